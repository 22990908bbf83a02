import { Module } from '@nestjs/common';
import { UsageModule } from '../usage/usage.module.js';
import { CommitmentFloor, NODE_COMMITMENTS } from './commitment-floor.service.js';
import { NODE_EVENTS, NodeEvents } from './node-events.service.js';
import { nodeOversellMetrics } from './node-oversell.metrics.js';
import { NodeOversellStrategy } from './node-oversell.strategy.js';

/**
 * Node oversell: contributes NodeOversellStrategy (found by the admission pipeline through its
 * @AdmissionStrategyProvider decorator), its per-node gauges, the commitment floor's view of the
 * shared pod cache and the Node Events it records. The usage-aware ratios it applies come from
 * UsageModule.
 */
@Module({
  imports: [UsageModule],
  providers: [
    ...nodeOversellMetrics,
    CommitmentFloor,
    { provide: NODE_COMMITMENTS, useExisting: CommitmentFloor },
    NodeEvents,
    { provide: NODE_EVENTS, useExisting: NodeEvents },
    NodeOversellStrategy,
  ],
  exports: [NodeOversellStrategy, NODE_COMMITMENTS],
})
export class NodeOversellModule {}
