import { Module } from '@nestjs/common';
import { NodeTargetsPublisher, nodePolicyMetrics } from './node-policy.service.js';

/**
 * The node-status policy's publisher (it reads the shared NodeCache and PodCache of KubeModule,
 * and by token the commitment floor of NodeOversellModule and the usage-aware ratios of
 * UsageModule), and its metrics.
 */
@Module({
  providers: [...nodePolicyMetrics, NodeTargetsPublisher],
})
export class NodePolicyModule {}
