import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { parseConfig } from '../../overcommit.config.js';
import { coolThreshold, NodesConfig, ReconcileConfig, UsageConfig } from './node-oversell.config.js';
import { floorEnabled } from './node-services.js';
import { planNodeStatus, resolveNodePolicy, USAGE_ANNOTATION } from './node-oversell.rules.js';
import {
  effectivePolicy,
  formatPublished,
  formatUsageEntry,
  type NodeUsageEntry,
  formatInputs,
  isHot,
  isHotFull,
  percentile,
  type Placements,
  placedUnmeasured,
  planUsageDecision,
  podLoads,
  readInputs,
  seedSample,
  smoothInputs,
  trackPlacements,
  readPublished,
  readUsage,
  samplesInWindow,
  type UsageSample,
  usageRatio,
  usageResources,
  USAGE_REASONS,
} from './usage-aware.rules.js';
import { Outcomes, runs } from '../../../test/support/property.js';

function loadConfig(text: string) {
  const result = parseConfig(text);
  if (!result.ok) throw new Error(result.errors.join('; '));
  return result.value;
}
const usage = (overrides: Partial<UsageConfig> = {}): UsageConfig => Object.assign(new UsageConfig(), overrides);
const CORES = 1000n;
const sample = (at: number, podsCpu: bigint, nodeCpu = podsCpu): UsageSample => ({ at, pods: { cpu: podsCpu }, requests: {}, node: { cpu: nodeCpu } });

describe('usageRatio (rule 1)', () => {
  it('the worked example of docs/usage-aware.md: A 4, R 4, U 0.8, T 0.6, L 0.4 → 2', () => {
    expect(usageRatio(4n * CORES, 4n * CORES, 800n, 0.6, { estimatedLoad: 0.4 })).toBeCloseTo(2, 10);
  });

  it('never below 1, and 1 for a node with no allocatable', () => {
    expect(usageRatio(4n * CORES, 1n * CORES, 3n * CORES, 0.6, { estimatedLoad: 0.4 })).toBe(1);
    expect(usageRatio(0n, 0n, 0n, 0.6, { estimatedLoad: 0.4 })).toBe(1);
  });

  it('P, the percentile of the per-pod usage ÷ request, sets e when above U/R and L', () => {
    // four pods of 1 CPU: the node uses 1.6 (U/R 0.4) but one pod uses 0.7 per request: e = 0.7
    expect(usageRatio(4n * CORES, 4n * CORES, 1600n, 0.6, { estimatedLoad: 0.4, podLoad: 0.7 })).toBeCloseTo((0.8 / 0.7 + 4) / 4, 10);
    // uniform pods: P = U/R, the worked example unchanged
    expect(usageRatio(4n * CORES, 4n * CORES, 800n, 0.6, { estimatedLoad: 0.4, podLoad: 0.2 })).toBeCloseTo(2, 10);
    // P is read at most 1 (a pod above its request)
    expect(usageRatio(4n * CORES, 2n * CORES, 200n, 0.6, { estimatedLoad: 0.4, podLoad: 3 })).toBeCloseTo((2.2 + 2) / 4, 10);
  });

  it('podLoads: usage ÷ request per pod, leaving out the pods that request nothing', () => {
    expect(podLoads([{ cpu: 300n }, { cpu: 100n, memory: 5n }, { cpu: 50n }], [{ cpu: 1000n, memory: 10n }, { cpu: 200n }, {}])).toEqual({
      cpu: [0.3, 0.5],
      memory: [0],
    });
  });

  it('an empty node: e = L, ratio = T / L', () => {
    expect(usageRatio(4n * CORES, 0n, 0n, 0.6, { estimatedLoad: 0.4 })).toBeCloseTo(1.5, 10);
    // usage without requests counts as usage = requests (e = 1)
    expect(usageRatio(4n * CORES, 0n, 1n * CORES, 0.6, { estimatedLoad: 0.4 })).toBe(1);
  });

  it('property: filling the node up to the ratio with pods of usage/request e puts expected usage at T·A (when above 1)', () => {
    const seen = new Outcomes('above 1', 'at 1');
    fc.assert(
      fc.property(
        fc.integer({ min: 1000, max: 64_000 }),
        fc.integer({ min: 0, max: 64_000 }),
        fc.double({ min: 0, max: 1, noNaN: true }),
        fc.double({ min: 0.1, max: 1, noNaN: true }),
        fc.double({ min: 0.05, max: 1, noNaN: true }),
        (a, r, fraction, target, load) => {
          const u = Math.floor(r * fraction);
          const ratio = usageRatio(BigInt(a), BigInt(r), BigInt(u), target, { estimatedLoad: load });
          expect(ratio).toBeGreaterThanOrEqual(1);
          const e = Math.max(r > 0 ? Math.min(u / r, 1) : u > 0 ? 1 : 0, load);
          if (ratio > 1) expect(u + (ratio * a - r) * e).toBeCloseTo(target * a, 6);
          else expect(u + (a - r) * e).toBeGreaterThanOrEqual(target * a - 1e-6);
          seen.add(ratio > 1 ? 'above 1' : 'at 1');
        },
      ),
      runs(100),
    );
    seen.expectShare('above 1', 0.2);
    seen.expectShare('at 1', 0.1);
  });
});

describe('percentile (rule 2)', () => {
  it('nearest rank', () => {
    expect(percentile([], 95)).toBeUndefined();
    expect(percentile([5n], 95)).toBe(5n);
    expect(percentile([1n, 2n, 3n, 4n, 5n, 6n, 7n, 8n, 9n, 10n], 95)).toBe(10n);
    expect(percentile([10n, 1n, 9n, 2n, 8n, 3n, 7n, 4n, 6n, 5n], 50)).toBe(5n);
    expect(percentile([1n, 2n, 3n], 100)).toBe(3n);
  });

  it('samplesInWindow keeps those no older than the window', () => {
    const history = [sample(0, 1n), sample(50, 2n), sample(100, 3n)];
    expect(samplesInWindow(history, 120, 70).map((s) => s.at)).toEqual([50, 100]);
  });
});

describe('planUsageDecision (rules 1–6)', () => {
  const A = 4n * CORES;
  const fresh = (u: bigint, nodeCpu = u) => ({ A, R: 4n * CORES, samples: [sample(0, u, nodeCpu)], sinceLastSampleMs: 0 });

  it('usage: the formula, capped at the ceiling, within one step of the ratio in force', () => {
    expect(planUsageDecision('cpu', fresh(800n), 3, 2, usage())).toEqual({ ratio: 2, reason: 'usage', A: '4', R: '4', U: '800m' });
    expect(planUsageDecision('cpu', fresh(800n), 1.5, 1.5, usage())).toMatchObject({ ratio: 1.5, reason: 'usage' });
    // slow up: 1 → 1.1, then 1.2, ...
    expect(planUsageDecision('cpu', fresh(800n), 2, 1, usage())).toMatchObject({ ratio: 1.1, reason: 'usage' });
    expect(planUsageDecision('cpu', fresh(800n), 2, 1.1, usage({ maxStepUp: 0.5 }))).toMatchObject({ ratio: 1.6 });
  });

  it('e from the pods of the latest sample: a node whose pods mostly idle is not opened up for one that does not', () => {
    // U 1.6 of R 4 (mean 0.4 per request), but one of the four 1-CPU pods uses 0.7: e = 0.7 (p95 of four is their maximum)
    const mixed: UsageSample = { ...sample(0, 1600n), podLoads: { cpu: [0.3, 0.3, 0.3, 0.7] } };
    expect(planUsageDecision('cpu', { A, R: 4n * CORES, samples: [mixed], sinceLastSampleMs: 0 }, 2, 2, usage())).toMatchObject({ ratio: 1.28 });
    // uniform pods: the same as U/R
    const uniform: UsageSample = { ...sample(0, 1600n), podLoads: { cpu: [0.4, 0.4, 0.4, 0.4] } };
    expect(planUsageDecision('cpu', { A, R: 4n * CORES, samples: [uniform], sinceLastSampleMs: 0 }, 2, 2, usage())).toMatchObject({ ratio: 1.5 });
  });

  it('hold: pods placed and not measured yet hold a rise; a decrease still applies', () => {
    const placed = (u: bigint) => ({ ...fresh(u), placedUnmeasured: 500n });
    expect(planUsageDecision('cpu', placed(800n), 2, 1.1, usage())).toMatchObject({ ratio: 1.1, reason: 'usage' });
    expect(planUsageDecision('cpu', { ...fresh(800n), placedUnmeasured: 0n }, 2, 1.1, usage())).toMatchObject({ ratio: 1.2, reason: 'usage' });
    // U 2: wanted 1.2, below the 2 in force
    expect(planUsageDecision('cpu', placed(2000n), 2, 2, usage())).toMatchObject({ ratio: 1.2, reason: 'usage' });
    // hot and stale are not held either way
    expect(planUsageDecision('cpu', placed(800n), 2, 2, usage()).reason).toBe('usage');
    expect(planUsageDecision('cpu', { ...fresh(800n, 3700n), placedUnmeasured: 500n }, 2, 2, usage())).toMatchObject({ ratio: 1, reason: 'hot' });
  });

  it('fast down: a decrease applies at once', () => {
    // U 2, e 0.5: ((2.4 − 2)/0.5 + 4)/4 = 1.2
    expect(planUsageDecision('cpu', fresh(2000n), 2, 2, usage())).toMatchObject({ ratio: 1.2, reason: 'usage' });
  });

  it('deadband: a change smaller than it is not applied', () => {
    // wanted 2; in force 1.97 → unchanged
    expect(planUsageDecision('cpu', fresh(800n), 2, 1.97, usage())).toMatchObject({ ratio: 1.97 });
    expect(planUsageDecision('cpu', fresh(800n), 2, 1.9, usage({ deadband: 0 }))).toMatchObject({ ratio: 2 });
  });

  it('hot: node usage above the threshold → 1 at once, whatever the pods use', () => {
    expect(planUsageDecision('cpu', fresh(800n, 3700n), 2, 2, usage())).toEqual({ ratio: 1, reason: 'hot', A: '4', R: '4', U: '800m' });
    expect(planUsageDecision('cpu', fresh(800n, 3500n), 2, 2, usage())).toMatchObject({ reason: 'usage' });
  });

  it('smoothing: the percentile of the window, not the last sample', () => {
    const samples = [sample(0, 2000n), ...Array.from({ length: 9 }, (_, i) => sample(i + 1, 800n))];
    // p95 of 10 samples is the highest: 2 cores → ratio 1.2, not 2
    expect(planUsageDecision('cpu', { A, R: 4n * CORES, samples, sinceLastSampleMs: 0 }, 2, 2, usage())).toMatchObject({ ratio: 1.2, U: '2' });
    expect(planUsageDecision('cpu', { A, R: 4n * CORES, samples, sinceLastSampleMs: 0 }, 2, 2, usage({ percentile: 50 }))).toMatchObject({
      ratio: 2,
      U: '800m',
    });
  });

  it('stale: no sample for staleAfter → never rises; for fallbackAfter → 1', () => {
    const old = (since: number) => ({ A, R: 4n * CORES, samples: [sample(0, 100n)], sinceLastSampleMs: since });
    // a stale decision keeps A and R, never U: the samples in the window are no current measurement
    expect(planUsageDecision('cpu', old(120_000), 2, 1.3, usage())).toEqual({ ratio: 1.3, reason: 'stale', A: '4', R: '4' });
    expect(planUsageDecision('cpu', old(599_000), 2, 1.3, usage())).toMatchObject({ ratio: 1.3, reason: 'stale' });
    expect(planUsageDecision('cpu', old(600_000), 2, 1.3, usage())).toMatchObject({ ratio: 1, reason: 'stale' });
    // no sample in the window at all
    expect(planUsageDecision('cpu', { A, R: 0n, samples: [], sinceLastSampleMs: 1000 }, 2, 1.3, usage())).toMatchObject({ ratio: 1.3, reason: 'stale' });
  });

  it('static: no target for the resource, or a ceiling of 1', () => {
    expect(planUsageDecision('memory', fresh(1n), 2, 1, usage({ target: { cpu: 0.6 } }))).toEqual({ ratio: 2, reason: 'static' });
    expect(planUsageDecision('cpu', fresh(1n), 1, 1, usage())).toEqual({ ratio: 1, reason: 'static' });
  });

  it('property: the ratio is in [1, ceiling], rises by at most maxStepUp (not at all while held), and a lowered ceiling applies at once', () => {
    const reasons = new Outcomes('usage', 'stale', 'static', 'hot');
    const steps = new Outcomes('rose', 'lowered', 'kept', 'kept, held');
    fc.assert(
      fc.property(
        fc.integer({ min: 100, max: 64_000 }),
        fc.integer({ min: 0, max: 128_000 }),
        // Usage in thousandths of A: above 900 the node is hot (hotThreshold 0.9) and gets ratio 1.
        fc.array(fc.record({ pods: fc.integer({ min: 0, max: 1000 }), node: fc.integer({ min: 0, max: 1100 }) }), { maxLength: 12 }),
        // Mostly a fresh sample (within staleAfter, 120 s): past it the decision is stale and nothing rises.
        fc.oneof({ arbitrary: fc.integer({ min: 0, max: 119_999 }), weight: 4 }, { arbitrary: fc.integer({ min: 0, max: 1_000_000 }), weight: 1 }),
        fc.oneof({ arbitrary: fc.constant(1), weight: 1 }, { arbitrary: fc.integer({ min: 100, max: 1000 }).map((n) => n / 100), weight: 9 }),
        fc.option(fc.integer({ min: 0, max: 1200 }).map((n) => n / 100)),
        fc.record({ deadband: fc.constantFrom(0, 0.05, 0.1), maxStepUp: fc.constantFrom(0.01, 0.1, 0.5), percentile: fc.constantFrom(50, 95, 100) }),
        fc.constantFrom(0n, 500n),
        (a, r, measured, since, ceiling, previous, envelope, placed) => {
          const samples = measured.map((m, i) => sample(i, (BigInt(a) * BigInt(m.pods)) / 1000n, (BigInt(a) * BigInt(m.node)) / 1000n));
          const decision = planUsageDecision(
            'cpu',
            { A: BigInt(a), R: BigInt(r), samples, sinceLastSampleMs: since, placedUnmeasured: placed },
            ceiling,
            previous ?? undefined,
            usage(envelope),
          );
          expect(decision.ratio).toBeGreaterThanOrEqual(1);
          expect(decision.ratio).toBeLessThanOrEqual(ceiling);
          const inForce = Math.min(Math.max(previous ?? 1, 1), ceiling);
          if (decision.reason !== 'static') expect(decision.ratio).toBeLessThanOrEqual(inForce + envelope.maxStepUp + 1e-9);
          if (decision.reason === 'stale' || (decision.reason !== 'static' && placed > 0n)) expect(decision.ratio).toBeLessThanOrEqual(inForce);
          expect(Math.round(decision.ratio * 100)).toBeCloseTo(decision.ratio * 100, 6);
          reasons.add(decision.reason as 'usage' | 'stale' | 'static' | 'hot');
          if (decision.reason === 'usage')
            steps.add(decision.ratio > inForce ? 'rose' : decision.ratio < inForce ? 'lowered' : placed > 0n ? 'kept, held' : 'kept');
        },
      ),
      runs(400),
    );
    // Over three seeds: 35-46 % usage, 18-22 % stale, 10-11 % static, 24-33 % hot; of the usage
    // decisions 11-18 % rose, 33-42 % were lowered.
    for (const [reason, share] of [
      ['usage', 0.2],
      ['stale', 0.08],
      ['static', 0.03],
      ['hot', 0.1],
    ] as const)
      reasons.expectShare(reason, share);
    steps.expectShare('rose', 0.05);
    steps.expectShare('lowered', 0.1);
    steps.expectEach();
  });
});

describe('trackPlacements, placedUnmeasured (rule 5, the hold)', () => {
  const bound = new Map([
    ['old', { cpu: 1000n, memory: 1n }],
    ['new', { cpu: 500n, memory: 2n }],
    ['new-measured', { cpu: 250n }],
  ]);
  const STALE = 120_000;

  it('a pod placed since the previous sample and not measured holds, from the sample that found it, for staleAfter', () => {
    const first = trackPlacements(undefined, ['old'], new Set(), 0);
    const second = trackPlacements(first, bound.keys(), new Set(['old', 'new-measured']), 10_000);
    expect(second.unmeasured).toEqual(new Map([['new', 10_000]]));
    expect(placedUnmeasured(bound, second, 10_000, STALE)).toEqual({ cpu: 500n, memory: 2n });
    // still not measured: it keeps the time of the sample that found it, and holds until staleAfter from then
    const third = trackPlacements(second, bound.keys(), new Set(['old']), 20_000);
    expect(third.unmeasured.get('new')).toBe(10_000);
    expect(placedUnmeasured(bound, third, 129_999, STALE)).toEqual({ cpu: 500n, memory: 2n });
    expect(placedUnmeasured(bound, third, 130_000, STALE)).toEqual({});
    // measured once: out for good, even if a later sample misses it
    const fourth = trackPlacements(third, bound.keys(), new Set(['new']), 30_000);
    expect(trackPlacements(fourth, bound.keys(), new Set(), 40_000).unmeasured).toEqual(new Map());
  });

  it('a pod placed since the latest sample holds until a sample finds it', () => {
    const first = trackPlacements(undefined, ['old'], new Set(), 0);
    expect(placedUnmeasured(bound, first, 5_000, STALE)).toEqual({ cpu: 750n, memory: 2n });
  });

  it("the pods a node's first sample finds hold nothing, and nothing holds before it", () => {
    const first = trackPlacements(undefined, bound.keys(), new Set(), 0);
    expect(first.unmeasured).toEqual(new Map());
    expect(placedUnmeasured(bound, first, 0, STALE)).toEqual({});
    expect(placedUnmeasured(bound, undefined, 0, STALE)).toEqual({});
  });

  it('property: a pod holds from the sample that first finds it until one measures it, for staleAfter at most', () => {
    // Per pod and sample, once bound: holding, measured, or held out its staleAfter.
    const seen = new Outcomes('holds', 'measured', 'held for staleAfter');
    fc.assert(
      fc.property(
        // per pod: the sample it is placed before (0: before the first), and the first sample that measures it (null: never)
        fc.array(fc.record({ placedBefore: fc.nat(8), measuredFrom: fc.option(fc.nat(10)) }), { maxLength: 12 }),
        fc.integer({ min: 1, max: 12 }).map((samples) => samples * 10_000),
        (pods, staleAfterMs) => {
          let placements: Placements | undefined;
          for (let k = 0; k < 10; k++) {
            const isBound = (pod: (typeof pods)[number]) => pod.placedBefore <= k;
            const isMeasured = (pod: (typeof pods)[number]) => isBound(pod) && pod.measuredFrom !== null && pod.measuredFrom <= k;
            // each pod's request is its own bit: the sum says exactly which pods hold
            const boundNow = new Map(pods.flatMap((pod, i) => (isBound(pod) ? [[`p${i}`, { cpu: 1n << BigInt(i) }] as const] : [])));
            const measured = new Set(pods.flatMap((pod, i) => (isMeasured(pod) ? [`p${i}`] : [])));
            // sample k at k × 10 s, then its plan (as the leader does, in one tick)
            placements = trackPlacements(placements, boundNow.keys(), measured, k * 10_000);
            const expected = pods.reduce(
              (sum, pod, i) =>
                pod.placedBefore > 0 && isBound(pod) && !isMeasured(pod) && (k - pod.placedBefore) * 10_000 < staleAfterMs ? sum + (1n << BigInt(i)) : sum,
              0n,
            );
            expect(placedUnmeasured(boundNow, placements, k * 10_000, staleAfterMs).cpu ?? 0n).toBe(expected);
            for (const [i, pod] of pods.entries()) {
              if (pod.placedBefore === 0 || !isBound(pod)) continue;
              seen.add(isMeasured(pod) ? 'measured' : (expected >> BigInt(i)) & 1n ? 'holds' : 'held for staleAfter');
            }
          }
        },
      ),
      runs(100),
    );
    seen.expectShare('holds', 0.2);
    seen.expectShare('measured', 0.1);
    seen.expectShare('held for staleAfter', 0.05);
  });
});

describe('effectivePolicy (rules 6, 7)', () => {
  const config = (yaml: string) => loadConfig(yaml).nodes;
  const nodes = config(`nodes:\n  defaultRatios: {cpu: 2, memory: 1.5}\n  defaultUsage: {target: {cpu: 0.6}}\n`);
  const policy = resolveNodePolicy({}, nodes);

  it('the published ratio, capped at the ceiling; the static ratio for a resource without a target', () => {
    const { policy: effective, decisions } = effectivePolicy(policy, { cpu: { ratio: 1.4, reason: 'usage', A: '4', R: '2', U: '500m' } }, undefined);
    expect(effective?.ratios).toEqual({ cpu: 1.4, memory: 1.5 });
    expect(decisions).toEqual({ cpu: { ratio: 1.4, reason: 'usage', A: '4', R: '2', U: '500m' } });
    expect(effectivePolicy(policy, { cpu: { ratio: 7, reason: 'usage' } }, undefined).policy?.ratios.cpu).toBe(2);
  });

  it('no published entry: the recorded ratio capped at the ceiling (stale), else 1', () => {
    expect(effectivePolicy(policy, undefined, { cpu: 1.7 }).decisions).toEqual({ cpu: { ratio: 1.7, reason: 'stale' } });
    expect(effectivePolicy(policy, undefined, { cpu: 9 }).policy?.ratios.cpu).toBe(2);
    expect(effectivePolicy(policy, {}, undefined).policy?.ratios.cpu).toBe(1);
  });

  it('a policy without usage is unchanged', () => {
    const plain = resolveNodePolicy({}, config(`nodes:\n  defaultRatios: {cpu: 2}\n`));
    expect(effectivePolicy(plain, { cpu: { ratio: 1.2, reason: 'usage' } }, undefined)).toEqual({ policy: plain, decisions: {} });
    expect(effectivePolicy(null, undefined, undefined)).toEqual({ policy: null, decisions: {} });
  });

  it('planNodeStatus writes the effective ratio and the usage annotation, then the floor', () => {
    const node = {
      metadata: { name: 'n1', annotations: {} },
      status: { allocatable: { cpu: '4', memory: '8Gi', pods: '110' }, capacity: { cpu: '4', memory: '8Gi', pods: '110' } },
    };
    const { policy: effective, decisions } = effectivePolicy(policy, { cpu: { ratio: 1.4, reason: 'usage' } }, undefined);
    const plan = planNodeStatus(node, effective, undefined, { cpu: 6000n }, formatUsageEntry(decisions))!;
    expect(plan.allocatable.cpu).toBe(6000n); // 4 × 1.4 = 5.6 < 6 committed: the floor
    expect(plan.ratios.cpu).toBe(1.4);
    expect(plan.annotations[USAGE_ANNOTATION]).toBe('{"cpu":{"ratio":1.4,"reason":"usage"}}');
    expect(planNodeStatus(node, effective, undefined, undefined)!.allocatable.cpu).toBe(5600n);
  });

  it('property: whatever is published or recorded, the ratio is the published one, else the recorded one, else 1, within [1, ceiling]', () => {
    // Half the entries a decision as the leader writes it, or nearly (fc.jsonValue() alone almost
    // never makes one that reads): ratios around [1, 10], reasons and quantities good and bad.
    const decision = fc.record(
      {
        ratio: fc.oneof(fc.constantFrom(1, 1.5, 2, 3, 10), fc.double({ min: 0, max: 12, noNaN: true })),
        reason: fc.constantFrom(...USAGE_REASONS, 'x'),
        A: fc.constantFrom('4', '500m', '-1', 'four'),
      },
      { requiredKeys: ['ratio', 'reason'] },
    );
    const readable = (d: { ratio: number; reason: string; A?: string }) =>
      d.ratio >= 1 && d.ratio <= 10 && (USAGE_REASONS as readonly string[]).includes(d.reason) && (d.A === undefined || d.A === '4' || d.A === '500m');
    const published = fc.oneof(
      fc.jsonValue().map((value) => ({ value, cpu: undefined })),
      decision.map((cpu) => ({ value: { cpu }, cpu })),
    );
    const source = new Outcomes('published', 'recorded', 'neither');
    const bound = new Outcomes('capped at the ceiling', 'raised to 1', 'within [1, ceiling]');
    fc.assert(
      fc.property(published, fc.option(fc.double({ min: -5, max: 50, noNaN: true })), ({ value, cpu }, recorded) => {
        const entry = readPublished(JSON.stringify({ n1: value })).get('n1');
        if (cpu !== undefined) expect(entry?.cpu !== undefined, JSON.stringify(cpu)).toBe(readable(cpu));
        const { policy: effective } = effectivePolicy(policy, entry, recorded === null ? undefined : { cpu: recorded });
        const wanted = entry?.cpu?.ratio ?? recorded ?? 1;
        expect(effective!.ratios.cpu).toBe(Math.min(2, Math.max(1, wanted)));
        source.add(entry?.cpu !== undefined ? 'published' : recorded !== null ? 'recorded' : 'neither');
        bound.add(wanted > 2 ? 'capped at the ceiling' : wanted < 1 ? 'raised to 1' : 'within [1, ceiling]');
      }),
      runs(300),
    );
    // About 11 % published, 75 % recorded, 14 % neither (three seeds).
    source.expectShare('published', 0.05);
    source.expectShare('recorded', 0.3);
    source.expectShare('neither', 0.05);
    bound.expectEach();
  });
});

describe('published ratios', () => {
  it('round trip, nodes sorted; bad decisions left out', () => {
    const entries = new Map<string, NodeUsageEntry>([
      ['b', { cpu: { ratio: 1.5, reason: 'usage', A: '4', R: '2', U: '1' } }],
      ['a', { memory: { ratio: 1, reason: 'hot' } }],
    ]);
    const text = formatPublished(entries);
    expect(text.indexOf('"a"')).toBeLessThan(text.indexOf('"b"'));
    expect(readPublished(text)).toEqual(entries);
    const bad = readPublished(
      '{"a":{"cpu":{"ratio":0.5,"reason":"usage"},"memory":{"ratio":1.2,"reason":"x"}},"b":{"cpu":{"ratio":1.2,"reason":"usage","A":"-1"}},"c":3}',
    );
    expect(bad.get('a')).toEqual({});
    expect(bad.get('b')).toEqual({});
    expect(bad.has('c')).toBe(false);
    expect(() => readPublished('[]')).toThrow(/not a JSON object/);
  });

  it('readUsage reads metrics.k8s.io quantities', () => {
    expect(readUsage({ cpu: '250m', memory: '1Gi' })).toEqual({ cpu: 250n, memory: 1073741824n });
    expect(readUsage({ cpu: '12345678n', memory: 'lots' })).toEqual({ cpu: 13n });
    expect(readUsage(null)).toEqual({});
  });
});

describe('config', () => {
  it('defaults', () => {
    const nodes = loadConfig('nodes:\n  pools:\n  - name: web\n    nodeSelector: {matchLabels: {a: b}}\n    ratios: {cpu: 2}\n    usage: {}\n').nodes;
    expect({ ...nodes.pools[0].usage }).toMatchObject({
      percentile: 95,
      window: '5m',
      interval: '30s',
      deadband: 0.05,
      maxStepUp: 0.1,
      staleAfter: '2m',
      fallbackAfter: '10m',
    });
    expect({ ...nodes.pools[0].usage!.target }).toEqual({ cpu: 0.6, memory: 0.8 });
    expect({ ...nodes.pools[0].usage!.estimatedLoad }).toEqual({ cpu: 0.4, memory: 0.8 });
    expect({ ...nodes.pools[0].usage!.hotThreshold }).toEqual({ cpu: 0.9, memory: 0.9 });
  });

  it.each([
    ['target: {cpu: 0}', /cpu must not be less than 0.01/],
    ['target: {cpu: 1.5}', /cpu must not be greater than 1/],
    ['percentile: 20', /percentile must not be less than 50/],
    ['window: 10s', /window must be a duration/],
    ['interval: 2s', /interval must be a duration/],
    ['{window: 1m, interval: 2m}', /interval must not be longer than window/],
    ['deadband: 2', /deadband must not be greater than 1/],
    ['maxStepUp: 0', /maxStepUp must not be less than 0.01/],
    ['{staleAfter: 10s, interval: 30s}', /staleAfter must not be shorter than interval/],
    ['{staleAfter: 5m, fallbackAfter: 5m}', /fallbackAfter must be longer than staleAfter/],
  ])('rejects %s', (section, message) => {
    const body = section.startsWith('{') ? section : `{${section}}`;
    expect(() => loadConfig(`nodes:\n  defaultRatios: {cpu: 2}\n  defaultUsage: ${body}\n`)).toThrow(message);
  });
});

describe('restart-proof inputs (rule 8)', () => {
  const spike: UsageSample = { at: 1000, pods: { cpu: 3000n }, requests: { cpu: 4000n }, node: { cpu: 3700n }, podLoads: { cpu: [0.7, 0.8] } };
  const calm: UsageSample = { at: 2000, pods: { cpu: 800n }, requests: { cpu: 4000n }, node: { cpu: 900n }, podLoads: { cpu: [0.2, 0.2] } };

  it('smooths the window as the plan does, and a new leader seeded with it plans the same (a spike stays remembered)', () => {
    const inputs = smoothInputs([spike, calm], 95, 1_700_000_000_000)!;
    expect(inputs).toEqual({
      at: 1_700_000_000_000,
      U: { cpu: '3', memory: '0' },
      node: { cpu: '3700m', memory: '0' },
      R: { cpu: '4', memory: '0' },
      P: { cpu: 0.2 },
    });
    const round = readInputs(formatInputs(new Map([['n1', inputs]])));
    expect(round.get('n1')).toEqual(inputs);
    const seeded = seedSample(round.get('n1')!, 50_000, 5_000);
    expect(seeded.at).toBe(45_000);
    const inputsOf = (samples: UsageSample[]) => ({ A: 4000n, R: 4000n, samples, sinceLastSampleMs: 0 });
    // the old leader: hot (node usage 3.7 of 4 in the window); the new one, from the seed alone: hot too
    expect(planUsageDecision('cpu', inputsOf([spike, calm]), 2, 2, usage())).toMatchObject({ ratio: 1, reason: 'hot' });
    expect(planUsageDecision('cpu', inputsOf([seeded]), 2, 2, usage())).toMatchObject({ ratio: 1, reason: 'hot' });
    // without it, its first sample alone would have raised the ratio in force
    expect(planUsageDecision('cpu', inputsOf([calm]), 2, 1, usage())).toMatchObject({ reason: 'usage', ratio: 1.1 });
  });

  it('reads defensively: an entry that is not what the leader writes is left out; not a JSON object throws', () => {
    const good = { at: 1, U: { cpu: '1' }, node: { cpu: '1' }, R: { cpu: '2' }, P: { cpu: 0.5 } };
    const text = JSON.stringify({
      good,
      noAt: { ...good, at: 'x' },
      badQuantity: { ...good, U: { cpu: 'lots' } },
      negative: { ...good, R: { cpu: '-1' } },
      badLoad: { ...good, P: { cpu: -1 } },
      missing: { at: 1, U: {} },
    });
    expect([...readInputs(text).keys()]).toEqual(['good']);
    expect(() => readInputs('[]')).toThrow(/not a JSON object/);
  });
});

// ---------------------------------------------------------------------------------------------
// Edges the mutation run (docs/testing.md) found untested
// ---------------------------------------------------------------------------------------------

describe('usage-aware: edges found by mutation testing', () => {
  const A = 4n * CORES;

  it('usageRatio: pods measured using something while requesting nothing count as fully loaded (e = 1)', () => {
    expect(usageRatio(4000n, 0n, 1000n, 0.9, { estimatedLoad: 0.4 })).toBe(1);
  });

  it('percentile sorts its input', () => {
    expect(percentile([3, 1, 2], 50)).toBe(2);
    expect(percentile([5n, 1n, 3n], 100)).toBe(5n);
    expect(percentile([5n, 1n, 3n], 1)).toBe(1n);
  });

  it('planUsageDecision: a change of exactly the deadband applies; no target or a null one is static; no estimatedLoad is 0', () => {
    const empty = { A, R: 0n, samples: [sample(0, 0n)], sinceLastSampleMs: 0 };
    const exact = usage({ target: { cpu: 0.625 }, estimatedLoad: { cpu: 0.5 }, deadband: 0.25, maxStepUp: 1 });
    expect(planUsageDecision('cpu', empty, 3, 1, exact)).toEqual({ ratio: 1.25, reason: 'usage', A: '4', R: '0', U: '0' });
    expect(planUsageDecision('cpu', empty, 3, 1, usage({ target: undefined }))).toEqual({ ratio: 3, reason: 'static' });
    expect(planUsageDecision('cpu', empty, 3, 1, usage({ target: { cpu: null as unknown as number } }))).toEqual({ ratio: 3, reason: 'static' });
    const busy = { A, R: 4n * CORES, samples: [sample(0, 800n)], sinceLastSampleMs: 0 };
    expect(planUsageDecision('cpu', busy, 3, 3, usage({ estimatedLoad: undefined }))).toEqual({ ratio: 3, reason: 'usage', A: '4', R: '4', U: '800m' });
  });

  it('isHot: never without a threshold or without allocatable', () => {
    expect(isHot('cpu', 100n, 0n, usage())).toBe(false);
    expect(isHot('cpu', 3900n, A, usage({ hotThreshold: { cpu: null as unknown as number } }))).toBe(false);
    expect(isHot('cpu', 3900n, A, usage({ hotThreshold: undefined }))).toBe(false);
    expect(isHot('cpu', 3900n, A, usage())).toBe(true);
  });

  it('usageResources: a target and a ceiling above 1', () => {
    expect(usageResources({ pool: null, ratios: { cpu: 1, memory: 2 }, usage: usage() })).toEqual(['memory']);
    expect(usageResources({ pool: null, ratios: { cpu: 2 }, usage: usage({ target: undefined }) })).toEqual([]);
  });

  it('effectivePolicy returns a policy without usage resources as it is; isHotFull needs one hot-full decision', () => {
    const policy = { pool: null, ratios: { cpu: 1 }, usage: usage() };
    expect(effectivePolicy(policy, undefined, undefined).policy).toBe(policy);
    expect(isHotFull({ cpu: { ratio: 1, reason: 'hot-full' }, memory: { ratio: 1.2, reason: 'usage' } })).toBe(true);
    expect(isHotFull({ cpu: undefined, memory: { ratio: 1, reason: 'hot-full' } })).toBe(true);
  });

  it('readPublished: a ratio as a string or A as a number is left out; A of 0 is kept', () => {
    const read = readPublished(
      '{"a":{"cpu":{"ratio":"2","reason":"usage"},"memory":{"ratio":1.2,"reason":"usage","A":5}},"b":{"cpu":{"ratio":1.2,"reason":"usage","A":"0"}}}',
    );
    expect(read.get('a')).toEqual({});
    expect(read.get('b')).toEqual({ cpu: { ratio: 1.2, reason: 'usage', A: '0' } });
  });

  it('podLoads with fewer requests than usages; readUsage keeps 0 and drops numbers and negatives', () => {
    expect(podLoads([{ cpu: 1n }], [])).toEqual({ cpu: [], memory: [] });
    expect(readUsage({ cpu: 5, memory: '-1' })).toEqual({});
    expect(readUsage({ cpu: '0' })).toEqual({ cpu: 0n });
  });

  it('smoothInputs: nothing without samples; R from the latest of three; no P without pod loads', () => {
    expect(smoothInputs([], 95, 0)).toBeUndefined();
    const at = (t: number, requested: bigint): UsageSample => ({ at: t, pods: { cpu: 100n }, requests: { cpu: requested }, node: { cpu: 200n } });
    expect(smoothInputs([at(0, 1000n), at(1, 2000n), at(2, 3000n)], 95, 1234.4)).toStrictEqual({
      at: 1234,
      U: { cpu: '100m', memory: '0' },
      node: { cpu: '200m', memory: '0' },
      R: { cpu: '3', memory: '0' },
      P: {},
    });
  });

  it('seedSample reads only the amounts and loads present', () => {
    expect(seedSample({ at: 0, U: { cpu: '1' }, node: {}, R: {}, P: { cpu: 0.5 } }, 10_000, 1_000)).toStrictEqual({
      at: 9000,
      pods: { cpu: 1000n },
      requests: {},
      node: {},
      podLoads: { cpu: [0.5] },
    });
  });

  it('readInputs leaves out a null entry, a number quantity, a node that is no object; keeps a load of 0; formatInputs sorts', () => {
    const read = readInputs(
      '{"a":null,"b":{"at":1,"U":{"cpu":5},"node":{},"R":{},"P":{}},"c":{"at":1,"U":{},"node":5,"R":{},"P":{}},"d":{"at":1,"U":{},"node":{},"R":{},"P":{"cpu":0}},"e":{"at":1,"U":{},"node":{},"R":{},"P":{"cpu":1e999}}}',
    );
    expect([...read]).toStrictEqual([['d', { at: 1, U: {}, node: {}, R: {}, P: { cpu: 0 } }]]);
    const inputs = { at: 1, U: {}, node: {}, R: {}, P: {} };
    expect(
      formatInputs(
        new Map([
          ['b', inputs],
          ['a', inputs],
        ]),
      ),
    ).toBe('{"a":{"at":1,"U":{},"node":{},"R":{},"P":{}},"b":{"at":1,"U":{},"node":{},"R":{},"P":{}}}');
  });

  it('config: defaults on, durations are strings up to their maximum, no cool threshold without a hot one', () => {
    expect(new NodesConfig().commitmentFloor).toBe(true);
    expect(new NodesConfig().coalesceStatusWrites).toBe(true);
    expect(new ReconcileConfig().enabled).toBe(true);
    expect(floorEnabled(undefined)).toBe(true);
    expect(floorEnabled({ commitmentFloor: false } as NodesConfig)).toBe(false);
    expect(parseConfig('nodes:\n  defaultRatios: { cpu: 2 }\n  defaultUsage: { window: 1h }\n').ok).toBe(true);
    expect(parseConfig('nodes:\n  defaultRatios: { cpu: 2 }\n  defaultUsage: { window: 300 }\n').ok).toBe(false);
    expect(parseConfig('nodes:\n  defaultRatios: { cpu: 2 }\n  defaultUsage: { window: [5m] }\n').ok).toBe(false);
    expect(coolThreshold({ hotThreshold: undefined as unknown as UsageConfig['hotThreshold'] }, 'cpu')).toBeNaN();
    expect(coolThreshold({ hotThreshold: { cpu: null as unknown as number } }, 'cpu')).toBeNaN();
  });
});
