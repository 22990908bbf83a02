import { hostname } from 'node:os';
import { randomBytes } from 'node:crypto';
import { Inject, Injectable, Logger, type OnApplicationShutdown, type OnModuleInit } from '@nestjs/common';
import { InjectMetric } from '@willsoto/nestjs-prometheus';
import { CoordinationV1Api, CoreV1Api, KubeConfig, Metrics, type V1ConfigMap, type V1Node } from '@kubernetes/client-node';
import type { Counter, Gauge } from 'prom-client';
import { BackgroundTasks } from '../common/background-tasks.js';
import { parseDuration } from '../common/duration.js';
import { type NodesConfig, USAGE_RESOURCES, type UsageConfig, type UsageResource } from '../domain/node-rules/node-oversell.config.js';
import { ConfigStore } from '../config/config.store.js';
import { describeApiError } from '../kube/api-error.js';
import { KUBE_ENV, inCluster, platformNamespace } from '../kube/kube.env.js';
import { LeaderLease } from '../kube/leader-lease.js';
import { PodCache } from '../kube/pod-cache.service.js';
import { keyOf } from '../kube/pods-by-node.js';
import { ResilientInformer } from '../kube/resilient-informer.js';
import { type NodePolicy, planNodeStatus, readRecord, resolveNodePolicy } from '../domain/node-rules/node-oversell.rules.js';
import type { NodeLike } from '../domain/node-like.js';
import { HOT_NODES_METRIC, NODE_USAGE_INPUT_METRIC, NODE_USAGE_RATIO_METRIC, USAGE_METRICS_ERRORS_METRIC, USAGE_PUBLISH_METRIC } from './usage.metrics.js';
import { type HotState, hotFullDecision, type NodeLevel, planHotEvent, planHotState, readHeat } from '../domain/node-rules/hot-nodes.rules.js';
import { baseAmountToNumber, parseResourceQuantity } from '../domain/quantity.js';
import {
  effectivePolicy,
  formatInputs,
  isHotFull,
  formatPublished,
  type NodeInputs,
  type NodeUsageEntry,
  type Placements,
  placedUnmeasured,
  planUsageDecision,
  podLoads,
  readInputs,
  readPublished,
  readUsage,
  samplesInWindow,
  seedSample,
  smoothedNodeUsage,
  smoothInputs,
  sumUsage,
  trackPlacements,
  type UsageSample,
  USAGE_CONFIGMAP,
  USAGE_DATA_KEY,
  USAGE_INPUTS_KEY,
  usageResources,
} from '../domain/node-rules/usage-aware.rules.js';
import { NODE_EVENTS, type NodeEventRecorder, type NodeUsageRatios, type PublishedUsage } from '../domain/node-rules/node-services.js';

/** The Lease that elects the leader. */
export const USAGE_LEASE = 'kube-overcommit-usage';

/** The usage sections of a nodes config: the default one and every pool's. */
export function usageSections(nodes: NodesConfig | undefined): UsageConfig[] {
  return [nodes?.defaultUsage, ...(nodes?.pools ?? []).map((pool) => pool.usage)].filter((usage): usage is UsageConfig => usage !== undefined);
}

/**
 * Usage-aware ratios (usage-aware.rules.ts, docs/usage-aware.md). Runs while the config in force
 * has a usage section, in a cluster:
 *
 * - every replica watches the ConfigMap `kube-overcommit-usage` and answers `effective` from it;
 * - the leader (Lease `kube-overcommit-usage`) samples metrics.k8s.io every interval, plans each
 *   usage-aware node's ratio and publishes them there, written only when they change.
 *
 * RBAC: get/list nodes and pods in metrics.k8s.io; get/list/watch/update the ConfigMap and
 * get/update the Lease, in the platform's namespace (the manifests create both).
 */
@Injectable()
export class UsageRatios implements NodeUsageRatios, PublishedUsage, OnModuleInit, OnApplicationShutdown {
  private readonly logger = new Logger('UsageRatios');
  private readonly available: boolean;
  private readonly namespace: string;
  private readonly identity: string;
  private entries = new Map<string, NodeUsageEntry>();
  private publishedText?: string;
  /** The published inputs (rule 8) as last read, for this replica to start from should it lead. */
  private inputsText?: string;
  private readonly readListeners = new Set<() => void>();
  private informer?: ResilientInformer<V1ConfigMap>;
  private lease?: LeaderLease;
  private timer?: NodeJS.Timeout;
  private intervalMs?: number;
  private running?: Promise<void>;
  /** Leader state: samples per node (within the longest window), the last NodeMetrics timestamp seen, when each node was last planned. */
  private history = new Map<string, UsageSample[]>();
  private lastTimestamp = new Map<string, string>();
  private lastPlanned = new Map<string, number>();
  /** Leader state for rule 5's hold, per node: the pods bound at its latest sample, and those placed since and not measured yet. */
  private placements = new Map<string, Placements>();
  /** Leader state of `hotAction: full` (hot-nodes.rules.ts): the hot nodes, seeded from the published entries at the first plan (rule 6). */
  private hot = new Map<string, HotState>();
  private hotSeeded = false;
  private leaderSince = 0;
  private lastMetricsError = '';

  // eslint-disable-next-line max-params -- Nest resolves each parameter by its token: the list counts the provider's dependencies.
  constructor(
    private readonly kube: KubeConfig,
    @Inject(KUBE_ENV) env: NodeJS.ProcessEnv,
    private readonly pods: PodCache,
    private readonly config: ConfigStore,
    private readonly background: BackgroundTasks,
    @InjectMetric(NODE_USAGE_RATIO_METRIC) private readonly ratioGauge: Gauge<string>,
    @InjectMetric(NODE_USAGE_INPUT_METRIC) private readonly inputGauge: Gauge<string>,
    @InjectMetric(USAGE_PUBLISH_METRIC) private readonly publishCounter: Counter<string>,
    @InjectMetric(USAGE_METRICS_ERRORS_METRIC) private readonly metricsErrors: Counter<string>,
    @InjectMetric(HOT_NODES_METRIC) private readonly hotNodes: Gauge<string>,
    @Inject(NODE_EVENTS) private readonly events: NodeEventRecorder,
  ) {
    this.available = inCluster(env);
    this.namespace = this.available ? platformNamespace(env) : '';
    this.identity = env.POD_NAME || `${hostname()}-${randomBytes(4).toString('hex')}`;
    for (const result of ['written', 'unchanged', 'error']) this.publishCounter.inc({ result }, 0);
    this.metricsErrors.inc(0);
    for (const reason of ['hot', 'hot-full']) this.hotNodes.set({ reason }, 0);
  }

  onModuleInit(): void {
    this.config.onChange(({ config }) => this.reconcile(config.nodes));
    this.reconcile(this.config.snapshot().config.nodes);
  }

  async onApplicationShutdown(): Promise<void> {
    await this.stop();
  }

  /** Calls `listener` after every new set of published ratios this replica reads; returns its removal. */
  onRead(listener: () => void): () => void {
    this.readListeners.add(listener);
    return () => this.readListeners.delete(listener);
  }

  /** The node's published entry, as this replica read it. */
  published(name: string): NodeUsageEntry | undefined {
    return this.entries.get(name);
  }

  effective(name: string, policy: NodePolicy | null, stored: NodeLike | undefined): { policy: NodePolicy | null; decisions: NodeUsageEntry } {
    // The recorded ratios matter to a usage-aware policy only: a static one skips reading the record.
    const recorded = policy?.usage === undefined ? undefined : readRecord(stored?.metadata?.annotations)?.ratios;
    return effectivePolicy(policy, this.entries.get(name), recorded);
  }

  private reconcile(nodes: NodesConfig | undefined): void {
    const sections = usageSections(nodes);
    if (!this.available) return;
    if (sections.length > 0 && this.informer === undefined) this.start();
    else if (sections.length === 0 && this.informer !== undefined) void this.stop();
    if (sections.length > 0) this.schedule(Math.min(...sections.map((usage) => parseDuration(usage.interval))));
  }

  private start(): void {
    const core = this.kube.makeApiClient(CoreV1Api);
    const fieldSelector = `metadata.name=${USAGE_CONFIGMAP}`;
    this.informer = new ResilientInformer<V1ConfigMap>(
      this.kube,
      `/api/v1/namespaces/${this.namespace}/configmaps`,
      () => core.listNamespacedConfigMap({ namespace: this.namespace, fieldSelector }),
      { description: `ConfigMap ${this.namespace}/${USAGE_CONFIGMAP}`, fieldSelector },
    );
    const onConfigMap = this.background.guard('usage-ratios', (configMap: V1ConfigMap) => {
      this.inputsText = configMap.data?.[USAGE_INPUTS_KEY];
      this.read(configMap.data?.[USAGE_DATA_KEY]);
    });
    this.informer.cache.on('add', onConfigMap);
    this.informer.cache.on('update', onConfigMap);
    this.informer.cache.on(
      'delete',
      this.background.guard('usage-ratios', () => this.read(undefined)),
    );
    void this.informer.start();
    this.lease = new LeaderLease(this.kube.makeApiClient(CoordinationV1Api), { namespace: this.namespace, name: USAGE_LEASE }, this.identity, (leader) => {
      this.history.clear();
      this.lastTimestamp.clear();
      this.lastPlanned.clear();
      this.placements.clear();
      this.hot.clear();
      this.hotSeeded = false;
      this.leaderSince = performance.now();
      if (!leader) return;
      const seeded = this.seedHistory();
      this.logger.log(`leading: sampling metrics.k8s.io and publishing usage-aware ratios; ${seeded} nodes start from the published inputs`);
    });
    this.lease.start();
    this.pods.use('usage-aware', true);
    this.logger.log(`usage-aware ratios from ConfigMap ${this.namespace}/${USAGE_CONFIGMAP}; leader by Lease ${this.namespace}/${USAGE_LEASE}`);
  }

  private async stop(): Promise<void> {
    clearInterval(this.timer);
    this.timer = undefined;
    this.pods.use('usage-aware', false);
    const informer = this.informer;
    const lease = this.lease;
    this.informer = undefined;
    this.lease = undefined;
    await this.running;
    await Promise.all([informer?.stop(), lease?.stop()]);
  }

  private schedule(intervalMs: number): void {
    if (this.intervalMs === intervalMs && this.timer !== undefined) return;
    clearInterval(this.timer);
    this.intervalMs = intervalMs;
    this.timer = setInterval(
      this.background.guard('usage-ratios', () => this.tick()),
      intervalMs,
    );
    this.timer.unref();
  }

  /** Every replica: the published ratios as read; a ConfigMap that does not parse keeps the last good ones. */
  private read(text: string | undefined): void {
    if (text === this.publishedText) return;
    try {
      this.entries = text === undefined ? new Map() : readPublished(text);
      this.publishedText = text;
    } catch (error) {
      this.logger.warn(`ConfigMap ${this.namespace}/${USAGE_CONFIGMAP}: ${(error as Error).message}; keeping the ratios read before`);
      return;
    }
    this.readListeners.forEach((listener) => listener());
    this.ratioGauge.reset();
    this.inputGauge.reset();
    const hot = { hot: 0, 'hot-full': 0 };
    for (const entry of this.entries.values()) {
      if (isHotFull(entry)) hot['hot-full'] += 1;
      else if (Object.values(entry).some((decision) => decision?.reason === 'hot')) hot.hot += 1;
    }
    for (const [reason, count] of Object.entries(hot)) this.hotNodes.set({ reason }, count);
    for (const [node, entry] of this.entries) {
      for (const resource of USAGE_RESOURCES) {
        const decision = entry[resource];
        if (decision === undefined) continue;
        this.ratioGauge.set({ node, resource }, decision.ratio);
        for (const input of ['A', 'R', 'U'] as const) {
          const text = decision[input];
          if (text !== undefined) this.inputGauge.set({ node, resource, input }, baseAmountToNumber(resource, parseResourceQuantity(resource, text)));
        }
      }
    }
  }

  private tick(): Promise<void> | undefined {
    if (this.running !== undefined || !this.lease?.isLeader() || !this.pods.isSynced()) return undefined;
    this.running = this.sampleAndPublish().finally(() => (this.running = undefined));
    return this.running;
  }

  private async sampleAndPublish(): Promise<void> {
    const nodesConfig = this.config.snapshot().config.nodes;
    const core = this.kube.makeApiClient(CoreV1Api);
    const nodes = (await core.listNode({ resourceVersion: '0' })).items;
    const now = performance.now();
    await this.sample(now);
    // hot-nodes.rules.ts rule 6: a node published full stays hot, its cooling counted from here
    // (at the first plan, an interval after taking the Lease: the published ConfigMap is read by then).
    if (!this.hotSeeded) for (const [name, entry] of this.entries) if (isHotFull(entry)) this.hot.set(name, { hotSince: now });
    this.hotSeeded = true;
    const entries = new Map<string, NodeUsageEntry>();
    for (const node of nodes) {
      const name = node.metadata?.name;
      if (name === undefined) continue;
      const entry = this.plan(name, node, nodesConfig, now);
      if (entry !== undefined) entries.set(name, entry);
    }
    for (const name of this.history.keys()) if (!entries.has(name)) this.forget(name);
    const byName = new Map(nodes.map((node) => [node.metadata?.name ?? '', node]));
    const before = this.entries;
    await this.publish(entries, () => this.smoothedInputs(entries, nodesConfig, byName));
    if (this.entries !== before) this.reportHot(before, nodesConfig, byName);
  }

  /** hot-nodes.rules.ts rule 7: NodeHot and NodeCooled for the nodes the publication turned full or back. */
  private reportHot(before: ReadonlyMap<string, NodeUsageEntry>, nodesConfig: NodesConfig | undefined, nodes: Map<string, V1Node>): void {
    for (const name of new Set([...before.keys(), ...this.entries.keys()])) {
      const node = nodes.get(name);
      const event = planHotEvent(before.get(name), this.entries.get(name), resolveNodePolicy(node?.metadata?.labels, nodesConfig)?.usage);
      if (event === undefined) continue;
      this.events.record({ name, ...(node?.metadata?.uid ? { uid: node.metadata.uid } : {}) }, event.reason, event.message);
    }
  }

  /** One sample per node whose NodeMetrics timestamp is new; a failed read adds none (the nodes go stale). */
  private async sample(now: number): Promise<void> {
    const metrics = new Metrics(this.kube);
    let nodeMetrics, podMetrics;
    try {
      [nodeMetrics, podMetrics] = await Promise.all([metrics.getNodeMetrics(), metrics.getPodMetrics()]);
    } catch (error) {
      this.metricsFailed(error);
      return;
    }
    this.lastMetricsError = '';
    // Per node: the usage of its measured pods, and what the kubelet admitted them at (R: a pod not measured yet is left out;
    // a resize it deferred is not what the containers run with, and counted here it would raise the ratio until it fits).
    const podsByNode = new Map<
      string,
      { usage: Partial<Record<UsageResource, bigint>>[]; requests: Partial<Record<UsageResource, bigint>>[]; keys: Set<string> }
    >();
    for (const pod of podMetrics.items) {
      const cached = this.pods.pod(pod.metadata.namespace, pod.metadata.name);
      const node = cached?.spec.nodeName;
      if (node === undefined) continue;
      const entry = podsByNode.get(node) ?? { usage: [], requests: [], keys: new Set<string>() };
      entry.usage.push(sumUsage(pod.containers.map((container) => readUsage(container.usage))));
      entry.requests.push(cached!.admitted);
      const key = keyOf(cached!);
      if (key !== undefined) entry.keys.add(key);
      podsByNode.set(node, entry);
    }
    const longest = Math.max(...usageSections(this.config.snapshot().config.nodes).map((usage) => parseDuration(usage.window)));
    for (const item of nodeMetrics.items) {
      const name = item.metadata.name;
      if (this.lastTimestamp.get(name) === item.timestamp) continue;
      this.lastTimestamp.set(name, item.timestamp);
      const samples = samplesInWindow(this.history.get(name) ?? [], now, longest);
      const pods = podsByNode.get(name);
      samples.push(newSample(now, pods, item.usage));
      this.history.set(name, samples);
      this.placements.set(name, trackPlacements(this.placements.get(name), this.pods.podsOn(name).keys(), pods?.keys ?? new Set(), now));
    }
  }

  private plan(name: string, node: V1Node, nodesConfig: NodesConfig | undefined, now: number): NodeUsageEntry | undefined {
    const derived = usagePolicy(node, nodesConfig);
    if (derived === undefined) return undefined;
    const { policy, usage, resources } = derived;
    const previous = this.entries.get(name);
    if (previous !== undefined && this.plannedWithin(name, usage, now)) return previous;
    this.lastPlanned.set(name, now);
    const raw = planNodeStatus(node as NodeLike, null, node as NodeLike)?.raw ?? {};
    // R: the admitted requests of the pods the latest sample measured, never more than what is admitted now.
    const bound = this.pods.admitted(name);
    const { measured, samples, lastSample } = readHistory(this.history.get(name), now, parseDuration(usage.window), this.leaderSince);
    const recorded = readRecord(node.metadata?.annotations)?.ratios;
    // Rule 5 holds while a placed pod asks for anything: its scheduled requests (the kubelet may not have admitted it yet).
    const requested = new Map([...this.pods.podsOn(name)].map(([key, accounts]) => [key, accounts.requests]));
    const placed = placedUnmeasured(requested, this.placements.get(name), now, parseDuration(usage.staleAfter));
    const entry: NodeUsageEntry = {};
    const sinceLastSampleMs = now - Math.max(lastSample, this.leaderSince);
    const levels: Partial<Record<UsageResource, NodeLevel>> = {};
    for (const resource of resources) {
      const inputs = {
        A: raw[resource] ?? 0n,
        R: smaller(measured[resource], bound[resource]),
        samples,
        sinceLastSampleMs,
        placedUnmeasured: placed[resource],
      };
      entry[resource] = planUsageDecision(resource, inputs, policy.ratios[resource] ?? 1, previous?.[resource]?.ratio ?? recorded?.[resource], usage);
      levels[resource] = { A: inputs.A, nodeUsage: smoothedNodeUsage(samples, resource, usage.percentile) };
    }
    return this.planHot(name, entry, { levels, sinceLastSampleMs }, now, usage);
  }

  /** hot-nodes.rules.ts, under `hotAction: full`: the node's hot state after this plan's reading; while hot, every decision is hot-full. */
  private planHot(
    name: string,
    entry: NodeUsageEntry,
    { levels, sinceLastSampleMs }: { levels: Partial<Record<UsageResource, NodeLevel>>; sinceLastSampleMs: number },
    now: number,
    usage: UsageConfig,
  ): NodeUsageEntry {
    const state =
      usage.hotAction === 'full' ? planHotState(this.hot.get(name), readHeat(levels, sinceLastSampleMs, usage), now, parseDuration(usage.coolFor)) : undefined;
    if (state === undefined) {
      this.hot.delete(name);
      return entry;
    }
    this.hot.set(name, state);
    const full: NodeUsageEntry = {};
    for (const resource of USAGE_RESOURCES) if (entry[resource] !== undefined) full[resource] = hotFullDecision(entry[resource]);
    return full;
  }

  /** Each node at its own section's interval (the timer runs at the shortest): at most one step up per interval. */
  private plannedWithin(name: string, usage: UsageConfig, now: number): boolean {
    const last = this.lastPlanned.get(name);
    return last !== undefined && now - last < parseDuration(usage.interval) - 1_000;
  }

  /** metrics.k8s.io could not be read: counted, and logged when the error is a new one. */
  private metricsFailed(error: unknown): void {
    this.metricsErrors.inc();
    const message = describeApiError(error, this.kube.getCurrentCluster()?.server);
    if (message !== this.lastMetricsError) this.logger.warn(`metrics.k8s.io: ${message}; no new samples (nodes go stale)`);
    this.lastMetricsError = message;
  }

  /** Rule 8: each node's history starts from its published inputs, as one sample taken when they were; returns how many nodes. */
  private seedHistory(): number {
    if (this.inputsText === undefined) return 0;
    let inputs: Map<string, NodeInputs>;
    try {
      inputs = readInputs(this.inputsText);
    } catch (error) {
      this.logger.warn(`ConfigMap ${this.namespace}/${USAGE_CONFIGMAP} ${USAGE_INPUTS_KEY}: ${(error as Error).message}; starting without history`);
      return 0;
    }
    const now = performance.now();
    const longest = Math.max(0, ...usageSections(this.config.snapshot().config.nodes).map((usage) => parseDuration(usage.window)));
    for (const [name, entry] of inputs) {
      const age = Math.max(0, Date.now() - entry.at);
      if (age <= longest) this.history.set(name, [seedSample(entry, now, age)]);
    }
    return this.history.size;
  }

  /** Rule 8: every published node's smoothed inputs, from the samples of its section's window. */
  private smoothedInputs(entries: Map<string, NodeUsageEntry>, nodesConfig: NodesConfig | undefined, nodes: Map<string, V1Node>): string {
    const out = new Map<string, NodeInputs>();
    const now = performance.now();
    const wallClock = Date.now();
    for (const name of entries.keys()) {
      const usage = resolveNodePolicy(nodes.get(name)?.metadata?.labels, nodesConfig)?.usage;
      const history = this.history.get(name) ?? [];
      if (usage === undefined || history.length === 0) continue;
      const inputs = smoothInputs(samplesInWindow(history, now, parseDuration(usage.window)), usage.percentile, wallClock - (now - history.at(-1)!.at));
      if (inputs !== undefined) out.set(name, inputs);
    }
    return formatInputs(out);
  }

  private forget(name: string): void {
    this.history.delete(name);
    this.lastTimestamp.delete(name);
    this.lastPlanned.delete(name);
    this.placements.delete(name);
    this.hot.delete(name);
  }

  /** Written only when the ratios change; the inputs (rule 8) go with them. */
  private async publish(entries: Map<string, NodeUsageEntry>, inputs: () => string): Promise<void> {
    const text = formatPublished(entries);
    if (text === this.publishedText) {
      this.publishCounter.inc({ result: 'unchanged' });
      return;
    }
    const core = this.kube.makeApiClient(CoreV1Api);
    const data = { [USAGE_DATA_KEY]: text, [USAGE_INPUTS_KEY]: inputs() };
    const body: V1ConfigMap = { metadata: { name: USAGE_CONFIGMAP, namespace: this.namespace }, data };
    try {
      try {
        const current = await core.readNamespacedConfigMap({ name: USAGE_CONFIGMAP, namespace: this.namespace });
        await core.replaceNamespacedConfigMap({ name: USAGE_CONFIGMAP, namespace: this.namespace, body: { ...current, data } });
      } catch (error) {
        if ((error as { code?: number }).code !== 404) throw error;
        await core.createNamespacedConfigMap({ namespace: this.namespace, body });
      }
      // Read at once here too: the next plan's "previous" must be what was just published.
      this.inputsText = data[USAGE_INPUTS_KEY];
      this.read(text);
      this.publishCounter.inc({ result: 'written' });
    } catch (error) {
      this.publishCounter.inc({ result: 'error' });
      this.logger.warn(`could not publish ConfigMap ${this.namespace}/${USAGE_CONFIGMAP}: ${describeApiError(error, this.kube.getCurrentCluster()?.server)}`);
    }
  }
}

/** The smaller of two amounts, an absent one read as 0. */
function smaller(a: bigint | undefined, b: bigint | undefined): bigint {
  const x = a ?? 0n;
  const y = b ?? 0n;
  return x < y ? x : y;
}

/** The node's policy when it derives a usage resource from usage, with those resources; undefined otherwise. */
function usagePolicy(node: V1Node, nodesConfig: NodesConfig | undefined): { policy: NodePolicy; usage: UsageConfig; resources: UsageResource[] } | undefined {
  const policy = resolveNodePolicy(node.metadata?.labels, nodesConfig);
  const resources = usageResources(policy);
  if (policy?.usage === undefined || resources.length === 0) return undefined;
  return { policy, usage: policy.usage, resources };
}

/**
 * What a node's samples say at `now`: R's measured requests (those of the pods the latest sample
 * measured), the samples within `windowMs`, and when the latest was taken (`since` without one).
 */
function readHistory(history: readonly UsageSample[] | undefined, now: number, windowMs: number, since: number) {
  const latest = history?.at(-1);
  return { measured: latest?.requests ?? {}, samples: samplesInWindow(history ?? [], now, windowMs), lastSample: latest?.at ?? since };
}

/** A node's sample: the usage and requests of its measured pods (`pods`, undefined for none) and its own usage. */
function newSample(
  at: number,
  pods: { usage: Partial<Record<UsageResource, bigint>>[]; requests: Partial<Record<UsageResource, bigint>>[] } | undefined,
  nodeUsage: unknown,
): UsageSample {
  return {
    at,
    pods: sumUsage(pods?.usage ?? []),
    requests: sumUsage(pods?.requests ?? []),
    node: readUsage(nodeUsage),
    podLoads: podLoads(pods?.usage ?? [], pods?.requests ?? []),
  };
}
