import { type DynamicModule, Global, Logger, Module } from '@nestjs/common';
import { KubeConfig } from '@kubernetes/client-node';
import { KUBE_ENV, describeKubeConfigSource, kubeConfigSource } from './kube.env.js';
import { NamespaceCache } from './namespace-cache.service.js';
import { NodeCache } from './node-cache.service.js';
import { PodCache } from './pod-cache.service.js';

/**
 * The API client configuration (OVERCOMMIT_KUBECONFIG when set, else in a pod its service
 * account, else none: see kubeConfigSource) and the caches shared by strategies (namespaces,
 * pods, nodes). Loading the
 * configuration makes no request: the webhook starts without a cluster.
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
            const source = kubeConfigSource(env);
            const kubeConfig = new KubeConfig();
            if (source.kind === 'kubeconfig') kubeConfig.loadFromFile(source.path);
            else if (source.kind === 'service-account') kubeConfig.loadFromCluster();
            new Logger('Kube').log(describeKubeConfigSource(source, kubeConfig.getCurrentCluster()?.server, env));
            return kubeConfig;
          },
        },
        NamespaceCache,
        PodCache,
        NodeCache,
      ],
      exports: [KUBE_ENV, KubeConfig, NamespaceCache, PodCache, NodeCache],
    };
  }
}
