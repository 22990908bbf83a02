import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { admitStatusWrite, nodeOversellStrategy } from '../../test/fixtures/node-oversell-strategy.js';
import { Outcomes, runs } from '../../test/support/property.js';
import { parseConfig, type OvercommitConfig } from '../overcommit.config.js';
import { DISABLED_LABEL } from '../domain/node-rules/node-oversell.rules.js';
import type { NodeLike } from '../domain/node-like.js';
import { type ResourceAmounts } from '../domain/resources.js';
import { NodeOversellStrategy } from '../node-oversell/node-oversell.strategy.js';
import { fullBucket, isNudgeDue, type Nudged, planNudges, readNudge, takeToken } from './reconciler.rules.js';
import { type NodeUsageEntry } from '../domain/node-rules/usage-aware.rules.js';

type Json = Record<string, any>;

function config(yaml: string): OvercommitConfig {
  const parsed = parseConfig(yaml);
  if (!parsed.ok) throw new Error(parsed.errors.join('\n'));
  return parsed.value;
}

const RAW = { cpu: '4', memory: '16Gi', pods: '110' };
const node = (
  name: string,
  labels: Record<string, string> = {},
  allocatable: Record<string, string> = RAW,
  annotations: Record<string, string> = {},
): Json => ({
  metadata: { name, labels, annotations },
  status: { allocatable: { ...allocatable }, capacity: { ...RAW } },
});

const POOLS = `
nodes:
  defaultRatios: { cpu: 1.5 }
  pools:
    - name: quiet
      nodeSelector: { matchLabels: { pool: quiet } }
      ratios: { cpu: 2 }
      mode: shadow
`;

function webhook(committed: ResourceAmounts | undefined, usage?: NodeUsageEntry): NodeOversellStrategy {
  return nodeOversellStrategy({ committed: () => committed, usage: () => usage });
}

/** The nudge as the API server runs it: the stored Node, unchanged, admitted as an update of itself. */
function nudge(stored: Json, cfg: OvercommitConfig, committed?: ResourceAmounts, usage?: NodeUsageEntry): Json {
  return admitStatusWrite(webhook(committed, usage), stored, stored, cfg, 'system:serviceaccount:kube-overcommit:kube-overcommit');
}

describe('readNudge', () => {
  it('a raw node under a ratio > 1 is due, with the planned allocatable as its target', () => {
    expect(readNudge(node('a') as NodeLike, config(POOLS).nodes, undefined)).toEqual({ due: true, target: 'cpu=6,memory=16Gi,ephemeral-storage=,pods=110' });
  });

  it('is not due when stored matches the plan, opted out, in shadow, or unplannable', () => {
    const cfg = config(POOLS);
    const inflated = nudge(node('a'), cfg);
    expect(inflated.status.allocatable.cpu).toBe('6');
    expect(readNudge(inflated as NodeLike, cfg.nodes, undefined)).toEqual({ due: false, reason: 'matches' });
    expect(readNudge(node('b', { [DISABLED_LABEL]: 'true' }) as NodeLike, cfg.nodes, undefined)).toEqual({ due: false, reason: 'opted-out' });
    expect(readNudge(node('c', { pool: 'quiet' }) as NodeLike, cfg.nodes, undefined)).toEqual({ due: false, reason: 'shadow' });
    expect(readNudge(node('d', {}, { cpu: 'four' }) as NodeLike, cfg.nodes, undefined)).toEqual({ due: false, reason: 'unplannable' });
    expect(readNudge(node('e') as NodeLike, config('').nodes, undefined)).toEqual({ due: false, reason: 'matches' });
  });

  it('plans the commitment floor as the webhook does: due when the bound requests exceed the stored value', () => {
    const cfg = config('nodes: { defaultRatios: { cpu: 1 } }');
    const committed = { cpu: 5000n, pods: 3n };
    expect(readNudge(node('a') as NodeLike, cfg.nodes, committed)).toEqual({ due: true, target: 'cpu=5,memory=16Gi,ephemeral-storage=,pods=110' });
    expect(readNudge(node('a') as NodeLike, cfg.nodes, undefined)).toEqual({ due: false, reason: 'matches' });
    expect(readNudge(node('a') as NodeLike, config('nodes: { commitmentFloor: false }').nodes, committed)).toEqual({ due: false, reason: 'matches' });
    expect(readNudge(nudge(node('a'), cfg, committed) as NodeLike, cfg.nodes, committed)).toEqual({ due: false, reason: 'matches' });
  });

  it('one nudge settles every node it says is due: the webhook, given the stored Node, writes the target', () => {
    const amount = (max: number) => fc.integer({ min: 1, max }).map(String);
    const ratio = fc.integer({ min: 100, max: 1000 }).map((r) => r / 100);
    const seen = new Outcomes('due', 'already matching');
    fc.assert(
      fc.property(amount(64), amount(64), ratio, ratio, fc.option(amount(80), { nil: undefined }), (cpu, capCpu, before, after, bound) => {
        const capacity = String(Math.max(Number(cpu), Number(capCpu)));
        const raw = { metadata: { name: 'n', labels: {}, annotations: {} }, status: { allocatable: { cpu }, capacity: { cpu: capacity } } };
        const committed = bound === undefined ? undefined : { cpu: BigInt(bound) * 1000n };
        const stored = nudge(raw, config(`nodes: { defaultRatios: { cpu: ${before} } }`), committed);
        const cfg = config(`nodes: { defaultRatios: { cpu: ${after} } }`);
        const decision = readNudge(stored as NodeLike, cfg.nodes, committed);
        const written = nudge(stored, cfg, committed);
        expect(readNudge(written as NodeLike, cfg.nodes, committed)).toEqual({ due: false, reason: 'matches' });
        if (decision.due) expect(decision.target).toBe(`cpu=${written.status.allocatable.cpu},memory=,ephemeral-storage=,pods=`);
        else expect(written.status.allocatable).toEqual(stored.status.allocatable);
        seen.add(decision.due ? 'due' : 'already matching');
      }),
      runs(60),
    );
    seen.expectEach();
  });
});

describe('planNudges', () => {
  const cfg = config(POOLS);
  const nodes = [node('c'), node('a'), node('b', { pool: 'quiet' }), nudge(node('d'), cfg)] as NodeLike[];

  it('lists the due nodes in name order', () => {
    expect(planNudges(nodes, cfg.nodes, () => undefined, { nudged: new Map(), now: 0, retryAfterMs: 30_000 }).map((n) => n.node)).toEqual(['a', 'c']);
  });

  it('skips a node nudged for the same target within retryAfterMs; a new target is due at once', () => {
    const target = 'cpu=6,memory=16Gi,ephemeral-storage=,pods=110';
    const nudged = new Map<string, Nudged>([
      ['a', { target, at: 1_000 }],
      ['c', { target: 'cpu=8,memory=16Gi,ephemeral-storage=,pods=110', at: 1_000 }],
    ]);
    expect(planNudges(nodes, cfg.nodes, () => undefined, { nudged, now: 30_999, retryAfterMs: 30_000 }).map((n) => n.node)).toEqual(['c']);
    expect(planNudges(nodes, cfg.nodes, () => undefined, { nudged, now: 31_000, retryAfterMs: 30_000 }).map((n) => n.node)).toEqual(['a', 'c']);
    expect(isNudgeDue(target, undefined, 0, 30_000)).toBe(true);
  });
});

describe('takeToken', () => {
  it('lets a full bucket of `rate` through at once, then `rate` a second', () => {
    let bucket = fullBucket(100, 0);
    let taken = 0;
    for (let now = 0; now <= 2_000; now += 1) {
      for (;;) {
        const next = takeToken(bucket, 100, now);
        bucket = next.bucket;
        if (next.waitMs > 0) break;
        taken++;
      }
      if (now === 0) expect(taken).toBe(100);
    }
    expect(taken).toBe(300);
  });

  it('says how long until the next token, and never fills beyond one second', () => {
    const empty = { tokens: 0, at: 0 };
    expect(takeToken(empty, 100, 0)).toEqual({ bucket: { tokens: 0, at: 0 }, waitMs: 10 });
    expect(takeToken(empty, 100, 10).waitMs).toBe(0);
    expect(takeToken(empty, 1, 0).waitMs).toBe(1_000);
    expect(takeToken(empty, 100, 60_000).bucket.tokens).toBe(99);
  });
});

describe('usage-aware ratios', () => {
  const cfg = config('nodes:\n  defaultRatios: { cpu: 2 }\n  defaultUsage: { target: { cpu: 0.6 } }\n');

  it('a newly published ratio is a new target, and one nudge through the webhook settles it', () => {
    const published: NodeUsageEntry = { cpu: { ratio: 1.5, reason: 'usage' } };
    const raw = node('a');
    expect(readNudge(raw as NodeLike, cfg.nodes, undefined, published)).toEqual({ due: true, target: 'cpu=6,memory=16Gi,ephemeral-storage=,pods=110' });
    const written = nudge(raw, cfg, undefined, published);
    expect(written.status.allocatable.cpu).toBe('6');
    expect(readNudge(written as NodeLike, cfg.nodes, undefined, published)).toEqual({ due: false, reason: 'matches' });
    // The leader lowers it (a hot node): due again, for the new value.
    const hot: NodeUsageEntry = { cpu: { ratio: 1, reason: 'hot' } };
    expect(readNudge(written as NodeLike, cfg.nodes, undefined, hot)).toEqual({ due: true, target: 'cpu=4,memory=16Gi,ephemeral-storage=,pods=110' });
    expect(
      planNudges(
        [written as NodeLike],
        cfg.nodes,
        () => undefined,
        { nudged: new Map(), now: 0, retryAfterMs: 30_000 },
        () => hot,
      ).map((n) => n.target),
    ).toEqual(['cpu=4,memory=16Gi,ephemeral-storage=,pods=110']);
  });
});
