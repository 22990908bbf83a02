/**
 * config.yaml's root: one optional section per feature, each section's classes owned by its
 * feature. The config module (config/) imports none of them: app.module.ts hands it this
 * schema, and it reads the root's type only.
 */
import { Type } from 'class-transformer';
import { IsOptional, ValidateNested } from 'class-validator';
import type { Validated } from './common/validation.js';
import { deepFreeze, parseConfigAs, type ConfigSchema } from './config/config.loader.js';
import { NodesConfig } from './domain/node-rules/node-oversell.config.js';
import { PodPolicyConfig } from './pod-policy/pod-policy.config.js';
import { SidecarConfig } from './sidecar/sidecar.config.js';

/** config.yaml, validated. A snapshot of it is deep-frozen and shared by concurrent requests. */
export class OvercommitConfig {
  @IsOptional() @ValidateNested() @Type(() => NodesConfig) nodes: NodesConfig = new NodesConfig();
  /** Pod policies: default requests, request-to-limit percentages, node cap (docs/pod-policy.md). */
  @IsOptional() @ValidateNested() @Type(() => PodPolicyConfig) pods: PodPolicyConfig = new PodPolicyConfig();
  /** Sidecar templates injected on pod CREATE (docs/sidecars.md). */
  @IsOptional() @ValidateNested() @Type(() => SidecarConfig) sidecars: SidecarConfig = new SidecarConfig();
}

/** Built-in defaults: every ratio 1, no policy — a no-op. */
export const DEFAULT_CONFIG: OvercommitConfig = deepFreeze(new OvercommitConfig());

/** Parses and validates config.yaml. Errors name every bad field by its path. */
export function parseConfig(text: string): Validated<OvercommitConfig> {
  return parseConfigAs(OvercommitConfig, text);
}

export const OVERCOMMIT_CONFIG: ConfigSchema<OvercommitConfig> = { defaults: DEFAULT_CONFIG, parse: parseConfig };
