import { Type } from 'class-transformer';
import { IsArray, IsBoolean, IsDefined, IsIn, IsInt, IsNumber, IsOptional, Matches, Max, Min, ValidateBy, ValidateNested } from 'class-validator';
import { PodPolicyConfig } from '../pod-policy/pod-policy.config.js';
import { SidecarConfig } from '../sidecar/sidecar.config.js';
import { parseDuration } from '../common/duration.js';
import { LabelSelector } from './label-selector.js';

/** The resources whose allocatable may be inflated. Extended resources (GPUs, hugepages) never are. */
export const MANAGED_RESOURCES = ['cpu', 'memory', 'ephemeral-storage', 'pods'] as const;
export type ManagedResource = (typeof MANAGED_RESOURCES)[number];

const ratio = () => [IsOptional(), IsNumber({ allowNaN: false, allowInfinity: false }), Min(1), Max(10)];
function Ratio(): PropertyDecorator {
  return (target, key) => ratio().forEach((decorate) => decorate(target, key));
}

/** Per-resource ratios; an absent resource keeps its reported value (ratio 1). */
export class Ratios {
  @Ratio() cpu?: number;
  @Ratio() memory?: number;
  @Ratio() 'ephemeral-storage'?: number;
  @Ratio() pods?: number;
}

/**
 * `enforce` writes the planned allocatable; `shadow` computes it (gauges, /plan) and leaves
 * the node's object exactly as its writer sent it.
 */
export const NODE_MODES = ['enforce', 'shadow'] as const;
export type NodeMode = (typeof NODE_MODES)[number];

export class NodePool {
  @Matches(/^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/, { message: 'name must be a DNS label (lower case, digits, -)' })
  name: string;
  @IsDefined() @ValidateNested() @Type(() => LabelSelector) nodeSelector: LabelSelector;
  @IsDefined() @ValidateNested() @Type(() => Ratios) ratios: Ratios;
  /** Absent: the pool follows `nodes.defaultMode`. */
  @IsOptional() @IsIn(NODE_MODES, { message: `mode must be one of ${NODE_MODES.join(', ')}` }) mode?: NodeMode;
}

/** The reconciler (src/node-oversell/reconciler.rules.ts): nudges nodes whose stored allocatable differs from the plan. */
export class ReconcileConfig {
  @IsOptional() @IsBoolean() enabled: boolean = true;
  /** At most this many nudges (nodes/status PATCHes) a second, from the replica holding the Lease. */
  @IsOptional()
  @IsInt({ message: 'maxNodesPerSecond must be an integer from 1 to 1000' })
  @Min(1, { message: 'maxNodesPerSecond must be an integer from 1 to 1000' })
  @Max(1000, { message: 'maxNodesPerSecond must be an integer from 1 to 1000' })
  maxNodesPerSecond: number = 100;
}

export class NodesConfig {
  /** The mode of the nodes under defaultRatios and of every pool without its own. */
  @IsOptional() @IsIn(NODE_MODES, { message: `defaultMode must be one of ${NODE_MODES.join(', ')}` }) defaultMode: NodeMode = 'enforce';
  @IsOptional() @ValidateNested() @Type(() => Ratios) defaultRatios: Ratios = new Ratios();
  @IsOptional()
  @IsArray()
  @ValidateNested({ each: true })
  @Type(() => NodePool)
  @ValidateBy({
    name: 'uniquePoolNames',
    validator: {
      validate: (pools: unknown) => !Array.isArray(pools) || new Set(pools.map((p: NodePool) => p?.name)).size === pools.length,
      defaultMessage: () => 'pool names must be unique',
    },
  })
  pools: NodePool[] = [];
  /** Never write an allocatable below the requests bound to the node (node-oversell.rules.ts, rule 6). */
  @IsOptional() @IsBoolean() commitmentFloor: boolean = true;
  /** Turn a kubelet's heartbeat-only status writes into no-ops (docs/status-coalescing.md). Opt-in. */
  @IsOptional() @IsBoolean() coalesceStatusWrites: boolean = false;
  /** How old the stored heartbeats may get while writes are coalesced: the kubelet's nodeStatusReportFrequency. */
  @IsOptional()
  @ValidateBy({
    name: 'statusReportPeriod',
    validator: {
      validate: (period: unknown) => typeof period === 'string' && parseDuration(period) >= 1_000 && parseDuration(period) <= 3_600_000,
      defaultMessage: () => 'statusReportPeriod must be a duration like "5m", "90s" or "1m30s", from 1s to 1h',
    },
  })
  statusReportPeriod: string = '5m';
  /** Apply a config change to idle nodes at once, instead of at their kubelet's next report. */
  @IsOptional() @ValidateNested() @Type(() => ReconcileConfig) reconcile: ReconcileConfig = new ReconcileConfig();
}

/** config.yaml, validated. A snapshot of it is deep-frozen and shared by concurrent requests. */
export class OvercommitConfig {
  @IsOptional() @ValidateNested() @Type(() => NodesConfig) nodes: NodesConfig = new NodesConfig();
  /** Pod policies: default requests, request-to-limit percentages, node cap (docs/pod-policy.md). */
  @IsOptional() @ValidateNested() @Type(() => PodPolicyConfig) pods: PodPolicyConfig = new PodPolicyConfig();
  /** Sidecar templates injected on pod CREATE (docs/sidecars.md). */
  @IsOptional() @ValidateNested() @Type(() => SidecarConfig) sidecars: SidecarConfig = new SidecarConfig();
}
