import { Inject, Injectable, Logger, type OnApplicationShutdown, type OnModuleInit } from '@nestjs/common';
import { CoreV1Api, KubeConfig, type V1LimitRange, type V1Node, type V1Pod } from '@kubernetes/client-node';
import { KUBE_ENV, inCluster } from '../kube/kube.env.js';
import { ResilientInformer } from '../kube/resilient-informer.js';
import type { NodeLike } from '../node-oversell/node-oversell.rules.js';
import type { LimitRangeLike } from './limit-range.js';
import type { NodeUsage } from './node-cap.js';
import { PodsByNode, type FactsCache, type PodFacts } from './pod-facts.js';
import type { PodLike } from './pod-resources.js';

/**
 * Terminal pods hold nothing on their node: the scheduler's own pod informer leaves them out
 * the same way. A pod that turns Succeeded/Failed leaves the watch as a DELETED event.
 */
export const NON_TERMINAL_PODS = 'status.phase!=Succeeded,status.phase!=Failed';

/**
 * Informer caches of pods (non-terminal, all namespaces; indexed by node on every event),
 * nodes and LimitRanges, kept warm in the background. Created only in a cluster; outside one
 * `available` is false and the strategy fails open (counted).
 *
 * RBAC: list and watch on pods, nodes and limitranges, cluster-wide (a ListWatch never GETs).
 */
@Injectable()
export class PodFactsService implements PodFacts, OnModuleInit, OnApplicationShutdown {
  private readonly logger = new Logger('PodPolicy');
  private pods?: ResilientInformer<V1Pod>;
  private nodes?: ResilientInformer<V1Node>;
  private limitRangeCache?: ResilientInformer<V1LimitRange>;
  private readonly index = new PodsByNode();
  readonly available: boolean;

  constructor(
    private readonly kube: KubeConfig,
    @Inject(KUBE_ENV) env: NodeJS.ProcessEnv,
  ) {
    this.available = inCluster(env);
  }

  async onModuleInit(): Promise<void> {
    if (!this.available) {
      this.logger.log('not in a cluster: pod-policy caches off (the node cap fails open; no LimitRange clamps)');
      return;
    }
    const core = this.kube.makeApiClient(CoreV1Api);
    this.pods = new ResilientInformer(this.kube, '/api/v1/pods', () => core.listPodForAllNamespaces({ fieldSelector: NON_TERMINAL_PODS }), {
      description: 'pods (non-terminal)',
      fieldSelector: NON_TERMINAL_PODS,
    });
    this.nodes = new ResilientInformer(this.kube, '/api/v1/nodes', () => core.listNode(), { description: 'nodes' });
    this.limitRangeCache = new ResilientInformer(this.kube, '/api/v1/limitranges', () => core.listLimitRangeForAllNamespaces(), {
      description: 'limitranges',
    });
    const upsert = (pod: V1Pod) => this.index.upsert(pod as PodLike);
    this.pods.cache.on('add', upsert);
    this.pods.cache.on('update', upsert);
    this.pods.cache.on('delete', (pod) => this.index.remove(pod as PodLike));
    await Promise.all([this.pods.start(), this.nodes.start(), this.limitRangeCache.start()]);
  }

  async onApplicationShutdown(): Promise<void> {
    await Promise.all([this.pods?.stop(), this.nodes?.stop(), this.limitRangeCache?.stop()]);
  }

  isSynced(cache: FactsCache): boolean {
    const informer = cache === 'pods' ? this.pods : cache === 'nodes' ? this.nodes : this.limitRangeCache;
    return informer?.isSynced() ?? false;
  }

  limitRanges(namespace: string): readonly LimitRangeLike[] {
    return (this.limitRangeCache?.cache.list(namespace) ?? []) as readonly LimitRangeLike[];
  }

  node(name: string): NodeLike | undefined {
    return this.nodes?.cache.get(name) as NodeLike | undefined;
  }

  pod(namespace: string, name: string): PodLike | undefined {
    return this.pods?.cache.get(name, namespace) as PodLike | undefined;
  }

  nodeUsage(nodeName: string, exclude?: string): NodeUsage {
    return this.index.usage(nodeName, exclude);
  }
}
