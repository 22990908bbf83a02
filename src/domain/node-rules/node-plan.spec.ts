import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { admitStatusWrite, nodeOversellStrategy } from '../../../test/fixtures/node-oversell-strategy.js';
import { parseConfig, type OvercommitConfig } from '../../overcommit.config.js';
import { type NodesConfig } from './node-oversell.config.js';
import { MANAGED_RESOURCES } from '../resources.js';
import { DISABLED_LABEL, RAW_ANNOTATION, readAmounts, USAGE_ANNOTATION } from './node-oversell.rules.js';
import type { NodeLike } from '../node-like.js';
import { NodeOversellStrategy } from '../../node-oversell/node-oversell.strategy.js';
import { formatResourceQuantity, parseResourceQuantity } from '../quantity.js';
import { type ClusterPlan, formatPlanTable, planCluster, planNode, planStoredNode, podsThatFit, readPodSize } from './node-plan.js';
import { jsonEqual } from '../../common/json-equal.js';
import { Outcomes, runs } from '../../../test/support/property.js';

type Json = Record<string, any>;

function config(yaml: string): OvercommitConfig {
  const parsed = parseConfig(yaml);
  if (!parsed.ok) throw new Error(parsed.errors.join('\n'));
  return parsed.value;
}

const POOLS = (mode: string) => `
nodes:
  defaultRatios: { cpu: 1.5 }
  pools:
    - name: batch
      nodeSelector: { matchLabels: { node-pool: batch } }
      ratios: { cpu: 2, memory: 1.5, pods: 2 }
      mode: ${mode}
`;

const node = (name: string, labels: Record<string, string>, allocatable: Record<string, string>, capacity = allocatable): Json => ({
  metadata: { name, labels },
  status: { allocatable: { ...allocatable }, capacity: { ...capacity } },
});

function strategy(): NodeOversellStrategy {
  return nodeOversellStrategy();
}

describe('readPodSize', () => {
  it('reads cpu=500m,memory=1Gi into base units', () => {
    expect(readPodSize('cpu=500m,memory=1Gi')).toEqual({ cpu: 500n, memory: 1073741824n });
    expect(readPodSize(' pods=1 ')).toEqual({ pods: 1n });
  });

  it('names the bad part', () => {
    expect(() => readPodSize('gpu=1')).toThrow(/pod size "gpu=1": expected <resource>=<quantity>/);
    expect(() => readPodSize('cpu')).toThrow(/pod size "cpu"/);
    expect(() => readPodSize('cpu=1,cpu=2')).toThrow(/cpu given twice/);
    expect(() => readPodSize('cpu=-1')).toThrow(/must not be negative/);
    expect(() => readPodSize('memory=lots')).toThrow(/invalid quantity "lots"/);
  });
});

describe('podsThatFit', () => {
  it('takes the scarcest resource, the pod counting one against pods', () => {
    expect(podsThatFit({ cpu: 2000n, memory: 10n * 2n ** 30n, pods: 100n }, { cpu: 500n, memory: 2n ** 30n })).toBe(4);
    expect(podsThatFit({ cpu: 2000n, memory: 10n * 2n ** 30n, pods: 3n }, { cpu: 500n })).toBe(3);
    expect(podsThatFit({ cpu: -500n, pods: 3n }, { cpu: 500n })).toBe(0);
    expect(podsThatFit({ cpu: 2000n }, { cpu: 500n })).toBe(0); // no pods allocatable: nothing schedules
  });
});

describe('planNode', () => {
  const cfg = config(POOLS('enforce'));

  it('plans floor(raw × ratio), with Σ requests, headroom and pods that fit', () => {
    const row = planNode(
      node('b1', { 'node-pool': 'batch' }, { cpu: '4', memory: '8Gi', pods: '110' }),
      { cpu: 3000n, memory: 2n ** 30n, pods: 3n },
      cfg.nodes,
      { cpu: 1000n },
    );
    expect(row).toEqual({
      node: 'b1',
      pool: 'batch',
      reason: 'pool',
      mode: 'enforce',
      ratios: { cpu: 2, memory: 1.5, pods: 2 },
      ratioReasons: { cpu: 'static', memory: 'static', pods: 'static' },
      raw: { cpu: '4', memory: '8Gi', pods: '110' },
      planned: { cpu: '8', memory: '12Gi', pods: '220' },
      stored: { cpu: '4', memory: '8Gi', pods: '110' },
      requests: { cpu: '3', memory: '1Gi', pods: '3' },
      headroom: { cpu: '5', memory: '11Gi', pods: '217' },
      exclusiveCpus: null,
      fits: 5,
      matches: false,
    });
  });

  it('shows the exclusive CPUs requested beside raw cpu on a node of a pool with exclusiveCpus (rule 6)', () => {
    const exclusive = config(POOLS('enforce').replace('mode: enforce', 'mode: enforce\n      exclusiveCpus: true'));
    const b1 = node('b1', { 'node-pool': 'batch' }, { cpu: '4', memory: '8Gi', pods: '110' });
    expect(planNode(b1, { pods: 1n }, exclusive.nodes, null, { exclusiveCpu: 3000n }).exclusiveCpus).toEqual({ requested: '3', raw: '4' });
    expect(planNode(b1, { pods: 1n }, cfg.nodes, null, { exclusiveCpu: 3000n }).exclusiveCpus).toBeNull();
  });

  it('matches once the webhook has written the plan, and recovers raw from our record', () => {
    const webhook = strategy();
    const raw = node('d1', {}, { cpu: '4000m', memory: '8Gi' });
    const stored = admitStatusWrite(webhook, raw, raw, cfg);
    expect(stored.status.allocatable.cpu).toBe('6');
    const row = planNode(stored, {}, cfg.nodes, null);
    expect(row).toMatchObject({
      reason: 'defaultRatios',
      pool: null,
      raw: { cpu: '4' },
      planned: { cpu: '6' },
      stored: { cpu: '6' },
      matches: true,
      fits: null,
    });
  });

  it('plans the commitment floor where the requests exceed floor(raw × ratio), as the webhook writes; without the floor the headroom is negative', () => {
    const requests = { cpu: 7200n, pods: 9n };
    const raw = node('f1', { [DISABLED_LABEL]: 'true' }, { cpu: '4', pods: '110' });
    expect(planNode(raw, requests, cfg.nodes, null)).toMatchObject({ planned: { cpu: '7200m', pods: '110' }, headroom: { cpu: '0', pods: '101' } });
    const off = { ...cfg.nodes, commitmentFloor: false } as NodesConfig;
    expect(planNode(raw, requests, off, null)).toMatchObject({ planned: { cpu: '4' }, headroom: { cpu: '-3200m' } });
  });

  it('plans the floor from what the kubelet admitted, the headroom from what the pods ask: a deferred resize shows as negative headroom, never as a raised planned value', () => {
    // Opted out (ratio 1): raw 4; the pods ask 7.2 CPUs (a resize deferred) and hold 3.
    const raw = node('f2', { [DISABLED_LABEL]: 'true' }, { cpu: '4', pods: '110' });
    const row = planNode(raw, { cpu: 7200n, pods: 2n }, cfg.nodes, null, { admitted: { cpu: 3000n, pods: 2n } });
    expect(row).toMatchObject({ planned: { cpu: '4' }, requests: { cpu: '7200m' }, headroom: { cpu: '-3200m' }, ratioReasons: {} });
    const plan = planCluster([raw], () => ({ cpu: 7200n, pods: 2n }), cfg.nodes, null, { admittedOf: () => ({ cpu: 5000n, pods: 2n }) });
    expect(plan.nodes[0]).toMatchObject({ planned: { cpu: '5' }, ratioReasons: { cpu: 'floor' }, headroom: { cpu: '-2200m' } });
  });

  it('plans raw for an opted-out node, and says why', () => {
    const row = planNode(node('o1', { [DISABLED_LABEL]: 'true' }, { cpu: '4' }), {}, cfg.nodes, null);
    expect(row).toMatchObject({ reason: 'opted-out', mode: null, ratios: {}, planned: { cpu: '4' }, matches: true });
  });

  it('reports a node it cannot plan instead of failing the whole plan', () => {
    const plan = planCluster([node('bad', {}, { cpu: 'four' }), node('a', {}, { cpu: '2' })], () => ({}), cfg.nodes);
    expect(plan.nodes.map((row) => row.node)).toEqual(['a', 'bad']);
    expect(plan.nodes[1]).toMatchObject({ matches: false, error: expect.stringMatching(/invalid quantity "four"/) });
    expect(formatPlanTable(plan)).toMatch(/bad .*error: invalid quantity "four"/);
  });

  it('prints one line per resource for people', () => {
    const plan = planCluster([node('b1', { 'node-pool': 'batch' }, { cpu: '4', pods: '110' })], () => ({ cpu: 500n, pods: 1n }), cfg.nodes, { cpu: 250n });
    expect(formatPlanTable(plan).split('\n')).toEqual([
      'NODE  POOL   MODE     RATIOS        RESOURCE  RAW  PLANNED  STORED  REQUESTS  HEADROOM  FITS  MATCHES',
      'b1    batch  enforce  cpu=2,pods=2  cpu       4    8        4       500m      7500m     30    no',
      '                                    pods      110  220      110     1         219',
      '',
    ]);
  });
});

describe('shadow mode', () => {
  it('validates the mode with its path', () => {
    const parsed = parseConfig('nodes:\n  defaultMode: dry\n  pools:\n    - { name: a, nodeSelector: {}, ratios: {}, mode: off }\n');
    expect(parsed.ok).toBe(false);
    if (!parsed.ok) {
      expect(parsed.errors).toContain('nodes.defaultMode: defaultMode must be one of enforce, shadow');
      expect(parsed.errors).toContain('nodes.pools[0].mode: mode must be one of enforce, shadow');
    }
  });

  it('patches nothing, and a kubelet write brings an inflated node back to raw', () => {
    const webhook = strategy();
    const raw = node('b1', { 'node-pool': 'batch' }, { cpu: '4', memory: '8Gi' });
    const inflated = admitStatusWrite(webhook, raw, raw, config(POOLS('enforce')));
    expect(inflated.status.allocatable.cpu).toBe('8');
    // The kubelet reads 8, computes 4 and patches it: in shadow the object stays as it sent it.
    const sent = structuredClone(inflated);
    sent.status.allocatable = { ...raw.status.allocatable };
    const after = admitStatusWrite(webhook, sent, inflated, config(POOLS('shadow')));
    expect(after).toEqual(sent);
    expect(after.metadata.annotations[RAW_ANNOTATION]).toBeDefined(); // ours, left as they were
  });

  /** Nodes and configs: raw values, ratios, and whether the node was inflated before the shadow period. */
  const quantity = (resource: string) =>
    resource === 'cpu'
      ? fc.integer({ min: 0, max: 256_000 }).map((m) => `${m}m`)
      : resource === 'pods'
        ? fc.integer({ min: 0, max: 500 }).map(String)
        : fc.integer({ min: 0, max: 2 ** 40 }).map((b) => `${b}`);
  const resources = fc.subarray([...MANAGED_RESOURCES], { minLength: 1 });
  const world = resources.chain((present) =>
    fc.record({
      allocatable: fc.record(Object.fromEntries(present.map((r) => [r, quantity(r)]))),
      headroom: fc.record(Object.fromEntries(present.map((r) => [r, fc.constantFrom(0, 1, 1000)]))),
      ratios: fc.dictionary(fc.constantFrom(...MANAGED_RESOURCES), fc.constantFrom(1, 1.01, 1.15, 1.5, 2, 3, 10), { maxKeys: 4 }),
      before: fc.option(fc.dictionary(fc.constantFrom(...MANAGED_RESOURCES), fc.constantFrom(1.2, 2, 4), { minKeys: 1, maxKeys: 4 })),
      inPool: fc.boolean(),
    }),
  );

  it('plans in shadow exactly what enforce then writes, node for node: floor(raw × ratio) per resource', () => {
    const seen = new Outcomes('inflated', 'left raw', 'inflated before the shadow period');
    const parameters = runs(500);
    fc.assert(
      fc.property(world, ({ allocatable, headroom, ratios, before, inPool }) => {
        const capacity = Object.fromEntries(
          Object.entries(allocatable).map(([r, q]) => [r, formatResourceQuantity(r, parseResourceQuantity(r, q) + BigInt(headroom[r]))]),
        );
        const labels: Record<string, string> = inPool ? { 'node-pool': 'p' } : {};
        const nodes = (mode: string, r: object): OvercommitConfig =>
          ({
            nodes: { defaultRatios: r, defaultMode: mode, pools: [{ name: 'p', nodeSelector: { matchLabels: { 'node-pool': 'p' } }, ratios: r, mode }] },
          }) as unknown as OvercommitConfig;
        const webhook = strategy();
        const raw = node('n', labels, allocatable, capacity);
        let stored = admitStatusWrite(webhook, raw, raw, nodes('enforce', before ?? {}));
        // Shadow: the kubelet's next write carries its raw values (it does when stored differs).
        stored = admitStatusWrite(webhook, { ...structuredClone(stored), status: structuredClone(raw.status) }, stored, nodes('shadow', ratios));
        expect(readAmounts(stored.status.allocatable)).toEqual(readAmounts(raw.status.allocatable));
        const planned = planNode(stored, {}, nodes('shadow', ratios).nodes as NodesConfig, null);
        expect(planned.mode).toBe('shadow');
        // Enforce: the kubelet's next write, nothing changed on its side.
        const written = admitStatusWrite(webhook, structuredClone(stored), stored, nodes('enforce', ratios));
        expect(readAmounts(written.status.allocatable)).toEqual(readAmounts(planned.planned));
        expect(planNode(written, {}, nodes('enforce', ratios).nodes as NodesConfig, null).matches).toBe(true);
        // Rule 4, computed here: every ratio has at most two decimals, so floor(raw × hundredths / 100) is exact.
        const expected = Object.fromEntries(
          Object.entries(allocatable).map(([r, q]) => [r, (parseResourceQuantity(r, q) * BigInt(Math.round((ratios[r] ?? 1) * 100))) / 100n]),
        );
        expect(readAmounts(planned.planned)).toEqual(expected);
        seen.add(jsonEqual(expected, readAmounts(raw.status.allocatable)) ? 'left raw' : 'inflated');
        if (before !== null) seen.add('inflated before the shadow period');
      }),
      parameters,
    );
    // Per run, over two seeds: 0.53 inflated, 0.47 left raw, 0.86 inflated before.
    seen.expectPerRun('inflated', 0.3, parameters);
    seen.expectPerRun('left raw', 0.25, parameters);
    seen.expectPerRun('inflated before the shadow period', 0.5, parameters);
  });
});

describe('usage-aware ratios in the plan', () => {
  const usageCfg = (() => {
    const result = parseConfig('nodes:\n  defaultRatios: {cpu: 2}\n  defaultUsage: {target: {cpu: 0.6}}\n');
    if (!result.ok) throw new Error(result.errors.join('; '));
    return result.value;
  })();

  it('plans the published ratio capped at the ceiling and says why, as the webhook writes', () => {
    const plan = planCluster(
      [node('u1', {}, { cpu: '4', pods: '110' }), node('u2', {}, { cpu: '4', pods: '110' })],
      (name) => (name === 'u2' ? { cpu: 5000n } : {}),
      usageCfg.nodes,
      null,
      { usageOf: (name) => (name === 'u1' ? { cpu: { ratio: 1.5, reason: 'usage' } } : { cpu: { ratio: 1, reason: 'hot' } }) },
    );
    expect(plan.nodes.map((row) => [row.node, row.ratios, row.ratioReasons, row.planned.cpu])).toEqual([
      ['u1', { cpu: 1.5 }, { cpu: 'usage', pods: 'static' }, '6'],
      ['u2', {}, { cpu: 'floor', pods: 'static' }, '5'],
    ]);
    expect(formatPlanTable(plan).split('\n')[1]).toMatch(/^u1 +defaultRatios +enforce +cpu=1\.5\(usage\) +cpu +4 +6 /);
    const hot = planCluster([node('u3', {}, { cpu: '4' })], () => ({}), usageCfg.nodes, null, { usageOf: () => ({ cpu: { ratio: 1, reason: 'hot' } }) });
    expect(hot.nodes[0]!.ratioReasons).toEqual({ cpu: 'hot' });
    expect(formatPlanTable(hot)).toContain('cpu=1(hot)');
  });
});

describe('planCluster', () => {
  it('reads the requests of each node by name', () => {
    const seen: string[] = [];
    const nodes: NodeLike[] = [node('b', {}, { cpu: '1' }), node('a', {}, { cpu: '1' })];
    planCluster(nodes, (name) => (seen.push(name), {}), undefined);
    expect(seen).toEqual(['b', 'a']);
  });
});

// ---------------------------------------------------------------------------------------------
// Edges the mutation run (docs/testing.md) found untested
// ---------------------------------------------------------------------------------------------

describe('node plan: edges found by mutation testing', () => {
  it('readPodSize: a part with two =, the resources named; 0 is a size', () => {
    expect(() => readPodSize('cpu=1=2')).toThrow('pod size "cpu=1=2": expected <resource>=<quantity>, resource one of cpu, memory, ephemeral-storage, pods');
    expect(readPodSize('cpu=0')).toEqual({ cpu: 0n });
  });

  it('podsThatFit: a resource the pod does not request does not bound it', () => {
    expect(podsThatFit({ cpu: 1000n, pods: 5n }, { cpu: 0n })).toBe(5);
  });

  it('a node without metadata or status: an empty row that matches', () => {
    expect(planNode({}, {}, undefined, { cpu: 500n })).toEqual({
      node: '',
      pool: null,
      reason: 'defaultRatios',
      mode: 'enforce',
      ratios: {},
      ratioReasons: {},
      raw: {},
      planned: {},
      stored: {},
      requests: {},
      headroom: {},
      exclusiveCpus: null,
      fits: 0,
      matches: true,
    });
  });

  it('exclusiveCpus: null on a node without allocatable or without cpu', () => {
    const exclusive = config(POOLS('enforce').replace('mode: enforce', 'mode: enforce\n      exclusiveCpus: true'));
    const labels = { 'node-pool': 'batch' };
    const bare = planNode({ metadata: { name: 'b0', labels } }, {}, exclusive.nodes, null, { exclusiveCpu: 1000n });
    expect([bare.exclusiveCpus, bare.error]).toEqual([null, undefined]);
    const memoryOnly = planNode(node('b2', labels, { memory: '8Gi' }), {}, exclusive.nodes, null, { exclusiveCpu: 1000n });
    expect([memoryOnly.exclusiveCpus, memoryOnly.error]).toEqual([null, undefined]);
  });

  it('planStoredNode: the usage annotation only when usage-aware decisions exist', () => {
    const n = node('u', {}, { cpu: '4' });
    expect(planStoredNode(n, {}, config(POOLS('enforce')).nodes).plan()?.annotations[USAGE_ANNOTATION]).toBeNull();
    const usageAware = config('nodes:\n  defaultRatios: { cpu: 1.5 }\n  defaultUsage: {}\n');
    expect(planStoredNode(n, {}, usageAware.nodes).plan()?.annotations[USAGE_ANNOTATION]).toBe('{"cpu":{"ratio":1,"reason":"stale"}}');
  });

  it('planCluster: rows sorted by name, the pod size formatted, a nameless node asked for as ""', () => {
    const seen: string[] = [];
    const plan = planCluster(
      [node('b', {}, { cpu: '1' }), node('a', {}, { cpu: '1' }), node('c', {}, { cpu: '1' }), {}],
      (name) => (seen.push(name), {}),
      undefined,
      {
        cpu: 500n,
      },
    );
    expect(plan.nodes.map((row) => row.node)).toEqual(['', 'a', 'b', 'c']);
    expect(plan.podSize).toEqual({ cpu: '500m' });
    expect(seen).toEqual(['b', 'a', 'c', '']);
  });

  it('formatPlanTable: hot-full and stale reasons, a resource stored or planned only, no fits, no allocatable', () => {
    const row = (fields: Partial<ClusterPlan['nodes'][number]>): ClusterPlan['nodes'][number] => ({
      node: '',
      pool: null,
      reason: 'defaultRatios',
      mode: 'enforce',
      ratios: {},
      ratioReasons: {},
      raw: {},
      planned: {},
      stored: {},
      requests: {},
      headroom: {},
      exclusiveCpus: null,
      fits: null,
      matches: true,
      ...fields,
    });
    const plan: ClusterPlan = {
      podSize: null,
      nodes: [
        row({
          node: 'n1',
          ratioReasons: { cpu: 'hot-full', memory: 'stale' },
          raw: { cpu: '4' },
          planned: { cpu: '2' },
          stored: { memory: '8Gi' },
          requests: { cpu: '2' },
          headroom: { cpu: '0' },
        }),
        row({ node: 'n2', reason: 'opted-out', mode: null, fits: 3 }),
      ],
    };
    expect(formatPlanTable(plan).split('\n')).toEqual([
      'NODE  POOL           MODE     RATIOS                           RESOURCE          RAW  PLANNED  STORED  REQUESTS  HEADROOM  FITS  MATCHES',
      'n1    defaultRatios  enforce  cpu=1(hot-full),memory=1(stale)  cpu               4    2        -       2         0         -     yes',
      '                                                               memory            -    -        8Gi     0         -',
      'n2    opted-out      -        -                                (no allocatable)',
      '',
    ]);
  });
});
