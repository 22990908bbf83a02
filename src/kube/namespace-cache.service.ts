import { Inject, Injectable, type OnApplicationShutdown, type OnModuleInit } from '@nestjs/common';
import { CoreV1Api, KubeConfig, type V1Namespace } from '@kubernetes/client-node';
import { ResilientInformer } from './resilient-informer.js';
import { KUBE_ENV, inCluster } from './kube.env.js';

/**
 * Namespace labels, for the pod strategies' namespace selectors (an AdmissionReview does not
 * carry them). Outside a cluster, and until the first list, labels are unknown: the pod
 * strategies then rely on the webhook's namespaceSelector, which the API server evaluates.
 */
@Injectable()
export class NamespaceCache implements OnModuleInit, OnApplicationShutdown {
  private informer?: ResilientInformer<V1Namespace>;

  constructor(
    private readonly kube: KubeConfig,
    @Inject(KUBE_ENV) private readonly env: NodeJS.ProcessEnv,
  ) {}

  async onModuleInit(): Promise<void> {
    if (!inCluster(this.env)) return;
    const core = this.kube.makeApiClient(CoreV1Api);
    this.informer = new ResilientInformer(this.kube, '/api/v1/namespaces', () => core.listNamespace(), { description: 'namespaces' });
    await this.informer.start();
  }

  async onApplicationShutdown(): Promise<void> {
    await this.informer?.stop();
  }

  /**
   * Ready when labels can be answered: always outside a cluster, after the first list in one.
   * Readiness waits for it, so that a pod strategy never has to trust the webhook entry that
   * happened to call (every pod entry calls the same /mutate) for a namespace it can't see.
   */
  isReady(): boolean {
    return !inCluster(this.env) || this.informer?.isSynced() === true;
  }

  /** The namespace's labels, or undefined when not known (no cluster, not synced, not found). */
  labels(namespace: string): Readonly<Record<string, string>> | undefined {
    if (!this.informer?.isSynced()) return undefined;
    const found = this.informer.cache.get(namespace);
    return found ? (found.metadata?.labels ?? {}) : undefined;
  }
}
