import { Module } from '@nestjs/common';
import { DiscoveryModule } from '@nestjs/core';
import { AdmissionHttpMetrics, admissionMetrics } from './admission.metrics.js';
import { AdmissionPipeline } from './admission.pipeline.js';
import { SERVED_PATHS } from './admission.routes.js';

/**
 * Owns the admission pipeline; strategies come from feature modules by discovery. The endpoint
 * that feeds it is admission.server.ts, started beside Nest's HTTP layer by app.factory.ts.
 */
@Module({
  imports: [DiscoveryModule],
  providers: [...admissionMetrics, AdmissionPipeline, { provide: SERVED_PATHS, useExisting: AdmissionPipeline }, AdmissionHttpMetrics],
  exports: [AdmissionPipeline, AdmissionHttpMetrics],
})
export class AdmissionModule {}
