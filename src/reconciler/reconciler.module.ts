import { Module } from '@nestjs/common';
import { Reconciler, reconcilerMetrics } from './reconciler.service.js';

/**
 * The Reconciler, which nudges nodes whose stored allocatable differs from the plan (it reads
 * the shared NodeCache of KubeModule, and by token the commitment floor of NodeOversellModule
 * and the usage-aware ratios of UsageModule), and its metrics.
 */
@Module({
  providers: [...reconcilerMetrics, Reconciler],
})
export class ReconcilerModule {}
