import { Logger, type OnApplicationShutdown, type OnModuleInit } from '@nestjs/common';
import { CoreV1Api, KubeConfig, type V1ConfigMap } from '@kubernetes/client-node';
import { BackgroundTasks } from '../common/background-tasks.js';
import { describeApiError } from '../kube/api-error.js';
import { eventAbout } from '../kube/events.js';
import { platformNamespace } from '../kube/kube.env.js';
import { ResilientInformer } from '../kube/resilient-informer.js';
import { ConfigStore } from './config.store.js';

export interface ConfigMapRef {
  namespace: string;
  name: string;
  key: string;
}

/** OVERCOMMIT_CONFIGMAP (`namespace/name`), default `<platform namespace>/kube-overcommit-config`. */
export function configMapRef(env: NodeJS.ProcessEnv): ConfigMapRef {
  const [namespace, name] = (env.OVERCOMMIT_CONFIGMAP ?? '').split('/');
  if (namespace && name) return { namespace, name, key: 'config.yaml' };
  return { namespace: platformNamespace(env), name: 'kube-overcommit-config', key: 'config.yaml' };
}

/**
 * Watches the one ConfigMap, by a field selector on its name so that RBAC can grant it by
 * resourceNames. An invalid update is rejected by the store and reported as a Warning Event
 * on the ConfigMap.
 */
export class ConfigMapSource implements OnModuleInit, OnApplicationShutdown {
  private readonly logger = new Logger('ConfigMap');
  private readonly informer: ResilientInformer<V1ConfigMap>;
  private readonly core: CoreV1Api;
  private readonly server?: string;
  private lastText?: string;

  constructor(
    private readonly ref: ConfigMapRef,
    private readonly store: ConfigStore,
    kube: KubeConfig,
    background: BackgroundTasks,
  ) {
    this.core = kube.makeApiClient(CoreV1Api);
    this.server = kube.getCurrentCluster()?.server;
    const fieldSelector = `metadata.name=${ref.name}`;
    const list = async () => {
      const result = await this.core.listNamespacedConfigMap({ namespace: ref.namespace, fieldSelector });
      if (result.items.length === 0) this.logger.warn(`ConfigMap ${this.describe()} not found; keeping the config in force`);
      // Listed: the ConfigMap (or its absence) is known, which is what readiness waits for.
      queueMicrotask(() => this.store.markLoaded());
      return result;
    };
    this.informer = new ResilientInformer(kube, `/api/v1/namespaces/${ref.namespace}/configmaps`, list, {
      description: `ConfigMap ${this.describe()}`,
      fieldSelector,
    });
    const update = background.guard('config-reload', (cm: V1ConfigMap) => this.update(cm));
    this.informer.cache.on('add', update);
    this.informer.cache.on('update', update);
    this.informer.cache.on('delete', () => this.logger.warn(`ConfigMap ${this.describe()} deleted; keeping the config in force`));
  }

  async onModuleInit(): Promise<void> {
    this.logger.log(`watching ConfigMap ${this.describe()} key ${this.ref.key}`);
    await this.informer.start();
  }

  async onApplicationShutdown(): Promise<void> {
    await this.informer.stop();
  }

  private describe(): string {
    return `${this.ref.namespace}/${this.ref.name}`;
  }

  private async update(cm: V1ConfigMap): Promise<void> {
    const text = cm.data?.[this.ref.key];
    const origin = `configmap:${this.describe()}@${cm.metadata?.resourceVersion ?? ''}`;
    if (text === undefined) {
      this.logger.error(`ConfigMap ${this.describe()} has no key ${this.ref.key}; keeping the config in force`);
      await this.warn(cm, [`${this.ref.key}: key missing from the ConfigMap`]);
      return;
    }
    if (text === this.lastText) return;
    this.lastText = text;
    const result = this.store.apply(text, origin);
    if (!result.ok) await this.warn(cm, result.errors);
  }

  private async warn(cm: V1ConfigMap, errors: string[]): Promise<void> {
    const message = `invalid config rejected, last good config kept: ${errors.join('; ')}`;
    const object = {
      apiVersion: 'v1',
      kind: 'ConfigMap',
      namespace: this.ref.namespace,
      name: this.ref.name,
      uid: cm.metadata?.uid,
      resourceVersion: cm.metadata?.resourceVersion,
    };
    const event = eventAbout(object, this.ref.namespace, 'Warning', 'InvalidConfig', message);
    try {
      await this.core.createNamespacedEvent({ namespace: this.ref.namespace, body: event });
    } catch (error) {
      this.logger.warn(`could not record an Event on ConfigMap ${this.describe()}: ${describeApiError(error, this.server)}`);
    }
  }
}
