/**
 * The targets the node-status policy applies inside kube-apiserver (k8s/node-policy/policy.yaml,
 * docs/adr/0006-node-policy.md), as pure functions. The platform decides; the policy only
 * compares quantities and copies strings. The invariants:
 *
 *   1. A node's entry is its plan (planStoredNode, node-plan.ts: what the webhook writes at a
 *      status write that keeps the kubelet's raw values), per managed resource: the raw
 *      allocatable, the capacity and the planned allocatable; and the values of our annotations.
 *      The policy applies it only to a write whose managed allocatable is, per resource, that raw
 *      value or that target and whose managed capacity is that capacity: exactly the writes the
 *      webhook answers with the same allocatable and annotations (rules 3, 4 and 6 of
 *      node-oversell.rules.ts read the raw value back from either). Any other write is the
 *      webhook's.
 *   2. Only a node the webhook would write is published: not opted out, in `enforce`,
 *      plannable, with a status.allocatable and a metadata.uid, every managed amount in
 *      [0, 2^63−1]. A node that is not gets no entry, and the policy leaves its writes to the
 *      webhook.
 *   3. The coalescing window of an entry is the node's window of status coalescing (nodeWindowMs
 *      of statusReportPeriod, domain/node-rules/coalescing-window.ts, whole seconds) while
 *      `coalesceStatusWrites` is on and the plan inflates the node (its ratios annotation is
 *      written), else 0 (no coalescing): the rules of status-coalescing.rules.ts, decided here,
 *      compared there.
 *   4. An entry is one line per field, joined by "\n" (no line holds one: quantities, a pool
 *      name, JSON.stringify output, a uid and a time), in a fixed order, versioned by its first
 *      line; its last two lines name the Node it was planned for (metadata.uid) and the time it is
 *      valid until (rule 8). The policy ignores an entry of another uid (a new Node reusing a
 *      deleted one's name), and one past that time but for rule 10.
 *   5. Entries are sharded by sha256(name) mod TARGET_SHARDS, each shard one ConfigMap; a shard
 *      holds at most SHARD_LIMIT_BYTES of entries (taken in name order; the rest stay the
 *      webhook's, counted), far below the 1 MiB a ConfigMap may hold.
 *   6. A publication writes only what changed: per shard, a JSON merge patch of the entries
 *      added or changed (their value) and removed (null); no patch for a shard that did not change.
 *   7. A webhook call the policy could have served: a node's own kubelet's nodes/status UPDATE
 *      that, once node oversell has answered it, leaves the stored Node's managed allocatable and
 *      capacity (by value), labels and our annotations as they are. With the node's target
 *      published, the policy writes the same and the nodes entry's matchCondition skips the call,
 *      but for the heartbeats due for a report (one per statusReportPeriod), still sent.
 *   8. An entry is valid until its publication time plus ENTRY_VALIDITY_MS, RFC 3339 UTC in whole
 *      seconds; the policy's clock is the write's own newest heartbeat. A publication keeps the
 *      published time while the rest of the entry is unchanged and more than half the validity
 *      remains, so validity alone rewrites a shard once per half-validity, not at every resync;
 *      with no replica publishing, every entry lapses within ENTRY_VALIDITY_MS.
 *   9. A publication plans again only the nodes whose entry may have changed: an entry is a
 *      function of the stored Node, its committed requests, the nodes config and its usage entry
 *      alone (no clock: rule 8's time is added after), so TargetEntryPlans keeps each node's last
 *      one and reuses it while those four are the same (the Node, the config and the usage entry by
 *      object: each a snapshot the informer or the store replaces on change, never edits; the
 *      requests by value). After one node's heartbeat a publication plans that node, not the cluster.
 *  10. The floor's last known commitment (planLapsed): an entry also carries, per resource, what
 *      the webhook writes at ratio 1 for a write of the raw values, the floor at the commitment of
 *      the publication (lapsedCommitment: the committed requests, rounded up to an eighth of the
 *      raw value while within the target; none with the floor off), and that plan's floor
 *      annotation: max(raw, committed) ≤ lapsed < max(raw, committed) + raw/8, and never above
 *      max(target, committed). The rounding keeps pod churn on a node committed between its raw
 *      value and its target from rewriting its shard at every pod. Past its time (its own uid),
 *      the policy applies it to a write whose managed allocatable are the raw values and capacity
 *      the planned one: no inflation, and a restarted kubelet still re-admits every pod bound at
 *      the last publication. Its record is the in-force entry's raw record with ratios `{}` (the same raw
 *      values and capacity), so a webhook that comes back reads the raw values back (rule 3 of
 *      node-oversell.rules.ts: a floored value is its floor record's) and never compounds.
 */
import { createHash } from 'node:crypto';
import { Memo } from '../domain/memo.js';
import { MANAGED_RESOURCES, type ResourceAmounts } from '../domain/resources.js';
import type { NodeLike } from '../domain/node-like.js';
import type { NodesConfig } from '../domain/node-rules/node-oversell.config.js';
import {
  FLOOR_ANNOTATION,
  NODE_ANNOTATIONS,
  planNodeStatus,
  RATIOS_ANNOTATION,
  readAmounts,
  type NodeStatusPlan,
} from '../domain/node-rules/node-oversell.rules.js';
import { isRecord } from '../common/is-record.js';
import { jsonEqual } from '../common/json-equal.js';
import { formatQuantities, planStoredNode } from '../domain/node-rules/node-plan.js';
import type { NodeUsageEntry } from '../domain/node-rules/usage-aware.rules.js';
import { formatResourceQuantity } from '../domain/quantity.js';
import { parseDuration } from '../common/duration.js';
import { nodeWindowMs } from '../domain/node-rules/coalescing-window.js';
import { floorEnabled } from '../domain/node-rules/node-services.js';

export const TARGET_SHARDS = 16;
/** The shards' ConfigMaps, in the platform's namespace (k8s/node-policy/targets.yaml). */
export const TARGET_CONFIGMAP_PREFIX = 'kube-overcommit-node-targets-';
/** What one shard's entries may weigh (rule 5): 5,000 nodes of ~0.5 KB are ~150 KB a shard. */
export const SHARD_LIMIT_BYTES = 900 * 1024;
const ENTRY_VERSION = 'v3';
/** Rule 8: how long an entry stays valid after it is published (docs/adr/0006-node-policy.md: every replica down). */
export const ENTRY_VALIDITY_MS = 6 * 60 * 60 * 1000;
/** The lines of an entry (rule 4): the version, 4 resources, 5 annotations, the lapsed floor (rule 10), the window, the uid, the time. */
export const ENTRY_LINES = 14;
const MAX_AMOUNT = 2n ** 63n - 1n;

/** The name of shard `index` (rule 5): kube-overcommit-node-targets-00 .. -15. */
export function shardName(index: number): string {
  return `${TARGET_CONFIGMAP_PREFIX}${String(index).padStart(2, '0')}`;
}

// A publication asks every node's shard twice: hashing 5,000 names each time was a third of its work.
const shardByName = new Memo<string, number>(65_536);

/** Rule 5: the shard of a node. */
export function shardOf(node: string): number {
  return shardByName.get(node, () => createHash('sha256').update(node).digest().readUInt32BE(0) % TARGET_SHARDS);
}

const inRange = (amount: bigint | undefined): boolean => amount === undefined || (amount >= 0n && amount <= MAX_AMOUNT);
const cell = (resource: (typeof MANAGED_RESOURCES)[number], amount: bigint | undefined): string =>
  amount === undefined ? '-' : formatResourceQuantity(resource, amount);

/**
 * Rules 1, 3, 4 and 10: the entry of a node's plan and its lapsed plan but its valid-until line
 * (rule 8: `validUntil`); null when an amount is outside [0, 2^63−1] (rule 2).
 */
export function formatTargetEntry(plan: NodeStatusPlan, lapsed: NodeStatusPlan, windowSeconds: number, uid: string): string | null {
  const lines = [ENTRY_VERSION];
  for (const resource of MANAGED_RESOURCES) {
    const amounts = [plan.raw[resource], plan.capacity[resource], plan.allocatable[resource], lapsed.allocatable[resource]];
    if (!amounts.every(inRange)) return null;
    lines.push([resource, ...amounts.map((amount) => cell(resource, amount))].join(' '));
  }
  for (const annotation of NODE_ANNOTATIONS) lines.push(plan.annotations[annotation] ?? '');
  lines.push(lapsed.annotations[FLOOR_ANNOTATION] ?? '', String(windowSeconds), uid);
  return lines.join('\n');
}

/**
 * Rule 10: the commitment a lapsed entry keeps, per resource: the committed requests above the raw
 * value rounded up to a step of an eighth of it (at least 1), never above the target (which holds
 * them: rule 6 of node-oversell.rules.ts); the others as they are (the floor keeps nothing of them).
 */
export function lapsedCommitment(plan: NodeStatusPlan, committed: ResourceAmounts): ResourceAmounts {
  const kept: ResourceAmounts = {};
  for (const resource of MANAGED_RESOURCES) {
    const [amount, raw, target] = [committed[resource], plan.raw[resource], plan.allocatable[resource]];
    if (amount === undefined) continue;
    if (raw === undefined || target === undefined || amount <= raw) {
      kept[resource] = amount;
      continue;
    }
    const step = raw / 8n > 0n ? raw / 8n : 1n;
    const roundedUp = ((amount + step - 1n) / step) * step;
    kept[resource] = roundedUp < target ? roundedUp : target;
  }
  return kept;
}

/**
 * Rule 10: what the webhook writes at ratio 1 for a write of the plan's raw values and capacity,
 * the floor at lapsedCommitment of `committed` (undefined: the floor off). planNodeStatus itself,
 * so the webhook and the lapsed entry cannot disagree.
 */
export function planLapsed(plan: NodeStatusPlan, committed: ResourceAmounts | undefined): NodeStatusPlan {
  const node = { status: { allocatable: formatQuantities(plan.raw), capacity: formatQuantities(plan.capacity) } };
  // A list is always given, so planNodeStatus plans.
  return planNodeStatus(node, null, undefined, committed && lapsedCommitment(plan, committed))!;
}

/**
 * Rule 8: the entry `body` (formatTargetEntry) with its valid-until line: the one of `published`
 * while that entry has this body and more than half the validity left at `now`, else now plus the
 * validity.
 */
export function validUntil(body: string, published: string | undefined, now: number, validityMs = ENTRY_VALIDITY_MS): string {
  if (published?.startsWith(`${body}\n`)) {
    const until = Date.parse(published.slice(body.length + 1));
    if (until - now > validityMs / 2) return published;
  }
  const time = new Date(Math.ceil((now + validityMs) / 1000) * 1000).toISOString().replace('.000Z', 'Z');
  return `${body}\n${time}`;
}

/** Rule 3: the node's coalescing window in seconds, 0 when its writes are not coalesced. */
export function coalescingWindowSeconds(name: string, plan: NodeStatusPlan, nodesConfig: NodesConfig | undefined): number {
  if (nodesConfig?.coalesceStatusWrites === false || plan.annotations[RATIOS_ANNOTATION] === null) return 0;
  return nodeWindowMs(name, parseDuration(nodesConfig?.statusReportPeriod ?? '5m')) / 1000;
}

/** Rules 1–4 and 10 for one stored Node: its entry but the valid-until line (validUntil), or null when the policy must leave its writes to the webhook. */
export function planTargetEntry(
  node: NodeLike,
  requests: ResourceAmounts,
  nodesConfig: NodesConfig | undefined,
  usage?: NodeUsageEntry,
): { name: string; entry: string } | null {
  const { name, uid } = node.metadata ?? {};
  if (!name || !uid || !/^[0-9A-Za-z-]+$/.test(uid)) return null;
  const stored = planStoredNode(node, requests, nodesConfig, usage);
  if (stored.policy === null || stored.policy.mode === 'shadow') return null;
  let plan: NodeStatusPlan | null;
  try {
    plan = stored.plan();
  } catch {
    return null; // an unreadable quantity: the webhook's to refuse or leave
  }
  if (plan === null) return null;
  const lapsed = planLapsed(plan, floorEnabled(nodesConfig) ? requests : undefined);
  const entry = formatTargetEntry(plan, lapsed, coalescingWindowSeconds(name, plan, nodesConfig), uid);
  return entry === null ? null : { name, entry };
}

interface PlannedEntry {
  node: NodeLike;
  requests: Readonly<ResourceAmounts>;
  nodesConfig: NodesConfig | undefined;
  usage: NodeUsageEntry | undefined;
  planned: { name: string; entry: string } | null;
}

const sameRequests = (a: Readonly<ResourceAmounts>, b: Readonly<ResourceAmounts>): boolean =>
  a === b || MANAGED_RESOURCES.every((resource) => a[resource] === b[resource]);

/** Rule 9: planTargetEntry of each node of a publication, reusing the last publication's while its inputs are the same. */
export class TargetEntryPlans {
  private last = new Map<string, PlannedEntry>();
  private next = new Map<string, PlannedEntry>();
  private planned = 0;

  /** planTargetEntry(node, requests, nodesConfig, usage), or the same node's last one while its inputs are the same. */
  plan(
    node: NodeLike,
    requests: Readonly<ResourceAmounts>,
    nodesConfig: NodesConfig | undefined,
    usage: NodeUsageEntry | undefined,
  ): { name: string; entry: string } | null {
    const name = node.metadata?.name ?? '';
    let kept = this.last.get(name);
    if (!kept || kept.node !== node || kept.nodesConfig !== nodesConfig || kept.usage !== usage || !sameRequests(kept.requests, requests)) {
      kept = { node, requests, nodesConfig, usage, planned: planTargetEntry(node, requests, nodesConfig, usage) };
      this.planned++;
    }
    this.next.set(name, kept);
    return kept.planned;
  }

  /** Ends a publication: what it planned is what the next one reuses (a node it did not see is forgotten). Returns how many of its nodes were planned and how many reused. */
  endPublication(): { planned: number; reused: number } {
    const counts = { planned: this.planned, reused: this.next.size - this.planned };
    this.last = this.next;
    this.next = new Map();
    this.planned = 0;
    return counts;
  }
}

/** Entries per shard, by node name. */
export type Shards = ReadonlyArray<ReadonlyMap<string, string>>;

/** Rule 5: the entries placed in their shards, in name order, each shard within SHARD_LIMIT_BYTES; `left` counts those that did not fit. */
export function planShards(entries: Iterable<{ name: string; entry: string }>, limitBytes = SHARD_LIMIT_BYTES): { shards: Shards; left: number } {
  const shards = Array.from({ length: TARGET_SHARDS }, () => new Map<string, string>());
  const sizes = new Array<number>(TARGET_SHARDS).fill(0);
  let left = 0;
  for (const { name, entry } of [...entries].sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0))) {
    const shard = shardOf(name);
    const size = Buffer.byteLength(name) + Buffer.byteLength(entry);
    if (sizes[shard]! + size > limitBytes) {
      left++;
      continue;
    }
    sizes[shard]! += size;
    shards[shard]!.set(name, entry);
  }
  return { shards, left };
}

/** Rule 6: per shard whose entries change, the merge patch of its `data` (a value to set, null to remove). */
export function planShardPatches(published: Shards, desired: Shards): Array<{ shard: number; data: Record<string, string | null> }> {
  const patches: Array<{ shard: number; data: Record<string, string | null> }> = [];
  for (let shard = 0; shard < TARGET_SHARDS; shard++) {
    const before = published[shard] ?? new Map<string, string>();
    const after = desired[shard] ?? new Map<string, string>();
    const data: Record<string, string | null> = {};
    for (const [name, entry] of after) if (before.get(name) !== entry) data[name] = entry;
    for (const name of before.keys()) if (!after.has(name)) data[name] = null;
    if (Object.keys(data).length > 0) patches.push({ shard, data });
  }
  return patches;
}

/** The parts of a nodes/status admission request rule 7 reads: `object` as node oversell answered it. */
export interface ServedUpdate {
  name?: string;
  userInfo?: { username?: string };
  object?: unknown;
  oldObject?: unknown;
}

/** Rule 7: true for a call the node-status policy could have served. */
export function isPolicyServable({ name, userInfo, object, oldObject }: ServedUpdate): boolean {
  if (!isRecord(object) || !isRecord(oldObject)) return false;
  const node = object as NodeLike;
  const stored = oldObject as NodeLike;
  if (userInfo?.username !== `system:node:${node.metadata?.name ?? name}`) return false;
  const [annotations, storedAnnotations] = [node.metadata?.annotations, stored.metadata?.annotations];
  return (
    sameAmounts(node, stored) &&
    NODE_ANNOTATIONS.every((annotation) => annotations?.[annotation] === storedAnnotations?.[annotation]) &&
    jsonEqual(node.metadata?.labels ?? {}, stored.metadata?.labels ?? {})
  );
}

/** The managed allocatable and capacity of two Nodes alike by value; false when one is unreadable. */
function sameAmounts(node: NodeLike, stored: NodeLike): boolean {
  try {
    return (['allocatable', 'capacity'] as const).every((list) => {
      const [incoming, before] = [readAmounts(node.status?.[list]), readAmounts(stored.status?.[list])];
      return MANAGED_RESOURCES.every((resource) => incoming[resource] === before[resource]);
    });
  } catch {
    return false; // an unreadable quantity: the webhook's to decide
  }
}
