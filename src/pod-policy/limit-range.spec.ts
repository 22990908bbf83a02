import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { Outcomes, runs } from '../../test/support/property.js';
import { parseQuantity } from '../domain/quantity.js';
import { containerBounds, minRequestForRatio, type LimitRangeLike } from './limit-range.js';

const Mi = (n: number) => BigInt(n) * 1024n * 1024n;

function limitRange(name: string, limits: NonNullable<LimitRangeLike['spec']>['limits']): LimitRangeLike {
  return { metadata: { name, namespace: 'shop' }, spec: { limits } };
}

describe('containerBounds', () => {
  it('reads the Container items of a namespace LimitRange, ignoring Pod and PVC items', () => {
    const bounds = containerBounds([
      limitRange('defaults', [
        { type: 'Container', min: { cpu: '50m', memory: '32Mi' }, max: { cpu: '4', memory: '8Gi' }, maxLimitRequestRatio: { cpu: '10' } },
        { type: 'Pod', max: { cpu: '1m', memory: '1Mi' } },
        { type: 'PersistentVolumeClaim', min: { storage: '1Gi' } },
      ]),
    ]);
    expect(bounds).toEqual({
      cpu: { min: 50n, max: 4000n, maxLimitRequestRatio: parseQuantity('10') },
      memory: { min: Mi(32), max: Mi(8192) },
    });
  });

  it('takes the tightest bound over several LimitRanges and items', () => {
    const bounds = containerBounds([
      limitRange('a', [{ type: 'Container', min: { memory: '64Mi' }, max: { memory: '4Gi' }, maxLimitRequestRatio: { memory: '4' } }]),
      limitRange('b', [{ type: 'Container', min: { memory: '32Mi' }, max: { memory: '2Gi' }, maxLimitRequestRatio: { memory: '2.5' } }]),
    ]);
    expect(bounds.memory).toEqual({ min: Mi(64), max: Mi(2048), maxLimitRequestRatio: parseQuantity('2.5') });
    expect(bounds.cpu).toBeUndefined();
  });

  it('ignores values it cannot read rather than failing the pod', () => {
    const bounds = containerBounds([
      limitRange('bad', [{ type: 'Container', min: { cpu: 'lots' }, max: { memory: '1Gi' }, maxLimitRequestRatio: { cpu: '0' } }]),
    ]);
    expect(bounds).toEqual({ memory: { max: Mi(1024) } });
    expect(containerBounds([{}, { spec: {} }])).toEqual({});
  });
});

describe('minRequestForRatio', () => {
  it('is the least request r with limit / r ≤ ratio', () => {
    expect(minRequestForRatio(1000n, parseQuantity('1.5'))).toBe(667n);
    expect(minRequestForRatio(1000n, parseQuantity('2'))).toBe(500n);
    expect(minRequestForRatio(1000n, parseQuantity('3'))).toBe(334n);
    expect(minRequestForRatio(1n, parseQuantity('10'))).toBe(1n);
    const seen = new Outcomes('exact', 'rounded up', 'at its floor of 1');
    fc.assert(
      fc.property(fc.bigInt({ min: 1n, max: 1n << 40n }), fc.integer({ min: 1, max: 100_000 }), (limit, scaled) => {
        const ratio = parseQuantity((scaled / 1000).toString());
        const r = minRequestForRatio(limit, ratio);
        // limit / r ≤ ratio, and limit / (r - 1) > ratio — with ratio = scaled / 1000.
        expect(limit * 1000n <= r * BigInt(scaled)).toBe(true);
        if (r > 1n) expect(limit * 1000n > (r - 1n) * BigInt(scaled)).toBe(true);
        seen.add(r === 1n ? 'at its floor of 1' : limit * 1000n === r * BigInt(scaled) ? 'exact' : 'rounded up');
      }),
      runs(300),
    );
    seen.expectEach();
  });
});

describe('limit ranges: edges found by mutation testing (docs/testing.md)', () => {
  it('reads quantities and ratios given as JSON numbers; skips an item that is null and one without max or ratio', () => {
    const bounds = containerBounds([
      limitRange('numbers', [
        null as never,
        { type: 'Container', min: { cpu: 1 }, maxLimitRequestRatio: { cpu: 2 } },
        { type: 'Container', max: { memory: 1024 } },
      ]),
    ]);
    expect(bounds).toEqual({ cpu: { min: 1000n, maxLimitRequestRatio: parseQuantity('2') }, memory: { max: 1024n } });
  });

  it('the tightest bound wins whichever LimitRange comes first', () => {
    const bounds = containerBounds([
      limitRange('b', [{ type: 'Container', min: { memory: '32Mi' }, max: { memory: '2Gi' }, maxLimitRequestRatio: { memory: '2.5' } }]),
      limitRange('a', [{ type: 'Container', min: { memory: '64Mi' }, max: { memory: '4Gi' }, maxLimitRequestRatio: { memory: '4' } }]),
    ]);
    expect(bounds.memory).toEqual({ min: Mi(64), max: Mi(2048), maxLimitRequestRatio: parseQuantity('2.5') });
  });

  it('minRequestForRatio of a ratio with a positive exponent (2k)', () => {
    expect(minRequestForRatio(10_000n, parseQuantity('2k'))).toBe(5n);
    expect(minRequestForRatio(10_001n, parseQuantity('2k'))).toBe(6n);
  });
});
