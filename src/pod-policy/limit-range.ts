/**
 * A namespace's LimitRanges (items of type Container) reduced to the bounds the policies must
 * respect for cpu and memory, so that LimitRanger's validation (which runs after the mutating
 * webhooks) accepts what we write. Several LimitRanges, or several items, all apply: the
 * tightest bound wins (largest min, smallest max, smallest maxLimitRequestRatio).
 */
import { compareDecimal, parseQuantity, parseResourceQuantity, type Decimal } from '../domain/quantity.js';

export type PolicyResource = 'cpu' | 'memory';
export const POLICY_RESOURCES: readonly PolicyResource[] = ['cpu', 'memory'];

export interface ResourceBounds {
  /** Base units (millicores, bytes). */
  min?: bigint;
  max?: bigint;
  /** limit / request must not exceed this. */
  maxLimitRequestRatio?: Decimal;
}

export type ContainerBounds = Partial<Record<PolicyResource, ResourceBounds>>;

export interface LimitRangeLike {
  metadata?: { name?: string; namespace?: string };
  spec?: {
    limits?: Array<{
      type?: string;
      min?: Record<string, string | number>;
      max?: Record<string, string | number>;
      maxLimitRequestRatio?: Record<string, string | number>;
    }>;
  };
}

function tryParse(resource: PolicyResource, value: unknown): bigint | undefined {
  if (typeof value !== 'string' && typeof value !== 'number') return undefined;
  try {
    return parseResourceQuantity(resource, value);
  } catch {
    return undefined;
  }
}

function tryParseRatio(value: unknown): Decimal | undefined {
  if (typeof value !== 'string' && typeof value !== 'number') return undefined;
  try {
    const ratio = parseQuantity(String(value));
    return ratio.coefficient > 0n ? ratio : undefined;
  } catch {
    return undefined;
  }
}

export function containerBounds(limitRanges: readonly LimitRangeLike[]): ContainerBounds {
  const bounds: ContainerBounds = {};
  for (const limitRange of limitRanges) {
    for (const item of limitRange.spec?.limits ?? []) {
      if (item?.type !== 'Container') continue;
      for (const resource of POLICY_RESOURCES) {
        const b: ResourceBounds = bounds[resource] ?? {};
        tighten(b, item, resource);
        if (Object.keys(b).length > 0) bounds[resource] = b;
      }
    }
  }
  return bounds;
}

type LimitRangeItem = NonNullable<NonNullable<LimitRangeLike['spec']>['limits']>[number];

/** Folds one Container item's bounds for `resource` into `b`: the largest min, the smallest max and ratio win. */
function tighten(b: ResourceBounds, item: LimitRangeItem, resource: PolicyResource): void {
  const min = tryParse(resource, item.min?.[resource]);
  const max = tryParse(resource, item.max?.[resource]);
  const ratio = tryParseRatio(item.maxLimitRequestRatio?.[resource]);
  if (min !== undefined && (b.min === undefined || min > b.min)) b.min = min;
  if (max !== undefined && (b.max === undefined || max < b.max)) b.max = max;
  if (ratio !== undefined && (b.maxLimitRequestRatio === undefined || compareDecimal(ratio, b.maxLimitRequestRatio) < 0)) b.maxLimitRequestRatio = ratio;
}

/** Smallest request r with limit / r ≤ ratio: ceil(limit / ratio). */
export function minRequestForRatio(limit: bigint, ratio: Decimal): bigint {
  // limit / (c × 10^e) = limit × 10^-e / c
  let numerator = limit;
  let denominator = ratio.coefficient;
  if (ratio.exponent < 0) numerator *= 10n ** BigInt(-ratio.exponent);
  else denominator *= 10n ** BigInt(ratio.exponent);
  return (numerator + denominator - 1n) / denominator;
}
