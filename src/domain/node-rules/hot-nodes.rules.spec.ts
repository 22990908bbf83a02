import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { Outcomes, runs } from '../../../test/support/property.js';
import { parseConfig } from '../../overcommit.config.js';
import { coolThreshold, UsageConfig } from './node-oversell.config.js';
import { FLOOR_ANNOTATION, planNodeStatus, readRecord, resolveNodePolicy } from './node-oversell.rules.js';
import { type Heat, type HotState, hotFullDecision, planHotEvent, planHotState, readHeat } from './hot-nodes.rules.js';
import { effectivePolicy, isHotFull } from './usage-aware.rules.js';
import { planNode } from './node-plan.js';

function loadConfig(text: string) {
  const result = parseConfig(text);
  if (!result.ok) throw new Error(result.errors.join('; '));
  return result.value;
}
const usage = (overrides: Partial<UsageConfig> = {}): UsageConfig => Object.assign(new UsageConfig(), { hotAction: 'full', ...overrides });
const CORES = 1000n;
const MINUTE = 60_000;

describe('config: hotAction, coolThreshold, coolFor', () => {
  it('defaults: ratio1, cool = hot − 0.1, 2m', () => {
    const pool = loadConfig('nodes:\n  pools:\n  - name: web\n    nodeSelector: {matchLabels: {a: b}}\n    ratios: {cpu: 2}\n    usage: {}\n').nodes.pools[0]!;
    expect(pool.usage!.hotAction).toBe('ratio1');
    expect(pool.usage!.coolFor).toBe('2m');
    expect(pool.usage!.coolThreshold).toBeUndefined();
    expect([coolThreshold(pool.usage!, 'cpu'), coolThreshold(pool.usage!, 'memory')]).toEqual([0.8, 0.8]);
    expect(coolThreshold({ hotThreshold: { cpu: 0.95 } }, 'cpu')).toBe(0.85);
    expect(coolThreshold({ hotThreshold: { cpu: 0.05 } }, 'cpu')).toBe(0.01);
    expect(coolThreshold({ hotThreshold: { cpu: 0.9 }, coolThreshold: { cpu: 0.5 } }, 'cpu')).toBe(0.5);
    expect(coolThreshold({ hotThreshold: {} }, 'memory')).toBeNaN();
  });

  it.each([
    ['hotAction: evict', /hotAction must be one of ratio1, full/],
    ['coolThreshold: {cpu: 0.9}', /coolThreshold must be below hotThreshold/],
    ['{hotThreshold: {memory: 0.7}, coolThreshold: {memory: 0.75}}', /coolThreshold must be below hotThreshold/],
    ['coolThreshold: {cpu: 0}', /cpu must not be less than 0.01/],
    ['coolFor: 2h', /coolFor must be a duration like "5m", "90s" or "1m30s", from 0s to 1h/],
    ['coolFor: soon', /coolFor must be a duration/],
  ])('rejects %s', (section, message) => {
    const body = section.startsWith('{') ? section : `{${section}}`;
    expect(() => loadConfig(`nodes:\n  defaultRatios: {cpu: 2}\n  defaultUsage: ${body}\n`)).toThrow(message);
  });

  it('accepts full with a cool threshold and 0s', () => {
    const nodes = loadConfig('nodes:\n  defaultRatios: {cpu: 2}\n  defaultUsage: {hotAction: full, coolThreshold: {cpu: 0.7}, coolFor: 0s}\n').nodes;
    expect(nodes.defaultUsage).toMatchObject({ hotAction: 'full', coolFor: '0s', coolThreshold: { cpu: 0.7 } });
  });
});

describe('readHeat (rule 1)', () => {
  const level = (used: bigint, A = 4n * CORES) => ({ A, nodeUsage: used });
  const config = usage({ staleAfter: '2m', fallbackAfter: '10m' });

  it('hot above hotThreshold (0.9 of 4 CPUs = 3.6), cool below coolThreshold (0.8: 3.2), warm between', () => {
    expect(readHeat({ cpu: level(3601n) }, 0, config)).toBe('hot');
    expect(readHeat({ cpu: level(3600n) }, 0, config)).toBe('warm');
    expect(readHeat({ cpu: level(3200n) }, 0, config)).toBe('warm');
    expect(readHeat({ cpu: level(3199n) }, 0, config)).toBe('cool');
  });

  it('any resource hot makes the node hot; cool needs every resource cool', () => {
    const GiB = 2n ** 30n;
    expect(readHeat({ cpu: level(100n), memory: level(15n * GiB, 16n * GiB) }, 0, config)).toBe('hot');
    expect(readHeat({ cpu: level(100n), memory: level(13n * GiB, 16n * GiB) }, 0, config)).toBe('warm');
    expect(readHeat({ cpu: level(100n), memory: level(12n * GiB, 16n * GiB) }, 0, config)).toBe('cool');
  });

  it('stale without a sample for staleAfter (or none at all), lost at fallbackAfter; no threshold or no allocatable is not read', () => {
    expect(readHeat({ cpu: level(3900n) }, 2 * MINUTE, config)).toBe('stale');
    expect(readHeat({ cpu: { A: 4n * CORES, nodeUsage: undefined } }, 0, config)).toBe('stale');
    expect(readHeat({ cpu: level(3900n) }, 10 * MINUTE, config)).toBe('lost');
    expect(readHeat({ cpu: level(3900n) }, 0, usage({ hotThreshold: { memory: 0.9 } }))).toBe('cool');
    expect(readHeat({ cpu: level(3900n, 0n) }, 0, config)).toBe('cool');
  });
});

describe('planHotState (rules 2–4)', () => {
  it('the worked sequence of docs/usage-aware.md: hot at once, held while warm, reopened after coolFor of cool readings', () => {
    const coolFor = 2 * MINUTE;
    const steps: Array<[number, Heat]> = [
      [0, 'cool'],
      [30_000, 'hot'], // turns hot
      [60_000, 'cool'], // run starts
      [90_000, 'warm'], // run broken
      [120_000, 'cool'], // run starts again
      [180_000, 'cool'],
      [240_000, 'cool'], // 2 min since 120 s: reopens
      [270_000, 'warm'], // open stays open
    ];
    let state: HotState | undefined;
    const seen: Array<HotState | undefined> = [];
    for (const [now, heat] of steps) seen.push((state = planHotState(state, heat, now, coolFor)));
    expect(seen).toEqual([
      undefined,
      { hotSince: 30_000 },
      { hotSince: 30_000, coolSince: 60_000 },
      { hotSince: 30_000 },
      { hotSince: 30_000, coolSince: 120_000 },
      { hotSince: 30_000, coolSince: 120_000 },
      undefined,
      undefined,
    ]);
  });

  it('stale holds a hot node and restarts its cooling; lost reopens it; coolFor 0 reopens at the first cool reading', () => {
    expect(planHotState({ hotSince: 0, coolSince: 10 }, 'stale', 20, 100)).toEqual({ hotSince: 0 });
    expect(planHotState(undefined, 'stale', 20, 100)).toBeUndefined();
    expect(planHotState({ hotSince: 0 }, 'lost', 20, 100)).toBeUndefined();
    expect(planHotState({ hotSince: 0 }, 'cool', 20, 0)).toBeUndefined();
    expect(planHotState({ hotSince: 0, coolSince: 5 }, 'hot', 20, 100)).toEqual({ hotSince: 0 });
  });

  /**
   * The model, stated apart from the fold: after reading i a node is hot iff some reading j ≤ i is
   * `hot` and, for the last such j, no reading m in (j, i] is `lost` or ends a run of `cool`
   * readings c..m (j < c) with t_m − t_c ≥ coolFor.
   */
  function modelHot(readings: ReadonlyArray<{ t: number; heat: Heat }>, i: number, coolFor: number): boolean {
    let j = -1;
    for (let k = 0; k <= i; k++) if (readings[k]!.heat === 'hot') j = k;
    if (j < 0) return false;
    for (let m = j + 1; m <= i; m++) {
      if (readings[m]!.heat === 'lost') return false;
      for (let c = j + 1; c <= m; c++) {
        const run = readings.slice(c, m + 1);
        if (run.every((r) => r.heat === 'cool') && readings[m]!.t - readings[c]!.t >= coolFor) return false;
      }
    }
    return true;
  }

  // Runs of one reading, so that long cool runs (the only way to reopen) occur.
  const segment = fc.record({
    heat: fc.constantFrom<Heat>('hot', 'warm', 'cool', 'cool', 'cool', 'stale', 'lost'),
    count: fc.integer({ min: 1, max: 8 }),
    gap: fc.integer({ min: 1_000, max: 60_000 }),
  });
  const readingsOf = (segments: ReadonlyArray<{ heat: Heat; count: number; gap: number }>) => {
    const readings: Array<{ t: number; heat: Heat }> = [];
    let t = 0;
    for (const { heat, count, gap } of segments) for (let k = 0; k < count; k++) readings.push({ heat, t: (t += gap) });
    return readings;
  };

  it('property: the fold equals the model; a hot period lasts coolFor unless lost ends it, so a node turns hot and reopens at most once per coolFor', () => {
    const seen = new Outcomes('turned hot', 'held while cooling', 'reopened by cooling', 'held while stale', 'reopened by lost');
    const parameters = runs(300);
    fc.assert(
      fc.property(fc.array(segment, { minLength: 1, maxLength: 30 }), fc.constantFrom(0, 30_000, 2 * MINUTE, 5 * MINUTE), (segments, coolFor) => {
        const readings = readingsOf(segments);
        let state: HotState | undefined;
        const entries: number[] = [];
        const reopenings: Array<{ t: number; byLost: boolean }> = [];
        readings.forEach(({ t, heat }, i) => {
          const before = state;
          state = planHotState(state, heat, t, coolFor);
          expect(state !== undefined, `reading ${i}`).toBe(modelHot(readings, i, coolFor));
          if (before === undefined && state !== undefined) {
            entries.push(t);
            seen.add('turned hot');
          }
          if (before !== undefined && state === undefined) {
            reopenings.push({ t, byLost: heat === 'lost' });
            expect(heat === 'lost' || t - before.hotSince >= coolFor).toBe(true);
            seen.add(heat === 'lost' ? 'reopened by lost' : 'reopened by cooling');
          }
          if (before !== undefined && state !== undefined && heat === 'cool') seen.add('held while cooling');
          if (before !== undefined && heat === 'stale') seen.add('held while stale');
        });
        // Each reopening by cooling comes coolFor or more after the entry before it.
        for (const reopening of reopenings.filter((r) => !r.byLost)) {
          const entry = entries.filter((t) => t < reopening.t).at(-1)!;
          expect(reopening.t - entry).toBeGreaterThanOrEqual(coolFor);
        }
      }),
      parameters,
    );
    seen.expectEach();
  });

  it('property: usage swinging around hotThreshold and never below coolThreshold turns the node hot once, and never reopens it', () => {
    const config = usage();
    const seen = new Outcomes('turned hot', 'stayed open', 'held');
    fc.assert(
      fc.property(fc.array(fc.integer({ min: 3200, max: 3800 }), { minLength: 1, maxLength: 60 }), fc.constantFrom(0, 30_000, 2 * MINUTE), (used, coolFor) => {
        let state: HotState | undefined;
        let changes = 0;
        used.forEach((u, i) => {
          const next = planHotState(state, readHeat({ cpu: { A: 4n * CORES, nodeUsage: BigInt(u) } }, 0, config), i * 30_000, coolFor);
          if ((next === undefined) !== (state === undefined)) changes += 1;
          state = next;
        });
        expect(changes).toBeLessThanOrEqual(1);
        // Hot exactly when some reading was above 3600 (0.9 of 4 CPUs).
        expect(state !== undefined).toBe(used.some((u) => u > 3600));
        seen.add(changes === 0 ? 'stayed open' : used.at(-1)! > 3600 ? 'turned hot' : 'held');
      }),
      runs(200),
    );
    seen.expectEach();
  });
});

describe('full: what the webhook writes (rule 5)', () => {
  const nodes = loadConfig('nodes:\n  defaultRatios: {cpu: 2}\n  defaultUsage: {target: {cpu: 0.6}, hotAction: full}\n').nodes;
  const node = {
    metadata: { name: 'n1', annotations: {} },
    status: {
      allocatable: { cpu: '4', memory: '8Gi', pods: '110', 'ephemeral-storage': '100Gi' },
      capacity: { cpu: '4', memory: '8Gi', pods: '110', 'ephemeral-storage': '100Gi' },
    },
  };
  const hotFull = { cpu: hotFullDecision({ ratio: 1, reason: 'hot', A: '4', R: '1500m', U: '1' }) };

  it('a hot-full decision keeps A, R, U; the entry reads as full', () => {
    expect(hotFull).toEqual({ cpu: { ratio: 1, reason: 'hot-full', A: '4', R: '1500m', U: '1' } });
    expect(isHotFull(hotFull)).toBe(true);
    expect(isHotFull({ cpu: { ratio: 1, reason: 'hot' } })).toBe(false);
    expect(isHotFull(undefined)).toBe(false);
  });

  it('every resource at exactly the committed requests (0 for one not requested), below raw as well as above; recorded so rule 3 reads it back', () => {
    const { policy } = effectivePolicy(resolveNodePolicy({}, nodes), hotFull, undefined);
    expect(policy?.full).toBe(true);
    const committed = { cpu: 1500n, memory: 3n * 2n ** 30n, pods: 3n };
    const plan = planNodeStatus(node, policy, undefined, committed)!;
    expect(plan.full).toBe(true);
    expect(plan.allocatable).toEqual({ cpu: 1500n, memory: 3n * 2n ** 30n, 'ephemeral-storage': 0n, pods: 3n });
    expect(plan.annotations[FLOOR_ANNOTATION]).toBe('{"cpu":"1500m","memory":"3Gi","ephemeral-storage":"0","pods":"3"}');
    // The kubelet's next write (raw values again) on the stored full node: the same plan, raw read as the kubelet's.
    const stored = { ...node, metadata: { name: 'n1', annotations: plan.annotations as Record<string, string> } };
    expect(readRecord(stored.metadata.annotations)?.allocatable.cpu).toBe(4000n);
    const again = planNodeStatus(
      { ...stored, status: { ...node.status, allocatable: { cpu: '1500m', memory: '3Gi', pods: '3', 'ephemeral-storage': '0' } } },
      policy,
      stored,
      committed,
    )!;
    expect(again.raw).toEqual({ cpu: 4000n, memory: 8n * 2n ** 30n, 'ephemeral-storage': 100n * 2n ** 30n, pods: 110n });
    expect(again.allocatable).toEqual(plan.allocatable);
    // Requests above raw: the floor's values, as before.
    expect(planNodeStatus(node, policy, undefined, { cpu: 6000n, pods: 9n })!.allocatable).toMatchObject({ cpu: 6000n, pods: 9n, memory: 0n });
  });

  it('committed requests unknown: ratio 1, not full', () => {
    const { policy } = effectivePolicy(resolveNodePolicy({}, nodes), hotFull, undefined);
    const plan = planNodeStatus(node, policy, undefined, undefined)!;
    expect(plan.full).toBe(false);
    expect(plan.allocatable.cpu).toBe(4000n);
  });

  it('a pool back on hotAction ratio1 reads a hot-full entry as hot (ratio 1) at once', () => {
    const ratio1 = loadConfig('nodes:\n  defaultRatios: {cpu: 2}\n  defaultUsage: {target: {cpu: 0.6}}\n').nodes;
    const { policy, decisions } = effectivePolicy(resolveNodePolicy({}, ratio1), hotFull, undefined);
    expect(policy?.full).toBeUndefined();
    expect(decisions.cpu).toEqual({ ratio: 1, reason: 'hot', A: '4', R: '1500m', U: '1' });
  });

  it('/plan: reason hot-full on every resource, planned = the requests', () => {
    const row = planNode(node, { cpu: 1500n, memory: 2n ** 30n, pods: 2n }, nodes, { cpu: 100n }, { usage: hotFull });
    expect(row.ratioReasons).toEqual({ cpu: 'hot-full', memory: 'hot-full', 'ephemeral-storage': 'hot-full', pods: 'hot-full' });
    expect(row.planned).toEqual({ cpu: '1500m', memory: '1Gi', 'ephemeral-storage': '0', pods: '2' });
    expect(row.fits).toBe(0);
  });
});

describe('planHotEvent (rule 7)', () => {
  const config = usage({ hotThreshold: { cpu: 0.9, memory: 0.95 } });
  const full = { cpu: { ratio: 1, reason: 'hot-full' as const, A: '4', R: '2', U: '3500m' } };
  const open = { cpu: { ratio: 1.2, reason: 'usage' as const, A: '4', R: '2', U: '1' } };

  it('NodeHot when an entry turns hot-full, with the thresholds and inputs', () => {
    expect(planHotEvent(open, full, config)).toEqual({
      reason: 'NodeHot',
      message:
        'node usage above hotThreshold (cpu 0.9 of raw allocatable): no new pod is placed or admitted here, its allocatable is the requests of its pods, until usage stays below coolThreshold (cpu 0.8) for 2m; its pods stay (cpu: A 4, R 2, U 3500m)',
    });
    expect(planHotEvent(undefined, full, config)?.reason).toBe('NodeHot');
  });

  it('NodeCooled saying why: cooled, metrics lost, or no longer full by config', () => {
    expect(planHotEvent(full, open, config)).toEqual({
      reason: 'NodeCooled',
      message: 'usage below coolThreshold (cpu 0.8) for coolFor (2m): the node takes new pods again',
    });
    expect(planHotEvent(full, { cpu: { ratio: 1, reason: 'stale', A: '4', R: '2' } }, config)?.message).toBe(
      'no usage measured for fallbackAfter (10m): the node takes new pods again, at ratio 1 (stale)',
    );
    expect(planHotEvent(full, { cpu: { ratio: 1, reason: 'hot' } }, usage({ hotAction: 'ratio1' }))?.message).toBe(
      'hotAction is no longer full for this node: it takes new pods again (ratio 1 while hot)',
    );
    expect(planHotEvent(full, undefined, undefined)?.reason).toBe('NodeCooled');
  });

  it('nothing while it stays full or stays open', () => {
    expect(planHotEvent(full, { cpu: { ...full.cpu, U: '3' } }, config)).toBeUndefined();
    expect(planHotEvent(open, { cpu: { ...open.cpu, ratio: 1.3 } }, config)).toBeUndefined();
    expect(planHotEvent(undefined, undefined, config)).toBeUndefined();
  });
});

// ---------------------------------------------------------------------------------------------
// Edges the mutation run (docs/testing.md) found untested
// ---------------------------------------------------------------------------------------------

describe('hot nodes: edges found by mutation testing', () => {
  const level = { cpu: { A: 4n * CORES, nodeUsage: 3900n } };
  const config = usage({ hotThreshold: { cpu: 0.9, memory: 0.95 } });
  const full = { cpu: { ratio: 1, reason: 'hot-full' as const, A: '4', R: '2', U: '3500m' }, memory: { ratio: 1, reason: 'hot-full' as const } };

  it('readHeat does not read a resource without a hot threshold', () => {
    expect(readHeat(level, 0, usage({ hotThreshold: undefined }))).toBe('cool');
    expect(readHeat(level, 0, usage({ hotThreshold: { cpu: null as unknown as number } }))).toBe('cool');
  });

  it('NodeHot lists every resource, "?" for an input not published; without a usage section no threshold is named', () => {
    expect(planHotEvent(undefined, full, config)).toEqual({
      reason: 'NodeHot',
      message:
        'node usage above hotThreshold (cpu 0.9, memory 0.95 of raw allocatable): no new pod is placed or admitted here, its allocatable is the requests of its pods, until usage stays below coolThreshold (cpu 0.8, memory 0.85) for 2m; its pods stay (cpu: A 4, R 2, U 3500m; memory: A ?, R ?, U ?)',
    });
    expect(planHotEvent(undefined, full, undefined)?.message).toContain('node usage above hotThreshold ( of raw allocatable)');
    expect(planHotEvent(undefined, full, undefined)?.message).toContain('until usage stays below coolThreshold () for');
    expect(planHotEvent(undefined, full, usage({ hotThreshold: undefined }))?.message).toContain('node usage above hotThreshold ( of raw allocatable)');
  });

  it('NodeCooled: an entry no longer published reads as no longer full, whatever the config', () => {
    expect(planHotEvent(full, undefined, config)).toEqual({
      reason: 'NodeCooled',
      message: 'hotAction is no longer full for this node: it takes new pods again (ratio 1 while hot)',
    });
    expect(planHotEvent(full, { cpu: undefined, memory: { ratio: 1, reason: 'stale' } }, config)).toEqual({
      reason: 'NodeCooled',
      message: 'no usage measured for fallbackAfter (10m): the node takes new pods again, at ratio 1 (stale)',
    });
  });
});
