/**
 * The resource policy for one container, as exact arithmetic on base units (millicores,
 * bytes). Pure: the same original values, settings and bounds always give the same result.
 *
 *   1. Default requests: a resource with neither a request nor a limit gets the default.
 *   2. Request-to-limit percentages (OpenShift ClusterResourceOverride):
 *        memory request = floor(memory limit × memoryRequestPercent / 100), rounded down to a
 *          whole MiB, at least 1Mi;
 *        cpu limit      = floor(memory limit / 1GiB × cpuLimitPerGiBPercent / 100 × 1000m),
 *          at least 1m;
 *        cpu request    = floor(cpu limit × cpuRequestPercent / 100), at least 1m.
 *      A container without the limit a step reads is left alone by that step.
 *   3. Bounds (LimitRange, type Container), for each resource the policy touched: a derived cpu
 *      limit is clamped into [min, max] before the cpu request is taken from it; the request is
 *      clamped into [min, max], then raised to ceil(limit / maxLimitRequestRatio) when the ratio
 *      would be exceeded; finally a request is never above its limit. A resource the policy did
 *      not touch is left as it is, even when it breaks the LimitRange (LimitRanger decides).
 */
import type { PodPolicyConfig } from './pod-policy.config.js';
import { minRequestForRatio, POLICY_RESOURCES, type ContainerBounds, type PolicyResource } from './limit-range.js';
import { parseNumber, parseResourceQuantity, type Decimal } from '../domain/quantity.js';

export type PolicyAmounts = Partial<Record<PolicyResource, bigint>>;

export interface ContainerAmounts {
  requests: PolicyAmounts;
  limits: PolicyAmounts;
}

/** The config, read once into exact values. */
export interface PolicySettings {
  defaults: PolicyAmounts;
  memoryRequestPercent?: Decimal;
  cpuLimitPerGiBPercent?: Decimal;
  cpuRequestPercent?: Decimal;
}

export const MIB = 1024n * 1024n;
export const GIB = 1024n * MIB;

export function policySettings(config: Pick<PodPolicyConfig, 'defaultRequests' | 'limitToRequest'>): PolicySettings {
  const defaults: PolicyAmounts = {};
  for (const resource of POLICY_RESOURCES) {
    const value = config.defaultRequests?.[resource];
    if (value !== undefined && value !== null) defaults[resource] = parseResourceQuantity(resource, value);
  }
  const percent = (value: number | undefined) => (value === undefined || value === null ? undefined : parseNumber(value));
  return {
    defaults,
    memoryRequestPercent: percent(config.limitToRequest?.memoryRequestPercent),
    cpuLimitPerGiBPercent: percent(config.limitToRequest?.cpuLimitPerGiBPercent),
    cpuRequestPercent: percent(config.limitToRequest?.cpuRequestPercent),
  };
}

/**
 * The settings without any step that writes one of `held`: defaults for those resources, the
 * memory request percentage for memory, the cpu limit and request percentages for cpu.
 */
export function settingsWithout(settings: PolicySettings, held: ReadonlySet<PolicyResource>): PolicySettings {
  if (held.size === 0) return settings;
  const defaults: PolicyAmounts = { ...settings.defaults };
  for (const resource of held) delete defaults[resource];
  return {
    defaults,
    memoryRequestPercent: held.has('memory') ? undefined : settings.memoryRequestPercent,
    cpuLimitPerGiBPercent: held.has('cpu') ? undefined : settings.cpuLimitPerGiBPercent,
    cpuRequestPercent: held.has('cpu') ? undefined : settings.cpuRequestPercent,
  };
}

const pow10 = (n: number) => 10n ** BigInt(n);

/** floor(amount × percent / 100 / divisor), exactly (amount ≥ 0). */
export function percentOf(amount: bigint, percent: Decimal, divisor = 1n): bigint {
  const exponent = percent.exponent - 2;
  let numerator = amount * percent.coefficient;
  let denominator = divisor;
  if (exponent >= 0) numerator *= pow10(exponent);
  else denominator *= pow10(-exponent);
  return numerator / denominator;
}

function clamp(value: bigint, min: bigint | undefined, max: bigint | undefined): bigint {
  if (max !== undefined && value > max) value = max;
  if (min !== undefined && value < min) value = min;
  return value;
}

export function applyContainerPolicy(original: ContainerAmounts, settings: PolicySettings, bounds: ContainerBounds = {}): ContainerAmounts {
  const draft: ContainerDraft = {
    requests: { ...original.requests },
    limits: { ...original.limits },
    setRequest: new Set<PolicyResource>(),
    setLimit: new Set<PolicyResource>(),
  };
  applyDefaults(draft, settings);
  applyPercentages(draft, settings, bounds);
  applyBounds(draft, bounds);
  return { requests: draft.requests, limits: draft.limits };
}

/** The amounts as the steps so far left them, and the requests and limits the policy set. */
interface ContainerDraft extends ContainerAmounts {
  setRequest: Set<PolicyResource>;
  setLimit: Set<PolicyResource>;
}

/** Step 1: a default request for each resource with neither a request nor a limit. */
function applyDefaults({ requests, limits, setRequest }: ContainerDraft, settings: PolicySettings): void {
  for (const resource of POLICY_RESOURCES) {
    const value = settings.defaults[resource];
    if (value !== undefined && requests[resource] === undefined && limits[resource] === undefined) {
      requests[resource] = value;
      setRequest.add(resource);
    }
  }
}

/** Step 2: the request-to-limit percentages, each where the limit it reads is there. */
function applyPercentages({ requests, limits, setRequest, setLimit }: ContainerDraft, settings: PolicySettings, bounds: ContainerBounds): void {
  const memoryLimit = limits.memory;
  if (memoryLimit !== undefined && settings.memoryRequestPercent !== undefined) {
    const bytes = (percentOf(memoryLimit, settings.memoryRequestPercent) / MIB) * MIB;
    requests.memory = bytes < MIB ? MIB : bytes;
    setRequest.add('memory');
  }
  if (memoryLimit !== undefined && settings.cpuLimitPerGiBPercent !== undefined) {
    const millicores = percentOf(memoryLimit * 1000n, settings.cpuLimitPerGiBPercent, GIB);
    // Clamped now, so that the cpu request below is a percentage of the limit actually written.
    limits.cpu = clamp(millicores < 1n ? 1n : millicores, bounds.cpu?.min, bounds.cpu?.max);
    setLimit.add('cpu');
  }
  if (settings.cpuRequestPercent !== undefined && limits.cpu !== undefined) {
    const millicores = percentOf(limits.cpu, settings.cpuRequestPercent);
    requests.cpu = millicores < 1n ? 1n : millicores;
    setRequest.add('cpu');
  }
}

/** Step 3: the bounds, on each resource whose request or limit the policy set. */
function applyBounds({ requests, limits, setRequest, setLimit }: ContainerDraft, bounds: ContainerBounds): void {
  for (const resource of POLICY_RESOURCES) {
    if (!setRequest.has(resource) && !setLimit.has(resource)) continue;
    const { min, max, maxLimitRequestRatio } = bounds[resource] ?? {};
    const limit = limits[resource];
    let request = requests[resource];
    if (request === undefined) continue;
    request = clamp(request, min, max);
    requests[resource] = request;
    if (limit === undefined) continue;
    if (maxLimitRequestRatio !== undefined) {
      const least = minRequestForRatio(limit, maxLimitRequestRatio);
      if (request < least) request = least;
    }
    if (request > limit) request = limit;
    requests[resource] = request;
  }
}

function sameList(a: PolicyAmounts, b: PolicyAmounts): boolean {
  return POLICY_RESOURCES.every((resource) => a[resource] === b[resource]);
}

export function sameAmounts(a: ContainerAmounts, b: ContainerAmounts): boolean {
  return sameList(a.requests, b.requests) && sameList(a.limits, b.limits);
}
