import { DiscoveryService } from '@nestjs/core';
import type { StrategyMetadata } from './admission.types.js';

/**
 * Marks a provider as an admission strategy. Feature modules declare decorated providers;
 * the admission pipeline discovers them at bootstrap and never imports the feature modules.
 * The class must implement `AdmissionStrategy`.
 */
export const AdmissionStrategyProvider = DiscoveryService.createDecorator<StrategyMetadata>();
