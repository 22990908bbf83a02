import { Module } from '@nestjs/common';
import { StatusCoalescingStrategy, statusCoalescingMetrics } from './status-coalescing.strategy.js';

/**
 * Status coalescing: contributes StatusCoalescingStrategy, which runs after node oversell on
 * nodes/status (found by the admission pipeline through its decorator), and its counter.
 */
@Module({
  providers: [...statusCoalescingMetrics, StatusCoalescingStrategy],
  exports: [StatusCoalescingStrategy],
})
export class StatusCoalescingModule {}
