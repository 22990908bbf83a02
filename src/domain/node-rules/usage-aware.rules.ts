/**
 * Usage-aware ratios, as pure functions (docs/usage-aware.md). A pool (or the default ratios)
 * with a `usage` section turns its configured ratio into a ceiling; the leader derives each
 * node's effective ratio from measured usage and publishes it; every replica writes what is
 * published. The invariants:
 *
 *   1. The formula, per usage resource (cpu, memory), with A = raw allocatable, R = Σ admitted requests
 *      of the node's bound pods that the latest sample measured (a pod not measured yet is
 *      left out, so its requests come out of the room, as if it used e of them), U = Σ usage
 *      of its pods (smoothed), T = target,
 *      L = estimatedLoad, P = the configured percentile (nearest rank) of the per-pod usage ÷
 *      request of the pods the latest sample measured (0 when none), e = max(min(U/R, 1),
 *      min(P, 1), L) (U/R read as 1 when R = 0 and U > 0, as 0 when both are 0):
 *      ratio = max(1, ((A·T − U)/e + R)/A), capped at the ceiling, rounded down to 0.01.
 *      e estimates the pods still to come: not the node's mean (the pods that happen to use
 *      little would make room for ones that use much), a high percentile of its pods.
 *   2. Smoothing: U and the node's usage are the configured percentile (nearest rank) of the
 *      samples within the window, never the last sample alone.
 *   3. Hot: the node's usage (NodeMetrics, system included) ÷ A above hotThreshold → ratio 1,
 *      reason `hot`, at once.
 *   4. Stale: no sample for staleAfter → the ratio never rises (the one in force, capped at the
 *      ceiling), reason `stale`; none for fallbackAfter → ratio 1, reason `stale`. A stale
 *      decision carries A and R, never U (no current measurement).
 *   5. Envelope on a `usage` ratio, against the one in force (previous; 1 when none): within
 *      the deadband → unchanged; lower → applies at once; higher → at most previous + maxStepUp,
 *      and not at all while the node holds pods placed since its first sample that no sample
 *      has measured yet (the room given out last is not known to be used as e assumed).
 *      Bounded: a pod holds for staleAfter at most from the sample that first found it bound,
 *      so one never measured holds nothing after that (rule 1 leaves it out of R, nothing
 *      more); the pods a node's first sample finds (a new node, a new leader) hold nothing.
 *   6. Every effective ratio is in [1, ceiling] of the config in force, whatever was published:
 *      a lowered ceiling applies at once, a published value above it is read as the ceiling,
 *      and nothing a node writes is read here. A resource without a usage target, or whose
 *      ceiling is 1, has its static ratio (reason `static`).
 *   7. Deterministic: the webhook's ratio for a node is a function of the config in force, the
 *      published entry and the stored Node only, so every replica writes the same allocatable.
 *      A node without a published entry keeps the ratio recorded on the stored Node, capped at
 *      the ceiling (`stale`); a node without one, 1.
 *   8. Restart-proof: with every publication the leader writes each node's smoothed inputs (U,
 *      the node's usage, R, P, and when it was last sampled, wall clock) next to the ratios; a
 *      new leader starts each node's history from them, as one sample taken then, so it
 *      remembers what the window remembered (a spike) and plans from its first interval. An
 *      entry older than the window, or not exactly what the leader writes, is ignored.
 *
 * The commitment floor (node-oversell.rules.ts, rule 6) still applies after the effective ratio.
 */
import { parseDuration } from '../../common/duration.js';
import { type Ratios, USAGE_RESOURCES, type UsageConfig, type UsageResource } from './node-oversell.config.js';
import { isRecord } from '../../common/is-record.js';
import type { NodePolicy } from './node-oversell.rules.js';
import { formatResourceQuantity, parseResourceQuantity } from '../quantity.js';

/** The ConfigMap (in the platform's namespace) the leader publishes the effective ratios to, and its key. */
export const USAGE_CONFIGMAP = 'kube-overcommit-usage';
export const USAGE_DATA_KEY = 'ratios.json';
/** Its key for the leader's smoothed inputs per node, which a new leader starts from (rule 8). */
export const USAGE_INPUTS_KEY = 'inputs.json';

/** Why a resource has the ratio it has (`hot-full`: hot-nodes.rules.ts); `floor` is added by the webhook when the commitment floor decides. */
export const USAGE_REASONS = ['static', 'usage', 'hot', 'hot-full', 'stale'] as const;
export type UsageReason = (typeof USAGE_REASONS)[number];

/** The published decision for one node and resource; A, R, U as Quantity strings (U smoothed). */
export interface UsageDecision {
  ratio: number;
  reason: UsageReason;
  A?: string;
  R?: string;
  U?: string;
}
/** What the leader publishes per node. */
export type NodeUsageEntry = Partial<Record<UsageResource, UsageDecision>>;

/** One measurement of a node, in base units (millicores, bytes). */
export interface UsageSample {
  /** Leader's clock, ms. */
  at: number;
  /** Σ usage of the node's pods (PodMetrics). */
  pods: Partial<Record<UsageResource, bigint>>;
  /** Σ requests of the pods measured (those in `pods`). */
  requests: Partial<Record<UsageResource, bigint>>;
  /** The node's own usage (NodeMetrics): pods, system daemons and the kubelet. */
  node: Partial<Record<UsageResource, bigint>>;
  /** Usage ÷ request of each measured pod that requests the resource (rule 1's P). */
  podLoads?: Partial<Record<UsageResource, number[]>>;
}

/** Nearest-rank percentile `p` (0–100] of `values`; undefined when there are none. */
export function percentile<T extends bigint | number>(values: readonly T[], p: number): T | undefined {
  if (values.length === 0) return undefined;
  const sorted = [...values].sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));
  return sorted[Math.min(sorted.length, Math.max(1, Math.ceil((p / 100) * sorted.length))) - 1];
}

/** Rounds down to 0.01 (a ratio is published and recorded with two decimals at most). */
export function roundRatio(ratio: number): number {
  return Math.floor(ratio * 100 + 1e-9) / 100;
}

/** Rule 1's floors on e: the configured estimated load, and P (`podLoad`, 0 when absent). */
export interface UsageLoads {
  estimatedLoad: number;
  podLoad?: number;
}

/** Rule 1, uncapped and unrounded: the ratio that brings the node's expected usage to T·A. */
export function usageRatio(A: bigint, R: bigint, U: bigint, target: number, { estimatedLoad, podLoad = 0 }: UsageLoads): number {
  if (A <= 0n) return 1;
  const a = Number(A);
  const r = Number(R);
  const u = Number(U);
  const measured = r > 0 ? Math.min(u / r, 1) : u > 0 ? 1 : 0;
  const e = Math.max(measured, Math.min(podLoad, 1), estimatedLoad);
  return Math.max(1, ((a * target - u) / e + r) / a);
}

export interface UsageInputs {
  /** Raw allocatable. */
  A: bigint;
  /** Σ requests of the node's bound pods measured by the latest sample (rule 1). */
  R: bigint;
  /** The samples within the window, oldest first (may be empty). */
  samples: readonly UsageSample[];
  /** Ms since the node's last sample (since the leader started leading when it has none). */
  sinceLastSampleMs: number;
  /** Σ requests of the pods placed and not measured yet (rule 5's hold; 0 when absent). */
  placedUnmeasured?: bigint;
}

/**
 * Rules 1–6 for one node and usage resource: the new decision from the inputs, the ceiling,
 * the ratio in force (`previous`, undefined when none) and the config.
 */
export function planUsageDecision(
  resource: UsageResource,
  inputs: UsageInputs,
  ceiling: number,
  previous: number | undefined,
  usage: UsageConfig,
): UsageDecision {
  const inForce = Math.min(Math.max(previous ?? 1, 1), ceiling);
  const target = usage.target?.[resource];
  const A = formatResourceQuantity(resource, inputs.A);
  const R = formatResourceQuantity(resource, inputs.R);
  if (target === undefined || target === null || ceiling <= 1) return { ratio: ceiling, reason: 'static' };
  const since = inputs.sinceLastSampleMs;
  if (since >= parseDuration(usage.fallbackAfter)) return { ratio: 1, reason: 'stale', A, R };
  const U = percentile(
    inputs.samples.map((s) => s.pods[resource] ?? 0n),
    usage.percentile,
  );
  const nodeUsage = smoothedNodeUsage(inputs.samples, resource, usage.percentile);
  if (U === undefined || nodeUsage === undefined || since >= parseDuration(usage.staleAfter)) return { ratio: inForce, reason: 'stale', A, R };
  const measured = { A, R, U: formatResourceQuantity(resource, U) };
  if (isHot(resource, nodeUsage, inputs.A, usage)) return { ratio: 1, reason: 'hot', ...measured };
  const wanted = roundRatio(Math.min(ceiling, usageRatio(inputs.A, inputs.R, U, target, loadFloors(resource, inputs, usage))));
  let ratio = wanted;
  if (Math.abs(wanted - inForce) < usage.deadband) ratio = inForce;
  else if (wanted > inForce) ratio = (inputs.placedUnmeasured ?? 0n) > 0n ? inForce : roundRatio(Math.min(wanted, inForce + usage.maxStepUp));
  return { ratio: Math.max(1, Math.min(ceiling, ratio)), reason: 'usage', ...measured };
}

/**
 * Rule 5's hold, per node, as of its latest sample: the pods (keys) bound then, and the pods
 * placed since the node's first sample that no sample has measured yet, each with when the
 * sample that first found it bound was taken.
 */
export interface Placements {
  boundAtLatest: ReadonlySet<string>;
  unmeasured: ReadonlyMap<string, number>;
}

/**
 * Rule 5: the placements after a sample taken `at` that found the pods `bound` and measured
 * `measured`. `previous` undefined: the node's first sample, whose pods count as there before
 * (nothing holds). A pod once measured, or no longer bound, is out for good.
 */
export function trackPlacements(previous: Placements | undefined, bound: Iterable<string>, measured: ReadonlySet<string>, at: number): Placements {
  const boundAtLatest = new Set(bound);
  const unmeasured = new Map<string, number>();
  if (previous !== undefined)
    for (const key of boundAtLatest) {
      if (measured.has(key)) continue;
      const since = previous.unmeasured.get(key) ?? (previous.boundAtLatest.has(key) ? undefined : at);
      if (since !== undefined) unmeasured.set(key, since);
    }
  return { boundAtLatest, unmeasured };
}

/**
 * Rule 5's hold: Σ requests, per usage resource, of the pods bound now (`bound`, by key) that
 * were placed since the node's first sample and are not measured yet: found bound less than
 * `staleAfterMs` before `now`, or since its latest sample. Nothing without a sample.
 */
export function placedUnmeasured(
  bound: ReadonlyMap<string, Partial<Record<UsageResource, bigint>>>,
  placements: Placements | undefined,
  now: number,
  staleAfterMs: number,
): Partial<Record<UsageResource, bigint>> {
  if (placements === undefined) return {};
  const held = (key: string) => {
    const since = placements.unmeasured.get(key);
    return since === undefined ? !placements.boundAtLatest.has(key) : now - since < staleAfterMs;
  };
  return sumUsage([...bound].filter(([key]) => held(key)).map(([, requests]) => requests));
}

/** Rule 2: the node's own usage (NodeMetrics) smoothed over `samples`; undefined without one. */
export function smoothedNodeUsage(samples: readonly UsageSample[], resource: UsageResource, percentileOf: number): bigint | undefined {
  return percentile(
    samples.map((s) => s.node[resource] ?? 0n),
    percentileOf,
  );
}

/** Rule 3: the node's own usage is above its hot threshold's share of raw allocatable. */
export function isHot(resource: UsageResource, nodeUsage: bigint, A: bigint, usage: UsageConfig): boolean {
  const hot = usage.hotThreshold?.[resource];
  return hot !== undefined && hot !== null && A > 0n && Number(nodeUsage) / Number(A) > hot;
}

/** Rule 1's floors on e for a resource: its configured estimated load, and P from the latest sample's pod loads. */
function loadFloors(resource: UsageResource, inputs: UsageInputs, usage: UsageConfig): UsageLoads {
  return {
    estimatedLoad: usage.estimatedLoad?.[resource] ?? 0,
    podLoad: percentile(inputs.samples.at(-1)?.podLoads?.[resource] ?? [], usage.percentile) ?? 0,
  };
}

/** Samples of `history` within `windowMs` before `now`. */
export function samplesInWindow(history: readonly UsageSample[], now: number, windowMs: number): UsageSample[] {
  return history.filter((sample) => now - sample.at <= windowMs);
}

/** The usage resources a policy derives from usage (a target and a ceiling > 1). */
export function usageResources(policy: NodePolicy | null): UsageResource[] {
  if (policy?.usage === undefined) return [];
  return USAGE_RESOURCES.filter((resource) => typeof policy.usage!.target?.[resource] === 'number' && (policy.ratios[resource] ?? 1) > 1);
}

/**
 * Rules 6 and 7 in the webhook: the policy with its usage resources' ratios replaced by the
 * published ones (capped at the ceiling), `full` when the published entry says hot-full
 * (hot-nodes.rules.ts rule 5), and the reason per resource. `entry` undefined: no
 * published entry for the node; `recorded` the ratios recorded on the stored Node.
 */
export function effectivePolicy(
  policy: NodePolicy | null,
  entry: NodeUsageEntry | undefined,
  recorded: Partial<Record<UsageResource, number>> | undefined,
): { policy: NodePolicy | null; decisions: NodeUsageEntry } {
  const resources = usageResources(policy);
  if (policy === null || resources.length === 0) return { policy, decisions: {} };
  const ratios: Ratios = { ...policy.ratios };
  const decisions: NodeUsageEntry = {};
  // A pool switched back to `ratio1` applies at once, as a lowered ceiling does: a hot-full entry reads as hot.
  const full = policy.usage?.hotAction === 'full' && isHotFull(entry);
  for (const resource of resources) {
    const ceiling = policy.ratios[resource] ?? 1;
    const published = entry?.[resource];
    const decision: UsageDecision = published ?? { ratio: recorded?.[resource] ?? 1, reason: 'stale' };
    const ratio = Math.max(1, Math.min(ceiling, decision.ratio));
    decisions[resource] = { ...decision, ratio, ...(decision.reason === 'hot-full' && !full ? { reason: 'hot' } : {}) };
    ratios[resource] = ratio;
  }
  return { policy: { ...policy, ratios, ...(full ? { full: true } : {}) }, decisions };
}

/** Whether a published entry says its node is full (hot-nodes.rules.ts rule 5): the webhook then writes its committed requests. */
export function isHotFull(entry: NodeUsageEntry | undefined): boolean {
  return entry !== undefined && Object.values(entry).some((decision) => decision?.reason === 'hot-full');
}

/** The `kube-overcommit.io/usage` annotation value: the node's decisions, keys in USAGE_RESOURCES order. */
export function formatUsageEntry(entry: NodeUsageEntry): string {
  const out: NodeUsageEntry = {};
  for (const resource of USAGE_RESOURCES) if (entry[resource] !== undefined) out[resource] = entry[resource];
  return JSON.stringify(out);
}

const MAX_PUBLISHED_RATIO = 10;

function readDecision(resource: UsageResource, value: unknown): UsageDecision | null {
  if (!isRecord(value)) return null;
  const { ratio, reason, A, R, U } = value;
  if (typeof ratio !== 'number' || !Number.isFinite(ratio) || ratio < 1 || ratio > MAX_PUBLISHED_RATIO) return null;
  if (typeof reason !== 'string' || !(USAGE_REASONS as readonly string[]).includes(reason)) return null;
  const decision: UsageDecision = { ratio, reason: reason as UsageReason };
  for (const [key, text] of [
    ['A', A],
    ['R', R],
    ['U', U],
  ] as const) {
    if (text === undefined) continue;
    if (typeof text !== 'string') return null;
    try {
      if (parseResourceQuantity(resource, text) < 0n) return null;
    } catch {
      return null;
    }
    decision[key] = text;
  }
  return decision;
}

/**
 * The published ratios (the ConfigMap's `ratios.json`: `{"<node>":{"cpu":{...},...},...}`),
 * read defensively: an entry or decision that is not exactly what the leader writes is left out
 * (its node then keeps its recorded ratio, rule 7). Throws on text that is not a JSON object.
 */
export function readPublished(text: string): Map<string, NodeUsageEntry> {
  const json: unknown = JSON.parse(text);
  if (!isRecord(json)) throw new Error('published usage ratios: not a JSON object');
  const out = new Map<string, NodeUsageEntry>();
  for (const [node, value] of Object.entries(json)) {
    if (!isRecord(value)) continue;
    const entry: NodeUsageEntry = {};
    for (const resource of USAGE_RESOURCES) {
      const decision = readDecision(resource, value[resource]);
      if (decision !== null) entry[resource] = decision;
    }
    out.set(node, entry);
  }
  return out;
}

/** The ConfigMap's `ratios.json`: nodes sorted by name, so equal content is equal text (no write). */
export function formatPublished(entries: ReadonlyMap<string, NodeUsageEntry>): string {
  const out: Record<string, NodeUsageEntry> = {};
  for (const node of [...entries.keys()].sort()) out[node] = JSON.parse(formatUsageEntry(entries.get(node)!)) as NodeUsageEntry;
  return JSON.stringify(out);
}

/** Σ over a list of amounts, per usage resource. */
export function sumUsage(items: Iterable<Partial<Record<UsageResource, bigint>>>): Partial<Record<UsageResource, bigint>> {
  const out: Partial<Record<UsageResource, bigint>> = {};
  for (const item of items) for (const resource of USAGE_RESOURCES) if (item[resource] !== undefined) out[resource] = (out[resource] ?? 0n) + item[resource];
  return out;
}

/** Usage ÷ request of each pod (`usage[i]`, `requests[i]`) that requests the resource: rule 1's P is a percentile of these. */
export function podLoads(
  usage: readonly Partial<Record<UsageResource, bigint>>[],
  requests: readonly Partial<Record<UsageResource, bigint>>[],
): Partial<Record<UsageResource, number[]>> {
  const out: Partial<Record<UsageResource, number[]>> = {};
  for (const resource of USAGE_RESOURCES) {
    const loads: number[] = [];
    usage.forEach((used, i) => {
      const requested = requests[i]?.[resource] ?? 0n;
      if (requested > 0n) loads.push(Number(used[resource] ?? 0n) / Number(requested));
    });
    out[resource] = loads;
  }
  return out;
}

/** metrics.k8s.io `usage` ({cpu: "250m", memory: "1Gi"}) in base units; a quantity that does not parse is left out. */
export function readUsage(usage: unknown): Partial<Record<UsageResource, bigint>> {
  const out: Partial<Record<UsageResource, bigint>> = {};
  if (!isRecord(usage)) return out;
  for (const resource of USAGE_RESOURCES) {
    const value = usage[resource];
    if (typeof value !== 'string') continue;
    try {
      const amount = parseResourceQuantity(resource, value);
      if (amount >= 0n) out[resource] = amount;
    } catch {
      // metrics-server never sends one; a broken sample counts as no sample for that resource
    }
  }
  return out;
}

/** Rule 8: a node's smoothed inputs as published (Quantity strings; `at` = wall-clock ms of its last sample). */
export interface NodeInputs {
  at: number;
  U: Partial<Record<UsageResource, string>>;
  node: Partial<Record<UsageResource, string>>;
  R: Partial<Record<UsageResource, string>>;
  P: Partial<Record<UsageResource, number>>;
}

/** Rule 8: the inputs the window's samples smooth to (the latest sample's R and P); undefined without samples. */
export function smoothInputs(samples: readonly UsageSample[], percentileOf: number, wallClockAt: number): NodeInputs | undefined {
  const latest = samples.at(-1);
  if (latest === undefined) return undefined;
  const inputs: NodeInputs = { at: Math.round(wallClockAt), U: {}, node: {}, R: {}, P: {} };
  for (const resource of USAGE_RESOURCES) {
    const U = percentile(
      samples.map((s) => s.pods[resource] ?? 0n),
      percentileOf,
    );
    const node = smoothedNodeUsage(samples, resource, percentileOf);
    if (U !== undefined) inputs.U[resource] = formatResourceQuantity(resource, U);
    if (node !== undefined) inputs.node[resource] = formatResourceQuantity(resource, node);
    inputs.R[resource] = formatResourceQuantity(resource, latest.requests[resource] ?? 0n);
    const P = percentile(latest.podLoads?.[resource] ?? [], percentileOf);
    if (P !== undefined) inputs.P[resource] = P;
  }
  return inputs;
}

/** Rule 8: the one sample a new leader starts a node's history with, taken `ageMs` before `now` (its clock). */
export function seedSample(inputs: NodeInputs, now: number, ageMs: number): UsageSample {
  const read = (amounts: Partial<Record<UsageResource, string>>) => {
    const out: Partial<Record<UsageResource, bigint>> = {};
    for (const resource of USAGE_RESOURCES) if (amounts[resource] !== undefined) out[resource] = parseResourceQuantity(resource, amounts[resource]);
    return out;
  };
  const podLoads: Partial<Record<UsageResource, number[]>> = {};
  for (const resource of USAGE_RESOURCES) if (inputs.P[resource] !== undefined) podLoads[resource] = [inputs.P[resource]];
  return { at: now - ageMs, pods: read(inputs.U), requests: read(inputs.R), node: read(inputs.node), podLoads };
}

function readAmountsOf(resource: UsageResource, value: unknown): string | null | undefined {
  if (value === undefined) return undefined;
  if (typeof value !== 'string') return null;
  try {
    return parseResourceQuantity(resource, value) >= 0n ? value : null;
  } catch {
    return null;
  }
}

/** Rule 8, read defensively: a node entry that is not exactly what the leader writes is left out. Throws on text that is not a JSON object. */
export function readInputs(text: string): Map<string, NodeInputs> {
  const json: unknown = JSON.parse(text);
  if (!isRecord(json)) throw new Error('published usage inputs: not a JSON object');
  const out = new Map<string, NodeInputs>();
  for (const [name, value] of Object.entries(json)) {
    const entry = readNodeInputs(value);
    if (entry !== null) out.set(name, entry);
  }
  return out;
}

/** One node's published inputs; null when the entry is not exactly what the leader writes. */
function readNodeInputs(value: unknown): NodeInputs | null {
  if (!isRecord(value) || typeof value.at !== 'number' || !Number.isFinite(value.at)) return null;
  const U = readInputAmounts(value.U);
  const node = readInputAmounts(value.node);
  const R = readInputAmounts(value.R);
  const P = readInputLoads(value.P);
  if (U === null || node === null || R === null || P === null) return null;
  return { at: value.at, U, node, R, P };
}

/** An entry's `U`, `node` or `R`: non-negative quantities per usage resource; null for anything else. */
function readInputAmounts(amounts: unknown): Partial<Record<UsageResource, string>> | null {
  if (!isRecord(amounts)) return null;
  const out: Partial<Record<UsageResource, string>> = {};
  for (const resource of USAGE_RESOURCES) {
    const amount = readAmountsOf(resource, amounts[resource]);
    if (amount === null) return null;
    if (amount !== undefined) out[resource] = amount;
  }
  return out;
}

/** An entry's `P`: finite non-negative loads per usage resource; null for anything else. */
function readInputLoads(loads: unknown): Partial<Record<UsageResource, number>> | null {
  if (!isRecord(loads)) return null;
  const out: Partial<Record<UsageResource, number>> = {};
  for (const resource of USAGE_RESOURCES) {
    const load = loads[resource];
    if (load === undefined) continue;
    if (typeof load !== 'number' || !Number.isFinite(load) || load < 0) return null;
    out[resource] = load;
  }
  return out;
}

/** Rule 8: the ConfigMap's `inputs.json`, nodes sorted by name. */
export function formatInputs(inputs: ReadonlyMap<string, NodeInputs>): string {
  const out: Record<string, NodeInputs> = {};
  for (const node of [...inputs.keys()].sort()) out[node] = inputs.get(node)!;
  return JSON.stringify(out);
}
