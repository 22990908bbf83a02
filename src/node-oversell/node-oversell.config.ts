import { Type } from 'class-transformer';
import { IsArray, IsBoolean, IsDefined, IsIn, IsNumber, IsOptional, Matches, Max, Min, ValidateBy, ValidateNested } from 'class-validator';
import { parseDuration } from '../common/duration.js';
import { LabelSelector } from '../domain/label-selector.js';

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
}
