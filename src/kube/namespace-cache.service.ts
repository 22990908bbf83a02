import { Inject, Injectable, type OnApplicationShutdown, type OnModuleInit } from '@nestjs/common';
import { CoreV1Api, KubeConfig, type V1Namespace } from '@kubernetes/client-node';
import { matchesLabelSelector, type LabelSelector } from '../domain/label-selector.js';
import { ResilientInformer } from './resilient-informer.js';
import { KUBE_ENV, NEVER_NAMESPACES, inCluster, platformNamespace } from './kube.env.js';

/**
 * Whether a pod strategy may act on a pod of a namespace. `unknown` (only when out of scope):
 * the namespace's labels are not known in a cluster, so the selector could not be evaluated;
 * the caller counts it.
 */
export type NamespaceScope = { inScope: true } | { inScope: false; reason: string; unknown: boolean };

/** What the pod strategies read from NamespaceCache (tests may hand them a subclass with known labels). */
export type NamespaceScoper = Pick<NamespaceCache, 'scope'>;

/**
 * Namespace labels, for the pod strategies' namespace selectors (an AdmissionReview does not
 * carry them), and the one scope rule every pod strategy applies (`scope`).
 */
@Injectable()
export class NamespaceCache implements OnModuleInit, OnApplicationShutdown {
  private informer?: ResilientInformer<V1Namespace>;
  private readonly inCluster: boolean;
  /** The platform's own namespace: never in scope. */
  readonly platformNamespace: string;

  constructor(
    private readonly kube: KubeConfig,
    @Inject(KUBE_ENV) env: NodeJS.ProcessEnv,
  ) {
    this.inCluster = inCluster(env);
    this.platformNamespace = platformNamespace(env);
  }

  async onModuleInit(): Promise<void> {
    if (!this.inCluster) return;
    const core = this.kube.makeApiClient(CoreV1Api);
    this.informer = new ResilientInformer(this.kube, '/api/v1/namespaces', (page) => core.listNamespace(page), { description: 'namespaces' });
    await this.informer.start();
  }

  async onApplicationShutdown(): Promise<void> {
    await this.informer?.stop();
  }

  /**
   * Ready when labels can be answered: always outside a cluster, after the first list in one.
   * Readiness waits for it, so that a pod strategy never has to trust the webhook entry that
   * happened to call (through /mutate, which runs every pod strategy) for a namespace it can't see.
   */
  isReady(): boolean {
    return !this.inCluster || this.informer?.isSynced() === true;
  }

  /** The namespace's labels, or undefined when not known (no cluster, not synced, not found). */
  labels(namespace: string): Readonly<Record<string, string>> | undefined {
    if (!this.informer?.isSynced()) return undefined;
    const found = this.informer.cache.get(namespace);
    return found ? (found.metadata?.labels ?? {}) : undefined;
  }

  /**
   * Whether a pod strategy whose namespace selector is `selector` may act on pods of `namespace`:
   * - never the system namespaces (NEVER_NAMESPACES) or the platform's own, whatever their labels;
   * - labels known: the selector decides;
   * - labels unknown outside a cluster: in scope. Nothing can be known there; whoever sent the
   *   request (the API server, through the webhook entry's namespaceSelector) decided;
   * - labels unknown in a cluster (not listed yet, a namespace created a moment ago): out of
   *   scope, `unknown: true`. A call on /mutate runs every matching strategy (each entry's own
   *   path runs only its own), so the calling entry's namespaceSelector may be another strategy's.
   * `selectorName` names the selector in the reason (e.g. `sidecars.namespaceSelector`).
   */
  scope(namespace: string, selector: LabelSelector, selectorName = 'the namespaceSelector'): NamespaceScope {
    if (namespace === '') return { inScope: false, reason: 'the pod has no namespace', unknown: false };
    if (NEVER_NAMESPACES.includes(namespace)) {
      return { inScope: false, reason: `namespace "${namespace}" is a system namespace, never in scope`, unknown: false };
    }
    if (namespace === this.platformNamespace) {
      return { inScope: false, reason: `namespace "${namespace}" is the platform's own, never in scope`, unknown: false };
    }
    const labels = this.labels(namespace);
    if (labels !== undefined) {
      return matchesLabelSelector(selector, labels)
        ? { inScope: true }
        : { inScope: false, reason: `namespace "${namespace}" does not match ${selectorName}`, unknown: false };
    }
    if (!this.inCluster) return { inScope: true };
    return {
      inScope: false,
      reason: `the labels of namespace "${namespace}" are not known yet (namespace cache not synced, or the namespace is new)`,
      unknown: true,
    };
  }
}
