import { Module } from '@nestjs/common';
import { PlanController } from './plan.controller.js';

/** GET /plan (PlanController), from the shared node and pod caches and the usage-aware ratios (NODE_USAGE, from UsageModule). */
@Module({ controllers: [PlanController] })
export class PlanModule {}
