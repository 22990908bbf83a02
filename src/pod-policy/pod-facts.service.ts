import { Inject, Injectable, Logger, type OnApplicationShutdown, type OnModuleInit } from '@nestjs/common';
import { InjectMetric } from '@willsoto/nestjs-prometheus';
import type { Gauge } from 'prom-client';
import { CoreV1Api, KubeConfig, type V1LimitRange, type V1Node, type V1Pod } from '@kubernetes/client-node';
import { BackgroundTasks } from '../common/background-tasks.js';
import { ConfigStore } from '../config/config.store.js';
import { KUBE_ENV, inCluster } from '../kube/kube.env.js';
import { ResilientInformer, stripManagedFields } from '../kube/resilient-informer.js';
import type { NodeLike } from '../node-oversell/node-oversell.rules.js';
import type { LimitRangeLike } from './limit-range.js';
import type { NodeUsage } from './node-cap.js';
import { PodsByNode, type FactsCache, type PodFacts } from './pod-facts.js';
import type { PodLike } from './pod-resources.js';
import { mutatesResources, type PodPolicyConfig } from './pod-policy.config.js';
import { CACHE_SYNCED } from './pod-policy.metrics.js';

/**
 * Terminal pods hold nothing on their node: the scheduler's own pod informer leaves them out
 * the same way. A pod that turns Succeeded/Failed leaves the watch as a DELETED event.
 */
export const NON_TERMINAL_PODS = 'status.phase!=Succeeded,status.phase!=Failed';

type CacheInformers = {
  pods: ResilientInformer<V1Pod>;
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

/**
 * Informer caches of pods (non-terminal, all namespaces; indexed by node on every event),
 * nodes and LimitRanges, kept warm in the background. Created only in a cluster; outside one
 * `available` is false and the strategy fails open (counted).
 *
 * A cache runs only while the pod policy in force needs it (cachesNeeded), started and
 * stopped as the config changes. The Node cache is the costly one: with inflation every
 * node-status write comes back to each replica as a watch event; Nodes are held without
 * their image lists (trimCachedNode). Until a started cache has listed, the strategy leaves
 * pods alone (counted).
 *
 * The first GET /plan starts the node and pod caches on this replica for good (watchForPlan).
 *
 * RBAC: list and watch on pods, nodes and limitranges, cluster-wide (a ListWatch never GETs).
 */
@Injectable()
export class PodFactsService implements PodFacts, OnModuleInit, OnApplicationShutdown {
  private readonly logger = new Logger('PodPolicy');
  private readonly informers: Partial<CacheInformers> = {};
  private index = new PodsByNode();
  /** Set by the first /plan: the node and pod caches then run whatever the pod policy. */
  private planning = false;
  readonly available: boolean;

  constructor(
    private readonly kube: KubeConfig,
    @Inject(KUBE_ENV) env: NodeJS.ProcessEnv,
    private readonly config: ConfigStore,
    @InjectMetric(CACHE_SYNCED) private readonly syncedGauge: Gauge<string>,
    private readonly background: BackgroundTasks,
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
    await Promise.all(CACHES.map((cache) => this.informers[cache]?.stop()));
  }

  /** Starts the caches `policy` needs and stops (and forgets) the others. */
  private follow(policy: PodPolicyConfig | undefined): void {
    const needed = cachesNeeded(policy);
    if (this.planning) needed.push('pods', 'nodes');
    for (const cache of CACHES) {
      const running = this.informers[cache];
      if (needed.includes(cache) && !running) this.start(cache);
      if (!needed.includes(cache) && running) {
        delete this.informers[cache];
        if (cache === 'pods') this.index = new PodsByNode();
        this.syncedGauge.remove({ cache });
        void running.stop();
        this.logger.log(`${cache} cache stopped: the pod policy in force does not read it`);
      }
    }
  }

  private start(cache: FactsCache): void {
    const core = this.kube.makeApiClient(CoreV1Api);
    const onListed = () => this.syncedGauge.set({ cache }, 1);
    this.syncedGauge.set({ cache }, 0);
    if (cache === 'pods') {
      const pods = new ResilientInformer<V1Pod>(
        this.kube,
        '/api/v1/pods',
        () => core.listPodForAllNamespaces({ fieldSelector: NON_TERMINAL_PODS }),
        { description: 'pods (non-terminal)', fieldSelector: NON_TERMINAL_PODS, onListed },
      );
      // A handler that throws inside client-node's watch is an unhandled rejection: guarded.
      const upsert = this.background.guard('informer-event', (pod: V1Pod) => this.index.upsert(pod as PodLike));
      pods.cache.on('add', upsert);
      pods.cache.on('update', upsert);
      pods.cache.on('delete', this.background.guard('informer-event', (pod: V1Pod) => this.index.remove(pod as PodLike)));
      this.informers.pods = pods;
    } else if (cache === 'nodes') {
      this.informers.nodes = new ResilientInformer<V1Node>(this.kube, '/api/v1/nodes', () => core.listNode(), {
        description: 'nodes',
        onListed,
        transform: trimCachedNode,
      });
    } else {
      this.informers.limitranges = new ResilientInformer<V1LimitRange>(
        this.kube,
        '/api/v1/limitranges',
        () => core.listLimitRangeForAllNamespaces(),
        { description: 'limitranges', onListed },
      );
    }
    this.logger.log(`${cache} cache started: the pod policy in force reads it`);
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

  nodes(): readonly NodeLike[] {
    return (this.informers.nodes?.cache.list() ?? []) as readonly NodeLike[];
  }

  isSynced(cache: FactsCache): boolean {
    return this.informers[cache]?.isSynced() ?? false;
  }

  limitRanges(namespace: string): readonly LimitRangeLike[] {
    return (this.informers.limitranges?.cache.list(namespace) ?? []) as readonly LimitRangeLike[];
  }

  node(name: string): NodeLike | undefined {
    return this.informers.nodes?.cache.get(name) as NodeLike | undefined;
  }

  pod(namespace: string, name: string): PodLike | undefined {
    return this.informers.pods?.cache.get(name, namespace) as PodLike | undefined;
  }

  nodeUsage(nodeName: string, exclude?: string): NodeUsage {
    return this.index.usage(nodeName, exclude);
  }
}

const CACHES: readonly FactsCache[] = ['pods', 'nodes', 'limitranges'];
