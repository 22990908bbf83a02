import { Global, Module } from '@nestjs/common';
import { NODE_COMMITMENTS, NODE_EVENTS } from '../domain/node-rules/node-services.js';
import { CommitmentFloor } from './commitment-floor.service.js';
import { NodeEvents } from './node-events.service.js';
import { nodeOversellMetrics } from './node-oversell.metrics.js';
import { NodeOversellStrategy } from './node-oversell.strategy.js';

/**
 * Node oversell: contributes NodeOversellStrategy (found by the admission pipeline through its
 * @AdmissionStrategyProvider decorator), its per-node gauges, the commitment floor's view of the
 * shared pod cache and the Node Events it records. Global, so the reconciler injects the
 * commitment floor by its token (NODE_COMMITMENTS), and the usage-aware leader the Node Events
 * (NODE_EVENTS), without importing this module; the
 * usage-aware ratios it applies come by token (NODE_USAGE) from UsageModule, global too.
 */
@Global()
@Module({
  providers: [
    ...nodeOversellMetrics,
    CommitmentFloor,
    { provide: NODE_COMMITMENTS, useExisting: CommitmentFloor },
    NodeEvents,
    { provide: NODE_EVENTS, useExisting: NodeEvents },
    NodeOversellStrategy,
  ],
  exports: [NodeOversellStrategy, NODE_COMMITMENTS, NODE_EVENTS],
})
export class NodeOversellModule {}
