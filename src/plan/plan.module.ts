import { Module } from '@nestjs/common';
import { UsageModule } from '../usage/usage.module.js';
import { PlanController } from './plan.controller.js';

/** GET /plan (PlanController), from the shared node and pod caches and the usage-aware ratios. */
@Module({ imports: [UsageModule], controllers: [PlanController] })
export class PlanModule {}
