import { Type } from 'class-transformer';
import { IsIn, IsNumber, IsOptional, Max, Min, ValidateBy, ValidateNested, type ValidationOptions } from 'class-validator';
import { LabelSelector } from '../domain/label-selector.js';
import { parseResourceQuantity } from '../domain/quantity.js';

/** The namespace label that opts a namespace in to pod policies (the default namespaceSelector). */
export const POD_POLICY_LABEL = 'kube-overcommit.io/pod-policy';

/** A resource.Quantity of `resource` (string, or a YAML number), strictly positive. */
function IsPositiveQuantity(resource: 'cpu' | 'memory', options?: ValidationOptions) {
  return ValidateBy(
    {
      name: 'isPositiveQuantity',
      validator: {
        validate: (value: unknown) => {
          if (typeof value !== 'string' && typeof value !== 'number') return false;
          try {
            return parseResourceQuantity(resource, value) > 0n;
          } catch {
            return false;
          }
        },
        defaultMessage: () => `$property must be a positive ${resource} quantity (e.g. ${resource === 'cpu' ? '100m or 0.5' : '128Mi or 1Gi'})`,
      },
    },
    options,
  );
}

const PERCENT = () => [IsOptional(), IsNumber({ allowNaN: false, allowInfinity: false }), Min(1)];
function Percent(max: number): PropertyDecorator {
  return (target, key) => [...PERCENT(), Max(max)].forEach((decorate) => decorate(target, key));
}

/** Requests given to a container that sets neither a request nor a limit for the resource. */
export class DefaultRequests {
  @IsOptional() @IsPositiveQuantity('cpu') cpu?: string | number;
  @IsOptional() @IsPositiveQuantity('memory') memory?: string | number;
}

/**
 * OpenShift ClusterResourceOverride semantics, each step optional:
 * memory request = memory limit × memoryRequestPercent / 100 (rounded down to a whole MiB);
 * cpu limit = memory limit in GiB × cpuLimitPerGiBPercent / 100 cores (200 → 2 cores per GiB);
 * cpu request = cpu limit × cpuRequestPercent / 100 (rounded down to a millicore).
 */
export class LimitToRequest {
  @Percent(100) memoryRequestPercent?: number;
  @Percent(10_000) cpuLimitPerGiBPercent?: number;
  @Percent(100) cpuRequestPercent?: number;
}

export const CAP_MODES = ['off', 'deny', 'warn'] as const;
export type CapMode = (typeof CAP_MODES)[number];

/** The per-node cap: requests of a node's pods ≤ raw allocatable × the node's ratio. */
export class NodeCapConfig {
  @IsOptional() @IsIn(CAP_MODES) mode: CapMode = 'off';
}

function defaultNamespaceSelector(): LabelSelector {
  const selector = new LabelSelector();
  selector.matchLabels = { [POD_POLICY_LABEL]: 'enabled' };
  return selector;
}

/** `pods:` in config.yaml. The defaults do nothing: no default requests, no percentages, cap off. */
export class PodPolicyConfig {
  @IsOptional() @ValidateNested() @Type(() => LabelSelector) namespaceSelector: LabelSelector = defaultNamespaceSelector();
  @IsOptional() @ValidateNested() @Type(() => DefaultRequests) defaultRequests?: DefaultRequests;
  @IsOptional() @ValidateNested() @Type(() => LimitToRequest) limitToRequest?: LimitToRequest;
  @IsOptional() @ValidateNested() @Type(() => NodeCapConfig) cap: NodeCapConfig = new NodeCapConfig();
}

/** True when the config asks for any mutation of containers' resources. */
export function mutatesResources(config: PodPolicyConfig): boolean {
  const d = config.defaultRequests;
  const l = config.limitToRequest;
  return (
    (d?.cpu !== undefined && d.cpu !== null) ||
    (d?.memory !== undefined && d.memory !== null) ||
    (l !== undefined && l !== null && (l.memoryRequestPercent !== undefined || l.cpuLimitPerGiBPercent !== undefined || l.cpuRequestPercent !== undefined))
  );
}
