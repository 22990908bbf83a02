import { type DynamicModule, Global, Module } from '@nestjs/common';
import { KubeConfig } from '@kubernetes/client-node';
import { KUBE_ENV } from './kube.env.js';
import { NamespaceCache } from './namespace-cache.service.js';

/**
 * The API client configuration (KUBECONFIG when set, else the pod's service account) and the
 * caches shared by strategies. Loading the configuration makes no request: the webhook
 * starts without a cluster.
 */
@Global()
@Module({})
export class KubeModule {
  static forRoot(env: NodeJS.ProcessEnv): DynamicModule {
    return {
      module: KubeModule,
      providers: [
        { provide: KUBE_ENV, useValue: env },
        {
          provide: KubeConfig,
          useFactory: () => {
            const kubeConfig = new KubeConfig();
            if (env.KUBECONFIG) kubeConfig.loadFromFile(env.KUBECONFIG);
            else kubeConfig.loadFromDefault();
            return kubeConfig;
          },
        },
        NamespaceCache,
      ],
      exports: [KUBE_ENV, KubeConfig, NamespaceCache],
    };
  }
}
