/**
 * `FC_SEED=N npx vitest run <spec>` runs every fast-check property with seed N, so that a failure
 * seen once (fast-check prints its seed) replays exactly. Without it each run draws a new seed.
 */
import fc from 'fast-check';

const seed = process.env.FC_SEED;
if (seed !== undefined && seed !== '') {
  if (!/^-?\d+$/.test(seed)) throw new Error(`FC_SEED must be an integer, got ${JSON.stringify(seed)}`);
  fc.configureGlobal({ ...fc.readConfigureGlobal(), seed: Number(seed) });
}
