import { Inject, Injectable, Logger, type OnApplicationShutdown } from '@nestjs/common';
import { CoreV1Api, KubeConfig, type V1Pod } from '@kubernetes/client-node';
import { BackgroundTasks } from '../common/background-tasks.js';
import type { NodeUsage, ResourceAmounts } from '../domain/resources.js';
import type { PodLike } from '../domain/pod-resources.js';
import { KUBE_ENV, inCluster } from './kube.env.js';
import { cachedPod, PodsByNode, type CachedPod, type PodAccounts } from './pods-by-node.js';
import { ResilientInformer } from './resilient-informer.js';

/**
 * Terminal pods hold nothing on their node: the scheduler's own pod informer leaves them out
 * the same way. A pod that turns Succeeded/Failed leaves the watch as a DELETED event.
 */
export const NON_TERMINAL_PODS = 'status.phase!=Succeeded,status.phase!=Failed';

/** Who reads the pod cache: the pod policies' node cap, node oversell's commitment floor and usage-aware ratios, GET /plan. */
export type PodCacheUser = 'node-cap' | 'commitment-floor' | 'usage-aware' | 'plan';

/**
 * How long readiness waits for the pod cache's first list while the commitment floor reads it. A
 * replica that has not listed writes what the ratios give where the others write the floor, and
 * since Kubernetes 1.37 the API server picks a replica per call, so a new replica serving before
 * its list would make a floor-decided node's allocatable dip between calls (docs/operating.md,
 * "Several replicas"). A LIST takes seconds; past this bound the replica serves anyway, since a
 * cluster whose every replica stays unready stores raw values, which is worse than no floor.
 */
export const FLOOR_READY_WAIT_MS = 60_000;

/** Readiness as the commitment floor sees the cache: ready unless the floor reads it and its first list, started under FLOOR_READY_WAIT_MS ago, has not completed. */
export function floorCacheReady(state: { floorReads: boolean; synced: boolean; startedAt: number | undefined; now: number }): boolean {
  if (!state.floorReads || state.synced) return true;
  return state.startedAt !== undefined && state.now - state.startedAt >= FLOOR_READY_WAIT_MS;
}

/**
 * One informer of the cluster's non-terminal pods (all namespaces), each kept as a CachedPod
 * (identity, node, phase, effective requests), indexed by node on every event (PodsByNode),
 * shared by every feature that reads it. It runs while at least one user
 * wants it (`use`), and only in a cluster; a user that stops wanting it leaves it to the others.
 *
 * RBAC: list and watch on pods, cluster-wide.
 */
@Injectable()
export class PodCache implements OnApplicationShutdown {
  private readonly logger = new Logger('PodCache');
  private readonly users = new Set<PodCacheUser>();
  private readonly listedListeners = new Set<() => void>();
  private informer?: ResilientInformer<V1Pod>;
  /** When the informer last started (Date.now()), for floorCacheReady. */
  private startedAt?: number;
  private index = new PodsByNode();
  readonly available: boolean;

  constructor(
    private readonly kube: KubeConfig,
    @Inject(KUBE_ENV) env: NodeJS.ProcessEnv,
    private readonly background: BackgroundTasks,
  ) {
    this.available = inCluster(env);
  }

  async onApplicationShutdown(): Promise<void> {
    this.users.clear();
    await this.informer?.stop();
  }

  /** `user` wants the cache (`on`) or no longer does: it starts with its first user and stops with its last. */
  use(user: PodCacheUser, on: boolean): void {
    if (!this.available || on === this.users.has(user)) return;
    if (on) this.users.add(user);
    else this.users.delete(user);
    if (this.users.size > 0 && this.informer === undefined) this.start();
    if (this.users.size === 0 && this.informer !== undefined) {
      void this.informer.stop();
      this.informer = undefined;
      this.index = new PodsByNode();
      this.logger.log('pods cache stopped: nothing in force reads it');
    }
  }

  /** Called after every successful list; returns the unsubscribe function. */
  onListed(listener: () => void): () => void {
    this.listedListeners.add(listener);
    return () => this.listedListeners.delete(listener);
  }

  private start(): void {
    const core = this.kube.makeApiClient(CoreV1Api);
    const informer = new ResilientInformer<V1Pod>(
      this.kube,
      '/api/v1/pods',
      (page) => core.listPodForAllNamespaces({ fieldSelector: NON_TERMINAL_PODS, ...page }),
      {
        description: 'pods (non-terminal)',
        fieldSelector: NON_TERMINAL_PODS,
        onListed: () => this.listedListeners.forEach((listener) => listener()),
        transform: (pod) => cachedPod(pod as PodLike) as unknown as V1Pod,
      },
    );
    // A handler that throws inside client-node's watch is an unhandled rejection: guarded.
    const upsert = this.background.guard('informer-event', (pod: V1Pod) => this.index.upsert(pod as PodLike));
    informer.cache.on('add', upsert);
    informer.cache.on('update', upsert);
    informer.cache.on(
      'delete',
      this.background.guard('informer-event', (pod: V1Pod) => this.index.remove(pod as PodLike)),
    );
    this.informer = informer;
    this.startedAt = Date.now();
    this.logger.log(`pods cache started for ${[...this.users].join(', ')}`);
    void informer.start();
  }

  isSynced(): boolean {
    return this.informer?.isSynced() ?? false;
  }

  /** Readiness: floorCacheReady for this process (always ready outside a cluster, where the cache never runs). */
  readyForFloor(now = Date.now()): boolean {
    return floorCacheReady({ floorReads: this.users.has('commitment-floor'), synced: this.isSynced(), startedAt: this.startedAt, now });
  }

  /** The pod as the cache keeps it: identity, node, phase and its effective requests. */
  pod(namespace: string, name: string): CachedPod | undefined {
    return this.informer?.cache.get(name, namespace) as CachedPod | undefined;
  }

  /** The node's bound non-terminal pods: their requests and what the kubelet admitted them at, by key (uid). */
  podsOn(nodeName: string): ReadonlyMap<string, PodAccounts> {
    return this.index.pods(nodeName);
  }

  /** The requests of the node's bound non-terminal pods as the scheduler counts them, leaving out the pod with uid `exclude`: what the cap reads. */
  usage(nodeName: string, exclude?: string): NodeUsage {
    return this.index.usage(nodeName, exclude);
  }

  /** What the kubelet has admitted the node's bound non-terminal pods at: what the commitment floor reads. */
  admitted(nodeName: string): Readonly<ResourceAmounts> {
    return this.index.admitted(nodeName);
  }
}
