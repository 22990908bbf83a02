import { Module } from '@nestjs/common';
import { CommitmentFloor, NODE_COMMITMENTS } from './commitment-floor.service.js';
import { NODE_EVENTS, NodeEvents } from './node-events.service.js';
import { nodeOversellMetrics } from './node-oversell.metrics.js';
import { NodeOversellStrategy } from './node-oversell.strategy.js';
import { Reconciler, reconcilerMetrics } from '../reconciler/reconciler.service.js';
import { StatusCoalescingStrategy, statusCoalescingMetrics } from '../status-coalescing/status-coalescing.strategy.js';
import { NODE_USAGE, UsageRatios } from '../usage/usage-ratios.service.js';

/**
 * Node oversell: contributes NodeOversellStrategy (found by the admission pipeline through its
 * @AdmissionStrategyProvider decorator), its per-node gauges, the commitment floor's view of the
 * shared pod cache, the Node Events it records, usage-aware ratios (UsageRatios); StatusCoalescingStrategy,
 * which runs after it on nodes/status, and its counter; the Reconciler, which nudges nodes whose stored
 * allocatable differs from the plan (it reads the shared NodeCache of KubeModule).
 */
@Module({
  providers: [
    ...reconcilerMetrics,
    Reconciler,
    ...nodeOversellMetrics,
    ...statusCoalescingMetrics,
    CommitmentFloor,
    { provide: NODE_COMMITMENTS, useExisting: CommitmentFloor },
    NodeEvents,
    { provide: NODE_EVENTS, useExisting: NodeEvents },
    UsageRatios,
    { provide: NODE_USAGE, useExisting: UsageRatios },
    NodeOversellStrategy,
    StatusCoalescingStrategy,
  ],
  exports: [NodeOversellStrategy, StatusCoalescingStrategy, UsageRatios],
})
export class NodeOversellModule {}
