import { afterEach, describe, expect, it, vi } from 'vitest';
import { type BenchSpec, type FlagSpec, parseFlags, ratioOf } from './lib.js';

const spec = {
  script: 'bench:example',
  results: 'example.json',
  build: true,
  flags: {
    duration: { type: 'number', default: 10, min: 1, env: 'BENCH_EXAMPLE_DURATION' },
    rounds: { type: 'number', default: 3, min: 1, integer: true },
    pods: { type: 'number', integer: true },
    read: { type: 'string', default: 'lister', choices: ['lister', 'get'] },
    against: { type: 'string', env: 'BENCH_EXAMPLE_AGAINST' },
    sizes: { type: 'list', default: 'a,b', choices: ['a', 'b', 'c'] },
    keep: { type: 'boolean' },
  },
} satisfies BenchSpec<Record<string, FlagSpec>>;

describe('a bench’s flags (parseFlags, what benchMain reads)', () => {
  afterEach(() => vi.unstubAllEnvs());

  it('answers the defaults when nothing is given', () => {
    expect(parseFlags(spec, [])).toEqual({ duration: 10, rounds: 3, pods: undefined, read: 'lister', against: undefined, sizes: ['a', 'b'], keep: false });
  });

  it('reads each flag, a list trimmed and without empty items, --out and --no-build', () => {
    const flags = parseFlags(spec, [
      '--duration',
      '2.5',
      '--rounds=1',
      '--pods',
      '40',
      '--read',
      'get',
      '--sizes',
      ' c, a,,',
      '--keep',
      '--out',
      '/tmp/x.json',
      '--no-build',
    ]);
    expect(flags).toEqual({
      duration: 2.5,
      rounds: 1,
      pods: 40,
      read: 'get',
      against: undefined,
      sizes: ['c', 'a'],
      keep: true,
      out: '/tmp/x.json',
      'no-build': true,
    });
  });

  it('reads a flag’s variable when the flag is absent, and the flag over it', () => {
    vi.stubEnv('BENCH_EXAMPLE_DURATION', '4');
    vi.stubEnv('BENCH_EXAMPLE_AGAINST', 'main');
    expect(parseFlags(spec, [])).toMatchObject({ duration: 4, against: 'main' });
    expect(parseFlags(spec, ['--duration', '6', '--against', 'HEAD~1'])).toMatchObject({ duration: 6, against: 'HEAD~1' });
  });

  it('stops on a bad value with an error naming the flag (and its variable)', () => {
    expect(() => parseFlags(spec, ['--rounds', '1.5'])).toThrow('--rounds: expected a whole number ≥ 1, got 1.5');
    expect(() => parseFlags(spec, ['--duration', '0'])).toThrow('--duration (or BENCH_EXAMPLE_DURATION): expected a number ≥ 1, got 0');
    expect(() => parseFlags(spec, ['--read', 'watch'])).toThrow('--read: unknown watch; known: lister, get');
    expect(() => parseFlags(spec, ['--sizes', 'a,d,e'])).toThrow('--sizes: unknown d, e; known: a, b, c');
    vi.stubEnv('BENCH_EXAMPLE_DURATION', 'soon');
    expect(() => parseFlags(spec, [])).toThrow('--duration (or BENCH_EXAMPLE_DURATION): expected a number ≥ 1, got soon');
  });

  it('refuses a flag it does not declare: --out and --no-build only with a results file and a build', () => {
    expect(() => parseFlags(spec, ['--durations', '2'])).toThrow(/Unknown option '--durations'/);
    const bare = { script: 'bench:bare', flags: {} } satisfies BenchSpec<Record<string, FlagSpec>>;
    expect(parseFlags(bare, [])).toEqual({});
    expect(() => parseFlags(bare, ['--out', 'x.json'])).toThrow(/Unknown option '--out'/);
    expect(() => parseFlags(bare, ['--no-build'])).toThrow(/Unknown option '--no-build'/);
  });
});

describe('a result file’s ratios (ratioOf)', () => {
  it('divides to two digits, and answers null for a missing figure or a zero divisor', () => {
    expect(ratioOf(3, 2)).toBe(1.5);
    expect(ratioOf(1, 3)).toBe(0.33);
    expect(ratioOf(1, 0)).toBeNull();
    expect(ratioOf(undefined, 2)).toBeNull();
    expect(ratioOf(2, undefined)).toBeNull();
  });
});
