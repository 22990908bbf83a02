import { Injectable } from '@nestjs/common';
import { makeCounterProvider } from '@willsoto/nestjs-prometheus';
import { AdmissionStrategyProvider } from '../admission/admission-strategy.decorator.js';
import { Tally } from '../admission/admission.metrics.js';
import type { AdmissionRequest, AdmissionStrategy, StrategyResult } from '../admission/admission.types.js';
import { STRATEGY_ORDER } from '../admission/strategy-order.js';
import { isPolicyServable } from './node-targets.rules.js';

/** Webhook calls the node-status policy could have served (node-targets.rules.ts, rule 7). */
export const POLICY_SERVABLE_METRIC = 'kube_overcommit_node_policy_servable_calls_total';

/** The calls counted as plain numbers, added to POLICY_SERVABLE_METRIC at every scrape (Tally). */
@Injectable()
export class PolicyServableTally extends Tally<string, string> {
  constructor() {
    super(() => ({}));
  }
}

export const policyServableMetrics = [
  makeCounterProvider({
    name: POLICY_SERVABLE_METRIC,
    help: 'nodes/status updates by a node’s own kubelet that this webhook answered while the node-status policy could have served them (the answer leaves the stored managed allocatable, capacity, labels and our annotations as they are; with the target published the policy writes the same and the webhook is not called, but for heartbeats due for a report). On an API server without the policy path, what moving to it saves.',
    inject: [PolicyServableTally],
    collect(tally: PolicyServableTally) {
      tally.flushInto(this);
    },
  }),
  PolicyServableTally,
];

/**
 * Counts, never patches: runs after node oversell on nodes/status updates, so it sees the
 * object as the webhook answers it.
 */
@Injectable()
@AdmissionStrategyProvider({
  name: 'node-policy',
  entry: 'nodes',
  rules: [{ resource: 'nodes', subResource: 'status', operations: ['UPDATE'] }],
  order: STRATEGY_ORDER['node-policy'],
})
export class PolicyServableStrategy implements AdmissionStrategy {
  constructor(private readonly tally: PolicyServableTally) {}

  admit(request: AdmissionRequest): StrategyResult {
    if (!request.dryRun && isPolicyServable(request)) this.tally.add('', '');
    return {};
  }
}
