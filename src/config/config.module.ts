import { type DynamicModule, Global, Module } from '@nestjs/common';
import { KubeConfig } from '@kubernetes/client-node';
import { BackgroundTasks } from '../common/background-tasks.js';
import { inCluster } from '../kube/kube.env.js';
import { ConfigFileSource } from './config-file.source.js';
import { configMetrics } from './config.metrics.js';
import { CONFIG_SCHEMA, type ConfigSchema } from './config.loader.js';
import { ConfigStore } from './config.store.js';
import { ConfigMapSource, configMapRef } from './configmap.source.js';

export const CONFIG_SOURCE = Symbol('CONFIG_SOURCE');

/**
 * Where config comes from, in the contract's order: OVERCOMMIT_CONFIG_FILE, else the
 * ConfigMap when running in a cluster, else the built-in defaults. `schema` is the root of
 * config.yaml, composed of the features' sections outside this module (src/overcommit.config.ts).
 */
@Global()
@Module({})
export class ConfigModule {
  static forRoot(env: NodeJS.ProcessEnv, schema: ConfigSchema<object>): DynamicModule {
    return {
      module: ConfigModule,
      providers: [
        ...configMetrics,
        { provide: CONFIG_SCHEMA, useValue: schema },
        ConfigStore,
        {
          provide: CONFIG_SOURCE,
          inject: [ConfigStore, KubeConfig, BackgroundTasks],
          useFactory: (store: ConfigStore, kube: KubeConfig, background: BackgroundTasks) => {
            if (env.OVERCOMMIT_CONFIG_FILE) return new ConfigFileSource(env.OVERCOMMIT_CONFIG_FILE, store, background);
            if (inCluster(env)) return new ConfigMapSource(configMapRef(env), store, kube, background);
            store.markLoaded();
            return null;
          },
        },
      ],
      exports: [ConfigStore],
    };
  }
}
