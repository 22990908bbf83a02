import { Global, Module } from '@nestjs/common';
import { NODE_USAGE } from '../domain/node-rules/node-services.js';
import { UsageRatios } from './usage-ratios.service.js';
import { usageMetrics } from './usage.metrics.js';

/**
 * Usage-aware ratios (docs/usage-aware.md): UsageRatios, whose leader samples usage and
 * publishes the ratios, and which every replica reads for node oversell, the reconciler and
 * GET /plan (by its token, NODE_USAGE: the module is global, so they do not import it); its
 * gauges and counters.
 */
@Global()
@Module({
  providers: [...usageMetrics, UsageRatios, { provide: NODE_USAGE, useExisting: UsageRatios }],
  exports: [NODE_USAGE],
})
export class UsageModule {}
