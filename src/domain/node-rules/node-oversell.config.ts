import { Type } from 'class-transformer';
import { IsArray, IsBoolean, IsDefined, IsIn, IsInt, IsNumber, IsOptional, Matches, Max, Min, ValidateBy, ValidateNested } from 'class-validator';
import { parseDuration } from '../../common/duration.js';
import { LabelSelector } from '../label-selector.js';

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

const fraction = () => [IsOptional(), IsNumber({ allowNaN: false, allowInfinity: false }), Min(0.01), Max(1)];
function Fraction(): PropertyDecorator {
  return (target, key) => fraction().forEach((decorate) => decorate(target, key));
}

/** The resources whose ratio usage-aware mode derives from measured usage (metrics.k8s.io measures these two). */
export const USAGE_RESOURCES = ['cpu', 'memory'] as const;
export type UsageResource = (typeof USAGE_RESOURCES)[number];

/** What a hot usage-aware node gets (hot-nodes.rules.ts): `ratio1`, or `full` (no new pod until it cools). */
export const HOT_ACTIONS = ['ratio1', 'full'] as const;
export type HotAction = (typeof HOT_ACTIONS)[number];

/** A fraction in [0.01, 1] per usage resource; an absent resource is not usage-aware (its ratio stays static). */
export class UsageFractions {
  @Fraction() cpu?: number;
  @Fraction() memory?: number;
}

function durationIn(name: string, minMs: number, maxMs: number, range: string): PropertyDecorator {
  return ValidateBy({
    name,
    validator: {
      validate: (value: unknown) => typeof value === 'string' && parseDuration(value) >= minMs && parseDuration(value) <= maxMs,
      defaultMessage: () => `${name} must be a duration like "5m", "90s" or "1m30s", ${range}`,
    },
  });
}

/** A check across fields of one UsageConfig: `value` against `object`. */
function usageCheck(name: string, check: (value: unknown, usage: UsageConfig) => boolean, message: string): PropertyDecorator {
  return ValidateBy({ name, validator: { validate: (value, args) => check(value, args?.object as UsageConfig), defaultMessage: () => message } });
}

/**
 * Usage-aware ratios (docs/usage-aware.md): the pool's ratio becomes a ceiling, and each node's
 * effective ratio is derived from measured usage (metrics.k8s.io) inside a safety envelope.
 */
export class UsageConfig {
  /** T: the utilization of raw allocatable the ratio aims at. */
  @IsOptional() @ValidateNested() @Type(() => UsageFractions) target: UsageFractions = Object.assign(new UsageFractions(), { cpu: 0.6, memory: 0.8 });
  /** The least usage/request fraction assumed of requests not yet measured (katalyst's estimated load). */
  @IsOptional() @ValidateNested() @Type(() => UsageFractions) estimatedLoad: UsageFractions = Object.assign(new UsageFractions(), { cpu: 0.4, memory: 0.8 });
  /** Node usage (NodeMetrics) ÷ raw allocatable above which the node is hot: ratio 1. */
  @IsOptional() @ValidateNested() @Type(() => UsageFractions) hotThreshold: UsageFractions = Object.assign(new UsageFractions(), { cpu: 0.9, memory: 0.9 });
  /** The percentile of the window's samples that smooths usage. */
  @IsOptional() @IsNumber({ allowNaN: false, allowInfinity: false }) @Min(50) @Max(100) percentile: number = 95;
  @IsOptional() @durationIn('window', 60_000, 3_600_000, 'from 1m to 1h') window: string = '5m';
  /** How often the leader samples metrics.k8s.io and publishes ratios. */
  @IsOptional()
  @durationIn('interval', 5_000, 600_000, 'from 5s to 10m')
  @usageCheck('intervalWithinWindow', (value, usage) => parseDuration(String(value)) <= parseDuration(usage.window), 'interval must not be longer than window')
  interval: string = '30s';
  /** A new ratio within this much of the one in force is not applied. */
  @IsOptional() @IsNumber({ allowNaN: false, allowInfinity: false }) @Min(0) @Max(1) deadband: number = 0.05;
  /** The most an effective ratio rises per interval (a decrease applies at once). */
  @IsOptional() @IsNumber({ allowNaN: false, allowInfinity: false }) @Min(0.01) @Max(9) maxStepUp: number = 0.1;
  /** A node without a sample for this long: its ratio never rises. */
  @IsOptional()
  @durationIn('staleAfter', 10_000, 3_600_000, 'from 10s to 1h')
  @usageCheck(
    'staleAfterInterval',
    (value, usage) => parseDuration(String(value)) >= parseDuration(usage.interval),
    'staleAfter must not be shorter than interval',
  )
  staleAfter: string = '2m';
  /** A node without a sample for this long: ratio 1 (then the commitment floor). */
  @IsOptional()
  @durationIn('fallbackAfter', 20_000, 86_400_000, 'from 20s to 24h')
  @usageCheck(
    'fallbackAfterStale',
    (value, usage) => parseDuration(String(value)) > parseDuration(usage.staleAfter),
    'fallbackAfter must be longer than staleAfter',
  )
  fallbackAfter: string = '10m';
  /** What a hot node gets: `ratio1` (ratio 1, then the commitment floor), or `full` (exactly its committed requests: no new pod; hot-nodes.rules.ts). */
  @IsOptional() @IsIn(HOT_ACTIONS, { message: `hotAction must be one of ${HOT_ACTIONS.join(', ')}` }) hotAction: HotAction = 'ratio1';
  /** `full` only: a hot node reopens once its usage ÷ raw allocatable stays below this for `coolFor`. Absent per resource: hotThreshold − COOL_MARGIN. */
  @IsOptional()
  @ValidateNested()
  @Type(() => UsageFractions)
  @usageCheck(
    'coolBelowHot',
    (_value, usage) => USAGE_RESOURCES.every((resource) => !((usage.coolThreshold?.[resource] ?? 0) >= (usage.hotThreshold?.[resource] ?? 1))),
    'coolThreshold must be below hotThreshold for each resource',
  )
  coolThreshold?: UsageFractions;
  /** `full` only: how long usage stays below coolThreshold before a hot node reopens. */
  @IsOptional() @durationIn('coolFor', 0, 3_600_000, 'from 0s to 1h') coolFor: string = '2m';
}

/** A `full` hot node's default cool threshold: this far below its hot threshold. */
export const COOL_MARGIN = 0.1;

/** The cool threshold of a resource: configured, else hotThreshold − COOL_MARGIN (0.01 at least); NaN without a hot threshold. */
export function coolThreshold(usage: Pick<UsageConfig, 'hotThreshold' | 'coolThreshold'>, resource: UsageResource): number {
  const hot = usage.hotThreshold?.[resource];
  if (hot === undefined || hot === null) return Number.NaN;
  return usage.coolThreshold?.[resource] ?? Math.max(0.01, Math.round((hot - COOL_MARGIN) * 100) / 100);
}

export class NodePool {
  @Matches(/^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/, { message: 'name must be a DNS label (lower case, digits, -)' })
  name: string;
  @IsDefined() @ValidateNested() @Type(() => LabelSelector) nodeSelector: LabelSelector;
  @IsDefined() @ValidateNested() @Type(() => Ratios) ratios: Ratios;
  /** Absent: the pool follows `nodes.defaultMode`. */
  @IsOptional() @IsIn(NODE_MODES, { message: `mode must be one of ${NODE_MODES.join(', ')}` }) mode?: NodeMode;
  /** Usage-aware: `ratios` are ceilings (docs/usage-aware.md). Absent: static ratios. */
  @IsOptional() @ValidateNested() @Type(() => UsageConfig) usage?: UsageConfig;
  /**
   * The pool's kubelets run the static CPU manager policy: the pod cap keeps the exclusive CPUs
   * requested on a node (Guaranteed pods, integer cpu) within its raw cpu allocatable (docs/pod-policy.md).
   */
  @IsOptional() @IsBoolean() exclusiveCpus?: boolean;
}

/** The reconciler (src/reconciler/reconciler.rules.ts): nudges nodes whose stored allocatable differs from the plan. */
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
  /** Usage-aware for the nodes under defaultRatios, which become ceilings (docs/usage-aware.md). Absent: static. */
  @IsOptional() @ValidateNested() @Type(() => UsageConfig) defaultUsage?: UsageConfig;
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
  /** Turn a kubelet's heartbeat-only status writes into no-ops (docs/status-coalescing.md); `false` opts out. */
  @IsOptional() @IsBoolean() coalesceStatusWrites: boolean = true;
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
  /**
   * Publish each node's target for the MutatingAdmissionPolicy kube-overcommit-nodes (where the API
   * server serves it and it is installed: k8s/node-policy), which then serves a kubelet's status
   * writes inside kube-apiserver; absent or `true` (the default): on; `false`: the webhook alone serves
   * them (docs/adr/0006-node-policy.md).
   */
  @IsOptional() @IsBoolean() admissionPolicy?: boolean;
  /** Apply a config change to idle nodes at once, instead of at their kubelet's next report. */
  @IsOptional() @ValidateNested() @Type(() => ReconcileConfig) reconcile: ReconcileConfig = new ReconcileConfig();
}
