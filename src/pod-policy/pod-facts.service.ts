import { Inject, Injectable, Logger, type OnApplicationShutdown, type OnModuleInit } from '@nestjs/common';
import { InjectMetric } from '@willsoto/nestjs-prometheus';
import type { Gauge } from 'prom-client';
import { CoreV1Api, KubeConfig, type V1LimitRange, type V1Node } from '@kubernetes/client-node';
import { ConfigStore } from '../config/config.store.js';
import { KUBE_ENV, inCluster } from '../kube/kube.env.js';
import { PodCache } from '../kube/pod-cache.service.js';
import type { CachedPod } from '../kube/pods-by-node.js';
import { ResilientInformer, stripManagedFields } from '../kube/resilient-informer.js';
import type { NodeLike } from '../node-oversell/node-oversell.rules.js';
import type { LimitRangeLike } from './limit-range.js';
import type { NodeUsage } from '../domain/resources.js';
import type { FactsCache, PodFacts } from './pod-facts.js';
import { mutatesResources, type PodPolicyConfig } from './pod-policy.config.js';
import { CACHE_SYNCED } from './pod-policy.metrics.js';

type CacheInformers = {
  nodes: ResilientInformer<V1Node>;
  limitranges: ResilientInformer<V1LimitRange>;
};

/**
 * What the Node cache keeps of a Node: all but managedFields and status.images. The image list
 * (up to the kubelet's nodeStatusMaxImages, 50 by default) is most of a Node's size, and the
 * cap reads only labels, annotations, allocatable and capacity.
 */
export function trimCachedNode(node: V1Node): V1Node {
  stripManagedFields(node);
  if (node.status?.images) delete node.status.images;
  return node;
}

/** Which caches a pod policy reads: pods and nodes for the node cap, LimitRanges for mutations. */
export function cachesNeeded(policy: PodPolicyConfig | undefined): FactsCache[] {
  if (!policy) return [];
  const needed: FactsCache[] = [];
  if ((policy.cap?.mode ?? 'off') !== 'off') needed.push('pods', 'nodes');
  if (mutatesResources(policy)) needed.push('limitranges');
  return needed;
}

/** Who reads the Node cache besides the pod policy and the plan. */
export type NodeCacheUser = 'reconciler';

/** Told of every Node added to or updated in the Node cache, and of each of its lists. */
export interface NodeCacheListener {
  changed(node: NodeLike): void;
  listed(): void;
}

/**
 * Informer caches of pods (the shared PodCache, which node oversell's commitment floor reads
 * too), nodes and LimitRanges, kept warm in the background. Created only in a cluster; outside one
 * `available` is false and the strategy fails open (counted).
 *
 * A cache runs only while the pod policy in force needs it (cachesNeeded), started and
 * stopped as the config changes. The Node cache is the costly one: with inflation every
 * node-status write comes back to each replica as a watch event; Nodes are held without
 * their image lists (trimCachedNode). Until a started cache has listed, the strategy leaves
 * pods alone (counted).
 *
 * The first GET /plan starts the node and pod caches on this replica for good (watchForPlan);
 * the Node cache also runs while another user wants it (useNodes: the reconciler while it leads).
 *
 * RBAC: list and watch on pods, nodes and limitranges, cluster-wide (a ListWatch never GETs).
 */
@Injectable()
export class PodFactsService implements PodFacts, OnModuleInit, OnApplicationShutdown {
  private readonly logger = new Logger('PodPolicy');
  private readonly informers: Partial<CacheInformers> = {};
  /** Set while this service uses the shared pod cache: stops following its lists. */
  private podsListed?: () => void;
  /** Set by the first /plan: the node and pod caches then run whatever the pod policy. */
  private planning = false;
  private readonly nodeUsers = new Set<NodeCacheUser>();
  private readonly nodeListeners = new Set<NodeCacheListener>();
  readonly available: boolean;

  constructor(
    private readonly kube: KubeConfig,
    @Inject(KUBE_ENV) env: NodeJS.ProcessEnv,
    private readonly config: ConfigStore,
    @InjectMetric(CACHE_SYNCED) private readonly syncedGauge: Gauge<string>,
    private readonly pods: PodCache,
  ) {
    this.available = inCluster(env);
  }

  onModuleInit(): void {
    if (!this.available) {
      this.logger.log('not in a cluster: pod-policy caches off (the node cap fails open; no LimitRange clamps)');
      return;
    }
    this.config.onChange(({ config }) => this.follow(config.pods));
    this.follow(this.config.snapshot().config.pods);
  }

  async onApplicationShutdown(): Promise<void> {
    this.pods.use('node-cap', false);
    await Promise.all(INFORMER_CACHES.map((cache) => this.informers[cache]?.stop()));
  }

  /** Starts the caches `policy` needs and stops (and forgets) the others. */
  private follow(policy: PodPolicyConfig | undefined): void {
    const needed = cachesNeeded(policy);
    if (this.planning) needed.push('pods', 'nodes');
    if (this.nodeUsers.size > 0) needed.push('nodes');
    this.followPods(needed.includes('pods'));
    for (const cache of INFORMER_CACHES) {
      const running = this.informers[cache];
      if (needed.includes(cache) && !running) this.start(cache);
      if (!needed.includes(cache) && running) {
        delete this.informers[cache];
        this.syncedGauge.remove({ cache });
        void running.stop();
        this.logger.log(`${cache} cache stopped: nothing in force reads it`);
      }
    }
  }

  /** The shared pod cache, wanted while the cap (or the plan) reads it; its synced gauge follows it. */
  private followPods(needed: boolean): void {
    if (needed === (this.podsListed !== undefined)) return;
    this.pods.use('node-cap', needed);
    if (needed) {
      this.syncedGauge.set({ cache: 'pods' }, this.pods.isSynced() ? 1 : 0);
      this.podsListed = this.pods.onListed(() => this.syncedGauge.set({ cache: 'pods' }, 1));
      this.logger.log('pods cache in use: the pod policy in force reads it');
    } else {
      this.podsListed!();
      this.podsListed = undefined;
      this.syncedGauge.remove({ cache: 'pods' });
    }
  }

  private start(cache: Exclude<FactsCache, 'pods'>): void {
    const core = this.kube.makeApiClient(CoreV1Api);
    const onListed = () => this.syncedGauge.set({ cache }, 1);
    this.syncedGauge.set({ cache }, 0);
    if (cache === 'nodes') {
      const informer = new ResilientInformer<V1Node>(this.kube, '/api/v1/nodes', (page) => core.listNode(page), {
        description: 'nodes',
        onListed: () => {
          onListed();
          this.nodeListeners.forEach((listener) => listener.listed());
        },
        transform: trimCachedNode,
      });
      const changed = (node: V1Node) => this.nodeListeners.forEach((listener) => listener.changed(node as NodeLike));
      informer.cache.on('add', changed);
      informer.cache.on('update', changed);
      this.informers.nodes = informer;
    } else {
      this.informers.limitranges = new ResilientInformer<V1LimitRange>(this.kube, '/api/v1/limitranges', (page) => core.listLimitRangeForAllNamespaces(page), {
        description: 'limitranges',
        onListed,
      });
    }
    this.logger.log(`${cache} cache started`);
    void this.informers[cache]!.start();
  }

  /**
   * Starts the node and pod caches for the plan, kept from then on (one LIST each, then
   * watches). True once both have listed.
   */
  watchForPlan(): boolean {
    if (!this.available) return false;
    if (!this.planning) {
      this.planning = true;
      this.follow(this.config.snapshot().config.pods);
    }
    return this.isSynced('nodes') && this.isSynced('pods');
  }

  /** `user` wants the Node cache (`on`) or no longer does. */
  useNodes(user: NodeCacheUser, on: boolean): void {
    if (!this.available || on === this.nodeUsers.has(user)) return;
    if (on) this.nodeUsers.add(user);
    else this.nodeUsers.delete(user);
    this.follow(this.config.snapshot().config.pods);
  }

  /** Subscribes to the Node cache's events (handlers must not throw: guard them); returns the unsubscribe function. */
  onNodes(listener: NodeCacheListener): () => void {
    this.nodeListeners.add(listener);
    return () => this.nodeListeners.delete(listener);
  }

  nodes(): readonly NodeLike[] {
    return (this.informers.nodes?.cache.list() ?? []) as readonly NodeLike[];
  }

  isSynced(cache: FactsCache): boolean {
    if (cache === 'pods') return this.podsListed !== undefined && this.pods.isSynced();
    return this.informers[cache]?.isSynced() ?? false;
  }

  limitRanges(namespace: string): readonly LimitRangeLike[] {
    return (this.informers.limitranges?.cache.list(namespace) ?? []) as readonly LimitRangeLike[];
  }

  node(name: string): NodeLike | undefined {
    return this.informers.nodes?.cache.get(name) as NodeLike | undefined;
  }

  pod(namespace: string, name: string): CachedPod | undefined {
    return this.podsListed === undefined ? undefined : this.pods.pod(namespace, name);
  }

  nodeUsage(nodeName: string, exclude?: string): NodeUsage {
    return this.podsListed === undefined ? { requests: { pods: 0n } } : this.pods.usage(nodeName, exclude);
  }
}

const INFORMER_CACHES = ['nodes', 'limitranges'] as const;
