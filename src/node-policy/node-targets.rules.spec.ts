import fc from 'fast-check';
import fastJsonPatch from 'fast-json-patch';
import { describe, expect, it } from 'vitest';
import { nodeOversellStrategy } from '../../test/fixtures/node-oversell-strategy.js';
import { Outcomes, runs } from '../../test/support/property.js';
import { parseConfig, type OvercommitConfig } from '../overcommit.config.js';
import { DISABLED_LABEL, NODE_ANNOTATIONS, RATIOS_ANNOTATION, type NodeStatusPlan } from '../domain/node-rules/node-oversell.rules.js';
import { parseResourceQuantity } from '../domain/quantity.js';
import { MANAGED_RESOURCES, type ResourceAmounts } from '../domain/resources.js';
import type { AdmissionRequest } from '../admission/admission.types.js';
import {
  coalescingWindowSeconds,
  ENTRY_LINES,
  ENTRY_VALIDITY_MS,
  isPolicyServable,
  planShardPatches,
  planShards,
  planTargetEntry,
  SHARD_LIMIT_BYTES,
  shardName,
  shardOf,
  TARGET_SHARDS,
  TargetEntryPlans,
  validUntil,
} from './node-targets.rules.js';

const { applyPatch } = fastJsonPatch;
type Json = Record<string, any>;

function config(yaml: string): OvercommitConfig {
  const parsed = parseConfig(yaml);
  if (!parsed.ok) throw new Error(parsed.errors.join('\n'));
  return parsed.value;
}

const CAPACITY = { cpu: '4', memory: '16Gi', pods: '110' };
const node = (
  name: string,
  allocatable: Record<string, string>,
  extra: { labels?: Record<string, string>; annotations?: Record<string, string> } = {},
): Json => ({
  metadata: { name, uid: `uid-${name}`, labels: extra.labels ?? {}, annotations: extra.annotations ?? {} },
  status: { allocatable: { ...allocatable }, capacity: { ...CAPACITY } },
});

/** The entry as docs/adr/0006-node-policy.md and k8s/node-policy/policy.yaml read it. */
function readEntry(entry: string) {
  const lines = entry.split('\n');
  const resources = lines.slice(1, 5).map((line) => line.split(' '));
  return { lines, resources, annotations: lines.slice(5, 10), lapsedFloor: lines[10], window: Number(lines[11]), uid: lines[12] };
}

describe('planTargetEntry (rules 1-4)', () => {
  const nodes = config('nodes: { defaultRatios: { cpu: 1.5 }, statusReportPeriod: 5m }').nodes;

  it('one line per field: the version, each managed resource (raw, capacity, target, lapsed), our five annotations, the lapsed floor, the window, the Node’s uid', () => {
    const published = planTargetEntry(node('worker-1', { cpu: '4', memory: '16Gi', pods: '110' }), {}, nodes);
    const { lines, window, uid } = readEntry(published!.entry);
    expect(published!.name).toBe('worker-1');
    expect(lines).toHaveLength(ENTRY_LINES - 1); // the valid-until line is validUntil's
    expect(uid).toBe('uid-worker-1');
    expect(lines.slice(0, 5)).toEqual(['v3', 'cpu 4 4 6 4', 'memory 16Gi 16Gi 16Gi 16Gi', 'ephemeral-storage - - - -', 'pods 110 110 110 110']);
    expect(lines.slice(5, 11)).toEqual([
      '{"allocatable":{"cpu":"4","memory":"16Gi","pods":"110"},"capacity":{"cpu":"4","memory":"16Gi","pods":"110"}}',
      '{"cpu":1.5}',
      '',
      '',
      '',
      '',
    ]);
    // The node's window of status coalescing: 5 min less up to 10 %, whole seconds.
    expect(window).toBeGreaterThanOrEqual(270);
    expect(window).toBeLessThanOrEqual(300);
    expect(Number.isInteger(window)).toBe(true);
  });

  it('a stored Node already inflated publishes the raw value it was computed from, and the floor decides where the requests are above it', () => {
    const webhook = nodeOversellStrategy();
    const stored = node('worker-1', { cpu: '4', memory: '16Gi', pods: '110' });
    const inflated = applyPatch(
      structuredClone(stored),
      webhook.admit({ object: stored } as AdmissionRequest, config('nodes: { defaultRatios: { cpu: 1.5 } }')).patch!,
    ).newDocument as Json;
    expect(inflated.status.allocatable.cpu).toBe('6');
    const committed: ResourceAmounts = { cpu: 7_200n };
    const { resources, annotations, lapsedFloor } = readEntry(planTargetEntry(inflated, committed, nodes)!.entry);
    expect(resources[0]).toEqual(['cpu', '4', '4', '7200m', '7200m']);
    expect(annotations[3]).toBe('{"cpu":"7200m"}');
    expect(lapsedFloor).toBe('{"cpu":"7200m"}');
    // Rule 10: past its time the floor alone, at the committed requests: 5 of raw 4 where the ratio makes 6.
    const below = readEntry(planTargetEntry(inflated, { cpu: 5_000n }, nodes)!.entry);
    expect(below.resources[0]).toEqual(['cpu', '4', '4', '6', '5']);
    expect([below.annotations[3], below.lapsedFloor]).toEqual(['', '{"cpu":"5"}']);
    // Rounded up to an eighth of the raw value (500m), never above the target.
    expect(readEntry(planTargetEntry(inflated, { cpu: 4_100n }, nodes)!.entry).resources[0]).toEqual(['cpu', '4', '4', '6', '4500m']);
    expect(readEntry(planTargetEntry(inflated, { cpu: 5_800n }, nodes)!.entry).resources[0]).toEqual(['cpu', '4', '4', '6', '6']);
    expect(readEntry(planTargetEntry(inflated, { cpu: 3_900n }, nodes)!.entry).resources[0]).toEqual(['cpu', '4', '4', '6', '4']);
    // The floor off: the raw values.
    const off = config('nodes: { defaultRatios: { cpu: 1.5 }, commitmentFloor: false }').nodes;
    const unfloored = readEntry(planTargetEntry(inflated, committed, off)!.entry);
    expect([unfloored.resources[0], unfloored.lapsedFloor]).toEqual([['cpu', '4', '4', '6', '4'], '']);
  });

  it('no entry for a node the webhook must decide: opted out, in shadow, without allocatable or uid, with an amount outside int64, unreadable', () => {
    const shadow = config('nodes: { defaultRatios: { cpu: 1.5 }, defaultMode: shadow }').nodes;
    expect(planTargetEntry(node('a', CAPACITY, { labels: { [DISABLED_LABEL]: 'true' } }), {}, nodes)).toBeNull();
    expect(planTargetEntry(node('a', CAPACITY), {}, shadow)).toBeNull();
    expect(planTargetEntry({ metadata: { name: 'a' }, status: {} }, {}, nodes)).toBeNull();
    expect(planTargetEntry(node('a', { ...CAPACITY, cpu: '-1' }), {}, nodes)).toBeNull();
    expect(planTargetEntry(node('a', { ...CAPACITY, cpu: 'lots' }), {}, nodes)).toBeNull();
    const withoutUid = node('a', CAPACITY);
    delete withoutUid.metadata.uid;
    expect(planTargetEntry(withoutUid, {}, nodes)).toBeNull();
    expect(planTargetEntry({ ...withoutUid, metadata: { ...withoutUid.metadata, uid: 'a\nb' } }, {}, nodes)).toBeNull();
    expect(planTargetEntry(node('a', CAPACITY), {}, nodes)).not.toBeNull();
  });

  it('window 0 (no coalescing) when the node is not inflated or coalesceStatusWrites is off', () => {
    const plain = config('nodes: { defaultRatios: { cpu: 1 } }').nodes;
    const off = config('nodes: { defaultRatios: { cpu: 1.5 }, coalesceStatusWrites: false }').nodes;
    expect(readEntry(planTargetEntry(node('a', CAPACITY), {}, plain)!.entry).window).toBe(0);
    expect(readEntry(planTargetEntry(node('a', CAPACITY), {}, off)!.entry).window).toBe(0);
    expect(readEntry(planTargetEntry(node('a', CAPACITY), {}, nodes)!.entry).window).toBeGreaterThan(0);
  });

  /**
   * Rule 1 against the webhook itself: for a published entry, a kubelet write carrying the
   * published raw values, or the published targets, with the published capacity, is answered by
   * the webhook with exactly the entry's targets and annotation values — what the policy writes.
   */
  it('what the policy writes is what the webhook writes, for a write of the raw values and for one of the targets', () => {
    const seen = new Outcomes('inflated', 'floor', 'ratio-1', 'raw-write', 'target-write', 'lapsed-floor', 'lapsed-raw', 'lapsed-rounded-up');
    const amount = (max: number) => fc.integer({ min: 1, max }).map(String);
    const scenario = fc.record({
      cpu: fc.integer({ min: 1, max: 64_000 }).map((m) => `${m}m`),
      extraCpu: fc.integer({ min: 0, max: 4_000 }),
      memory: amount(2 ** 40),
      ratio: fc.constantFrom(1, 1.15, 1.5, 2, 3),
      memoryRatio: fc.constantFrom(1, 1.2),
      committedCpu: fc.option(fc.integer({ min: 0, max: 300_000 }), { nil: undefined }),
      writeTargets: fc.boolean(),
    });
    fc.assert(
      fc.property(scenario, (s) => {
        const cfg = config(`nodes: { defaultRatios: { cpu: ${s.ratio}, memory: ${s.memoryRatio} } }`);
        const cpu = parseResourceQuantity('cpu', s.cpu);
        const capacity = { cpu: `${cpu + BigInt(s.extraCpu)}m`, memory: s.memory, pods: '110' };
        const raw = { cpu: s.cpu, memory: s.memory, pods: '110' };
        const committed: ResourceAmounts | undefined = s.committedCpu === undefined ? undefined : { cpu: BigInt(s.committedCpu) };
        const webhook = nodeOversellStrategy({ committed: () => committed });
        const admitted = (object: Json, oldObject?: Json): Json => {
          const result = webhook.admit({ object, oldObject, name: 'n', userInfo: { username: 'system:node:n' } } as AdmissionRequest, cfg);
          return result.patch ? (applyPatch(structuredClone(object), result.patch, true, false).newDocument as Json) : object;
        };
        const kubelet = (allocatable: Record<string, string>): Json => ({
          metadata: { name: 'n', uid: 'uid-n', labels: {}, annotations: {} },
          status: { allocatable, capacity: { ...capacity } },
        });
        // The stored Node: the webhook's answer to the kubelet's registration.
        const stored = admitted(kubelet(raw));
        const published = planTargetEntry(stored, committed ?? {}, cfg.nodes);
        expect(published).not.toBeNull();
        const entry = readEntry(published!.entry);
        const write = structuredClone(stored);
        for (const [resource, rawValue, , target] of entry.resources) {
          if (rawValue === '-') continue;
          write.status.allocatable[resource!] = s.writeTargets ? target : rawValue;
        }
        const answer = admitted(write, stored);
        for (const [resource, , , target] of entry.resources) {
          const value = answer.status.allocatable[resource!];
          if (target === '-') expect(value).toBeUndefined();
          else
            expect(parseResourceQuantity(resource as (typeof MANAGED_RESOURCES)[number], value)).toBe(
              parseResourceQuantity(resource as (typeof MANAGED_RESOURCES)[number], target!),
            );
        }
        NODE_ANNOTATIONS.forEach((annotation, i) => expect(answer.metadata.annotations[annotation] ?? '', annotation).toBe(entry.annotations[i]));
        // Rule 10: the lapsed column keeps the commitment: max(raw, committed) ≤ lapsed < that + raw/8, never above
        // max(target, committed); the raw value where nothing above it is committed.
        const lapsedAmounts: ResourceAmounts = {};
        for (const [resource, rawValue, , target, lapsed] of entry.resources) {
          const key = resource as (typeof MANAGED_RESOURCES)[number];
          if (lapsed === '-') {
            expect(rawValue).toBe('-');
            continue;
          }
          const [rawAmount, targetAmount, lapsedAmount] = [rawValue!, target!, lapsed!].map((value) => parseResourceQuantity(key, value)) as [
            bigint,
            bigint,
            bigint,
          ];
          const bound = committed?.[key] ?? 0n;
          const floor = bound > rawAmount ? bound : rawAmount;
          const step = rawAmount / 8n > 0n ? rawAmount / 8n : 1n;
          expect(lapsedAmount >= floor && lapsedAmount < floor + step, `lapsed ${resource} ${lapsed} of raw ${rawValue}, committed ${bound}`).toBe(true);
          expect(lapsedAmount <= (bound > targetAmount ? bound : targetAmount), `lapsed ${resource} within the target`).toBe(true);
          if (bound <= rawAmount) expect(lapsedAmount).toBe(rawAmount);
          if (lapsedAmount > floor) seen.add('lapsed-rounded-up');
          lapsedAmounts[key] = lapsedAmount;
        }
        // And it is what the webhook at ratio 1 writes, with that commitment, for a write of the raw values: the lapsed
        // column, the in-force raw record, ratios {} and the lapsed floor (the policy's write past the entry's time).
        const rawWrite = structuredClone(stored);
        for (const [resource, rawValue] of entry.resources) if (rawValue !== '-') rawWrite.status.allocatable[resource!] = rawValue;
        const atRatio1 = nodeOversellStrategy({ committed: () => (committed === undefined ? undefined : lapsedAmounts) });
        const lapsedResult = atRatio1.admit(
          { object: rawWrite, oldObject: stored, name: 'n', userInfo: { username: 'system:node:n' } } as AdmissionRequest,
          config('nodes: { defaultRatios: { cpu: 1 } }'),
        );
        const lapsedAnswer = lapsedResult.patch ? (applyPatch(structuredClone(rawWrite), lapsedResult.patch, true, false).newDocument as Json) : rawWrite;
        for (const [resource, , , , lapsed] of entry.resources) {
          const value = lapsedAnswer.status.allocatable[resource!];
          if (lapsed === '-') expect(value).toBeUndefined();
          else
            expect(parseResourceQuantity(resource as (typeof MANAGED_RESOURCES)[number], value), `lapsed ${resource}`).toBe(
              parseResourceQuantity(resource as (typeof MANAGED_RESOURCES)[number], lapsed!),
            );
        }
        const floored = entry.lapsedFloor !== '';
        const lapsedAnnotations = [floored ? entry.annotations[0] : '', floored ? '{}' : '', '', entry.lapsedFloor, ''];
        NODE_ANNOTATIONS.forEach((annotation, i) =>
          expect(lapsedAnswer.metadata.annotations[annotation] ?? '', `lapsed ${annotation}`).toBe(lapsedAnnotations[i]),
        );
        seen.add(floored ? 'lapsed-floor' : 'lapsed-raw');
        seen.add(entry.annotations[3] !== '' ? 'floor' : entry.annotations[1] !== '' ? 'inflated' : 'ratio-1');
        seen.add(s.writeTargets ? 'target-write' : 'raw-write');
      }),
      runs(300),
    );
    seen.expectEach();
  });
});

describe('validUntil (rule 8)', () => {
  const HOUR = 3_600_000;
  const now = Date.parse('2026-12-06T20:00:00.250Z');

  it('a new entry is valid for the validity from now, RFC 3339 in whole seconds (rounded up)', () => {
    expect(validUntil('v2\nbody', undefined, now)).toBe('v2\nbody\n2026-12-07T02:00:01Z');
    expect(ENTRY_VALIDITY_MS).toBe(6 * HOUR);
    expect(validUntil('v2\nbody', undefined, now, HOUR)).toBe('v2\nbody\n2026-12-06T21:00:01Z');
  });

  it('the published time is kept while the body is the same and more than half the validity is left; renewed after, or for a new body', () => {
    const published = validUntil('v2\nbody', undefined, now);
    expect(validUntil('v2\nbody', published, now + 3 * HOUR - 2_000)).toBe(published);
    expect(validUntil('v2\nbody', published, now + 3 * HOUR + 2_000)).toBe('v2\nbody\n2026-12-07T05:00:03Z');
    expect(validUntil('v2\nother', published, now + 1_000)).toBe('v2\nother\n2026-12-07T02:00:02Z');
    // A body that only starts like the published one is another body.
    expect(validUntil('v2\nbod', published, now)).toBe('v2\nbod\n2026-12-07T02:00:01Z');
    expect(validUntil('v2\nbody', 'v2\nbody\nnot a time', now)).toBe('v2\nbody\n2026-12-07T02:00:01Z');
  });
});

describe('planShards, planShardPatches (rules 5 and 6)', () => {
  const names = fc.uniqueArray(fc.stringMatching(/^[a-z][a-z0-9-]{0,20}$/), { maxLength: 60 });

  it('16 shard ConfigMaps, named by their two-digit index', () => {
    expect(TARGET_SHARDS).toBe(16);
    expect([shardName(0), shardName(15)]).toEqual(['kube-overcommit-node-targets-00', 'kube-overcommit-node-targets-15']);
  });

  it('every entry in its own shard, once; over the limit the rest are counted, not placed', () => {
    fc.assert(
      fc.property(names, (list) => {
        const { shards, left } = planShards(list.map((name) => ({ name, entry: 'x'.repeat(10) })));
        expect(left).toBe(0);
        for (const name of list) expect(shards[shardOf(name)]!.get(name)).toBe('x'.repeat(10));
        expect(shards.reduce((n, shard) => n + shard.size, 0)).toBe(list.length);
      }),
      runs(100),
    );
    // 3 entries of one shard of 106 bytes each (name and entry), room for 2: the first two by name.
    const same = Array.from({ length: 100 }, (_, i) => `node-${String(i).padStart(2, '0')}`)
      .filter((n) => shardOf(n) === shardOf('node-00'))
      .slice(0, 3);
    expect(same).toHaveLength(3);
    const { shards, left } = planShards(
      same.map((name) => ({ name, entry: 'y'.repeat(99) })),
      250,
    );
    expect(left).toBe(1);
    expect([...shards[shardOf('node-00')]!.keys()]).toEqual(same.slice(0, 2));
    expect(SHARD_LIMIT_BYTES).toBeLessThan(1024 * 1024);
  });

  it('the patches turn what is published into what is desired, and leave unchanged shards alone', () => {
    const seen = new Outcomes('added', 'changed', 'removed', 'untouched-shard');
    const state = fc.dictionary(fc.stringMatching(/^[a-z]{1,6}$/), fc.constantFrom('1', '2', '3'), { maxKeys: 40 });
    fc.assert(
      fc.property(state, state, (before, after) => {
        const published = planShards(Object.entries(before).map(([name, entry]) => ({ name, entry }))).shards;
        const desired = planShards(Object.entries(after).map(([name, entry]) => ({ name, entry }))).shards;
        const patches = planShardPatches(published, desired);
        const result = published.map((shard) => Object.fromEntries(shard));
        for (const { shard, data } of patches) {
          for (const [name, value] of Object.entries(data)) {
            if (value === null) {
              expect(result[shard]).toHaveProperty(name);
              delete result[shard]![name];
              seen.add('removed');
            } else {
              seen.add(name in result[shard]! ? 'changed' : 'added');
              result[shard]![name] = value;
            }
          }
        }
        expect(result).toEqual(desired.map((shard) => Object.fromEntries(shard)));
        const patched = new Set(patches.map((p) => p.shard));
        for (let shard = 0; shard < TARGET_SHARDS; shard++) {
          if (patched.has(shard)) continue;
          expect(Object.fromEntries(published[shard]!)).toEqual(Object.fromEntries(desired[shard]!));
          seen.add('untouched-shard');
        }
      }),
      runs(200),
    );
    seen.expectEach();
  });
});

describe('isPolicyServable (rule 7)', () => {
  const stored = {
    metadata: { name: 'n', labels: { a: '1' }, annotations: { 'kube-overcommit.io/ratios': '{"cpu":1.5}', other: 'x' } },
    status: { allocatable: { cpu: '6', memory: '1Gi' }, capacity: { cpu: '4', memory: '1Gi' }, conditions: [{ type: 'Ready', lastHeartbeatTime: 't1' }] },
  };
  const kubelet = { username: 'system:node:n' };
  const update = (change: (node: Json) => void, userInfo = kubelet) => {
    const object: Json = structuredClone(stored);
    change(object);
    return { name: 'n', userInfo, object, oldObject: stored };
  };

  it('a kubelet heartbeat answered with the stored allocatable (by value), capacity, labels and annotations: servable', () => {
    expect(isPolicyServable(update((node) => (node.status.conditions[0].lastHeartbeatTime = 't2')))).toBe(true);
    expect(isPolicyServable(update((node) => (node.status.allocatable.cpu = '6000m')))).toBe(true);
    // Annotations not ours are not the policy's to decide.
    expect(isPolicyServable(update((node) => (node.metadata.annotations.other = 'y')))).toBe(true);
  });

  it('anything the webhook decides changing, another writer, no stored object, an unreadable quantity: not servable', () => {
    expect(isPolicyServable(update((node) => (node.status.allocatable.cpu = '4')))).toBe(false);
    expect(isPolicyServable(update((node) => (node.status.capacity.memory = '2Gi')))).toBe(false);
    expect(isPolicyServable(update((node) => (node.metadata.labels.a = '2')))).toBe(false);
    expect(isPolicyServable(update((node) => delete node.metadata.annotations['kube-overcommit.io/ratios']))).toBe(false);
    expect(isPolicyServable(update(() => undefined, { username: 'system:node:m' }))).toBe(false);
    expect(isPolicyServable(update(() => undefined, { username: 'system:serviceaccount:kube-overcommit:kube-overcommit' }))).toBe(false);
    expect(isPolicyServable({ ...update(() => undefined), oldObject: undefined })).toBe(false);
    expect(isPolicyServable(update((node) => (node.status.allocatable.cpu = 'lots')))).toBe(false);
  });
});

describe('TargetEntryPlans (rule 9)', () => {
  const configs = [
    config('nodes: { defaultRatios: { cpu: 1.5 }, statusReportPeriod: 5m }').nodes,
    config('nodes: { defaultRatios: { cpu: 2, memory: 1.2 }, statusReportPeriod: 5m, commitmentFloor: true }').nodes,
  ];
  const NAMES = ['a', 'b', 'c', 'd'];
  /** One step between two publications: a node's new Node object (another raw cpu), new committed requests (equal by value or not), a config swap, a usage entry swapped, a node deleted. */
  const step = fc.oneof(
    fc.record({ kind: fc.constant('node' as const), name: fc.constantFrom(...NAMES), cpu: fc.constantFrom('2', '4') }),
    fc.record({ kind: fc.constant('requests' as const), name: fc.constantFrom(...NAMES), cpu: fc.constantFrom(0n, 3000n, 7000n) }),
    fc.record({ kind: fc.constant('config' as const), index: fc.constantFrom(0, 1) }),
    fc.record({ kind: fc.constant('usage' as const), name: fc.constantFrom(...NAMES), ratio: fc.constantFrom(1, 1.3) }),
    fc.record({ kind: fc.constant('delete' as const), name: fc.constantFrom(...NAMES) }),
  );

  it('a publication returns exactly planTargetEntry of the current inputs, and plans again only the nodes whose inputs changed', () => {
    fc.assert(
      fc.property(fc.array(fc.array(step, { maxLength: 4 }), { minLength: 1, maxLength: 8 }), (publications) => {
        const nodes = new Map(NAMES.map((name) => [name, node(name, { cpu: '4', memory: '16Gi', pods: '110' })]));
        const requests = new Map<string, ResourceAmounts>(NAMES.map((name) => [name, { cpu: 0n, pods: 0n }]));
        const usage = new Map<string, { cpu: { ratio: number; reason: 'usage'; A: string; R: string; U: string } } | undefined>();
        let nodesConfig = configs[0];
        const plans = new TargetEntryPlans();
        /** The model: the nodes given a new Node or usage entry since the last publication (every node before the first), and what that publication saw. */
        let replaced = new Set(NAMES);
        let lastConfig = nodesConfig;
        const lastCpu = new Map<string, bigint | undefined>();
        for (const steps of publications) {
          for (const s of steps) {
            if (s.kind === 'node') {
              nodes.set(s.name, node(s.name, { cpu: s.cpu, memory: '16Gi', pods: '110' }));
              replaced.add(s.name);
            } else if (s.kind === 'requests') {
              requests.set(s.name, { cpu: s.cpu, pods: 0n }); // a new object: equal amounts are the same inputs
            } else if (s.kind === 'config') {
              nodesConfig = configs[s.index];
            } else if (s.kind === 'usage') {
              usage.set(s.name, { cpu: { ratio: s.ratio, reason: 'usage', A: '4', R: '4', U: '1' } });
              replaced.add(s.name);
            } else {
              nodes.delete(s.name);
              replaced.delete(s.name);
              lastCpu.delete(s.name);
            }
          }
          const changed = [...nodes.keys()].filter(
            (name) => replaced.has(name) || nodesConfig !== lastConfig || !lastCpu.has(name) || lastCpu.get(name) !== requests.get(name)!.cpu,
          );
          for (const [name, stored] of nodes) {
            const inputs = [stored, requests.get(name)!, nodesConfig, usage.get(name)] as const;
            expect(plans.plan(...inputs)).toEqual(planTargetEntry(...inputs));
            lastCpu.set(name, requests.get(name)!.cpu);
          }
          expect(plans.endPublication()).toEqual({ planned: changed.length, reused: nodes.size - changed.length });
          replaced = new Set();
          lastConfig = nodesConfig;
        }
      }),
      runs(200),
    );
  });

  it('a deleted node is forgotten: re-created under the name, it is planned again even from the same inputs', () => {
    const plans = new TargetEntryPlans();
    const stored = node('worker-1', { cpu: '4', memory: '16Gi', pods: '110' });
    plans.plan(stored, {}, configs[0], undefined);
    expect(plans.endPublication()).toEqual({ planned: 1, reused: 0 });
    expect(plans.endPublication()).toEqual({ planned: 0, reused: 0 });
    plans.plan(stored, {}, configs[0], undefined);
    expect(plans.endPublication()).toEqual({ planned: 1, reused: 0 });
  });
});

// ---------------------------------------------------------------------------------------------
// Edges the mutation run (docs/testing.md) found untested
// ---------------------------------------------------------------------------------------------

describe('node targets: edges found by mutation testing', () => {
  const nodes = config('nodes: { defaultRatios: { cpu: 1.5 }, statusReportPeriod: 5m }').nodes;
  const MAX = 2n ** 63n - 1n;

  it('an amount of 0 or 2^63−1 is published; one past 2^63−1 in the raw value, the capacity or the target is not', () => {
    expect(readEntry(planTargetEntry(node('a', { ...CAPACITY, pods: '0' }), {}, nodes)!.entry).resources[3]).toEqual(['pods', '0', '110', '0', '0']);
    const atMax = node('a', { ...CAPACITY, memory: String(MAX) });
    atMax.status.capacity.memory = String(MAX);
    expect(readEntry(planTargetEntry(atMax, {}, nodes)!.entry).resources[1]).toEqual(['memory', String(MAX), String(MAX), String(MAX), String(MAX)]);
    const capacityPast = node('a', CAPACITY);
    capacityPast.status.capacity.memory = String(MAX + 1n);
    expect(planTargetEntry(capacityPast, {}, nodes)).toBeNull();
    // A raw cpu whose target, raw × 1.5, passes 2^63−1 (in millicores).
    const targetPast = node('a', { ...CAPACITY, cpu: `${MAX}m` });
    targetPast.status.capacity.cpu = `${MAX}m`;
    expect(planTargetEntry(targetPast, {}, nodes)).toBeNull();
  });

  it('the lapsed column: a sum at most the raw value is not rounded past it (a raw value of no whole eighths); a committed resource the node does not report has none', () => {
    const odd = node('a', { ...CAPACITY, cpu: '3999m' });
    // Steps of 499m: 3995m would round up to 4491m, above the raw value.
    expect(readEntry(planTargetEntry(odd, { cpu: 3_995n }, nodes)!.entry).resources[0]).toEqual(['cpu', '3999m', '4', '5998m', '3999m']);
    expect(readEntry(planTargetEntry(odd, { cpu: 3_999n }, nodes)!.entry).resources[0]).toEqual(['cpu', '3999m', '4', '5998m', '3999m']);
    expect(readEntry(planTargetEntry(odd, { cpu: 4_000n }, nodes)!.entry).resources[0]).toEqual(['cpu', '3999m', '4', '5998m', '4491m']);
    const storage = readEntry(planTargetEntry(node('a', CAPACITY), { 'ephemeral-storage': 10n ** 9n }, nodes)!.entry);
    expect(storage.resources[2]).toEqual(['ephemeral-storage', '-', '-', '-', '-']);
  });

  it('a node with a uid but nothing to plan (no status) gets no entry', () => {
    expect(planTargetEntry({ metadata: { name: 'a', uid: 'uid-a' } }, {}, nodes)).toBeNull();
  });

  it('validUntil renews an entry with exactly half the validity left', () => {
    const now = Date.parse('2026-12-06T20:00:00Z');
    const published = validUntil('v2\nbody', undefined, now);
    expect(validUntil('v2\nbody', published, now + ENTRY_VALIDITY_MS / 2)).toBe('v2\nbody\n2026-12-07T05:00:00Z');
  });

  it('coalescingWindowSeconds without a nodes config: the 5 min default; with one, its statusReportPeriod', () => {
    const inflatedPlan = { annotations: { [RATIOS_ANNOTATION]: '{"cpu":1.5}' } } as unknown as NodeStatusPlan;
    // worker-1's window is 298 s of 300 (domain/node-rules/coalescing-window.spec.ts).
    expect(coalescingWindowSeconds('worker-1', inflatedPlan, undefined)).toBe(298);
    expect(coalescingWindowSeconds('worker-1', inflatedPlan, config('nodes: { statusReportPeriod: 1m }').nodes)).toBeLessThan(61);
  });

  it('planShards places by name order whatever the input order, and fills a shard to exactly its limit', () => {
    const same = Array.from({ length: 100 }, (_, i) => `node-${String(i).padStart(2, '0')}`)
      .filter((n) => shardOf(n) === shardOf('node-00'))
      .slice(0, 3);
    const reversed = [...same].reverse().map((name) => ({ name, entry: 'y'.repeat(99) }));
    expect([...planShards(reversed, 250).shards[shardOf('node-00')]!.keys()]).toEqual(same.slice(0, 2));
    // Two entries of 106 bytes in a limit of 212: both fit.
    expect(planShards(reversed.slice(1), 212).left).toBe(0);
    expect(planShards(reversed.slice(1), 211).left).toBe(1);
  });

  it('isPolicyServable: no userInfo is not the kubelet; an object or stored Node without metadata or status is compared as empty', () => {
    const stored = { metadata: { name: 'n' }, status: { allocatable: { cpu: '4' }, capacity: { cpu: '4' } } };
    const kubelet = { username: 'system:node:n' };
    expect(isPolicyServable({ name: 'n', object: structuredClone(stored), oldObject: stored })).toBe(false);
    // The request names the node when the object does not.
    const { metadata: _, ...bare } = structuredClone(stored);
    expect(isPolicyServable({ name: 'n', userInfo: kubelet, object: bare, oldObject: stored })).toBe(true);
    expect(isPolicyServable({ name: 'n', userInfo: kubelet, object: bare, oldObject: { status: stored.status } })).toBe(true);
    expect(isPolicyServable({ name: 'n', userInfo: kubelet, object: { metadata: { name: 'n' } }, oldObject: { metadata: { name: 'n' } } })).toBe(true);
    expect(isPolicyServable({ name: 'n', userInfo: kubelet, object: { metadata: { name: 'n' } }, oldObject: stored })).toBe(false);
  });
});
