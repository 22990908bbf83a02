/**
 * npm run bench:usage — usage-aware ratios on the real control plane (docs/usage-aware.md).
 *
 * 50 simulated kubelets (4 CPU, 16 GiB; status every 10 s, as a kubelet; reports every 20 s
 * instead of 5 min, so that a ratio raised from 1 between phases does not wait minutes), each serving
 * `/metrics/resource` with the usage this bench sets; metrics-server through the aggregation
 * layer; kube-scheduler placing pods (500m CPU, 256Mi each; more than fit at ratio 2). Three
 * phases — static ratio 1, static ratio 2, usage-aware with ceiling 2 and cpu target 0.6 — each
 * under a low-usage profile (usage ÷ request 0.1–0.3 per pod) and a high one (0.5–0.9), then a
 * spike (usage 95 % of the node) on 10 nodes. Per phase and profile:
 *
 *   podsPlaced            pods bound once placement has settled
 *   nodeUtilizationP95Max the highest, over nodes, of the p95 of NodeMetrics cpu ÷ raw allocatable
 *   nodesOverTarget       nodes whose p95 utilization exceeds the target + 5 points (static ratio 1
 *                         alone puts most nodes there under the high profile: no ratio ≥ 1 helps them)
 *   overTargetAddedVsStatic1  of those, the nodes overcommit put there: bound cpu requests above
 *                         raw allocatable (more than static ratio 1 could have placed), at the end
 *                         of placement; 0 for static ratio 1 by construction
 *   addedWithRoomBeforeBurst  of overTargetAddedVsStatic1, the nodes whose stored cpu allocatable
 *                         already had room for more pods than raw allocatable when the first pod
 *                         was created (room given before any pod of the phase could be measured)
 *   maxRequestsVsRaw      the highest, over nodes, of bound cpu requests ÷ raw allocatable
 *   nodesBelowCommitted   nodes whose stored allocatable is below Σ requests bound (cpu or memory), any sample
 *   spikeReactionSeconds  spike start → stored cpu allocatable of all 10 spiked nodes at their
 *                         hot value (usage-aware only; null for static ratios, which never react)
 *
 * and packingVsStatic (usage-aware ÷ static-2 pods placed, low profile), overTargetAddedVsStatic1
 * (usage-aware, high profile) and the worst node (nodeUtilizationP95Max, usage-aware) against
 * hotThreshold.
 *
 * A fourth phase, `hot-full`, is the usage-aware one with `hotAction: full` (coolFor 30s), then
 * runHotNodes: pods arriving one a second for 2 minutes while 10 nodes are at 95 % of their CPUs
 * (placedOnHotAfterFull: pods bound to a hot node beyond the `pods` allocatable of its first full
 * write, want 0; hotToFullSeconds), their usage falling back (coolToReopenSeconds), and usage
 * oscillating on 9 other nodes, fast and slow swings (full/open changes per node and hour); hotFullPackingVsUsageAware
 * (pods placed, low profile, want ≥ 0.98: no node is hot under low usage, so the same plan).
 *
 * Writes bench/results/usage-aware.json.
 *
 * Flags: --nodes N (50), --pods N per phase (default nodes × 18), --settle-seconds S (180),
 * --phases a,b (a subset, for trying a change; the targets need the first three), --estimated-load L
 * (the usage-aware phase's estimatedLoad.cpu; default: the config's default, 0.4), --keep (keep
 * the run folder), --out FILE.
 */
import { writeFileSync } from 'node:fs';
import { applyConfig, configYaml } from '../test/support/config.js';
import type { E2eEnv } from '../test/support/env.js';
import { adminClient, type KubeClient } from '../test/support/kube-client.js';
import { kubeletServingCertificate, markRunning, MetricsServer, ResourceMetricsEndpoint } from '../test/support/metrics-server.js';
import { claimNodeNames } from '../test/support/nodes.js';
import { createNamespace, deleteAllPods, listPods } from '../test/support/pods.js';
import { baseUnits } from '../test/support/quantity.js';
import { SimKubelet } from '../test/support/sim-kubelet.js';
import { onStage, type Stage } from '../test/support/stage.js';
import { WebhookProcess } from '../test/support/webhook.js';
import { benchMain, machineInfo, percentile, round, sleep, table } from './lib.js';

const NAMESPACE = 'bench-usage';
const MACHINE = { cpu: '4', memory: '16Gi', pods: '110', 'ephemeral-storage': '100Gi' };
const NODE_CPU = 4;
const POD_CPU = 0.5;
const SYSTEM_CPU = 0.1;
const TARGET = 0.6;
/** The usage section's hotThreshold (its default). */
const HOT = 0.9;
const SPIKED = 10;
/** nodeStatusReportFrequency: a node stored at its raw value takes a raised ratio only at a report (5 min in a cluster). */
const REPORT_MS = 20_000;

const PHASES = {
  'static-1': { nodes: { defaultRatios: { cpu: 1 } } },
  'static-2': { nodes: { defaultRatios: { cpu: 2 } } },
  'usage-aware': {
    nodes: {
      defaultRatios: { cpu: 2 },
      defaultUsage: { target: { cpu: TARGET }, interval: '10s', window: '1m' },
    },
  },
  // The usage-aware phase with hot nodes full (docs/usage-aware.md, "Hot nodes"); then runHotNodes.
  'hot-full': {
    nodes: {
      defaultRatios: { cpu: 2 },
      defaultUsage: { target: { cpu: TARGET }, interval: '10s', window: '1m', hotAction: 'full', coolFor: '30s' },
    },
  },
} as const;
type Phase = keyof typeof PHASES;

const bench = benchMain(
  {
    script: 'bench:usage',
    results: 'usage-aware.json',
    flags: {
      nodes: { type: 'number', default: 50, min: 11, integer: true },
      /** Per phase; default nodes × 18. */
      pods: { type: 'number', min: 1, integer: true },
      'settle-seconds': { type: 'number', default: 180, min: 30 },
      /** A subset, for trying a change; the targets need all three. */
      phases: { type: 'list', default: Object.keys(PHASES).join(','), choices: Object.keys(PHASES) as Phase[] },
      /** The usage-aware phase's estimatedLoad.cpu; default: the config's default, 0.4. */
      'estimated-load': { type: 'number', min: 0.01 },
      keep: { type: 'boolean' },
    },
  },
  ({ flags, log }) => onStage('bench-usage', log, flags.keep, measureOnStage),
);
const { flags, log, outFile } = bench;
const NODES = flags.nodes;
const PODS = flags.pods ?? NODES * 18;
const SETTLE_MS = flags['settle-seconds'] * 1000;
const RUN_PHASES = flags.phases;
const ESTIMATED_LOAD = flags['estimated-load'];

/** A phase's config, with --estimated-load in the usage-aware one. */
function phaseConfig(phase: Phase) {
  if (phase !== 'usage-aware' || ESTIMATED_LOAD === undefined) return PHASES[phase];
  const { nodes } = PHASES[phase];
  return { nodes: { ...nodes, defaultUsage: { ...nodes.defaultUsage, estimatedLoad: { cpu: ESTIMATED_LOAD } } } };
}
const PROFILES = { low: [0.1, 0.3], high: [0.5, 0.9] } as const;
type Profile = keyof typeof PROFILES;

interface Figures {
  podsPlaced: number;
  nodeUtilizationP95Max: number;
  nodesOverTarget: number;
  overTargetAddedVsStatic1: number;
  addedWithRoomBeforeBurst: number;
  maxRequestsVsRaw: number;
  nodesBelowCommitted: number;
  spikeReactionSeconds: number | null;
}

/** A deterministic usage factor per pod (its name hashed into the profile's range). */
function factor(name: string, [lo, hi]: readonly [number, number]): number {
  let h = 2166136261;
  for (const c of name) h = Math.imul(h ^ c.charCodeAt(0), 16777619) >>> 0;
  return lo + ((h % 1000) / 999) * (hi - lo);
}

class Cluster {
  readonly endpoints = new Map<string, ResourceMetricsEndpoint>();
  readonly kubelets: SimKubelet[] = [];
  /** Nodes whose usage is pinned (the spike): cores. */
  readonly pinned = new Map<string, number>();
  profile: readonly [number, number] = PROFILES.low;

  constructor(
    readonly env: E2eEnv,
    readonly admin: KubeClient,
  ) {}

  /** Bound pods by node, with their requests (cpu cores, memory bytes). */
  async bound(): Promise<Map<string, Array<{ name: string; cpu: number; memory: number }>>> {
    const byNode = new Map<string, Array<{ name: string; cpu: number; memory: number }>>();
    for (const pod of await listPods(this.admin, NAMESPACE)) {
      const node = pod.spec?.nodeName;
      if (!node || pod.metadata?.deletionTimestamp) continue;
      if (pod.status?.phase !== 'Running') await markRunning(this.admin, NAMESPACE, pod.metadata.name);
      const requests = pod.spec.containers[0].resources.requests;
      const list = byNode.get(node) ?? [];
      list.push({ name: pod.metadata.name, cpu: Number(baseUnits('cpu', requests.cpu)) / 1000, memory: Number(baseUnits('memory', requests.memory)) });
      byNode.set(node, list);
    }
    return byNode;
  }

  /** Sets every node's usage from its bound pods and the profile (pinned nodes at their pinned usage). */
  async feedUsage(): Promise<void> {
    const bound = await this.bound();
    for (const [node, endpoint] of this.endpoints) {
      const pods = (bound.get(node) ?? []).map((pod) => ({
        namespace: NAMESPACE,
        name: pod.name,
        cpu: pod.cpu * factor(pod.name, this.profile),
        memory: pod.memory * 0.5,
      }));
      const podCpu = pods.reduce((sum, pod) => sum + pod.cpu, 0);
      endpoint.set({ cpu: this.pinned.get(node) ?? podCpu + SYSTEM_CPU, memory: 2 * 1024 ** 3 + pods.reduce((sum, pod) => sum + pod.memory, 0), pods });
    }
  }

  /** Nodes whose stored allocatable (cpu or memory) is below Σ requests bound there. */
  async belowCommitted(): Promise<number> {
    const bound = await this.bound();
    const nodes = (await this.admin.get('/api/v1/nodes')).items as any[];
    let below = 0;
    for (const node of nodes) {
      const pods = bound.get(node.metadata.name) ?? [];
      const cpu = pods.reduce((sum, pod) => sum + pod.cpu, 0) * 1000;
      const memory = pods.reduce((sum, pod) => sum + pod.memory, 0);
      const allocatable = node.status?.allocatable ?? {};
      if (!allocatable.cpu) continue;
      if (Number(baseUnits('cpu', allocatable.cpu)) < Math.round(cpu) || Number(baseUnits('memory', allocatable.memory)) < memory) below += 1;
    }
    return below;
  }

  /** Stored cpu allocatable per node, cores. */
  async allocatableCpu(): Promise<Map<string, number>> {
    const nodes = (await this.admin.get('/api/v1/nodes')).items as any[];
    return new Map(
      nodes
        .filter((node) => this.endpoints.has(node.metadata.name))
        .map((node) => [node.metadata.name, Number(baseUnits('cpu', node.status?.allocatable?.cpu ?? '0')) / 1000]),
    );
  }

  /** NodeMetrics cpu ÷ raw allocatable (4 CPUs) per node, as metrics.k8s.io serves it now. */
  async utilization(): Promise<Map<string, number>> {
    const out = new Map<string, number>();
    const list = await this.admin.get('/apis/metrics.k8s.io/v1beta1/nodes').catch(() => ({ items: [] }));
    for (const item of list.items)
      if (this.endpoints.has(item.metadata.name)) out.set(item.metadata.name, Number(baseUnits('cpu', item.usage.cpu)) / 1000 / NODE_CPU);
    return out;
  }
}

async function runPhase(cluster: Cluster, phase: Phase, profile: Profile): Promise<Figures> {
  const { env, admin } = cluster;
  log(`--- ${phase}, ${profile} usage`);
  await deleteAllPods(admin, NAMESPACE, { force: true });
  cluster.pinned.clear();
  cluster.profile = PROFILES[profile];
  await cluster.feedUsage();
  await applyConfig(env, configYaml(phaseConfig(phase)));
  // Ratios settle on the empty nodes. Static: at once. Usage-aware: they rise one step per interval
  // once the previous phase's usage (its high profile, its spiked nodes) has left the smoothing
  // window, and a node the spike made full reopens after coolFor more: until no node's stored cpu
  // allocatable has moved for 30 s, at least 60 s, at most 5 min — a phase does not start from
  // the one before it.
  if (phase === 'static-1' || phase === 'static-2') await sleep(15_000);
  else {
    const settleStart = Date.now();
    let last = '';
    let stableSince = Date.now();
    while (Date.now() - settleStart < 300_000) {
      await cluster.feedUsage();
      const now = JSON.stringify([...(await cluster.allocatableCpu())].sort());
      if (now !== last) stableSince = Date.now();
      last = now;
      if (Date.now() - settleStart >= 60_000 && Date.now() - stableSince >= 30_000) break;
      await sleep(2_000);
    }
    log(`ratios settled on the empty nodes after ${round((Date.now() - settleStart) / 1000, 0)} s`);
  }

  const allocatableAtBurst = await cluster.allocatableCpu();
  const burstStart = Date.now();
  for (let i = 0; i < PODS; i++) {
    await admin.post(`/api/v1/namespaces/${NAMESPACE}/pods`, {
      apiVersion: 'v1',
      kind: 'Pod',
      metadata: { name: `p-${phase}-${profile}-${i}` },
      spec: {
        tolerations: [{ operator: 'Exists' }],
        containers: [{ name: 'app', image: 'registry.k8s.io/pause:3.10', resources: { requests: { cpu: `${POD_CPU * 1000}m`, memory: '256Mi' } } }],
      },
    });
  }

  log(
    `${PODS} pods created in ${round((Date.now() - burstStart) / 1000, 1)} s; cpu allocatable at the first: ${[...allocatableAtBurst.values()].filter((cpu) => cpu >= NODE_CPU + POD_CPU).length} nodes with room beyond raw`,
  );
  // Placement: usage fed every 2 s, until the number of bound pods has not moved for 45 s (or SETTLE_MS).
  const utilization = new Map<string, number[]>();
  let below = 0;
  let placed = 0;
  let stableSince = Date.now();
  const t0 = Date.now();
  while (Date.now() - t0 < SETTLE_MS) {
    await cluster.feedUsage();
    const bound = [...(await cluster.bound()).values()].reduce((sum, pods) => sum + pods.length, 0);
    if (bound !== placed) stableSince = Date.now();
    placed = bound;
    for (const [node, u] of await cluster.utilization()) utilization.set(node, [...(utilization.get(node) ?? []), u]);
    below = Math.max(below, await cluster.belowCommitted());
    if (Date.now() - stableSince > 45_000 && Date.now() - t0 > 60_000) break;
    await sleep(2_000);
  }
  const p95 = new Map(
    [...utilization].map(([node, samples]) => [
      node,
      percentile(
        samples.sort((a, b) => a - b),
        95,
      ),
    ]),
  );
  const overTarget = [...p95].filter(([, u]) => u > TARGET + 0.05).map(([node]) => node);
  const requested = new Map([...(await cluster.bound())].map(([node, pods]) => [node, pods.reduce((sum, pod) => sum + pod.cpu, 0)]));
  const addedNodes = overTarget.filter((node) => (requested.get(node) ?? 0) > NODE_CPU);
  const added = addedNodes.length;
  const addedWithRoomBeforeBurst = addedNodes.filter((node) => (allocatableAtBurst.get(node) ?? 0) >= NODE_CPU + POD_CPU).length;
  const maxRequestsVsRaw = round(Math.max(0, ...requested.values()) / NODE_CPU, 3);
  log(
    `${placed} pods placed; p95 utilization max ${round(Math.max(0, ...p95.values()), 3)}; ${overTarget.length} over target, ${added} of them over-committed (${addedWithRoomBeforeBurst} with room before the burst); requests ÷ raw max ${maxRequestsVsRaw}`,
  );

  // The spike: 10 nodes at 95 % of their CPUs.
  let spikeReactionSeconds: number | null = null;
  if (phase === 'usage-aware' || phase === 'hot-full') {
    const spiked = [...cluster.endpoints.keys()].slice(0, SPIKED);
    for (const node of spiked) cluster.pinned.set(node, 0.95 * NODE_CPU);
    await cluster.feedUsage();
    const start = Date.now();
    while (Date.now() - start < 180_000) {
      const nodes = await Promise.all(spiked.map((name) => admin.get(`/api/v1/nodes/${name}`)));
      const hot = nodes.every((node) => usageReason(node) === (phase === 'hot-full' ? 'hot-full' : 'hot'));
      below = Math.max(below, await cluster.belowCommitted());
      if (hot) {
        spikeReactionSeconds = round((Date.now() - start) / 1000, 1);
        break;
      }
      await cluster.feedUsage();
      await sleep(1_000);
    }
    log(`spike on ${SPIKED} nodes: all hot after ${spikeReactionSeconds ?? '> 180'} s`);
  }
  return {
    podsPlaced: placed,
    nodeUtilizationP95Max: round(Math.max(0, ...p95.values()), 3),
    nodesOverTarget: overTarget.length,
    overTargetAddedVsStatic1: added,
    addedWithRoomBeforeBurst,
    maxRequestsVsRaw,
    nodesBelowCommitted: below,
    spikeReactionSeconds,
  };
}

/** The cpu reason of a Node's usage annotation (kube-overcommit.io/usage), if any. */
function usageReason(node: any): string | undefined {
  return JSON.parse(node.metadata?.annotations?.['kube-overcommit.io/usage'] ?? '{}').cpu?.reason;
}

interface HotNodeFigures {
  spikedNodes: number;
  podsCreatedWhileHot: number;
  /** Pods bound to a spiked node beyond the `pods` allocatable of its first full write: placed after it was full. */
  placedOnHotAfterFull: number;
  /** Pods bound to the spiked nodes between the spike and their first full write. */
  placedOnHotBeforeFull: number;
  hotToFullSeconds: { median: number; max: number } | null;
  coolToReopenSeconds: { median: number; max: number } | null;
  nodesBelowCommitted: number;
  /** Per band of oscillating usage (÷ 4 CPUs): full/open changes per node and hour. */
  oscillation: Record<string, { nodes: number; minutes: number; halfPeriodSeconds: number; changesPerNodePerHour: number[] }>;
}

const spread = (values: number[]) =>
  values.length === 0
    ? null
    : {
        median: round(
          percentile(
            [...values].sort((a, b) => a - b),
            50,
          ),
          1,
        ),
        max: round(Math.max(...values), 1),
      };

/**
 * Hot nodes under `hotAction: full` while pods keep arriving (run after the hot-full phase, its
 * config in force): a base of pods placed under low usage, then SPIKED nodes at 95 % of their
 * CPUs while a pod a second arrives for 2 minutes; then their usage falls back; then usage
 * oscillating on other nodes, around hotThreshold (0.85–0.95, never below coolThreshold 0.8) and
 * across both thresholds (0.7–0.95).
 */
async function runHotNodes(cluster: Cluster): Promise<HotNodeFigures> {
  const { admin } = cluster;
  log('--- hot nodes: pods arriving while nodes turn hot, cooling, oscillation');
  await deleteAllPods(admin, NAMESPACE, { force: true });
  cluster.pinned.clear();
  cluster.profile = PROFILES.low;
  await cluster.feedUsage();
  await applyConfig(cluster.env, configYaml(PHASES['hot-full']));
  await sleep(60_000);
  const createPod = (name: string) =>
    admin.post(`/api/v1/namespaces/${NAMESPACE}/pods`, {
      apiVersion: 'v1',
      kind: 'Pod',
      metadata: { name },
      spec: {
        tolerations: [{ operator: 'Exists' }],
        containers: [{ name: 'app', image: 'registry.k8s.io/pause:3.10', resources: { requests: { cpu: `${POD_CPU * 1000}m`, memory: '256Mi' } } }],
      },
    });
  for (let i = 0; i < NODES * 4; i++) await createPod(`hot-base-${i}`);
  for (let t = 0; t < 60; t += 2) {
    await cluster.feedUsage();
    await sleep(2_000);
  }
  const nodeNames = [...cluster.endpoints.keys()];
  const spiked = nodeNames.slice(0, SPIKED);
  let below = 0;

  // Spike while pods arrive, one a second for 2 minutes.
  const spikeAt = Date.now();
  for (const node of spiked) cluster.pinned.set(node, 0.95 * NODE_CPU);
  await cluster.feedUsage();
  const boundAtSpike = await cluster.bound();
  const fullAt = new Map<string, { seconds: number; pods: number; boundThen: number }>();
  let created = 0;
  while (Date.now() - spikeAt < 120_000) {
    await createPod(`hot-arrival-${created++}`);
    if (created % 3 === 0) {
      const bound = await cluster.bound();
      for (const name of spiked) {
        if (fullAt.has(name)) continue;
        const node = await admin.get(`/api/v1/nodes/${name}`);
        if (usageReason(node) === 'hot-full')
          fullAt.set(name, { seconds: (Date.now() - spikeAt) / 1000, pods: Number(node.status.allocatable.pods), boundThen: bound.get(name)?.length ?? 0 });
      }
      below = Math.max(below, await cluster.belowCommitted());
      await cluster.feedUsage();
    }
    await sleep(1_000);
  }
  const boundAfter = await cluster.bound();
  const placedAfterFull = spiked.reduce((sum, name) => sum + Math.max(0, (boundAfter.get(name)?.length ?? 0) - (fullAt.get(name)?.pods ?? Infinity)), 0);
  const placedBeforeFull = spiked.reduce((sum, name) => sum + Math.max(0, (fullAt.get(name)?.boundThen ?? 0) - (boundAtSpike.get(name)?.length ?? 0)), 0);
  log(
    `${created} pods created while ${spiked.length} nodes were hot: ${fullAt.size} full, ${placedBeforeFull} placed on them before, ${placedAfterFull} after`,
  );

  // Cooling: usage back to the profile; each node reopens (reason usage again).
  for (const node of spiked) cluster.pinned.delete(node);
  await cluster.feedUsage();
  const coolAt = Date.now();
  const reopenedAt = new Map<string, number>();
  while (reopenedAt.size < spiked.length && Date.now() - coolAt < 300_000) {
    for (const name of spiked)
      if (!reopenedAt.has(name) && usageReason(await admin.get(`/api/v1/nodes/${name}`)) === 'usage') reopenedAt.set(name, (Date.now() - coolAt) / 1000);
    below = Math.max(below, await cluster.belowCommitted());
    await cluster.feedUsage();
    await sleep(2_000);
  }
  log(`cooled: ${reopenedAt.size} of ${spiked.length} reopened, after ${[...reopenedAt.values()].map((s) => round(s, 0)).join(', ')} s`);

  const oscillation = await oscillate(cluster, nodeNames.slice(SPIKED, SPIKED + 9));
  return {
    spikedNodes: spiked.length,
    podsCreatedWhileHot: created,
    placedOnHotAfterFull: placedAfterFull,
    placedOnHotBeforeFull: placedBeforeFull,
    hotToFullSeconds: spread([...fullAt.values()].map((f) => f.seconds)),
    coolToReopenSeconds: spread([...reopenedAt.values()]),
    nodesBelowCommitted: below,
    oscillation,
  };
}

/** Usage oscillating on two groups of nodes for 6 minutes; the published full/open changes per node, read every 2 s. */
async function oscillate(cluster: Cluster, nodes: string[]): Promise<HotNodeFigures['oscillation']> {
  // Fast swings (20 s each way, within the 1m smoothing window) and a slow one (90 s each way, past
  // the window and coolFor): the fast ones should turn a node full once and keep it so, the slow
  // one may close and reopen it, never more than once per coolFor.
  const bands = {
    'around hotThreshold (0.85-0.95)': { levels: [0.85, 0.95], halfPeriodMs: 20_000 },
    'across both thresholds (0.7-0.95)': { levels: [0.7, 0.95], halfPeriodMs: 20_000 },
    'slow, across both thresholds (0.5-0.95, 90 s each way)': { levels: [0.5, 0.95], halfPeriodMs: 90_000 },
  } as const;
  const minutes = 6;
  const groups = Object.entries(bands).map(([band, { levels, halfPeriodMs }], i) => ({ band, levels, halfPeriodMs, nodes: nodes.slice(i * 3, i * 3 + 3) }));
  const state = new Map<string, boolean>();
  const changes = new Map<string, number>();
  const start = Date.now();
  while (Date.now() - start < minutes * 60_000) {
    for (const { levels, halfPeriodMs, nodes: group } of groups) {
      const high = Math.floor((Date.now() - start) / halfPeriodMs) % 2 === 0;
      for (const node of group) cluster.pinned.set(node, (high ? levels[1] : levels[0]) * NODE_CPU);
    }
    await cluster.feedUsage();
    const cm = await cluster.admin.get(`/api/v1/namespaces/${cluster.env.webhook.namespace}/configmaps/kube-overcommit-usage`);
    const published = JSON.parse(cm.data?.['ratios.json'] ?? '{}');
    for (const node of nodes) {
      const full = published[node]?.cpu?.reason === 'hot-full';
      if (state.has(node) && state.get(node) !== full) changes.set(node, (changes.get(node) ?? 0) + 1);
      state.set(node, full);
    }
    await sleep(2_000);
  }
  for (const node of nodes) cluster.pinned.delete(node);
  const out: HotNodeFigures['oscillation'] = {};
  for (const { band, halfPeriodMs, nodes: group } of groups)
    out[band] = {
      nodes: group.length,
      minutes,
      halfPeriodSeconds: halfPeriodMs / 1000,
      changesPerNodePerHour: group.map((node) => round(((changes.get(node) ?? 0) * 60) / minutes, 1)),
    };
  log(`oscillation: ${JSON.stringify(out)}`);
  return out;
}

/** The run on the e2e stage: true when every target is met. */
async function measureOnStage({ env, onTearDown }: Stage): Promise<boolean> {
  const admin = adminClient(env);
  onTearDown(() => admin.close());
  const metricsServer = new MetricsServer(env);
  await metricsServer.start(log);
  onTearDown(() => metricsServer.remove());
  await createNamespace(env, NAMESPACE);
  const webhook = new WebhookProcess(env, { logLevel: 'info' });
  await webhook.start();
  onTearDown(() => webhook.stop());

  const cluster = new Cluster(env, admin);
  const tls = await kubeletServingCertificate(env);
  for (const name of claimNodeNames(env, 'sim-node', NODES)) {
    const endpoint = await ResourceMetricsEndpoint.start(name, tls);
    cluster.endpoints.set(name, endpoint);
    onTearDown(() => endpoint.stop());
  }
  const kubelets = await Promise.all(
    [...cluster.endpoints.values()].map((endpoint) =>
      SimKubelet.start(env, { name: endpoint.node, capacity: MACHINE, kubeletPort: endpoint.port, reportFrequencyMs: REPORT_MS }),
    ),
  );
  onTearDown(() => Promise.all(kubelets.map((k) => k.stop({ deleteNode: true }))).then(() => undefined));
  onTearDown(() => deleteAllPods(admin, NAMESPACE, { force: true }));

  const results: Record<string, Record<string, Figures>> = {};
  for (const phase of RUN_PHASES) {
    results[phase] = {};
    for (const profile of Object.keys(PROFILES) as Profile[]) results[phase][profile] = await runPhase(cluster, phase, profile);
  }
  const hotNodes = RUN_PHASES.includes('hot-full') ? await runHotNodes(cluster) : null;
  const usageAware = results['usage-aware'];
  const packingVsStatic = usageAware && results['static-2'] ? round(usageAware.low!.podsPlaced / results['static-2'].low!.podsPlaced, 3) : null;
  const overTargetAddedVsStatic1 = usageAware?.high!.overTargetAddedVsStatic1 ?? null;
  const worstNode = usageAware ? Math.max(...Object.values(usageAware).map((f) => f.nodeUtilizationP95Max)) : null;
  const belowEverywhere = Object.values(results).every((byProfile) => Object.values(byProfile).every((f) => f.nodesBelowCommitted === 0));
  // Packing under low usage, where no node is hot: hotAction full places what ratio1 places.
  const hotFull = results['hot-full'];
  const hotFullPacking = hotFull && usageAware ? round(hotFull.low!.podsPlaced / usageAware.low!.podsPlaced, 3) : null;
  const spike = usageAware ? Math.max(...Object.values(usageAware).map((f) => f.spikeReactionSeconds ?? Infinity)) : null;
  const report = {
    bench: 'usage-aware',
    command: bench.command,
    machine: machineInfo(),
    setup: {
      nodes: NODES,
      machine: MACHINE,
      podsPerPhase: PODS,
      pod: { cpu: `${POD_CPU * 1000}m`, memory: '256Mi' },
      profiles: PROFILES,
      target: TARGET,
      estimatedLoad: ESTIMATED_LOAD ?? 'default (0.4)',
      hotThreshold: HOT,
      spikedNodes: SPIKED,
    },
    phases: results,
    hotNodes,
    hotFullPackingVsUsageAware: hotFullPacking,
    packingVsStatic,
    overTargetAddedVsStatic1,
    worstNodeUtilization: worstNode,
    targets: {
      packingVsStatic: { want: '>= 0.9', met: packingVsStatic !== null && packingVsStatic >= 0.9 },
      overTargetAddedVsStatic1: { want: 0, met: overTargetAddedVsStatic1 === 0 },
      worstNodeUtilization: { want: `<= hotThreshold ${HOT}`, met: worstNode !== null && worstNode <= HOT },
      nodesBelowCommitted: { want: 0, met: belowEverywhere },
      spikeReactionSeconds: { want: '<= 60', met: spike !== null && spike <= 60 },
      ...(hotNodes
        ? {
            placedOnHotAfterFull: { want: 0, met: hotNodes.placedOnHotAfterFull === 0 },
            hotFullPackingVsUsageAware: { want: '>= 0.98', met: hotFullPacking === null || hotFullPacking >= 0.98 },
            hotNodesBelowCommitted: { want: 0, met: hotNodes.nodesBelowCommitted === 0 },
          }
        : {}),
    },
  };
  writeFileSync(outFile, `${JSON.stringify(report, null, 2)}\n`);
  const rows = Object.entries(results).flatMap(([phase, byProfile]) =>
    Object.entries(byProfile).map(([profile, f]) => [
      phase,
      profile,
      f.podsPlaced,
      f.nodeUtilizationP95Max,
      f.nodesOverTarget,
      f.overTargetAddedVsStatic1,
      f.addedWithRoomBeforeBurst,
      f.maxRequestsVsRaw,
      f.nodesBelowCommitted,
      f.spikeReactionSeconds ?? '-',
    ]),
  );
  log(
    table(
      [
        'phase',
        'profile',
        'placed',
        'util p95 max',
        'over target',
        'added vs static 1',
        'of them room before burst',
        'requests ÷ raw max',
        'below committed',
        'spike s',
      ],
      rows,
    ),
  );
  log(`packingVsStatic ${packingVsStatic}, overTargetAddedVsStatic1 ${overTargetAddedVsStatic1}, worst node ${worstNode} (hot ${HOT}); written to ${outFile}`);
  return Object.values(report.targets).every((t) => t.met);
}
