/**
 * Kubernetes quantities for assertions, independent of the product's own arithmetic: parse to
 * exact base units (millicores for cpu; bytes or counts otherwise) and the expected inflated
 * value floor(raw × ratio), with the ratio taken as the exact decimal it is written as.
 */

const BINARY: Record<string, bigint> = { Ki: 1n << 10n, Mi: 1n << 20n, Gi: 1n << 30n, Ti: 1n << 40n, Pi: 1n << 50n, Ei: 1n << 60n };
const DECIMAL: Record<string, number> = { n: -9, u: -6, m: -3, '': 0, k: 3, M: 6, G: 9, T: 12, P: 15, E: 18 };
const QUANTITY = /^([+-]?)(\d+(?:\.\d*)?|\.\d+)(?:[eE]([+-]?\d+))?(Ki|Mi|Gi|Ti|Pi|Ei|n|u|m|k|M|G|T|P|E)?$/;

/** An exact non-negative rational num/den. */
interface Fraction {
  num: bigint;
  den: bigint;
}

function parseFraction(quantity: string | number): Fraction {
  const text = String(quantity).trim();
  const m = QUANTITY.exec(text);
  if (!m) throw new Error(`not a Kubernetes quantity: ${JSON.stringify(quantity)}`);
  const [, sign, mantissa, exponent, suffix = ''] = m;
  const [intPart, fracPart = ''] = mantissa!.split('.');
  let num = BigInt((intPart || '0') + fracPart);
  let den = 10n ** BigInt(fracPart.length);
  let exp10 = Number(exponent ?? 0);
  if (suffix in BINARY) num *= BINARY[suffix]!;
  else exp10 += DECIMAL[suffix]!;
  if (exp10 >= 0) num *= 10n ** BigInt(exp10);
  else den *= 10n ** BigInt(-exp10);
  if (sign === '-') num = -num;
  return { num, den };
}

function ceilDiv(a: bigint, b: bigint): bigint {
  return a >= 0n ? (a + b - 1n) / b : a / b;
}

/** Base units of a resource quantity: millicores for `cpu`, else the value itself (bytes, count), rounded up. */
export function baseUnits(resource: string, quantity: string | number): bigint {
  const { num, den } = parseFraction(quantity);
  return resource === 'cpu' ? ceilDiv(num * 1000n, den) : ceilDiv(num, den);
}

/** floor(raw × ratio) in base units, ratio exact as written in decimal (1.15 is 115/100, not the nearest double). */
export function inflatedBaseUnits(resource: string, raw: string | number, ratio: number | string): bigint {
  const r = parseFraction(String(ratio));
  return (baseUnits(resource, raw) * r.num) / r.den;
}

/** Same value (e.g. "4" and "4000m", "1Gi" and "1073741824"). */
export function sameQuantity(resource: string, a: string | number | undefined, b: string | number | undefined): boolean {
  if (a === undefined || b === undefined) return a === b;
  return baseUnits(resource, a) === baseUnits(resource, b);
}

/** A readable form of base units for messages and tables: "5.7" cores, "15.2Gi", "110". */
export function formatBaseUnits(resource: string, amount: bigint): string {
  if (resource === 'cpu') return amount % 1000n === 0n ? String(amount / 1000n) : `${amount}m`;
  if (resource === 'memory' || resource === 'ephemeral-storage') {
    const gib = Number(amount) / 2 ** 30;
    return gib >= 1 ? `${gib.toFixed(2)}Gi` : `${(Number(amount) / 2 ** 20).toFixed(1)}Mi`;
  }
  return String(amount);
}
