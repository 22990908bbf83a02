import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { Outcomes, runs } from '../../test/support/property.js';
import {
  baseAmountToNumber,
  compareDecimal,
  type Decimal,
  formatResourceQuantity,
  milliValue,
  multiplyFloor,
  parseNumber,
  parseQuantity,
  parseResourceQuantity,
  QuantityFormatError,
  unitValue,
} from './quantity.js';

const dec = (coefficient: bigint, exponent: number): Decimal => ({ coefficient, exponent });
const sameValue = (a: Decimal, b: Decimal) => compareDecimal(a, b) === 0;

describe('parseQuantity', () => {
  // [text, millicores (MilliValue), units (Value)]
  const table: Array<[string, bigint, bigint]> = [
    ['4', 4000n, 4n],
    ['0', 0n, 0n],
    ['-0', 0n, 0n],
    ['47438335103', 47438335103000n, 47438335103n],
    ['3900m', 3900n, 4n],
    ['100m', 100n, 1n],
    ['1.5G', 1_500_000_000_000n, 1_500_000_000n],
    ['16318064Ki', 16318064n * 1024n * 1000n, 16709697536n],
    ['1.5Gi', 1610612736000n, 1610612736n],
    ['1Ki', 1024000n, 1024n],
    ['1Mi', 1048576000n, 1048576n],
    ['1Ti', 1099511627776000n, 1099511627776n],
    ['1Pi', 1125899906842624000n, 1125899906842624n],
    ['1Ei', 1152921504606846976000n, 1152921504606846976n],
    ['1e3', 1_000_000n, 1000n],
    ['1E3', 1_000_000n, 1000n],
    ['1e+3', 1_000_000n, 1000n],
    ['12e-3', 12n, 1n],
    ['1.5e3', 1_500_000n, 1500n],
    ['0.5', 500n, 1n],
    ['.5', 500n, 1n],
    ['5.', 5000n, 5n],
    ['+5', 5000n, 5n],
    ['-5', -5000n, -5n],
    ['-1.5', -1500n, -2n], // rounded away from zero, like resource.Quantity
    ['0.1m', 1n, 1n], // sub-milli rounds up: Quantity.MilliValue
    ['0.0001', 1n, 1n],
    ['100n', 1n, 1n],
    ['1u', 1n, 1n],
    ['1000u', 1n, 1n],
    ['1001u', 2n, 1n],
    ['1n', 1n, 1n],
    ['1k', 1_000_000n, 1000n],
    ['1M', 1_000_000_000n, 1_000_000n],
    ['1T', 10n ** 15n, 10n ** 12n],
    ['1P', 10n ** 18n, 10n ** 15n],
    ['1E', 10n ** 21n, 10n ** 18n], // "E" alone is exa; "E3" is an exponent
    ['007', 7000n, 7n],
    ['0.000000001', 1n, 1n],
    ['9223372036854775807', 9223372036854775807000n, 9223372036854775807n],
  ];
  it.each(table)('%s → %s millis, %s units', (text, millis, units) => {
    const value = parseQuantity(text);
    expect(milliValue(value)).toBe(millis);
    expect(unitValue(value)).toBe(units);
  });

  it('is exact: no floating point anywhere', () => {
    expect(parseQuantity('0.1')).toEqual(dec(1n, -1));
    expect(parseQuantity('1.5Gi')).toEqual(dec(15n * 2n ** 30n, -1));
    expect(parseQuantity('12e-3')).toEqual(dec(12n, -3));
    expect(sameValue(parseQuantity('4000m'), parseQuantity('4'))).toBe(true);
    expect(sameValue(parseQuantity('1Ki'), parseQuantity('1024'))).toBe(true);
    expect(sameValue(parseQuantity('1.024k'), parseQuantity('1Ki'))).toBe(true);
    expect(sameValue(parseQuantity('1e3'), parseQuantity('1k'))).toBe(true);
    expect(compareDecimal(parseQuantity('999m'), parseQuantity('1'))).toBe(-1);
  });

  const malformed = [
    '',
    ' 1',
    '1 ',
    '1KiB',
    '1K',
    '1ki',
    '1mi',
    'e3',
    '1e',
    '1e3.5',
    '1e3Ki',
    '1.2.3',
    '--1',
    '+-1',
    '-',
    '.',
    '+.',
    'abc',
    '1Gi3',
    '0x10',
    '1,5',
    'NaN',
    'Infinity',
    '1e1001',
    '1e-1001',
    '1'.repeat(200),
    '４', // a full-width digit
  ];
  it.each(malformed)('rejects %j with a clear error', (text) => {
    expect(() => parseQuantity(text)).toThrow(QuantityFormatError);
    expect(() => parseQuantity(text)).toThrow(/^invalid quantity /);
  });

  it('rejects non-strings and non-finite numbers', () => {
    expect(() => parseQuantity(4 as unknown as string)).toThrow(QuantityFormatError);
    expect(() => parseNumber(Number.NaN)).toThrow(/not a finite number/);
    expect(() => parseNumber(Number.POSITIVE_INFINITY)).toThrow(/not a finite number/);
  });
});

describe('parseResourceQuantity', () => {
  it('converts to the base unit of each resource', () => {
    expect(parseResourceQuantity('cpu', '3900m')).toBe(3900n);
    expect(parseResourceQuantity('cpu', '4')).toBe(4000n);
    expect(parseResourceQuantity('cpu', '0.0001')).toBe(1n);
    expect(parseResourceQuantity('memory', '16318064Ki')).toBe(16709697536n);
    expect(parseResourceQuantity('memory', '0.5')).toBe(1n);
    expect(parseResourceQuantity('ephemeral-storage', '47438335103')).toBe(47438335103n);
    expect(parseResourceQuantity('pods', '110')).toBe(110n);
    expect(parseResourceQuantity('hugepages-2Mi', '2Mi')).toBe(2097152n);
    expect(parseResourceQuantity('nvidia.com/gpu', '1')).toBe(1n);
    expect(parseResourceQuantity('cpu', 4)).toBe(4000n); // a JSON number where a string belongs
    expect(parseResourceQuantity('cpu', 0.5)).toBe(500n);
  });
});

describe('formatResourceQuantity', () => {
  const resources: Array<[string, bigint, string]> = [
    ['cpu', 3450n, '3450m'],
    ['cpu', 3000n, '3'],
    ['cpu', 0n, '0'],
    ['cpu', 1n, '1m'],
    ['cpu', 64000n, '64'],
    ['memory', 16709697536n, '16318064Ki'],
    ['memory', 1073741824n, '1Gi'],
    ['memory', 34254879948n, '34254879948'],
    ['memory', 1023n, '1023'],
    ['memory', 0n, '0'],
    ['memory', 2n ** 70n, '1024Ei'],
    ['ephemeral-storage', 47438335103n, '47438335103'],
    ['ephemeral-storage', 52710309888n, '51474912Ki'],
    ['pods', 110n, '110'],
    ['pods', 1024n, '1024'],
  ];
  it.each(resources)('formatResourceQuantity(%s, %s) = %s', (resource, amount, formatted) => {
    expect(formatResourceQuantity(resource, amount)).toBe(formatted);
    expect(parseResourceQuantity(resource, formatted)).toBe(amount);
  });

  it('exports cpu in cores and the rest as is', () => {
    expect(baseAmountToNumber('cpu', 3450n)).toBe(3.45);
    expect(baseAmountToNumber('memory', 16709697536n)).toBe(16709697536);
  });
});

describe('exact ratios', () => {
  it('1.15 × 3 CPUs = 3450m, never 3449m', () => {
    expect(3000 * 1.15).toBeLessThan(3450); // what floating point would have done
    expect(multiplyFloor(parseResourceQuantity('cpu', '3'), 1.15)).toBe(3450n);
    expect(formatResourceQuantity('cpu', multiplyFloor(parseResourceQuantity('cpu', '3'), 1.15))).toBe('3450m');
  });

  it('2.05 × "16318064Ki" is exact to the byte', () => {
    const bytes = parseResourceQuantity('memory', '16318064Ki');
    const expected = (16318064n * 1024n * 205n) / 100n; // 34254879948.8 → floor
    expect(multiplyFloor(bytes, 2.05)).toBe(expected);
    expect(expected).toBe(34254879948n);
    // Where floating point is one byte short: 16318000Ki × 2.05 = 34254745600 exactly.
    expect(Math.floor(16318000 * 1024 * 2.05)).toBe(34254745599);
    expect(multiplyFloor(parseResourceQuantity('memory', '16318000Ki'), 2.05)).toBe(34254745600n);
  });

  it('reads a JS number as its shortest decimal string', () => {
    expect(parseNumber(1.15)).toEqual(dec(115n, -2));
    expect(parseNumber(3)).toEqual(dec(3n, 0));
    expect(parseNumber(1e-7)).toEqual(dec(1n, -7));
    expect(parseNumber(1.2e21)).toEqual(dec(12n, 20));
    expect(multiplyFloor(7n, dec(15n, -1))).toBe(10n);
    expect(multiplyFloor(-7n, 1.5)).toBe(-11n);
  });

  it('floor(raw × k/100) for every ratio in [1, 10] with up to 2 decimals', () => {
    const seen = new Outcomes('exact', 'rounded down');
    fc.assert(
      fc.property(fc.integer({ min: 100, max: 1000 }), fc.bigInt({ min: 0n, max: 2n ** 64n }), (k, raw) => {
        expect(multiplyFloor(raw, k / 100)).toBe((raw * BigInt(k)) / 100n);
        seen.add((raw * BigInt(k)) % 100n === 0n ? 'exact' : 'rounded down');
      }),
      runs(2000),
    );
    // About 7.5 % exact (three seeds).
    seen.expectShare('exact', 0.03);
    seen.expectShare('rounded down', 0.5);
  });
});

describe('properties', () => {
  const digits = fc.stringMatching(/^[0-9]{1,12}$/);
  const quantityText = fc
    .record({
      sign: fc.constantFrom('', '+', '-'),
      whole: fc.option(digits, { nil: undefined }),
      fraction: fc.option(fc.stringMatching(/^[0-9]{0,9}$/), { nil: undefined }),
      suffix: fc.oneof(
        fc.constantFrom('', 'n', 'u', 'm', 'k', 'M', 'G', 'T', 'P', 'E', 'Ki', 'Mi', 'Gi', 'Ti', 'Pi', 'Ei'),
        fc.tuple(fc.constantFrom('e', 'E'), fc.constantFrom('', '+', '-'), fc.integer({ min: 0, max: 30 })).map(([e, s, n]) => `${e}${s}${n}`),
      ),
    })
    .filter(({ whole, fraction }) => (whole ?? '') + (fraction ?? '') !== '')
    .map(({ sign, whole, fraction, suffix }) => `${sign}${whole ?? ''}${fraction === undefined ? '' : `.${fraction}`}${suffix}`)
    .filter((text) => !/^[+-]?\.$/.test(text.replace(/[a-zA-Z].*$/, '')));

  it('MilliValue and Value are the ceiling (away from zero) of the exact value', () => {
    const seen = new Outcomes('positive, rounded', 'negative, rounded', 'exact');
    fc.assert(
      fc.property(quantityText, (text) => {
        const value = parseQuantity(text);
        const exact = compareDecimal(dec(unitValue(value), 0), value) === 0;
        seen.add(exact ? 'exact' : value.coefficient >= 0n ? 'positive, rounded' : 'negative, rounded');
        for (const [scale, round] of [
          [3, milliValue],
          [0, unitValue],
        ] as const) {
          const n = round(value);
          const atN = dec(n, -scale);
          if (value.coefficient >= 0n) {
            expect(compareDecimal(atN, value)).toBeGreaterThanOrEqual(0);
            expect(compareDecimal(dec(n - 1n, -scale), value)).toBe(-1);
          } else {
            expect(compareDecimal(atN, value)).toBeLessThanOrEqual(0);
            expect(compareDecimal(dec(n + 1n, -scale), value)).toBe(1);
          }
        }
      }),
      runs(3000),
    );
    seen.expectShare('positive, rounded', 0.1);
    seen.expectShare('negative, rounded', 0.1);
    seen.expectShare('exact', 0.1);
  });

  it('formatResourceQuantity round-trips every base amount exactly', () => {
    const seen = new Outcomes('binary suffix', 'decimal suffix', 'no suffix');
    fc.assert(
      fc.property(
        fc.constantFrom('cpu', 'memory', 'ephemeral-storage', 'pods', 'hugepages-1Gi'),
        fc.oneof(
          fc.bigInt({ min: 0n, max: 2n ** 80n }),
          fc.bigInt({ min: 0n, max: 2n ** 20n }).map((n) => n * 1024n ** 2n),
        ),
        (resource, amount) => {
          const text = formatResourceQuantity(resource, amount);
          expect(parseResourceQuantity(resource, text)).toBe(amount);
          seen.add(/[KMGTPE]i$/.test(text) ? 'binary suffix' : /[0-9]$/.test(text) ? 'no suffix' : 'decimal suffix');
        },
      ),
      runs(3000),
    );
    seen.expectEach();
  });
});
