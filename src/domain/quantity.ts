/**
 * Exact Kubernetes resource.Quantity arithmetic.
 *
 * client-node's `quantityToScalar` returns a JS number for fractional quantities, and
 * `1.15 * 3000` is 3449.9999999999995 in floating point: a ratio applied that way drifts by
 * one unit, and a drifted value never matches again the value it was computed from. Here
 * every quantity is an exact decimal `coefficient × 10^exponent` in BigInt (each Quantity
 * string denotes one: binary suffixes only multiply the coefficient by 1024^k), and the
 * conversion to a resource's base unit rounds the way resource.Quantity does.
 *
 * Grammar (k8s.io/apimachinery/pkg/api/resource):
 *
 *   <quantity>        ::= <sign>? <number> <suffix>?
 *   <number>          ::= <digits> | <digits>.<digits>? | .<digits>
 *   <suffix>          ::= <binarySI> | <decimalExponent> | <decimalSI>
 *   <binarySI>        ::= Ki | Mi | Gi | Ti | Pi | Ei
 *   <decimalSI>       ::= n | u | m | k | M | G | T | P | E
 *   <decimalExponent> ::= ("e" | "E") <sign>? <digits>
 *
 * Stricter than the Go parser on purpose in two places: a number needs at least one digit
 * (Go reads "-" and "." as zero), and an exponent is bounded (|e| ≤ 1000) so that a hostile
 * annotation cannot make us build a gigantic BigInt. Neither form is ever emitted by the API.
 */
import { Memo } from './memo.js';

/** An exact decimal: `coefficient × 10^exponent`. */
export interface Decimal {
  readonly coefficient: bigint;
  readonly exponent: number;
}

const MAX_LENGTH = 128;
const MAX_EXPONENT = 1000;

export const QUANTITY = /^([+-]?)(?:(\d+)(?:\.(\d*))?|\.(\d+))(?:(Ki|Mi|Gi|Ti|Pi|Ei)|[eE]([+-]?\d+)|([numkMGTPE]))?$/;

const BINARY_POWER: Record<string, bigint> = { Ki: 1n, Mi: 2n, Gi: 3n, Ti: 4n, Pi: 5n, Ei: 6n };
const DECIMAL_EXPONENT: Record<string, number> = { n: -9, u: -6, m: -3, k: 3, M: 6, G: 9, T: 12, P: 15, E: 18 };
const BINARY_SUFFIX = ['', 'Ki', 'Mi', 'Gi', 'Ti', 'Pi', 'Ei'];

export class QuantityFormatError extends Error {
  constructor(
    readonly text: string,
    reason: string,
  ) {
    super(`invalid quantity ${JSON.stringify(text)}: ${reason}`);
    this.name = 'QuantityFormatError';
  }
}

const POW10: bigint[] = Array.from({ length: 64 }, (_, i) => 10n ** BigInt(i));
const pow10 = (n: number): bigint => POW10[n] ?? 10n ** BigInt(n);

/** Throws QuantityFormatError for what cannot be a Quantity before reading it: not a string, empty, too long. */
function checkQuantityText(text: string): void {
  if (typeof text !== 'string') throw new QuantityFormatError(String(text), 'not a string');
  if (text.length === 0) throw new QuantityFormatError(text, 'empty');
  if (text.length > MAX_LENGTH) throw new QuantityFormatError(`${text.slice(0, 32)}…`, `longer than ${MAX_LENGTH} characters`);
}

/** Parses a Quantity string exactly. Throws QuantityFormatError on anything else. */
export function parseQuantity(text: string): Decimal {
  checkQuantityText(text);
  if (/^[0-9]{1,15}$/.test(text)) return { coefficient: BigInt(text), exponent: 0 }; // fast path: "110", "47438335103"
  const match = QUANTITY.exec(text);
  if (match === null) {
    throw new QuantityFormatError(text, 'expected <sign><digits>[.<digits>][suffix], suffix one of n u m k M G T P E Ki Mi Gi Ti Pi Ei or e<exponent>');
  }
  const [, sign, whole, wholeFraction, onlyFraction, binary, exponentText, decimal] = match;
  const fraction = wholeFraction ?? onlyFraction ?? '';
  let coefficient = BigInt(`${whole ?? ''}${fraction}` || '0');
  let exponent = 0 - fraction.length; // never -0
  if (binary !== undefined) {
    coefficient <<= 10n * BINARY_POWER[binary];
  } else if (exponentText !== undefined) {
    const e = Number(exponentText);
    if (!Number.isSafeInteger(e) || Math.abs(e) > MAX_EXPONENT) throw new QuantityFormatError(text, `exponent out of range ±${MAX_EXPONENT}`);
    exponent += e;
  } else if (decimal !== undefined) {
    exponent += DECIMAL_EXPONENT[decimal];
  }
  if (sign === '-') coefficient = -coefficient;
  return { coefficient, exponent };
}

/** Compares two exact decimals by value. */
export function compareDecimal(a: Decimal, b: Decimal): -1 | 0 | 1 {
  const exponent = Math.min(a.exponent, b.exponent);
  const x = a.coefficient * pow10(a.exponent - exponent);
  const y = b.coefficient * pow10(b.exponent - exponent);
  return x < y ? -1 : x > y ? 1 : 0;
}

/**
 * `value × 10^scale` as an integer, rounded away from zero when inexact: the semantics of
 * resource.Quantity's ScaledValue (so `scale` 3 is MilliValue, 0 is Value).
 */
export function scaledValue(value: Decimal, scale: number): bigint {
  const shift = value.exponent + scale;
  if (shift >= 0) return value.coefficient * pow10(shift);
  const divisor = pow10(-shift);
  const quotient = value.coefficient / divisor; // truncates toward zero
  if (quotient * divisor === value.coefficient) return quotient;
  return value.coefficient > 0n ? quotient + 1n : quotient - 1n;
}

/** Quantity.MilliValue(): thousandths, rounded away from zero ("0.1m" → 1). */
export const milliValue = (value: Decimal): bigint => scaledValue(value, 3);
/** Quantity.Value(): units, rounded away from zero ("0.5" → 1). */
export const unitValue = (value: Decimal): bigint => scaledValue(value, 0);

/** How a resource's quantities are counted once converted: cpu in millicores, the rest in whole units. */
export type BaseUnit = 'millicores' | 'bytes' | 'count';

/** cpu → millicores; memory, ephemeral-storage, hugepages-* → bytes; anything else (pods, extended resources) → count. */
export function baseUnitOf(resource: string): BaseUnit {
  if (resource === 'cpu') return 'millicores';
  if (resource === 'memory' || resource === 'ephemeral-storage' || resource.startsWith('hugepages-')) return 'bytes';
  return 'count';
}

/**
 * A quantity of `resource` in its base unit, rounded up like the API does: cpu via
 * MilliValue ("3900m" → 3900n, "0.0001" → 1n), everything else via Value() ("1.5Gi" →
 * 1610612736n, "0.5" bytes → 1n). A number (a JSON number where a string belongs) is read as
 * its shortest decimal form.
 */
export function parseResourceQuantity(resource: string, text: string | number): bigint {
  if (typeof text !== 'string') return toBase(resource, parseNumber(text));
  return baseUnitOf(resource) === 'millicores' ? milliMemo.get(text, parseMillicores) : unitMemo.get(text, parseUnits);
}
const milliMemo = new Memo<string, bigint>(16_384);
const unitMemo = new Memo<string, bigint>(16_384);
// Module functions, not a closure per call: the admission path parses a node's quantities at every heartbeat.
const parseMillicores = (text: string): bigint => milliValue(parseQuantity(text));
const parseUnits = (text: string): bigint => unitValue(parseQuantity(text));
const toBase = (resource: string, value: Decimal): bigint => (baseUnitOf(resource) === 'millicores' ? milliValue(value) : unitValue(value));

/**
 * Formats a base-unit amount of `resource` as a Quantity string the API server accepts and
 * that parses back to exactly the same amount: cpu "3" (whole cores) or "1500m"; bytes with
 * the largest binary suffix that divides them ("16318064Ki", as the kubelet reports memory;
 * this is also Go's BinarySI canonical form) else plain bytes ("34254879948"); counts as
 * plain integers ("110").
 */
export function formatResourceQuantity(resource: string, amount: bigint): string {
  switch (baseUnitOf(resource)) {
    case 'millicores':
      return amount % 1000n === 0n ? `${amount / 1000n}` : `${amount}m`;
    case 'bytes': {
      let mantissa = amount;
      let power = 0;
      while (power < BINARY_SUFFIX.length - 1 && mantissa !== 0n && mantissa % 1024n === 0n) {
        mantissa /= 1024n;
        power += 1;
      }
      return `${mantissa}${BINARY_SUFFIX[power]}`;
    }
    case 'count':
      return `${amount}`;
  }
}

/** A base-unit amount as a Prometheus sample: cores (a float) for cpu, bytes or a count otherwise. */
export function baseAmountToNumber(resource: string, amount: bigint): number {
  return baseUnitOf(resource) === 'millicores' ? Number(amount) / 1000 : Number(amount);
}

/**
 * A JS number as the exact decimal of its shortest round-tripping string (`String(n)`):
 * 1.15 → 115 × 10^-2, not the binary double 1.149999999999999911182158029987... This is the
 * number a human wrote in config.yaml, and the value JSON.stringify writes back.
 */
export function parseNumber(n: number): Decimal {
  if (typeof n !== 'number' || !Number.isFinite(n)) throw new QuantityFormatError(String(n), 'not a finite number');
  // String(n) is "1.15", "3", "1e-7", "1.2e+21": all inside the Quantity grammar.
  return numberMemo.get(n, (x) => parseQuantity(String(x)));
}
const numberMemo = new Memo<number, Decimal>(1024);

/** `floor(amount × ratio)`, exactly, with the ratio read as its shortest decimal (see parseNumber). */
export function multiplyFloor(amount: bigint, ratio: number | Decimal): bigint {
  const r = typeof ratio === 'number' ? parseNumber(ratio) : ratio;
  const product = amount * r.coefficient;
  if (r.exponent >= 0) return product * pow10(r.exponent);
  const divisor = pow10(-r.exponent);
  const quotient = product / divisor; // toward zero
  return product < 0n && quotient * divisor !== product ? quotient - 1n : quotient;
}
