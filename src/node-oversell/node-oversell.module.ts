import { Module } from '@nestjs/common';
import { nodeOversellMetrics } from './node-oversell.metrics.js';
import { NodeOversellStrategy } from './node-oversell.strategy.js';

export { NODE_ALLOCATABLE_OVERCOMMITTED_METRIC, NODE_ALLOCATABLE_RAW_METRIC, NODE_METRICS_DROPPED_METRIC, NODE_RATIO_METRIC } from './node-oversell.metrics.js';

/**
 * Node oversell: contributes NodeOversellStrategy (found by the admission pipeline through its
 * @AdmissionStrategyProvider decorator) and its per-node gauges.
 */
@Module({
  providers: [...nodeOversellMetrics, NodeOversellStrategy],
  exports: [NodeOversellStrategy],
})
export class NodeOversellModule {}
