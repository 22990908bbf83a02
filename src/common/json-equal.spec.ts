import fc from 'fast-check';
import { isDeepStrictEqual } from 'node:util';
import { describe, expect, it } from 'vitest';
import { Outcomes, runs } from '../../test/support/property.js';
import { jsonEqual, jsonEqualExcept } from './json-equal.js';

/** JSON values, with keys set to undefined (as the status-coalescing rules' copies have) and -0. */
const value = fc.letrec((tie) => ({
  leaf: fc.oneof(fc.constantFrom(0, -0, 1, 'a', '', true, false, null, undefined), fc.double(), fc.string({ maxLength: 3 })),
  node: fc.oneof(
    { depthSize: 'small' },
    tie('leaf'),
    fc.array(tie('node'), { maxLength: 3 }),
    fc.dictionary(fc.constantFrom('a', 'b', 'c', '__proto__', 'time'), tie('node'), { maxKeys: 3, noNullPrototype: true }),
  ),
})).node;

/** v through JSON: -0 becomes 0 and undefined keys are dropped, the rest equal. */
const nearCopy = (v: unknown) => JSON.parse(JSON.stringify(v ?? null)) as unknown;

describe('jsonEqual', () => {
  it('gives isDeepStrictEqual’s verdict on JSON values', () => {
    // Half the pairs a value and its deep copy: two values drawn apart are equal in about 2 % of cases.
    const pair = fc.oneof(
      fc.tuple(value, value),
      value.map((a) => [a, structuredClone(a)] as const),
    );
    const seen = new Outcomes('equal', 'different');
    fc.assert(
      fc.property(pair, ([a, b]) => {
        const equal = jsonEqual(a, b);
        expect(equal).toBe(isDeepStrictEqual(a, b));
        expect(jsonEqual(a, a)).toBe(true);
        seen.add(equal ? 'equal' : 'different');
      }),
      runs(1000),
    );
    seen.expectShare('equal', 0.3);
    seen.expectShare('different', 0.3);
  });

  it('gives it on a value and its JSON round trip (equal unless -0 or an undefined key was in it)', () => {
    const seen = new Outcomes('equal', 'different');
    fc.assert(
      fc.property(value, (a) => {
        const b = nearCopy(a);
        const equal = jsonEqual(a, b);
        expect(equal).toBe(isDeepStrictEqual(a, b));
        seen.add(equal ? 'equal' : 'different');
      }),
      runs(1000),
    );
    seen.expectShare('equal', 0.2);
    seen.expectShare('different', 0.05);
  });

  it('jsonEqualExcept: jsonEqual of copies without the keys set apart', () => {
    const record = fc.dictionary(fc.constantFrom('a', 'b', 'time', '__proto__'), value, { maxKeys: 4, noNullPrototype: true });
    const apart = fc.subarray(['a', 'time', 'x']).map((keys) => new Set(keys));
    const without = (r: Record<string, unknown>, keys: Set<string>) => Object.fromEntries(Object.entries(r).filter(([key]) => !keys.has(key)));
    const seen = new Outcomes('equal', 'different');
    fc.assert(
      fc.property(record, record, apart, (a, b, keys) => {
        const equal = jsonEqualExcept(a, b, keys);
        expect(equal).toBe(isDeepStrictEqual(without(a, keys), without(b, keys)));
        expect(jsonEqualExcept(a, { ...a, time: 1 }, new Set(['time']))).toBe(true);
        seen.add(equal ? 'equal' : 'different');
      }),
      runs(1000),
    );
    seen.expectShare('equal', 0.02);
    seen.expectShare('different', 0.5);
  });

  it('tells apart what the contract names', () => {
    expect(jsonEqual(0, -0)).toBe(false);
    expect(jsonEqual(Number.NaN, Number.NaN)).toBe(true);
    expect(jsonEqual({ a: 1, b: 2 }, { b: 2, a: 1 })).toBe(true);
    expect(jsonEqual({ a: undefined }, {})).toBe(false);
    expect(jsonEqual({ a: undefined }, { a: undefined })).toBe(true);
    expect(jsonEqual([1, 2], { 0: 1, 1: 2 })).toBe(false);
    expect(jsonEqual({ 0: 1, 1: 2 }, [1, 2])).toBe(false);
    expect(jsonEqual([[1], { a: [null] }], [[1], { a: [null] }])).toBe(true);
    expect(jsonEqual(JSON.parse('{"__proto__":1}'), JSON.parse('{"__proto__":2}'))).toBe(false);
    expect(jsonEqual(JSON.parse('{"__proto__":1}'), {})).toBe(false);
  });
});
