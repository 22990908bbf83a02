import { Injectable } from '@nestjs/common';
import { makeCounterProvider } from '@willsoto/nestjs-prometheus';
import { AdmissionStrategyProvider } from '../admission/admission-strategy.decorator.js';
import { Tally } from '../admission/admission.metrics.js';
import type { AdmissionRequest, AdmissionStrategy, StrategyResult } from '../admission/admission.types.js';
import { parseDuration } from '../common/duration.js';
import type { OvercommitConfig } from '../overcommit.config.js';
import { STRATEGY_ORDER } from '../admission/strategy-order.js';
import { resolveNodePolicy } from '../domain/node-rules/node-oversell.rules.js';
import type { NodeLike } from '../domain/node-like.js';
import { planStatusCoalescing } from './status-coalescing.rules.js';
import { Memo } from '../domain/memo.js';

/** nodes/status updates seen with coalescing on, by decision (`coalesced`, `passed`) and reason. */
export const STATUS_WRITES_METRIC = 'kube_overcommit_status_writes_total';

/** Updates seen, by decision and reason, counted as plain numbers and added to STATUS_WRITES_METRIC at every scrape (Tally). */
@Injectable()
export class StatusWritesTally extends Tally<string, string> {
  constructor() {
    super((decision, reason) => ({ decision, reason }));
  }
}

export const statusCoalescingMetrics = [
  makeCounterProvider({
    name: STATUS_WRITES_METRIC,
    help: 'nodes/status updates admitted while nodes.coalesceStatusWrites is on, by decision: coalesced (turned into the stored object, so kube-apiserver skips the etcd write) or passed, with the reason (heartbeat, other-writer, not-inflated, no-stored-object, condition-changed, status-changed, report-due).',
    labelNames: ['decision', 'reason'],
    inject: [StatusWritesTally],
    collect(writes: StatusWritesTally) {
      writes.flushInto(this);
    },
  }),
  StatusWritesTally,
];

/** statusReportPeriod parsed once per value (a regular expression), not at every review. */
const reportPeriods = new Memo<string, number>(16);

/**
 * Coalesces a kubelet's heartbeat-only status writes on inflated nodes (status-coalescing.rules.ts).
 * Runs after NodeOversellStrategy on the same requests, so it sees the object inflated.
 */
@Injectable()
@AdmissionStrategyProvider({
  name: 'status-coalescing',
  entry: 'nodes',
  rules: [{ resource: 'nodes', subResource: 'status', operations: ['UPDATE'] }],
  order: STRATEGY_ORDER['status-coalescing'],
})
export class StatusCoalescingStrategy implements AdmissionStrategy {
  constructor(private readonly writes: StatusWritesTally) {}

  isActive(config: OvercommitConfig): boolean {
    return config.nodes?.coalesceStatusWrites === true;
  }

  admit(request: AdmissionRequest, config: OvercommitConfig): StrategyResult {
    const nodes = config.nodes;
    if (!nodes?.coalesceStatusWrites) return {};
    const labels = (request.object as NodeLike | undefined)?.metadata?.labels;
    const plan = planStatusCoalescing(request, reportPeriods.get(nodes.statusReportPeriod, parseDuration), resolveNodePolicy(labels, nodes)?.mode !== 'shadow');
    if (!request.dryRun) this.writes.add(plan.decision, plan.reason);
    return plan.decision === 'coalesced' ? { patch: plan.patch } : {};
  }
}
