import { Module } from '@nestjs/common';
import { NodeOversellModule } from '../node-oversell/node-oversell.module.js';
import { UsageModule } from '../usage/usage.module.js';
import { Reconciler, reconcilerMetrics } from './reconciler.service.js';

/**
 * The Reconciler, which nudges nodes whose stored allocatable differs from the plan (it reads
 * the shared NodeCache of KubeModule, the commitment floor and the usage-aware ratios), and its
 * metrics.
 */
@Module({
  imports: [NodeOversellModule, UsageModule],
  providers: [...reconcilerMetrics, Reconciler],
})
export class ReconcilerModule {}
