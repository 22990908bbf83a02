/**
 * Hot nodes take no new pods (docs/usage-aware.md, "Hot nodes"), as pure functions. A usage
 * section's `hotAction` says what a hot node gets: `ratio1` (the default: ratio 1, reason `hot`,
 * usage-aware.rules.ts rule 3, no state), or `full`, decided here. The invariants, for `full`:
 *
 *   1. Heat, read from the node's own usage (NodeMetrics) smoothed as usage-aware rule 2 smooths
 *      it, ÷ A, per usage resource with a hot threshold: `hot` when one is above its
 *      `hotThreshold`, `cool` when every one is below its `coolThreshold` (configured, else
 *      hotThreshold − 0.1), `warm` in between; `stale` without a sample for staleAfter, `lost`
 *      without one for fallbackAfter (usage-aware rule 4).
 *   2. An open node turns hot at once on a `hot` reading.
 *   3. A hot node reopens on a `cool` reading taken `coolFor` or more after the first of an
 *      unbroken run of `cool` readings; any other reading breaks the run (`stale` holds the node
 *      hot and restarts the count), and `lost` reopens it (as every stale node: ratio 1).
 *   4. Nothing else changes the state: a hot node stays hot while its readings are not `cool`
 *      for coolFor, an open one stays open while none is `hot`. So a hot period lasts coolFor
 *      at least (or ends at `lost`), and a node turns hot, and reopens, at most once per coolFor.
 *   5. While hot, every usage resource of the node is decided ratio 1, reason `hot-full`, and the
 *      webhook writes for every managed resource exactly what the kubelet admitted the node's
 *      bound pods at (and their count for `pods`; a resize it deferred stays deferred): the commitment floor (node-oversell.rules.ts rule 6), deciding
 *      below the ratio's value as well as above it. Never less than what is bound, so every pod
 *      on the node stays admitted, also across a kubelet restart; nothing is evicted. Where the
 *      committed requests are not known (the floor off, the pod cache not listed yet), ratio 1.
 *   6. A new leader starts a node published `hot-full` as hot, its run of `cool` readings counted
 *      from its own first one: a leader change never reopens a node early.
 *   7. Visible: the leader records a Normal Event on the Node when a publication turns its entry
 *      `hot-full` (NodeHot) and when one turns it back (NodeCooled, saying why: cooled, metrics
 *      lost, or no longer `full` by config), from the entries published before and after: once
 *      per change published, none for a publication that failed or a leader change.
 */
import { parseDuration } from '../../common/duration.js';
import { coolThreshold, USAGE_RESOURCES, type UsageConfig, type UsageResource } from './node-oversell.config.js';
import { isHot, isHotFull, type NodeUsageEntry, type UsageDecision } from './usage-aware.rules.js';

/** Rule 1's reading of a node at one plan. */
export type Heat = 'hot' | 'warm' | 'cool' | 'stale' | 'lost';

/** A hot node's state (leader's clock, ms): when it turned hot, and when its current run of `cool` readings began. */
export interface HotState {
  hotSince: number;
  coolSince?: number;
}

/** What rule 1 reads per usage resource: raw allocatable and the node's smoothed usage (undefined without a sample). */
export interface NodeLevel {
  A: bigint;
  nodeUsage: bigint | undefined;
}

/**
 * Rule 1: the heat of a node from its levels per usage resource and the ms since its last sample
 * (`sinceLastSampleMs`). A resource without a hot threshold, or with no allocatable, is not read.
 */
export function readHeat(levels: Partial<Record<UsageResource, NodeLevel>>, sinceLastSampleMs: number, usage: UsageConfig): Heat {
  if (sinceLastSampleMs >= parseDuration(usage.fallbackAfter)) return 'lost';
  if (sinceLastSampleMs >= parseDuration(usage.staleAfter)) return 'stale';
  let cool = true;
  for (const [resource, { A, nodeUsage }] of Object.entries(levels) as Array<[UsageResource, NodeLevel]>) {
    if (usage.hotThreshold?.[resource] === undefined || usage.hotThreshold[resource] === null || A <= 0n) continue;
    if (nodeUsage === undefined) return 'stale';
    if (isHot(resource, nodeUsage, A, usage)) return 'hot';
    if (!(Number(nodeUsage) / Number(A) < coolThreshold(usage, resource))) cool = false;
  }
  return cool ? 'cool' : 'warm';
}

/** Rules 2–4: the node's state after a reading at `now`; undefined = open. */
export function planHotState(previous: HotState | undefined, heat: Heat, now: number, coolForMs: number): HotState | undefined {
  if (heat === 'hot') return { hotSince: previous?.hotSince ?? now };
  if (previous === undefined || heat === 'lost') return undefined;
  if (heat !== 'cool') return { hotSince: previous.hotSince };
  const coolSince = previous.coolSince ?? now;
  return now - coolSince >= coolForMs ? undefined : { hotSince: previous.hotSince, coolSince };
}

/** Rule 5: a hot node's decision for a usage resource, beside the one rules 1–6 of usage-aware.rules.ts made (its A, R, U kept). */
export function hotFullDecision(decision: UsageDecision): UsageDecision {
  const { A, R, U } = decision;
  return { ratio: 1, reason: 'hot-full', ...(A !== undefined ? { A } : {}), ...(R !== undefined ? { R } : {}), ...(U !== undefined ? { U } : {}) };
}

/** Rule 7's Event. */
export interface HotEvent {
  reason: 'NodeHot' | 'NodeCooled';
  message: string;
}

/**
 * Rule 7: the Event for a node whose published entry went from `before` to `after` (undefined:
 * none), `usage` the node's usage section in force (undefined: none); undefined when it did not
 * turn full or back.
 */
export function planHotEvent(before: NodeUsageEntry | undefined, after: NodeUsageEntry | undefined, usage: UsageConfig | undefined): HotEvent | undefined {
  const was = isHotFull(before);
  const is = isHotFull(after);
  if (was === is) return undefined;
  const thresholds = (of: (resource: UsageResource) => number) =>
    USAGE_RESOURCES.filter((resource) => after?.[resource] !== undefined && Number.isFinite(of(resource)))
      .map((resource) => `${resource} ${of(resource)}`)
      .join(', ');
  const cool = usage === undefined ? '' : thresholds((resource) => coolThreshold(usage, resource));
  if (is) {
    const inputs = USAGE_RESOURCES.filter((resource) => after?.[resource] !== undefined)
      .map((resource) => `${resource}: A ${after![resource]!.A ?? '?'}, R ${after![resource]!.R ?? '?'}, U ${after![resource]!.U ?? '?'}`)
      .join('; ');
    const hot = thresholds((resource) => usage?.hotThreshold?.[resource] ?? Number.NaN);
    return {
      reason: 'NodeHot',
      message: `node usage above hotThreshold (${hot} of raw allocatable): no new pod is placed or admitted here, its allocatable is the requests of its pods, until usage stays below coolThreshold (${cool}) for ${usage?.coolFor}; its pods stay (${inputs})`,
    };
  }
  const reasons = new Set(Object.values(after ?? {}).map((decision) => decision?.reason));
  if (usage?.hotAction !== 'full' || after === undefined)
    return { reason: 'NodeCooled', message: 'hotAction is no longer full for this node: it takes new pods again (ratio 1 while hot)' };
  if (reasons.has('stale'))
    return { reason: 'NodeCooled', message: `no usage measured for fallbackAfter (${usage.fallbackAfter}): the node takes new pods again, at ratio 1 (stale)` };
  return { reason: 'NodeCooled', message: `usage below coolThreshold (${cool}) for coolFor (${usage.coolFor}): the node takes new pods again` };
}
