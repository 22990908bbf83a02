import { Module } from '@nestjs/common';
import { sidecarMetrics } from './sidecar.metrics.js';
import { SidecarStrategy } from './sidecar.strategy.js';

/**
 * Sidecar injection: contributes SidecarStrategy (found by the admission pipeline through its
 * @AdmissionStrategyProvider decorator) and its counter. Namespace labels come from the global
 * NamespaceCache of KubeModule.
 */
@Module({
  providers: [...sidecarMetrics, SidecarStrategy],
  exports: [SidecarStrategy],
})
export class SidecarModule {}
