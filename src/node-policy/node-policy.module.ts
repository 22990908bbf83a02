import { Module } from '@nestjs/common';
import { NodeTargetsPublisher, nodePolicyMetrics } from './node-policy.service.js';
import { PolicyServableStrategy, policyServableMetrics } from './node-policy.strategy.js';

/**
 * The node-status policy's publisher, the strategy counting the webhook calls it could have served (it reads the shared NodeCache and PodCache of KubeModule,
 * and by token the commitment floor of NodeOversellModule and the usage-aware ratios of
 * UsageModule), and its metrics.
 */
@Module({
  providers: [...nodePolicyMetrics, NodeTargetsPublisher, ...policyServableMetrics, PolicyServableStrategy],
})
export class NodePolicyModule {}
