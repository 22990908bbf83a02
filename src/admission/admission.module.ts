import { Module } from '@nestjs/common';
import { DiscoveryModule } from '@nestjs/core';
import { AdmissionController } from './admission.controller.js';
import { admissionMetrics } from './admission.metrics.js';
import { AdmissionPipeline } from './admission.pipeline.js';

/** Owns the webhook endpoint and the pipeline; strategies come from feature modules by discovery. */
@Module({
  imports: [DiscoveryModule],
  controllers: [AdmissionController],
  providers: [...admissionMetrics, AdmissionPipeline],
})
export class AdmissionModule {}
