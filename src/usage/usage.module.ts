import { Module } from '@nestjs/common';
import { usageMetrics } from '../node-oversell/node-oversell.metrics.js';
import { NODE_USAGE, UsageRatios } from './usage-ratios.service.js';

/**
 * Usage-aware ratios (docs/usage-aware.md): UsageRatios, whose leader samples usage and
 * publishes the ratios, and which every replica reads for node oversell, the reconciler and
 * GET /plan; its gauges and counters.
 */
@Module({
  providers: [...usageMetrics, UsageRatios, { provide: NODE_USAGE, useExisting: UsageRatios }],
  exports: [UsageRatios, NODE_USAGE],
})
export class UsageModule {}
