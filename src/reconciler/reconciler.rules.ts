/**
 * The reconciler's decisions, as pure functions. A node whose kubelet has nothing to write (a
 * ratio raised from 1, an opt-out label removed, the webhook back after an outage) keeps a stale
 * allocatable until its next unconditional report; the reconciler nudges it with a no-op PATCH
 * of `nodes/<name>/status`, so that the API server runs admission and the webhook writes the
 * plan. The rules stay in one place: the reconciler never computes what to write, only whether a
 * write is due. The invariants:
 *
 *   1. A node is due when its stored allocatable differs from the planned one for a managed
 *      resource (planNode, node-plan.ts: the function the webhook runs, on the stored Node),
 *      and the nudge can change it: not opted out (the webhook's objectSelector skips those
 *      nodes, and their kubelet writes its raw value within its status period anyway), not in
 *      `shadow` (nothing is written), and plannable (a Node with an unreadable quantity is not).
 *   2. The target of a nudge is the planned allocatable, as a string key. A node nudged for
 *      the same target less than `retryAfterMs` ago is not due again: its write is on its way,
 *      or the webhook could not serve it (down, failing open) and a retry waits; a new target
 *      (a config edit, a kubelet's new raw value) is due at once.
 *   3. Due nodes are taken in name order, each once per scan.
 *   4. Pacing is a token bucket of `rate` tokens a second holding at most one second of them:
 *      never more than `rate` nudges in any second after the first, and at most `rate` at once.
 */
import { type NodesConfig } from '../domain/node-rules/node-oversell.config.js';
import { MANAGED_RESOURCES, type ResourceAmounts } from '../domain/resources.js';
import type { NodeLike } from '../domain/node-like.js';
import { planNode } from '../domain/node-rules/node-plan.js';
import type { NodeUsageEntry } from '../domain/node-rules/usage-aware.rules.js';

/** Why a node is not due (rule 1), or `due`. */
export type NudgeDecision = { due: true; target: string } | { due: false; reason: 'matches' | 'opted-out' | 'shadow' | 'unplannable' };

/**
 * Rule 1: whether a nudge can bring the stored Node to its plan, and the target (rule 2).
 * `committed`: the requests bound to the node, as the webhook's commitment floor reads them
 * (undefined: unknown, no floor); `usage`: the node's published usage-aware entry, as the webhook
 * reads it.
 */
export function readNudge(node: NodeLike, nodesConfig: NodesConfig | undefined, committed: ResourceAmounts | undefined, usage?: NodeUsageEntry): NudgeDecision {
  // No requests and unknown requests plan the same allocatable (rule 6 raises nothing).
  const row = planNode(node, committed ?? {}, nodesConfig, null, { usage });
  if (row.error !== undefined) return { due: false, reason: 'unplannable' };
  if (row.reason === 'opted-out') return { due: false, reason: 'opted-out' };
  if (row.mode === 'shadow') return { due: false, reason: 'shadow' };
  if (row.matches) return { due: false, reason: 'matches' };
  return { due: true, target: MANAGED_RESOURCES.map((resource) => `${resource}=${row.planned[resource] ?? ''}`).join(',') };
}

export interface Nudged {
  target: string;
  /** When (ms, the caller's monotonic clock) the nudge was sent. */
  at: number;
}

/** Rule 2: false while the node was nudged for this target less than `retryAfterMs` ago. */
export function isNudgeDue(target: string, last: Nudged | undefined, now: number, retryAfterMs: number): boolean {
  return last === undefined || last.target !== target || now - last.at >= retryAfterMs;
}

/** Rule 2's inputs: the nudges sent, per node, the time now and how long a nudge for a target stands. */
export interface NudgeRetry {
  nudged: ReadonlyMap<string, Nudged>;
  now: number;
  retryAfterMs: number;
}

/** Rules 1–3: the nodes to nudge now, with their targets, in name order. */
export function planNudges(
  nodes: Iterable<NodeLike>,
  nodesConfig: NodesConfig | undefined,
  committedOf: (node: string) => ResourceAmounts | undefined,
  { nudged, now, retryAfterMs }: NudgeRetry,
  usageOf: (node: string) => NodeUsageEntry | undefined = () => undefined,
): Array<{ node: string; target: string }> {
  const due: Array<{ node: string; target: string }> = [];
  for (const node of nodes) {
    const name = node.metadata?.name;
    if (!name) continue;
    const decision = readNudge(node, nodesConfig, committedOf(name), usageOf(name));
    if (decision.due && isNudgeDue(decision.target, nudged.get(name), now, retryAfterMs)) due.push({ node: name, target: decision.target });
  }
  return due.sort((a, b) => (a.node < b.node ? -1 : a.node > b.node ? 1 : 0));
}

export interface TokenBucket {
  tokens: number;
  /** When (ms) `tokens` was computed. */
  at: number;
}

/** A full bucket at `now`. */
export function fullBucket(rate: number, now: number): TokenBucket {
  return { tokens: rate, at: now };
}

/**
 * Rule 4: takes one token if there is one (`waitMs` 0, the bucket after it), else says how long
 * until there is (`waitMs` > 0, the bucket refilled to now). `rate` > 0 tokens a second.
 */
export function takeToken(bucket: TokenBucket, rate: number, now: number): { bucket: TokenBucket; waitMs: number } {
  const tokens = Math.min(rate, bucket.tokens + (Math.max(0, now - bucket.at) * rate) / 1000);
  // Refills of a fraction of a token add up with rounding errors: 10 × 0.1 must be one token.
  if (tokens >= 1 - 1e-9) return { bucket: { tokens: Math.max(0, tokens - 1), at: now }, waitMs: 0 };
  return { bucket: { tokens, at: now }, waitMs: Math.ceil(((1 - tokens) * 1000) / rate) };
}
