/**
 * Status-write coalescing, as pure functions: when a kubelet's nodes/status update may be
 * turned into a write of the stored object itself, which kube-apiserver then skips (the
 * storage layer does not write to etcd an object whose encoding is byte-identical to the
 * stored one, and sends no watch event). See docs/status-coalescing.md.
 *
 *   1. Only a node's own kubelet is coalesced: the writer is `system:node:<name>` for the
 *      Node being updated. Any other writer (the node lifecycle controller marking it
 *      Unknown, an operator, another controller) passes untouched.
 *   2. Only an inflated node is coalesced: our ratios annotation is on the object after
 *      inflation and its policy is enforced (a node in shadow mode keeps the annotations of its
 *      last enforced write, raw allocatable underneath). Without inflation the kubelet only
 *      writes on a change or at its report period, and there is nothing to save.
 *   3. The update passes untouched unless, after inflation, it differs from the stored
 *      object (oldObject) only in the conditions' `lastHeartbeatTime` and in the `time` of
 *      `metadata.managedFields` entries (the field manager stamps the writer's entry before
 *      admission; a change of who owns which field, or of the entries' order — the writer's
 *      entry moves last when another manager wrote since — passes). Those two are the only
 *      fields set aside: everything else is compared as JSON, at every depth, whether this
 *      file knows the field or not (a new status field such as `declaredFeatures`, a new
 *      condition type, a key inside a condition, a non-object item in the list of conditions).
 *      Any other difference — a condition's status, reason,
 *      message or transition time, a condition added or removed, capacity, the raw
 *      allocatable, addresses, images, nodeInfo, daemon endpoints, volumes, labels — passes.
 *   4. It passes once a stored heartbeat is the node's window old or older, measured against
 *      the incoming heartbeat of the same condition (the kubelet's own clock on both sides, so
 *      the webhook's clock plays no part); an incoming heartbeat before the stored one (a
 *      clock stepped back) or an unreadable time passes too. A heartbeat the update leaves as
 *      stored (the same time, or none on both sides: a condition an administrator set without
 *      one) has not moved, so it is not measured. The node's window is the report
 *      period less up to 10 %, fixed per node name (nodeWindowMs, domain/node-rules/coalescing-window.ts): when coalescing is switched
 *      on every node's heartbeats were stored within one kubelet period, and with one window
 *      for all they would all be written again together, in one burst per period; with
 *      windows of different lengths the bursts spread out. So the stored heartbeats advance at
 *      least once per report period plus one kubelet period.
 *   5. Coalesced = the stored conditions put back (no patch when they are them already: our own
 *      output sent back). The object to store then differs from the
 *      stored one only in managedFields times, which kube-apiserver reverts itself before
 *      writing (IgnoreManagedFieldsTimestampsTransformer, on by default since 1.28): it is the
 *      stored object, byte for byte, and no write happens.
 *
 * Quantities in allocatable and capacity are compared by value (the API server stores
 * "4000m" as "4", so a by-value equal list encodes to the same bytes).
 */
import type { PatchOperation } from '../admission/admission.types.js';
import { MANAGED_RESOURCES, type ManagedResource } from '../domain/resources.js';
import { RATIOS_ANNOTATION } from '../domain/node-rules/node-oversell.rules.js';
import { parseResourceQuantity } from '../domain/quantity.js';
import { isRecord } from '../common/is-record.js';
import { Memo } from '../domain/memo.js';
import { nodeWindowMs } from '../domain/node-rules/coalescing-window.js';
import { jsonEqual, jsonEqualExcept } from '../common/json-equal.js';

/** Why an update was let through; `coalesced` updates have the one reason `heartbeat`. */
export type PassReason = 'other-writer' | 'not-inflated' | 'no-stored-object' | 'condition-changed' | 'status-changed' | 'report-due';

export type CoalescingPlan = { decision: 'coalesced'; reason: 'heartbeat'; patch: PatchOperation[] } | { decision: 'passed'; reason: PassReason };

/** The parts of a nodes/status admission request read here. */
export interface StatusUpdateRequest {
  name?: string;
  userInfo?: { username?: string };
  object?: unknown;
  oldObject?: unknown;
}

interface Condition {
  type?: unknown;
  lastHeartbeatTime?: unknown;
  [key: string]: unknown;
}

const NODE_USER_PREFIX = 'system:node:';
const RESOURCE_LISTS = ['allocatable', 'capacity'] as const;
const MANAGED_RESOURCE_SET: ReadonlySet<string> = new Set(MANAGED_RESOURCES);

function conditionsOf(node: Record<string, any>): Condition[] {
  const conditions = node.status?.conditions;
  if (!Array.isArray(conditions)) return [];
  return conditions.every(isRecord) ? conditions : conditions.filter(isRecord);
}

const isQuantityText = (value: unknown): value is string | number => typeof value === 'string' || typeof value === 'number';

/**
 * Reads every managed quantity of the node's resource lists, so that an unreadable one fails the
 * plan (QuantityFormatError) before anything is compared, whichever side it is on.
 */
function readQuantities(node: Record<string, any>): void {
  for (const list of RESOURCE_LISTS) {
    const values = node.status?.[list];
    if (!isRecord(values)) continue;
    for (const resource of MANAGED_RESOURCES) if (isQuantityText(values[resource])) parseResourceQuantity(resource, values[resource]);
  }
}

/** Two resource lists alike, the managed quantities compared by value ("4000m" is "4"). */
function sameResourceList(a: unknown, b: unknown): boolean {
  if (!isRecord(a) || !isRecord(b)) return jsonEqual(a, b);
  return jsonEqualExcept(a, b, MANAGED_RESOURCE_SET) && MANAGED_RESOURCES.every((resource) => sameQuantity(resource, a, b));
}

/** One managed resource of two lists alike: by value when both are quantities (absent from one: a JSON value is never undefined). */
function sameQuantity(resource: ManagedResource, a: Record<string, unknown>, b: Record<string, unknown>): boolean {
  const [x, y] = [a[resource], b[resource]];
  return isQuantityText(x) && isQuantityText(y) ? parseResourceQuantity(resource, x) === parseResourceQuantity(resource, y) : jsonEqual(x, y);
}

/** What rule 3 sets aside, or compares on its own, at each level of the node. */
const TOP_APART: ReadonlySet<string> = new Set(['metadata', 'status']);
const MANAGED_FIELDS: ReadonlySet<string> = new Set(['managedFields']);
const NONE: ReadonlySet<string> = new Set();
const FIELD_TIME: ReadonlySet<string> = new Set(['time']);
const HEARTBEAT: ReadonlySet<string> = new Set(['lastHeartbeatTime']);

/** Two managedFields lists alike but for their entries' `time`. */
function sameManagedFields(a: readonly unknown[], b: readonly unknown[]): boolean {
  return (
    a.length === b.length && a.every((entry, i) => (isRecord(entry) && isRecord(b[i]) ? jsonEqualExcept(entry, b[i], FIELD_TIME) : jsonEqual(entry, b[i])))
  );
}

/** A part of the node as an object: itself when it is one, else what a spread of it makes (`{}` for none). */
const asRecord = (part: unknown): Record<string, any> => (isRecord(part) ? part : { ...(part as object) });

/**
 * Rule 3 but for the conditions: the node and the stored one alike once managedFields times are
 * set aside and allocatable and capacity compared by value, compared in place (no copies).
 */
function sameButConditions(node: Record<string, any>, stored: Record<string, any>): boolean {
  if (!jsonEqualExcept(node, stored, TOP_APART)) return false;
  const metadataA = asRecord(node.metadata);
  const metadataB = asRecord(stored.metadata);
  const fieldsA = metadataA.managedFields;
  const fieldsB = metadataB.managedFields;
  const fieldsApart = Array.isArray(fieldsA) && Array.isArray(fieldsB);
  if (!jsonEqualExcept(metadataA, metadataB, fieldsApart ? MANAGED_FIELDS : NONE)) return false;
  if (fieldsApart && !sameManagedFields(fieldsA, fieldsB)) return false;
  const statusA = asRecord(node.status);
  const statusB = asRecord(stored.status);
  const listsApart = RESOURCE_LISTS.filter((list) => Object.hasOwn(statusA, list) && Object.hasOwn(statusB, list));
  return jsonEqualExcept(statusA, statusB, statusApart(listsApart)) && listsApart.every((list) => sameResourceList(statusA[list], statusB[list]));
}

/** The status keys compared apart, one set per combination of resource lists both sides have: none made per review. */
const STATUS_APART: ReadonlyMap<string, ReadonlySet<string>> = new Map(
  [[], ['allocatable'], ['capacity'], ['allocatable', 'capacity']].map((lists) => [lists.join(), new Set(['conditions', ...lists])]),
);
const statusApart = (lists: readonly string[]): ReadonlySet<string> => STATUS_APART.get(lists.join())!;

/**
 * Rule 3 for the conditions, as the two sides hold them: the same list, in the same order, alike
 * but for the heartbeats of conditions that are objects on both sides.
 */
function sameConditionsButHeartbeats(a: unknown, b: unknown): boolean {
  if (!Array.isArray(a) || !Array.isArray(b)) return jsonEqual(a, b);
  return a.length === b.length && a.every((item, i) => (isRecord(item) && isRecord(b[i]) ? jsonEqualExcept(item, b[i], HEARTBEAT) : jsonEqual(item, b[i])));
}

/** Heartbeat times repeat: every condition of an update and of the stored node carries the same few. */
const heartbeatTimes = new Memo<string, number>(4_096);

function heartbeatMs(condition: Condition | undefined): number {
  return typeof condition?.lastHeartbeatTime === 'string' ? heartbeatTimes.get(condition.lastHeartbeatTime, Date.parse) : Number.NaN;
}

/** Rule 4: true when every condition's heartbeat stayed as stored or moved forward by less than `windowMs`. */
export function heartbeatsFresh(incoming: readonly Condition[], stored: readonly Condition[], windowMs: number): boolean {
  return incoming.every((condition) => {
    const before = stored.find((s) => s.type === condition.type);
    if (before !== undefined && jsonEqual(condition.lastHeartbeatTime, before.lastHeartbeatTime)) return true;
    const age = heartbeatMs(condition) - heartbeatMs(before);
    return age >= 0 && age < windowMs;
  });
}

/**
 * Rules 1–5 for one nodes/status UPDATE: `request.object` is the Node as inflation left it,
 * `reportPeriodMs` the configured statusReportPeriod and `enforced` false for a node in shadow
 * mode. Pure: the same request always gets the same plan.
 */
export function planStatusCoalescing(request: StatusUpdateRequest, reportPeriodMs: number, enforced = true): CoalescingPlan {
  const { object, oldObject: stored } = request;
  const node: Record<string, any> | undefined = isRecord(object) ? object : undefined;
  const name = kubeletNodeName(request, node);
  if (name === undefined) return { decision: 'passed', reason: 'other-writer' };
  if (!enforced || !node || typeof node.metadata?.annotations?.[RATIOS_ANNOTATION] !== 'string') return { decision: 'passed', reason: 'not-inflated' };
  if (!hasStoredConditions(stored)) return { decision: 'passed', reason: 'no-stored-object' };
  const changed = changeReason(node, stored, name, reportPeriodMs);
  if (changed !== null) return { decision: 'passed', reason: changed };
  // Conditions already the stored ones (our own output sent back): nothing to put back.
  const patch: PatchOperation[] = jsonEqual(node.status?.conditions, stored.status.conditions)
    ? []
    : [{ op: 'add', path: '/status/conditions', value: stored.status.conditions }];
  return { decision: 'coalesced', reason: 'heartbeat', patch };
}

/** Rule 1: the Node's name when the writer is that node's kubelet, else undefined. */
function kubeletNodeName(request: StatusUpdateRequest, node: Record<string, any> | undefined): string | undefined {
  const name = node ? (node.metadata?.name ?? request.name) : request.name;
  const username = request.userInfo?.username;
  // username === NODE_USER_PREFIX + name, without building that string on every review.
  const isKubelet =
    typeof name === 'string' &&
    typeof username === 'string' &&
    username.length === NODE_USER_PREFIX.length + name.length &&
    username.startsWith(NODE_USER_PREFIX) &&
    username.endsWith(name);
  return isKubelet ? name : undefined;
}

/** A stored Node (oldObject) with a list of conditions to put back. */
function hasStoredConditions(stored: unknown): stored is Record<string, any> & { status: { conditions: unknown[] } } {
  return isRecord(stored) && isRecord(stored.status) && Array.isArray(stored.status.conditions);
}

/**
 * Rule 3's cheapest part, first: our ratios annotation (a string on the node: rule 2) the same on
 * the stored node. A stored node not inflated as this one is — its first write since inflation or
 * since its ratios changed — differs in its annotations, and nothing else need be compared.
 */
function sameRatiosAnnotation(node: Record<string, any>, stored: Record<string, any>): boolean {
  const annotations: unknown = stored.metadata?.annotations;
  return isRecord(annotations) && annotations[RATIOS_ANNOTATION] === node.metadata.annotations[RATIOS_ANNOTATION];
}

/** Rules 3 and 4: why the update differs from the stored Node by more than a heartbeat within the node's window; null when it does not. */
function changeReason(node: Record<string, any>, stored: Record<string, any>, name: string, reportPeriodMs: number): PassReason | null {
  readQuantities(node);
  readQuantities(stored);
  if (!sameConditionsButHeartbeats(node.status?.conditions, stored.status.conditions)) return 'condition-changed';
  if (!sameRatiosAnnotation(node, stored) || !sameButConditions(node, stored)) return 'status-changed';
  if (!heartbeatsFresh(conditionsOf(node), conditionsOf(stored), nodeWindowMs(name, reportPeriodMs))) return 'report-due';
  return null;
}
