/**
 * What every fast-check property of the suite shares: how many cases it runs, and the count of
 * the outcomes it claims to exercise.
 */
import { expect } from 'vitest';

/** PROPERTY_RUNS: a factor on every property's own number of cases (default 1). */
function factor(): number {
  const text = process.env.PROPERTY_RUNS;
  if (text === undefined || text === '') return 1;
  const value = Number(text);
  if (!Number.isFinite(value) || value <= 0)
    throw new Error(`PROPERTY_RUNS must be a positive number (a factor on each property's runs), got ${JSON.stringify(text)}`);
  return value;
}

/**
 * The parameters of `fc.assert`: `base` cases times PROPERTY_RUNS (`PROPERTY_RUNS=20` runs 20
 * times as many, `0.1` a tenth; at least one). scripts/check-tests.js fails an fc.assert
 * without it.
 */
export function runs(base: number): { numRuns: number } {
  return { numRuns: Math.max(1, Math.round(base * factor())) };
}

/**
 * The timeout of a test whose property needs more than its project's: `ms` at the default
 * PROPERTY_RUNS, scaled as the runs are.
 */
export function propertyTimeout(ms: number): number {
  return Math.max(ms, Math.round(ms * factor()));
}

/**
 * The outcomes a property claims to test, counted as its cases run, so that the test fails when a
 * class never occurs (a generator that stops producing it, a branch no case reaches) instead of
 * passing without exercising it. Floors are shares of the cases counted, so they hold at any
 * PROPERTY_RUNS.
 *
 *   const seen = new Outcomes('admitted', 'rejected');
 *   fc.assert(fc.property(review, (r) => { ...; seen.add(allowed ? 'admitted' : 'rejected'); }), runs(300));
 *   seen.expectEach();                  // both occurred
 *   seen.expectShare('rejected', 0.05); // in at least 5 % of the cases
 */
export class Outcomes<Name extends string> {
  private readonly counts: Map<Name, number>;
  private printed = false;

  constructor(...names: Name[]) {
    this.counts = new Map(names.map((name) => [name, 0]));
  }

  add(name: Name): void {
    this.counts.set(name, this.count(name) + 1);
  }

  count(name: Name): number {
    return this.counts.get(name) ?? 0;
  }

  get total(): number {
    let total = 0;
    for (const count of this.counts.values()) total += count;
    return total;
  }

  /** PROPERTY_OUTCOMES=1 prints the counts, to measure a property's shares before setting its floors. */
  private print(): void {
    if (process.env.PROPERTY_OUTCOMES !== '1' || this.printed) return;
    this.printed = true;
    console.log(`outcomes of ${expect.getState().currentTestName}: ${JSON.stringify(Object.fromEntries(this.counts))}`);
  }

  /** Every outcome named at construction occurred at least once. */
  expectEach(): void {
    this.print();
    const never = [...this.counts].filter(([, count]) => count === 0).map(([name]) => name);
    expect(never, `outcomes that never occurred in ${this.total} counted cases: ${JSON.stringify(Object.fromEntries(this.counts))}`).toEqual([]);
  }

  /**
   * `name` occurred at least `rate` times per run of the property, and at least once: for events
   * a run may see several times or not at all (`parameters` is what runs() gave fc.assert).
   */
  expectPerRun(name: Name, rate: number, parameters: { numRuns: number }): void {
    this.print();
    const floor = Math.max(1, Math.ceil(rate * parameters.numRuns));
    expect(
      this.count(name),
      `${name}: at least ${rate} per run over ${parameters.numRuns} runs (${JSON.stringify(Object.fromEntries(this.counts))})`,
    ).toBeGreaterThanOrEqual(floor);
  }

  /** `name` occurred in at least `share` (0..1) of the counted cases, and at least once. */
  expectShare(name: Name, share: number): void {
    this.print();
    const floor = Math.max(1, Math.ceil(share * this.total));
    expect(this.count(name), `${name}: at least ${share} of ${this.total} cases (${JSON.stringify(Object.fromEntries(this.counts))})`).toBeGreaterThanOrEqual(
      floor,
    );
  }
}
