import fc from 'fast-check';
import { isDeepStrictEqual } from 'node:util';
import { describe, expect, it } from 'vitest';
import { Outcomes, runs } from '../../test/support/property.js';
import { parseNumber, parseQuantity } from '../domain/quantity.js';
import { applyContainerPolicy, GIB, MIB, percentOf, policySettings, settingsWithout, type ContainerAmounts, type PolicySettings } from './container-policy.js';
import type { ContainerBounds } from './limit-range.js';

const Mi = (n: number) => BigInt(n) * MIB;

function settings(s: {
  cpu?: string;
  memory?: string;
  memoryRequestPercent?: number;
  cpuLimitPerGiBPercent?: number;
  cpuRequestPercent?: number;
}): PolicySettings {
  return policySettings({
    defaultRequests: { cpu: s.cpu, memory: s.memory },
    limitToRequest: { memoryRequestPercent: s.memoryRequestPercent, cpuLimitPerGiBPercent: s.cpuLimitPerGiBPercent, cpuRequestPercent: s.cpuRequestPercent },
  });
}

const CRO = settings({ memoryRequestPercent: 50, cpuLimitPerGiBPercent: 200, cpuRequestPercent: 25 });

describe('applyContainerPolicy: defaults', () => {
  const defaults = settings({ cpu: '100m', memory: '128Mi' });

  it('gives a container with no requests and no limits the default requests', () => {
    expect(applyContainerPolicy({ requests: {}, limits: {} }, defaults)).toEqual({ requests: { cpu: 100n, memory: Mi(128) }, limits: {} });
  });

  it('per resource: a resource with a request or a limit keeps it', () => {
    expect(applyContainerPolicy({ requests: { cpu: 50n }, limits: {} }, defaults)).toEqual({ requests: { cpu: 50n, memory: Mi(128) }, limits: {} });
    // A limit without request is impossible after API defaulting (request = limit), but still counts as "set".
    expect(applyContainerPolicy({ requests: {}, limits: { memory: Mi(64) } }, defaults)).toEqual({ requests: { cpu: 100n }, limits: { memory: Mi(64) } });
  });

  it('clamps a default into the LimitRange [min, max]', () => {
    const bounds: ContainerBounds = { cpu: { min: 200n }, memory: { max: Mi(64) } };
    expect(applyContainerPolicy({ requests: {}, limits: {} }, defaults, bounds)).toEqual({ requests: { cpu: 200n, memory: Mi(64) }, limits: {} });
  });

  it('leaves everything alone with no settings', () => {
    const original: ContainerAmounts = { requests: { cpu: 1n }, limits: { memory: 5n } };
    expect(applyContainerPolicy(original, settings({}))).toEqual(original);
  });
});

describe('applyContainerPolicy: ClusterResourceOverride percentages', () => {
  it('memory request 50%, cpu limit 200% per GiB, cpu request 25% of it', () => {
    const out = applyContainerPolicy({ requests: { cpu: 250n, memory: Mi(512) }, limits: { memory: GIB } }, CRO);
    expect(out).toEqual({ requests: { memory: Mi(512), cpu: 500n }, limits: { memory: GIB, cpu: 2000n } });
  });

  it('overrides the request both ways, as CRO does (it is the limit that counts)', () => {
    expect(applyContainerPolicy({ requests: { memory: GIB }, limits: { memory: GIB } }, settings({ memoryRequestPercent: 25 })).requests.memory).toBe(Mi(256));
    expect(applyContainerPolicy({ requests: { memory: Mi(1) }, limits: { memory: GIB } }, settings({ memoryRequestPercent: 25 })).requests.memory).toBe(
      Mi(256),
    );
  });

  it('rounds the memory request down to a whole MiB, at least 1Mi', () => {
    // 1G (decimal) × 50% = 500000000 bytes = 476.837 MiB → 476Mi.
    const decimal = applyContainerPolicy({ requests: {}, limits: { memory: 1_000_000_000n } }, settings({ memoryRequestPercent: 50 }));
    expect(decimal.requests.memory).toBe(Mi(476));
    const tiny = applyContainerPolicy({ requests: {}, limits: { memory: Mi(1) } }, settings({ memoryRequestPercent: 10 }));
    expect(tiny.requests.memory).toBe(Mi(1));
    // Below 1Mi the request is capped by the limit.
    const subMi = applyContainerPolicy({ requests: {}, limits: { memory: 1000n } }, settings({ memoryRequestPercent: 10 }));
    expect(subMi.requests.memory).toBe(1000n);
  });

  it('is exact where floating point is not: 3 cores × 29.1% = 873m (3000 × 0.291 = 872.999… in a double)', () => {
    expect(3000 * 0.291).toBeLessThan(873);
    const out = applyContainerPolicy({ requests: {}, limits: { cpu: 3000n } }, settings({ cpuRequestPercent: 29.1 }));
    expect(out.requests.cpu).toBe(873n);
  });

  it('derives the cpu limit in millicores from the memory limit: 100% = 1 core per GiB', () => {
    const pct = (memory: bigint, percent: number) =>
      applyContainerPolicy({ requests: {}, limits: { memory } }, settings({ cpuLimitPerGiBPercent: percent })).limits.cpu;
    expect(pct(GIB, 100)).toBe(1000n);
    expect(pct(Mi(512), 100)).toBe(500n);
    expect(pct(Mi(300), 100)).toBe(292n); // 300/1024 × 1000 = 292.97 → 292m
    expect(pct(Mi(1), 10)).toBe(1n); // 0.097m → at least 1m
    expect(pct(4n * GIB, 12.5)).toBe(500n);
  });

  it('a cpu request derived from the derived cpu limit, at least 1m', () => {
    const out = applyContainerPolicy({ requests: {}, limits: { memory: Mi(16) } }, settings({ cpuLimitPerGiBPercent: 10, cpuRequestPercent: 1 }));
    expect(out.limits.cpu).toBe(1n);
    expect(out.requests.cpu).toBe(1n);
  });

  it('leaves containers without limits untouched', () => {
    const original: ContainerAmounts = { requests: { cpu: 250n, memory: Mi(256) }, limits: {} };
    expect(applyContainerPolicy(original, CRO)).toEqual(original);
  });

  it('lowers a user cpu request above a derived cpu limit to the limit', () => {
    const out = applyContainerPolicy({ requests: { cpu: 4000n, memory: Mi(512) }, limits: { memory: Mi(512) } }, settings({ cpuLimitPerGiBPercent: 100 }));
    expect(out).toEqual({ requests: { cpu: 500n, memory: Mi(512) }, limits: { memory: Mi(512), cpu: 500n } });
  });
});

describe('applyContainerPolicy: LimitRange clamps', () => {
  it('raises a request to the LimitRange min, and never above the limit', () => {
    const bounds: ContainerBounds = { memory: { min: Mi(300) } };
    const out = applyContainerPolicy({ requests: {}, limits: { memory: Mi(512) } }, settings({ memoryRequestPercent: 10 }), bounds);
    expect(out.requests.memory).toBe(Mi(300));
    const over = applyContainerPolicy({ requests: {}, limits: { memory: Mi(200) } }, settings({ memoryRequestPercent: 10 }), bounds);
    expect(over.requests.memory).toBe(Mi(200));
  });

  it('clamps a derived cpu limit to the LimitRange max, and takes the cpu request from the clamped limit', () => {
    const bounds: ContainerBounds = { cpu: { max: 2000n } };
    const out = applyContainerPolicy({ requests: {}, limits: { memory: 8n * GIB } }, CRO, bounds);
    expect(out.limits.cpu).toBe(2000n);
    expect(out.requests.cpu).toBe(500n);
  });

  it('keeps limit / request within maxLimitRequestRatio', () => {
    const bounds: ContainerBounds = { memory: { maxLimitRequestRatio: parseQuantity('4') }, cpu: { maxLimitRequestRatio: parseQuantity('1.5') } };
    const out = applyContainerPolicy(
      { requests: {}, limits: { memory: GIB, cpu: 1000n } },
      settings({ memoryRequestPercent: 10, cpuRequestPercent: 10 }),
      bounds,
    );
    expect(out.requests.memory).toBe(Mi(256)); // 1Gi / 4
    expect(out.requests.cpu).toBe(667n); // ceil(1000 / 1.5)
  });
});

describe('percentOf', () => {
  it('is floor(amount × percent / 100 / divisor), exactly', () => {
    const seen = new Outcomes('exact', 'rounded down');
    fc.assert(
      fc.property(fc.bigInt({ min: 0n, max: 1n << 50n }), fc.integer({ min: 1, max: 10_000 }), fc.integer({ min: 0, max: 3 }), (amount, scaled, decimals) => {
        // percent = scaled / 10^decimals
        const percent = parseNumber(Number((scaled / 10 ** decimals).toFixed(decimals)));
        const expected = (amount * BigInt(scaled)) / (100n * 10n ** BigInt(decimals));
        expect(percentOf(amount, percent)).toBe(expected);
        seen.add((amount * BigInt(scaled)) % (100n * 10n ** BigInt(decimals)) === 0n ? 'exact' : 'rounded down');
      }),
      // About 3.5 % exact: 1,000 runs see some.
      runs(1000),
    );
    seen.expectEach();
  });
});

// ---- properties ----------------------------------------------------------------------------

const maybe = <T>(arb: fc.Arbitrary<T>) => fc.option(arb, { nil: undefined });
const cpuAmount = fc.bigInt({ min: 1n, max: 64_000n });
const memAmount = fc.oneof(
  fc.bigInt({ min: 1n, max: 256n * GIB }),
  fc.integer({ min: 1, max: 65_536 }).map((n) => BigInt(n) * MIB),
);
const percent = fc.oneof(
  fc.integer({ min: 1, max: 100 }),
  fc.integer({ min: 10, max: 1000 }).map((n) => n / 10),
);

/** A container after API defaulting: a limit without request has request = limit; request ≤ limit. */
const containerArb: fc.Arbitrary<ContainerAmounts> = fc
  .record({ cpuReq: maybe(cpuAmount), cpuLim: maybe(cpuAmount), memReq: maybe(memAmount), memLim: maybe(memAmount) })
  .map(({ cpuReq, cpuLim, memReq, memLim }) => {
    const fix = (req: bigint | undefined, lim: bigint | undefined) => (lim === undefined ? req : req === undefined || req > lim ? lim : req);
    const requests: ContainerAmounts['requests'] = {};
    const limits: ContainerAmounts['limits'] = {};
    const cpu = fix(cpuReq, cpuLim);
    const memory = fix(memReq, memLim);
    if (cpu !== undefined) requests.cpu = cpu;
    if (memory !== undefined) requests.memory = memory;
    if (cpuLim !== undefined) limits.cpu = cpuLim;
    if (memLim !== undefined) limits.memory = memLim;
    return { requests, limits };
  });

const settingsArb: fc.Arbitrary<PolicySettings> = fc
  .record({
    cpu: maybe(cpuAmount),
    memory: maybe(memAmount),
    memoryRequestPercent: maybe(percent),
    cpuLimitPerGiBPercent: maybe(fc.integer({ min: 1, max: 1000 })),
    cpuRequestPercent: maybe(percent),
  })
  .map((s) =>
    policySettings({
      defaultRequests: { cpu: s.cpu === undefined ? undefined : `${s.cpu}m`, memory: s.memory === undefined ? undefined : `${s.memory}` },
      limitToRequest: { memoryRequestPercent: s.memoryRequestPercent, cpuLimitPerGiBPercent: s.cpuLimitPerGiBPercent, cpuRequestPercent: s.cpuRequestPercent },
    }),
  );

const boundsArb: fc.Arbitrary<ContainerBounds> = fc
  .record({
    cpuMin: maybe(fc.bigInt({ min: 1n, max: 1000n })),
    cpuSpan: maybe(fc.bigInt({ min: 0n, max: 64_000n })),
    memMin: maybe(fc.integer({ min: 1, max: 1024 }).map((n) => BigInt(n) * MIB)),
    memSpan: maybe(fc.bigInt({ min: 0n, max: 64n * GIB })),
    cpuRatio: maybe(fc.constantFrom('1', '1.5', '2', '4', '10')),
    memRatio: maybe(fc.constantFrom('1', '1.25', '2', '3')),
  })
  .map(({ cpuMin, cpuSpan, memMin, memSpan, cpuRatio, memRatio }) => {
    const bounds: ContainerBounds = { cpu: {}, memory: {} };
    if (cpuMin !== undefined) bounds.cpu!.min = cpuMin;
    if (cpuSpan !== undefined) bounds.cpu!.max = (cpuMin ?? 1n) + cpuSpan;
    if (memMin !== undefined) bounds.memory!.min = memMin;
    if (memSpan !== undefined) bounds.memory!.max = (memMin ?? 1n) + memSpan;
    if (cpuRatio) bounds.cpu!.maxLimitRequestRatio = parseQuantity(cpuRatio);
    if (memRatio) bounds.memory!.maxLimitRequestRatio = parseQuantity(memRatio);
    return bounds;
  });

describe('applyContainerPolicy properties', () => {
  it('is idempotent: applying it to its own output changes nothing', () => {
    const seen = new Outcomes('changed', 'left as it was');
    fc.assert(
      fc.property(containerArb, settingsArb, boundsArb, (container, s, bounds) => {
        const once = applyContainerPolicy(container, s, bounds);
        expect(applyContainerPolicy(once, s, bounds)).toEqual(once);
        seen.add(isDeepStrictEqual(once, container) ? 'left as it was' : 'changed');
      }),
      runs(2000),
    );
    // About 92 % changed (two seeds).
    seen.expectShare('changed', 0.5);
    seen.expectShare('left as it was', 0.02);
  });

  it('never writes a request above its limit, never removes a value, never touches a memory limit', () => {
    // Per resource: the request or limit the policy changed, and the pairs it left both set.
    const seen = new Outcomes('request changed', 'limit added', 'request and limit both set');
    fc.assert(
      fc.property(containerArb, settingsArb, boundsArb, (container, s, bounds) => {
        const out = applyContainerPolicy(container, s, bounds);
        for (const r of ['cpu', 'memory'] as const) {
          if (out.requests[r] !== undefined && out.limits[r] !== undefined) expect(out.requests[r]! <= out.limits[r]!).toBe(true);
          if (container.requests[r] !== undefined) expect(out.requests[r]).toBeDefined();
          if (container.limits[r] !== undefined) expect(out.limits[r]).toBeDefined();
          if (out.requests[r] !== container.requests[r]) seen.add('request changed');
          if (out.limits[r] !== container.limits[r]) seen.add('limit added');
          if (out.requests[r] !== undefined && out.limits[r] !== undefined) seen.add('request and limit both set');
        }
        expect(out.limits.memory).toBe(container.limits.memory);
      }),
      runs(2000),
    );
    seen.expectEach();
  });

  it('respects the LimitRange whenever the limit allows it', () => {
    // Per changed request, each bound it was checked against.
    const seen = new Outcomes('min', 'max', 'max exceeded through the ratio', 'maxLimitRequestRatio');
    const parameters = runs(2000);
    fc.assert(
      fc.property(containerArb, settingsArb, boundsArb, (container, s, bounds) => {
        const out = applyContainerPolicy(container, s, bounds);
        for (const r of ['cpu', 'memory'] as const) {
          const { min, max, maxLimitRequestRatio } = bounds[r] ?? {};
          const changed = out.requests[r] !== container.requests[r];
          const request = out.requests[r];
          const limit = out.limits[r];
          if (!changed || request === undefined) continue;
          const ceiling = limit === undefined ? max : max === undefined ? limit : limit < max ? limit : max;
          if (min !== undefined && (ceiling === undefined || min <= ceiling)) {
            expect(request >= min).toBe(true);
            seen.add('min');
          }
          if (max !== undefined) seen.add(request > max ? 'max exceeded through the ratio' : 'max');
          if (max !== undefined && request > max) {
            // Only the ratio can push a request above max (an unsatisfiable LimitRange).
            expect(maxLimitRequestRatio).toBeDefined();
          }
          if (maxLimitRequestRatio !== undefined && limit !== undefined) {
            seen.add('maxLimitRequestRatio');
            // limit / request ≤ ratio  ⇔  limit × 10^-e ≤ request × c
            const { coefficient, exponent } = maxLimitRequestRatio;
            const lhs = exponent < 0 ? limit * 10n ** BigInt(-exponent) : limit;
            const rhs = exponent < 0 ? request * coefficient : request * coefficient * 10n ** BigInt(exponent);
            expect(lhs <= rhs || request === limit).toBe(true);
          }
        }
      }),
      parameters,
    );
    seen.expectPerRun('min', 0.1, parameters);
    seen.expectPerRun('max', 0.1, parameters);
    seen.expectPerRun('maxLimitRequestRatio', 0.1, parameters);
    seen.expectEach();
  });

  it('matches CRO arithmetic exactly without bounds (integer percentages)', () => {
    const seen = new Outcomes('memory request a percentage', 'memory request at its 1 MiB floor');
    fc.assert(
      fc.property(memAmount, fc.integer({ min: 1, max: 100 }), fc.integer({ min: 1, max: 1000 }), fc.integer({ min: 1, max: 100 }), (memLimit, m, c, r) => {
        const out = applyContainerPolicy(
          { requests: {}, limits: { memory: memLimit } },
          settings({ memoryRequestPercent: m, cpuLimitPerGiBPercent: c, cpuRequestPercent: r }),
        );
        const memRequest = ((memLimit * BigInt(m)) / 100n / MIB) * MIB;
        expect(out.requests.memory).toBe(memRequest < MIB ? (memLimit < MIB ? memLimit : MIB) : memRequest);
        const cpuLimit = (memLimit * 1000n * BigInt(c)) / (100n * GIB);
        const cpuLimitFloor = cpuLimit < 1n ? 1n : cpuLimit;
        expect(out.limits.cpu).toBe(cpuLimitFloor);
        const cpuRequest = (cpuLimitFloor * BigInt(r)) / 100n;
        expect(out.requests.cpu).toBe(cpuRequest < 1n ? 1n : cpuRequest);
        seen.add(memRequest < MIB ? 'memory request at its 1 MiB floor' : 'memory request a percentage');
      }),
      runs(100),
    );
    seen.expectEach();
  });

  it('fills only absent resources with defaults', () => {
    // Per resource: a default written, or the container's own request kept.
    const seen = new Outcomes('default written', 'request kept');
    // Each resource absent (no request, no limit) half the time: containerArb alone leaves both out in 3 % of cases.
    const sparse = fc.tuple(containerArb, fc.subarray(['cpu', 'memory'] as const)).map(([container, absent]) => {
      const out = structuredClone(container);
      for (const r of absent) {
        delete out.requests[r];
        delete out.limits[r];
      }
      return out;
    });
    fc.assert(
      fc.property(sparse, cpuAmount, memAmount, (container, cpu, memory) => {
        const out = applyContainerPolicy(container, policySettings({ defaultRequests: { cpu: `${cpu}m`, memory: `${memory}` } }));
        expect(out.requests.cpu).toBe(container.requests.cpu ?? container.limits.cpu ?? cpu);
        expect(out.requests.memory).toBe(container.requests.memory ?? container.limits.memory ?? memory);
        expect(out.limits).toEqual(container.limits);
        for (const r of ['cpu', 'memory'] as const) seen.add(container.requests[r] === undefined ? 'default written' : 'request kept');
      }),
      runs(100),
    );
    // About 40 % written (two seeds).
    seen.expectShare('default written', 0.2);
    seen.expectShare('request kept', 0.3);
  });
});

describe('container policy: edges found by mutation testing', () => {
  const all = policySettings({
    defaultRequests: { cpu: '100m', memory: '128Mi' },
    limitToRequest: { memoryRequestPercent: 50, cpuLimitPerGiBPercent: 200, cpuRequestPercent: 25 },
  });

  it('settingsWithout drops every step that writes a held resource, and only those', () => {
    expect(settingsWithout(all, new Set())).toBe(all);
    expect(settingsWithout(all, new Set(['memory']))).toEqual({
      defaults: { cpu: 100n },
      memoryRequestPercent: undefined,
      cpuLimitPerGiBPercent: all.cpuLimitPerGiBPercent,
      cpuRequestPercent: all.cpuRequestPercent,
    });
    expect(settingsWithout(all, new Set(['cpu']))).toEqual({
      defaults: { memory: Mi(128) },
      memoryRequestPercent: all.memoryRequestPercent,
      cpuLimitPerGiBPercent: undefined,
      cpuRequestPercent: undefined,
    });
  });

  it('percentOf with a percentage of 100 × 10^k written as an exponent', () => {
    expect(percentOf(7n, parseQuantity('1e3'))).toBe(70n);
    expect(percentOf(7n, parseQuantity('1e3'), 3n)).toBe(23n);
    expect(percentOf(7n, parseQuantity('1e2'))).toBe(7n);
  });

  it('a value between the LimitRange min and max is kept as it is', () => {
    const bounds: ContainerBounds = { memory: { min: Mi(100), max: GIB }, cpu: { min: 100n, max: 4000n } };
    const out = applyContainerPolicy({ requests: {}, limits: { memory: GIB } }, all, bounds);
    expect(out).toEqual({ requests: { memory: Mi(512), cpu: 500n }, limits: { memory: GIB, cpu: 2000n } });
  });
});
