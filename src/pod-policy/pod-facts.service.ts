import { Inject, Injectable, Logger, type OnApplicationShutdown, type OnModuleInit } from '@nestjs/common';
import { InjectMetric } from '@willsoto/nestjs-prometheus';
import type { Gauge } from 'prom-client';
import { CoreV1Api, KubeConfig, type V1LimitRange } from '@kubernetes/client-node';
import { ConfigStore } from '../config/config.store.js';
import { KUBE_ENV, inCluster } from '../kube/kube.env.js';
import { PodCache } from '../kube/pod-cache.service.js';
import type { CachedPod } from '../kube/pods-by-node.js';
import { NodeCache } from '../kube/node-cache.service.js';
import { ResilientInformer } from '../kube/resilient-informer.js';
import type { NodeLike } from '../domain/node-like.js';
import type { LimitRangeLike } from './limit-range.js';
import type { NodeUsage } from '../domain/resources.js';
import type { FactsCache, PodFacts } from './pod-facts.js';
import { mutatesResources, type PodPolicyConfig } from './pod-policy.config.js';
import { CACHE_SYNCED } from './pod-policy.metrics.js';

/** Which caches a pod policy reads: pods and nodes for the node cap, LimitRanges for mutations. */
export function cachesNeeded(policy: PodPolicyConfig | undefined): FactsCache[] {
  if (!policy) return [];
  const needed: FactsCache[] = [];
  if ((policy.cap?.mode ?? 'off') !== 'off') needed.push('pods', 'nodes');
  if (mutatesResources(policy)) needed.push('limitranges');
  return needed;
}

/**
 * Informer caches of pods and nodes (the shared PodCache and NodeCache of kube/, which other
 * features read too) and LimitRanges, kept warm in the background. Created only in a cluster;
 * outside one `available` is false and the strategy fails open (counted).
 *
 * The pod policy wants a cache only while the policy in force needs it (cachesNeeded), as the
 * config changes. Until a started cache has listed, the strategy leaves pods alone (counted).
 * The synced gauge has a `nodes` series while the Node cache runs, whoever wants it (GET /plan
 * and the leading reconciler too).
 *
 * RBAC: list and watch on pods, nodes and limitranges, cluster-wide (a ListWatch never GETs).
 */
@Injectable()
export class PodFactsService implements PodFacts, OnModuleInit, OnApplicationShutdown {
  private readonly logger = new Logger('PodPolicy');
  private readonly informers: { limitranges?: ResilientInformer<V1LimitRange> } = {};
  /** Set while this service uses the shared pod cache: stops following its lists. */
  private podsListed?: () => void;
  private readonly unsubscribe: Array<() => void> = [];
  readonly available: boolean;

  // eslint-disable-next-line max-params -- Nest resolves each parameter by its token: the list counts the provider's dependencies.
  constructor(
    private readonly kube: KubeConfig,
    @Inject(KUBE_ENV) env: NodeJS.ProcessEnv,
    private readonly config: ConfigStore,
    @InjectMetric(CACHE_SYNCED) private readonly syncedGauge: Gauge<string>,
    private readonly pods: PodCache,
    private readonly nodeCache: NodeCache,
  ) {
    this.available = inCluster(env);
  }

  onModuleInit(): void {
    if (!this.available) {
      this.logger.log('not in a cluster: pod-policy caches off (the node cap fails open; no LimitRange clamps)');
      return;
    }
    this.unsubscribe.push(
      this.nodeCache.onRunning((running) => (running ? this.syncedGauge.set({ cache: 'nodes' }, 0) : this.syncedGauge.remove({ cache: 'nodes' }))),
      this.nodeCache.onNodes({ changed: () => undefined, listed: () => this.syncedGauge.set({ cache: 'nodes' }, 1) }),
    );
    if (this.nodeCache.running) this.syncedGauge.set({ cache: 'nodes' }, this.nodeCache.isSynced() ? 1 : 0);
    this.config.onChange(({ config }) => this.follow(config.pods));
    this.follow(this.config.snapshot().config.pods);
  }

  async onApplicationShutdown(): Promise<void> {
    this.unsubscribe.forEach((unsubscribe) => unsubscribe());
    this.pods.use('node-cap', false);
    this.nodeCache.use('node-cap', false);
    await this.informers.limitranges?.stop();
  }

  /** Starts the caches `policy` needs and stops (and forgets) the others. */
  private follow(policy: PodPolicyConfig | undefined): void {
    const needed = cachesNeeded(policy);
    this.followPods(needed.includes('pods'));
    this.nodeCache.use('node-cap', needed.includes('nodes'));
    const cache = 'limitranges';
    const running = this.informers[cache];
    if (needed.includes(cache) && !running) this.start(cache);
    if (!needed.includes(cache) && running) {
      delete this.informers[cache];
      this.syncedGauge.remove({ cache });
      void running.stop();
      this.logger.log(`${cache} cache stopped: nothing in force reads it`);
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

  private start(cache: 'limitranges'): void {
    const core = this.kube.makeApiClient(CoreV1Api);
    const onListed = () => this.syncedGauge.set({ cache }, 1);
    this.syncedGauge.set({ cache }, 0);
    this.informers.limitranges = new ResilientInformer<V1LimitRange>(this.kube, '/api/v1/limitranges', (page) => core.listLimitRangeForAllNamespaces(page), {
      description: 'limitranges',
      onListed,
    });
    this.logger.log(`${cache} cache started`);
    void this.informers[cache]!.start();
  }

  isSynced(cache: FactsCache): boolean {
    if (cache === 'pods') return this.podsListed !== undefined && this.pods.isSynced();
    if (cache === 'nodes') return this.nodeCache.isSynced();
    return this.informers[cache]?.isSynced() ?? false;
  }

  limitRanges(namespace: string): readonly LimitRangeLike[] {
    return (this.informers.limitranges?.cache.list(namespace) ?? []) as readonly LimitRangeLike[];
  }

  node(name: string): NodeLike | undefined {
    return this.nodeCache.node(name);
  }

  pod(namespace: string, name: string): CachedPod | undefined {
    return this.podsListed === undefined ? undefined : this.pods.pod(namespace, name);
  }

  nodeUsage(nodeName: string, exclude?: string): NodeUsage {
    return this.podsListed === undefined ? { requests: { pods: 0n } } : this.pods.usage(nodeName, exclude);
  }
}
