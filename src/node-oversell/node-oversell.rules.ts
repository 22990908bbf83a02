/**
 * Node oversell, as pure functions: which policy applies to a node, and what its
 * status.allocatable and our annotations must become. See DESIGN.md, "Node oversell: the
 * rules that make it correct":
 *
 *   1. We own status.allocatable for the managed resources; capacity is never changed.
 *   2. With every value written we record the raw allocatable, the capacity seen and the
 *      ratios applied (annotations below).
 *   3. The incoming object already carries our output iff, for every managed resource, its
 *      allocatable equals inflate(recorded raw, recorded ratios) and its capacity equals the
 *      recorded capacity; then raw = recorded raw. Otherwise raw = incoming allocatable.
 *   4. New allocatable = floor(raw × ratio) in base units; no ratio ≠ 1 (all 1, opted out, no
 *      policy) → the raw value, our annotations removed.
 *
 * Quantities are compared by value in base units (millicores, bytes, count), never as
 * strings: the API server may store "4000m" as "4".
 *
 * The one case no admission-time rule can decide (the equal-value case): the kubelet's new
 * raw allocatable equals, for every managed resource at once, the inflated value we last
 * wrote, and the capacity did not change (e.g. cpu 8 with 4 reserved, ratio 1.5 → we write 6;
 * then system-reserved is lowered to 2, so the kubelet computes 6). The object is then
 * byte-for-byte what we would have produced ourselves, and the kubelet — which sends a
 * two-way patch against the Node it read — does not even include allocatable in its patch,
 * because to it nothing changed. We keep the recorded raw (4) and write 6 again; the new raw is
 * picked up at the next capacity change, raw change or ratio edit (the ratio edit makes our
 * output differ from the kubelet's value, so it patches its 6 back, which no longer matches).
 * The same holds after a webhook outage during which the kubelet stored exactly our previous
 * output. Requiring a capacity match (a CPU hot-add, a maxPods change move capacity too) and
 * an all-resources match makes this as narrow as it can be without state outside the object.
 */
import { MANAGED_RESOURCES, type ManagedResource, type NodesConfig, type Ratios } from '../config/config.schema.js';
import { matchesLabelSelector } from '../config/label-selector.js';
import { Memo } from './memo.js';
import { formatResourceQuantity, multiplyFloor, parseResourceQuantity } from './quantity.js';

export const ANNOTATION_PREFIX = 'kube-overcommit.io/';
/** JSON `{"allocatable":{...},"capacity":{...}}`: see RawRecordJson. */
export const RAW_ANNOTATION = 'kube-overcommit.io/allocatable-raw';
/** JSON `{"cpu":1.5,...}`: the ratios applied, only those ≠ 1. */
export const RATIOS_ANNOTATION = 'kube-overcommit.io/ratios';
/** The pool name; absent for the default ratios. Informational: rule 3 does not read it. */
export const POOL_ANNOTATION = 'kube-overcommit.io/pool';
export const NODE_ANNOTATIONS = [RAW_ANNOTATION, RATIOS_ANNOTATION, POOL_ANNOTATION] as const;
export type NodeAnnotation = (typeof NODE_ANNOTATIONS)[number];

export const DISABLED_LABEL = 'kube-overcommit.io/disabled';
/** The seed-era opt-out label, still honoured. */
export const LEGACY_DISABLED_LABEL = 'node-oversell/disable';

/** The parts of a Node we read. Quantities as the API sends them (strings). */
export interface NodeLike {
  metadata?: {
    name?: string;
    labels?: Readonly<Record<string, string>>;
    annotations?: Readonly<Record<string, string>>;
  };
  status?: {
    allocatable?: Readonly<Record<string, string | number>>;
    capacity?: Readonly<Record<string, string | number>>;
  };
}

/** Amounts of the managed resources in base units (millicores, bytes, count); a missing key = resource absent. */
export type ResourceAmounts = Partial<Record<ManagedResource, bigint>>;
/** Ratios per managed resource; a missing key = 1. */
export type AppliedRatios = Partial<Record<ManagedResource, number>>;

export interface NodePolicy {
  /** The matching pool's name; null for `defaultRatios`. */
  pool: string | null;
  ratios: Ratios;
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
}

export interface NodeStatusPlan {
  /** Where raw came from: `recorded` when the object already carried our output (rule 3). */
  source: 'incoming' | 'recorded';
  /** The incoming allocatable of the managed resources. */
  incoming: ResourceAmounts;
  /** The raw allocatable (what the kubelet reported). */
  raw: ResourceAmounts;
  /** The incoming capacity of the managed resources (never changed). */
  capacity: ResourceAmounts;
  /** The ratios applied, only those ≠ 1 of resources present. */
  ratios: AppliedRatios;
  /** The desired allocatable of the managed resources present: floor(raw × ratio). */
  allocatable: ResourceAmounts;
  /** The desired value of each of our annotations: a string to set, null to remove. */
  annotations: Record<NodeAnnotation, string | null>;
}

const MIN_RATIO = 1;
const MAX_RATIO = 10;

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** True when the node carries an opt-out label (`kube-overcommit.io/disabled=true` or `node-oversell/disable=true`). */
export function isOptedOut(labels: Readonly<Record<string, string>> | undefined): boolean {
  return labels?.[DISABLED_LABEL] === 'true' || labels?.[LEGACY_DISABLED_LABEL] === 'true';
}

/**
 * The policy for a node with these labels: null when it opted out; else the first pool whose
 * nodeSelector matches, in order; else the default ratios (pool null).
 */
export function resolveNodePolicy(
  labels: Readonly<Record<string, string>> | undefined,
  nodesConfig: NodesConfig | undefined,
): NodePolicy | null {
  if (isOptedOut(labels)) return null;
  for (const pool of nodesConfig?.pools ?? []) {
    if (matchesLabelSelector(pool.nodeSelector, labels)) return { pool: pool.name, ratios: pool.ratios };
  }
  return { pool: null, ratios: nodesConfig?.defaultRatios ?? {} };
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

/** Same managed resources present, with equal values. */
export function sameAmounts(a: ResourceAmounts, b: ResourceAmounts): boolean {
  return MANAGED_RESOURCES.every((resource) => a[resource] === b[resource]);
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
    if (amount < 0n) return null;
    amounts[key as ManagedResource] = amount;
  }
  return amounts;
}

function isValidRatio(ratio: unknown): ratio is number {
  return typeof ratio === 'number' && Number.isFinite(ratio) && ratio >= MIN_RATIO && ratio <= MAX_RATIO;
}

/**
 * Our record on a node, or null when it is absent or not exactly what we write (anything
 * else — bad JSON, unknown keys, unparsable quantities, ratios outside [1, 10], one of the
 * two annotations missing — counts as absent: then the incoming allocatable is raw).
 * The annotations are writable by the node itself, so this is parsed defensively; nothing in
 * them can raise a ratio (ratios come from config only), they only tell raw from inflated.
 */
export function readRecord(annotations: Readonly<Record<string, string>> | undefined): Readonly<RawRecord> | null {
  const rawText = annotations?.[RAW_ANNOTATION];
  const ratiosText = annotations?.[RATIOS_ANNOTATION];
  if (typeof rawText !== 'string' || typeof ratiosText !== 'string') return null;
  // Bounded input (no memo entry for a huge hostile annotation); a record is frozen, so shareable.
  if (rawText.length + ratiosText.length > 4096) return parseRecord(rawText, ratiosText);
  return recordMemo.get(`${rawText}\u0000${ratiosText}`, () => parseRecord(rawText, ratiosText));
}
const recordMemo = new Memo<string, Readonly<RawRecord> | null>(8192);

function parseRecord(rawText: string, ratiosText: string): Readonly<RawRecord> | null {
  try {
    const raw: unknown = JSON.parse(rawText);
    const ratios: unknown = JSON.parse(ratiosText);
    if (!isRecord(raw) || !isRecord(ratios)) return null;
    if (Object.keys(raw).some((key) => key !== 'allocatable' && key !== 'capacity')) return null;
    const allocatable = readRecordedList(raw.allocatable);
    const capacity = readRecordedList(raw.capacity);
    if (allocatable === null || capacity === null) return null;
    const applied: AppliedRatios = {};
    for (const [key, ratio] of Object.entries(ratios)) {
      if (!(MANAGED_RESOURCES as readonly string[]).includes(key) || !isValidRatio(ratio)) return null;
      applied[key as ManagedResource] = ratio;
    }
    return Object.freeze({ allocatable: Object.freeze(allocatable), capacity: Object.freeze(capacity), ratios: Object.freeze(applied) });
  } catch {
    return null;
  }
}

function formatList(amounts: ResourceAmounts): Partial<Record<ManagedResource, string>> {
  const out: Partial<Record<ManagedResource, string>> = {};
  for (const resource of MANAGED_RESOURCES) {
    const amount = amounts[resource];
    if (amount !== undefined) out[resource] = formatResourceQuantity(resource, amount);
  }
  return out;
}

/** The `kube-overcommit.io/allocatable-raw` annotation value for these amounts (see RawRecordJson). */
export function formatRawRecord(raw: ResourceAmounts, capacity: ResourceAmounts): string {
  const json: RawRecordJson = { allocatable: formatList(raw), capacity: formatList(capacity) };
  return JSON.stringify(json);
}

/** The `kube-overcommit.io/ratios` annotation value: `{"cpu":1.5}`, keys in MANAGED_RESOURCES order. */
export function formatRatios(ratios: AppliedRatios): string {
  const out: AppliedRatios = {};
  for (const resource of MANAGED_RESOURCES) if (ratios[resource] !== undefined) out[resource] = ratios[resource];
  return JSON.stringify(out);
}

/**
 * Rules 3 and 4 for one incoming Node (CREATE, or the merged object of a nodes/status
 * UPDATE). `policy` null = opted out. Returns null when the object has no status.allocatable
 * (nothing to do). Throws if a managed quantity on the object itself is unparsable (the API
 * server validated it, so this does not happen; the pipeline fails open if it does).
 */
export function planNodeStatus(node: NodeLike, policy: NodePolicy | null): NodeStatusPlan | null {
  const allocatableList = node.status?.allocatable;
  if (!isRecord(allocatableList)) return null;
  const incoming = readAmounts(allocatableList);
  const capacity = readAmounts(node.status?.capacity);

  // Rule 3.
  const record = readRecord(node.metadata?.annotations);
  const carriesOurOutput =
    record !== null && sameAmounts(incoming, inflate(record.allocatable, record.ratios)) && sameAmounts(capacity, record.capacity);
  const raw = carriesOurOutput ? record.allocatable : incoming;

  // Rule 4.
  const ratios: AppliedRatios = {};
  if (policy !== null) {
    for (const resource of MANAGED_RESOURCES) {
      const ratio = policy.ratios[resource];
      if (raw[resource] === undefined || ratio === undefined || ratio === null || ratio === 1) continue;
      if (typeof ratio !== 'number' || !Number.isFinite(ratio) || ratio < 0) {
        throw new Error(`ratio for ${resource} must be a finite non-negative number, got ${String(ratio)}`);
      }
      ratios[resource] = ratio;
    }
  }
  const applying = Object.keys(ratios).length > 0;
  return {
    source: carriesOurOutput ? 'recorded' : 'incoming',
    incoming,
    raw,
    capacity,
    ratios,
    allocatable: inflate(raw, ratios),
    annotations: {
      [RAW_ANNOTATION]: applying ? formatRawRecord(raw, capacity) : null,
      [RATIOS_ANNOTATION]: applying ? formatRatios(ratios) : null,
      [POOL_ANNOTATION]: applying && policy?.pool ? policy.pool : null,
    },
  };
}
