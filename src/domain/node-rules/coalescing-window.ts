/**
 * The node's window of status-write coalescing (docs/status-coalescing.md, rule 4 of
 * status-coalescing.rules.ts), shared by the webhook's coalescing and the node-status policy's
 * published entries (node-policy/node-targets.rules.ts, rule 3), which apply it alike.
 */
import { createHash } from 'node:crypto';
import { Memo } from '../memo.js';

/** The share of the report period a node's window is shorter by (rule 4). */
const WINDOW_SPREAD = 0.1;

/** One hash per node and period, not one per heartbeat. */
const nodeWindows = new Memo<string, number>(16_384);

/**
 * Rule 4: the node's window, reportPeriodMs less a fraction of WINDOW_SPREAD fixed by the node's
 * name, in whole seconds (heartbeat times have no fractions).
 */
export function nodeWindowMs(name: string, reportPeriodMs: number): number {
  return nodeWindows.get(`${reportPeriodMs} ${name}`, () => computeNodeWindowMs(name, reportPeriodMs));
}

function computeNodeWindowMs(name: string, reportPeriodMs: number): number {
  const fraction = createHash('sha256').update(name).digest().readUInt32BE(0) / 2 ** 32;
  return Math.max(1_000, Math.round((reportPeriodMs * (1 - WINDOW_SPREAD * fraction)) / 1_000) * 1_000);
}
