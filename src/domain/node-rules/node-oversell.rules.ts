/**
 * Node oversell, as pure functions: which policy applies to a node, and what its
 * status.allocatable and our annotations must become. The rules that make it correct under
 * every writer (kubelets, third parties, the webhook's own reinvocation, and a node editing its
 * own annotations, which NodeRestriction allows):
 *
 *   1. We own status.allocatable for the managed resources; capacity is never changed.
 *   2. With every value written we record the raw allocatable, the capacity seen, the
 *      ratios applied and the values the floor decided (annotations below). A record that is not exactly what we write counts as
 *      absent: bad JSON, unknown keys, quantities negative, unparsable or beyond int64, ratios
 *      not numbers or outside [1, 10], or a resource whose recorded raw exceeds its capacity.
 *   3. Per managed resource, the incoming value is our output iff it equals the recorded floor
 *      value when the floor decided the resource, else floor(recorded raw × recorded ratio), and
 *      the resource's capacity equals its recorded capacity; then raw = recorded raw. The record read is the incoming object's; for an
 *      inflated node, when that one does not explain a resource, the stored Node's (oldObject),
 *      so a writer that drops our annotations but keeps the inflated value does not compound.
 *      Otherwise raw = the incoming allocatable, read as the capacity when above it on an
 *      inflated node (a kubelet's raw never exceeds its capacity).
 *   4. New allocatable = floor(raw × ratio) in base units for a resource whose
 *      0 ≤ raw ≤ capacity ≤ 2^63−1, else the raw value: no value written exceeds
 *      floor(capacity × ratio), whatever the annotations say. No ratio ≠ 1 (all 1, opted out,
 *      no policy) → the raw value, our annotations removed, and a value no record explains is
 *      left as the writer sent it.
 *   5. mutate(mutate(x)) = mutate(x) for every input: the record written explains every value
 *      written (amounts outside [0, 2^63−1] are left out of it and never inflated).
 *   6. The commitment floor, the last step: when the node's committed requests are known (the
 *      sum of what the kubelet admitted its bound non-terminal pods at, pod-resources.ts
 *      admittedPodRequests: a resize it deferred counts at what it allocated), the value
 *      written is max(rule 4's value, committed), opted out and ratio 1 included. The floor wins
 *      over floor(capacity × ratio): a kubelet re-admits its running pods against the stored
 *      allocatable on restart, and a value below what is bound would reject (strand) them. A
 *      value the floor decides is recorded (the floor annotation), so rule 3 recognises it as
 *      ours and raw stays the kubelet's; the record is kept while the floor decides anything.
 *      On a full node (a hot node under `hotAction: full`, hot-nodes.rules.ts: the policy's
 *      `full`) the floor decides every resource present, at exactly the committed value (0 for
 *      one none of its pods requests), below rule 4's value as well as above: no new pod fits,
 *      every bound one still does.
 *
 * Quantities are compared by value in base units (millicores, bytes, count), never as
 * strings: the API server may store "4000m" as "4".
 *
 * The one case no admission-time rule can decide (the equal-value case): the kubelet's new
 * raw allocatable for a resource equals the inflated value we last wrote for it, and its
 * capacity did not change (e.g. cpu 8 with 4 reserved, ratio 1.5 → we write 6; then
 * system-reserved is lowered to 2, so the kubelet computes 6). For that resource the object is
 * then exactly what we would have produced ourselves, and the kubelet — which sends a two-way
 * patch against the Node it read — does not even include it in its patch, because to it
 * nothing changed; a writer that changes one resource and carries our output for the others
 * (rule 3's reason to decide per resource) sends the same object. We keep the recorded raw (4)
 * and write 6 again; the new raw is picked up at the next capacity change, raw change or ratio
 * edit (the ratio edit makes our output differ from the kubelet's value, so it patches its 6
 * back, which no longer matches). The same holds after a webhook outage during which the
 * kubelet stored exactly our previous output. Requiring a capacity match (a CPU hot-add, a
 * maxPods change move capacity too) makes this as narrow as it can be without state outside
 * the object.
 */
import { type NodeMode, type NodePool, type NodesConfig, type Ratios, type UsageConfig } from './node-oversell.config.js';
import { MANAGED_RESOURCES, type ManagedResource, type ResourceAmounts } from '../resources.js';
import { matchesLabelSelector } from '../label-selector.js';
import { Memo } from '../memo.js';
import { formatResourceQuantity, multiplyFloor, parseResourceQuantity } from '../quantity.js';
import { isRecord } from '../../common/is-record.js';
import type { NodeLike } from '../node-like.js';

/** JSON `{"allocatable":{...},"capacity":{...}}`: see RawRecordJson. */
export const RAW_ANNOTATION = 'kube-overcommit.io/allocatable-raw';
/** JSON `{"cpu":1.5,...}`: the ratios applied, only those ≠ 1. */
export const RATIOS_ANNOTATION = 'kube-overcommit.io/ratios';
/** The pool name; absent for the default ratios. Informational: rule 3 does not read it. */
export const POOL_ANNOTATION = 'kube-overcommit.io/pool';
/** JSON `{"cpu":"7200m"}`: the values the commitment floor decided (rule 6), only those; absent when it decided none. */
export const FLOOR_ANNOTATION = 'kube-overcommit.io/floor';
/** JSON `{"cpu":{"ratio":1.7,"reason":"usage","A":"4","R":"3","U":"800m"}}`: usage-aware decisions (usage-aware.rules.ts). Informational: rule 3 does not read it. */
export const USAGE_ANNOTATION = 'kube-overcommit.io/usage';
export const NODE_ANNOTATIONS = [RAW_ANNOTATION, RATIOS_ANNOTATION, POOL_ANNOTATION, FLOOR_ANNOTATION, USAGE_ANNOTATION] as const;
export type NodeAnnotation = (typeof NODE_ANNOTATIONS)[number];

export const DISABLED_LABEL = 'kube-overcommit.io/disabled';
/** The seed-era opt-out label, still honoured. */
export const LEGACY_DISABLED_LABEL = 'node-oversell/disable';

/** Ratios per managed resource; a missing key = 1. */
export type AppliedRatios = Partial<Record<ManagedResource, number>>;

export interface NodePolicy {
  /** The matching pool's name; null for `defaultRatios`. */
  pool: string | null;
  ratios: Ratios;
  /** `shadow`: planned and exported, never written (the strategy's decision). Absent = enforce. */
  mode?: NodeMode;
  /** Usage-aware (usage-aware.rules.ts): `ratios` are ceilings. Absent: static ratios. */
  usage?: UsageConfig;
  /** The pool's kubelets give Guaranteed pods exclusive CPUs (the pod cap keeps them within raw cpu). */
  exclusiveCpus?: boolean;
  /** A hot node under `hotAction: full` (hot-nodes.rules.ts): rule 6's floor decides every resource, at exactly the committed requests. */
  full?: boolean;
}

/**
 * The shape of the `kube-overcommit.io/allocatable-raw` annotation: the raw allocatable and
 * the capacity of the managed resources present on the object when we wrote it, as Quantity
 * strings in the canonical form of formatResourceQuantity; keys in MANAGED_RESOURCES order,
 * absent resources absent. Example:
 *
 *   {"allocatable":{"cpu":"4","memory":"16318064Ki","ephemeral-storage":"47438335103","pods":"110"},
 *    "capacity":{"cpu":"4","memory":"16420464Ki","ephemeral-storage":"51474912Ki","pods":"110"}}
 */
export interface RawRecordJson {
  allocatable: Partial<Record<ManagedResource, string>>;
  capacity: Partial<Record<ManagedResource, string>>;
}

/** What our annotations say, parsed; see readRecord. */
export interface RawRecord {
  allocatable: ResourceAmounts;
  capacity: ResourceAmounts;
  ratios: AppliedRatios;
  /** The values the floor decided (rule 6); empty when it decided none. */
  floor: ResourceAmounts;
}

export interface NodeStatusPlan {
  /** The incoming allocatable of the managed resources. */
  incoming: ResourceAmounts;
  /** The raw allocatable (what the kubelet reported; rule 3). */
  raw: ResourceAmounts;
  /** The incoming capacity of the managed resources (never changed). */
  capacity: ResourceAmounts;
  /** The ratios applied (rule 4): only those ≠ 1, of resources present and inflatable. */
  ratios: AppliedRatios;
  /** The desired allocatable of the managed resources present: max(floor(raw × ratio), committed). */
  allocatable: ResourceAmounts;
  /** The resources whose value the commitment floor decided (rule 6), with that value. */
  floor: ResourceAmounts;
  /** The floor decided every resource at exactly the committed requests: a hot node under `hotAction: full` (rule 6). */
  full: boolean;
  /** The desired value of each of our annotations: a string to set, null to remove. */
  annotations: Record<NodeAnnotation, string | null>;
}

const MIN_RATIO = 1;
const MAX_RATIO = 10;
/** int64, what every Kubernetes component counts a resource in: the amounts we inflate and record. */
const MAX_AMOUNT = 2n ** 63n - 1n;

const inRange = (amount: bigint | undefined): amount is bigint => amount !== undefined && amount >= 0n && amount <= MAX_AMOUNT;

/** True when the node carries an opt-out label (`kube-overcommit.io/disabled=true` or `node-oversell/disable=true`). */
export function isOptedOut(labels: Readonly<Record<string, string>> | undefined): boolean {
  return labels?.[DISABLED_LABEL] === 'true' || labels?.[LEGACY_DISABLED_LABEL] === 'true';
}

/**
 * The policy for a node with these labels: null when it opted out; else the first pool whose
 * nodeSelector matches, in order; else the default ratios (pool null). The mode is the
 * pool's, else `defaultMode`.
 */
export function resolveNodePolicy(labels: Readonly<Record<string, string>> | undefined, nodesConfig: NodesConfig | undefined): NodePolicy | null {
  if (isOptedOut(labels)) return null;
  const mode = nodesConfig?.defaultMode ?? 'enforce';
  for (const pool of nodesConfig?.pools ?? []) if (matchesLabelSelector(pool.nodeSelector, labels)) return poolPolicy(pool, mode);
  const usage = nodesConfig?.defaultUsage;
  return { pool: null, ratios: nodesConfig?.defaultRatios ?? {}, mode, ...(usage ? { usage } : {}) };
}

/** The policy of a matching pool: its own mode, else `defaultMode`. */
function poolPolicy(pool: NodePool, defaultMode: NodeMode): NodePolicy {
  return {
    pool: pool.name,
    ratios: pool.ratios,
    mode: pool.mode ?? defaultMode,
    ...(pool.usage ? { usage: pool.usage } : {}),
    ...(pool.exclusiveCpus ? { exclusiveCpus: true } : {}),
  };
}

/** Reads the managed resources of a ResourceList into base units. Throws on an unparsable quantity. */
export function readAmounts(list: Readonly<Record<string, string | number>> | undefined): ResourceAmounts {
  const amounts: ResourceAmounts = {};
  if (!isRecord(list)) return amounts;
  for (const resource of MANAGED_RESOURCES) {
    const value = list[resource];
    if (value !== undefined && value !== null) amounts[resource] = parseResourceQuantity(resource, value as string | number);
  }
  return amounts;
}

/** floor(amount × ratio) for each resource present; a missing ratio is 1. */
export function inflate(raw: ResourceAmounts, ratios: AppliedRatios): ResourceAmounts {
  const out: ResourceAmounts = {};
  for (const resource of MANAGED_RESOURCES) {
    const amount = raw[resource];
    if (amount === undefined) continue;
    const ratio = ratios[resource];
    out[resource] = ratio === undefined || ratio === 1 ? amount : multiplyFloor(amount, ratio);
  }
  return out;
}

function readRecordedList(value: unknown): ResourceAmounts | null {
  if (!isRecord(value)) return null;
  const amounts: ResourceAmounts = {};
  for (const [key, text] of Object.entries(value)) {
    if (!(MANAGED_RESOURCES as readonly string[]).includes(key) || typeof text !== 'string') return null;
    const amount = parseResourceQuantity(key, text);
    if (!inRange(amount)) return null;
    amounts[key as ManagedResource] = amount;
  }
  return amounts;
}

function isValidRatio(ratio: unknown): ratio is number {
  return typeof ratio === 'number' && Number.isFinite(ratio) && ratio >= MIN_RATIO && ratio <= MAX_RATIO;
}

/**
 * Our record on a node, or null when it is absent or not exactly what we write (rule 2; one of
 * the two annotations missing counts as absent too). The annotations are writable by the node
 * itself, so this is parsed defensively; nothing in them can raise a ratio (ratios come from
 * config only) or a value past floor(capacity × ratio) (rule 4): they only tell raw from
 * inflated.
 */
export function readRecord(annotations: Readonly<Record<string, string>> | undefined): Readonly<RawRecord> | null {
  const rawText = annotations?.[RAW_ANNOTATION];
  const ratiosText = annotations?.[RATIOS_ANNOTATION];
  if (typeof rawText !== 'string' || typeof ratiosText !== 'string') return null;
  const floorText = annotations?.[FLOOR_ANNOTATION];
  const floor = typeof floorText === 'string' ? floorText : '{}';
  // Bounded input (no memo entry for a huge hostile annotation); a record is frozen, so shareable.
  if (rawText.length + ratiosText.length + floor.length > 4096) return parseRecord(rawText, ratiosText, floor);
  return recordMemo.get(`${rawText}\u0000${ratiosText}\u0000${floor}`, () => parseRecord(rawText, ratiosText, floor));
}
const recordMemo = new Memo<string, Readonly<RawRecord> | null>(8192);

function parseRecord(rawText: string, ratiosText: string, floorText: string): Readonly<RawRecord> | null {
  try {
    const raw: unknown = JSON.parse(rawText);
    const ratios: unknown = JSON.parse(ratiosText);
    const floor = readRecordedList(JSON.parse(floorText));
    if (!isRecord(raw) || !isRecord(ratios) || floor === null) return null;
    if (Object.keys(raw).some((key) => key !== 'allocatable' && key !== 'capacity')) return null;
    const allocatable = readRecordedList(raw.allocatable);
    const capacity = readRecordedList(raw.capacity);
    if (allocatable === null || capacity === null) return null;
    for (const resource of MANAGED_RESOURCES) {
      if ((allocatable[resource] ?? 0n) > (capacity[resource] ?? MAX_AMOUNT)) return null;
    }
    const applied: AppliedRatios = {};
    for (const [key, ratio] of Object.entries(ratios)) {
      if (!(MANAGED_RESOURCES as readonly string[]).includes(key) || !isValidRatio(ratio)) return null;
      applied[key as ManagedResource] = ratio;
    }
    return Object.freeze({
      allocatable: Object.freeze(allocatable),
      capacity: Object.freeze(capacity),
      ratios: Object.freeze(applied),
      floor: Object.freeze(floor),
    });
  } catch {
    return null;
  }
}

function formatList(amounts: ResourceAmounts): Partial<Record<ManagedResource, string>> {
  const out: Partial<Record<ManagedResource, string>> = {};
  for (const resource of MANAGED_RESOURCES) {
    const amount = amounts[resource];
    if (inRange(amount)) out[resource] = formatResourceQuantity(resource, amount);
  }
  return out;
}

/**
 * The `kube-overcommit.io/allocatable-raw` annotation value for these amounts (see
 * RawRecordJson); amounts outside [0, 2^63−1] are left out (rule 5).
 */
export function formatRawRecord(raw: ResourceAmounts, capacity: ResourceAmounts): string {
  const json: RawRecordJson = { allocatable: formatList(raw), capacity: formatList(capacity) };
  return JSON.stringify(json);
}

/** The `kube-overcommit.io/floor` annotation value: `{"cpu":"7200m"}`, keys in MANAGED_RESOURCES order. */
export function formatFloor(floor: ResourceAmounts): string {
  return JSON.stringify(formatList(floor));
}

/** The `kube-overcommit.io/ratios` annotation value: `{"cpu":1.5}`, keys in MANAGED_RESOURCES order. */
export function formatRatios(ratios: AppliedRatios): string {
  const out: AppliedRatios = {};
  for (const resource of MANAGED_RESOURCES) if (ratios[resource] !== undefined) out[resource] = ratios[resource];
  return JSON.stringify(out);
}

/**
 * The recorded raw of `resource` when `record` explains its incoming amount and capacity
 * (rule 3), else undefined.
 */
function recordedRaw(record: Readonly<RawRecord> | null, resource: ManagedResource, amount: bigint, capacity: bigint | undefined): bigint | undefined {
  const raw = record?.allocatable[resource];
  if (raw === undefined || capacity === undefined || record!.capacity[resource] !== capacity) return undefined;
  // A resource the floor decided was written as its floor value, never as floor(raw × ratio), so
  // only that value is ours: a kubelet raw that happens to equal the inflated value is raw.
  const decided = record!.floor[resource];
  if (decided !== undefined) return decided === amount ? raw : undefined;
  const ratio = record!.ratios[resource];
  const output = ratio === undefined || ratio === 1 ? raw : multiplyFloor(raw, ratio);
  return output === amount ? raw : undefined;
}

/** The policy's ratios ≠ 1 of the resources present. Throws on a ratio outside [1, 10] (config never has one). */
function configuredRatios(policy: NodePolicy | null, present: ResourceAmounts): AppliedRatios {
  const ratios: AppliedRatios = {};
  if (policy === null) return ratios;
  for (const resource of MANAGED_RESOURCES) {
    const ratio = policy.ratios[resource];
    if (present[resource] === undefined || ratio === undefined || ratio === null || ratio === 1) continue;
    if (!isValidRatio(ratio)) throw new Error(`ratio for ${resource} must be a number in [${MIN_RATIO}, ${MAX_RATIO}], got ${String(ratio)}`);
    ratios[resource] = ratio;
  }
  return ratios;
}

/**
 * Rule 3 alone: the node's raw allocatable per managed resource, read through its own record
 * (the stored value when no record explains it). Null when it has no status.allocatable.
 */
export function rawAllocatable(node: NodeLike): ResourceAmounts | null {
  return planNodeStatus(node, null)?.raw ?? null;
}

/**
 * Rules 3 and 4 with the ratios the node's own record applied (no floor): what its allocatable
 * is while that record stands. Null when it has no status.allocatable or no valid record.
 */
export function planRecordedStatus(node: NodeLike): NodeStatusPlan | null {
  const record = readRecord(node.metadata?.annotations);
  return record === null ? null : planNodeStatus(node, { pool: null, ratios: record.ratios });
}

/**
 * Rules 3, 4 and 6 for one incoming Node (CREATE, or the merged object of a nodes/status
 * UPDATE); `previous` is the stored Node (the request's oldObject), absent on CREATE.
 * `policy` null = opted out. `committed`: the requests bound to the node (rule 6), undefined
 * when unknown (no floor). Returns null when the object has no status.allocatable (nothing
 * to do). Throws if a managed quantity on the object itself is unparsable (the API server
 * rejects such a write after admission; the pipeline fails open). `usage`: the usage annotation
 * to write (usage-aware ratios already in `policy`), null for none.
 */
export function planNodeStatus(
  node: NodeLike,
  policy: NodePolicy | null,
  previous?: NodeLike,
  committed?: ResourceAmounts,
  usage: string | null = null,
): NodeStatusPlan | null {
  const allocatableList = node.status?.allocatable;
  if (!isRecord(allocatableList)) return null;
  const incoming = readAmounts(allocatableList);
  const capacity = readAmounts(node.status?.capacity);
  const configured = configuredRatios(policy, incoming);
  const inflating = Object.keys(configured).length > 0;
  const record = readRecord(node.metadata?.annotations);
  const stored = (inflating || committed !== undefined) && previous ? readRecord(previous.metadata?.annotations) : null;
  const { raw, ratios } = planRaw(incoming, capacity, configured, record, stored);
  const allocatable = inflate(raw, ratios);
  const full = policy?.full === true && committed !== undefined;
  const floor = full ? fullFloor(allocatable, committed) : planFloor(allocatable, committed);
  // inflate's object is this plan's own: the floor's values go in without a copy.
  Object.assign(allocatable, floor);
  const annotations = planAnnotations({ raw, capacity, ratios, floor }, inflating, policy?.pool, usage);
  return { incoming, raw, capacity, ratios, allocatable, floor, full, annotations };
}

/** What readRecord reads of a node's annotations. */
const RECORD_ANNOTATIONS = [RAW_ANNOTATION, RATIOS_ANNOTATION, FLOOR_ANNOTATION] as const;

/**
 * Every value planNodeStatus reads of its arguments, in a fixed order: the same inputs (each
 * compared by Object.is) give an equal plan. Kept beside planNodeStatus: a value it comes to read
 * must be added here. The policy counts by its ratios and pool (resolveNodePolicy makes a new
 * object at every call; none plans as no ratios), the committed requests by their amounts.
 */
export function planInputs(
  node: NodeLike,
  policy: NodePolicy | null,
  previous?: NodeLike,
  committed?: ResourceAmounts,
  usage: string | null = null,
): unknown[] {
  const allocatable = node.status?.allocatable;
  const capacity = node.status?.capacity;
  // A capacity that is no ResourceList reads as one without the managed resources: no input of its own.
  const inputs: unknown[] = [isRecord(allocatable), policy?.pool, policy?.full, committed === undefined, usage];
  for (const resource of MANAGED_RESOURCES)
    inputs.push(listValue(allocatable, resource), listValue(capacity, resource), policy?.ratios[resource], committed?.[resource]);
  for (const annotation of RECORD_ANNOTATIONS) inputs.push(node.metadata?.annotations?.[annotation], previous?.metadata?.annotations?.[annotation]);
  return inputs;
}

/** A resource's value in a ResourceList, as readAmounts reads it. */
const listValue = (list: unknown, resource: ManagedResource): unknown => (isRecord(list) ? list[resource] : undefined);

/**
 * Rules 3 and 4, per resource: the raw allocatable, read through our record on the incoming
 * object, else the one on the stored Node (`stored`), and the configured ratios that apply to it.
 */
function planRaw(
  incoming: ResourceAmounts,
  capacity: ResourceAmounts,
  configured: AppliedRatios,
  record: Readonly<RawRecord> | null,
  stored: Readonly<RawRecord> | null,
): { raw: ResourceAmounts; ratios: AppliedRatios } {
  const inflating = Object.keys(configured).length > 0;
  const raw: ResourceAmounts = {};
  const ratios: AppliedRatios = {};
  for (const resource of MANAGED_RESOURCES) {
    const amount = incoming[resource];
    if (amount === undefined) continue;
    const cap = capacity[resource];
    let value = recordedRaw(record, resource, amount, cap) ?? recordedRaw(stored, resource, amount, cap);
    if (value === undefined) value = inflating && inRange(cap) && amount > cap ? cap : amount;
    raw[resource] = value;
    // Rule 4.
    const ratio = configured[resource];
    if (ratio !== undefined && inRange(cap) && value >= 0n && value <= cap) ratios[resource] = ratio;
  }
  return { raw, ratios };
}

/** Rule 6: the resources whose committed requests exceed the value planned by rule 4, with the committed value. */
function planFloor(planned: ResourceAmounts, committed: ResourceAmounts | undefined): ResourceAmounts {
  const floor: ResourceAmounts = {};
  if (committed === undefined) return floor;
  for (const resource of MANAGED_RESOURCES) {
    const bound = committed[resource];
    const value = planned[resource];
    if (bound !== undefined && value !== undefined && inRange(bound) && bound > value) floor[resource] = bound;
  }
  return floor;
}

/** Rule 6 on a full node: every resource present at exactly its committed requests (none requested: 0), below or above the ratio's value. */
function fullFloor(planned: ResourceAmounts, committed: ResourceAmounts): ResourceAmounts {
  const floor: ResourceAmounts = {};
  for (const resource of MANAGED_RESOURCES) {
    const bound = committed[resource] ?? 0n;
    if (planned[resource] !== undefined && inRange(bound)) floor[resource] = bound;
  }
  return floor;
}

/**
 * Our annotations for a plan: the record (rules 2 and 6) while we inflate (`inflating`: a ratio
 * ≠ 1 is configured for a resource present) or the floor decides anything, the pool while we
 * inflate, the floor's decisions, and `usage`.
 */
function planAnnotations(
  { raw, capacity, ratios, floor }: Pick<NodeStatusPlan, 'raw' | 'capacity' | 'ratios' | 'floor'>,
  inflating: boolean,
  pool: string | null | undefined,
  usage: string | null,
): Record<NodeAnnotation, string | null> {
  const floored = Object.keys(floor).length > 0;
  const recording = inflating || floored;
  return {
    [RAW_ANNOTATION]: recording ? formatRawRecord(raw, capacity) : null,
    [RATIOS_ANNOTATION]: recording ? formatRatios(ratios) : null,
    [POOL_ANNOTATION]: inflating && pool ? pool : null,
    [FLOOR_ANNOTATION]: floored ? formatFloor(floor) : null,
    [USAGE_ANNOTATION]: usage,
  };
}
