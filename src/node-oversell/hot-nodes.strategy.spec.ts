import { Registry } from 'prom-client';
import { describe, expect, it } from 'vitest';
import { admitStatusWrite, nodeOversellStrategy } from '../../test/fixtures/node-oversell-strategy.js';
import { kubeadmNode } from '../../test/fixtures/nodes.js';
import { FLOOR_ANNOTATION, USAGE_ANNOTATION } from '../domain/node-rules/node-oversell.rules.js';
import type { NodeUsageEntry } from '../domain/node-rules/usage-aware.rules.js';
import type { ResourceAmounts } from '../domain/resources.js';
import type { OvercommitConfig } from '../overcommit.config.js';
import { NODE_ALLOCATABLE_REASON_METRIC } from './node-oversell.metrics.js';

type Json = Record<string, any>;

const FULL = {
  nodes: { defaultRatios: { cpu: 2 }, pools: [], defaultUsage: { target: { cpu: 0.6 }, hotAction: 'full' } },
} as unknown as OvercommitConfig;
const RATIO1 = {
  nodes: { defaultRatios: { cpu: 2 }, pools: [], defaultUsage: { target: { cpu: 0.6 }, hotAction: 'ratio1' } },
} as unknown as OvercommitConfig;
const GiB = 2n ** 30n;

function harness() {
  const registry = new Registry();
  const committed = new Map<string, ResourceAmounts>();
  const published = new Map<string, NodeUsageEntry>();
  const events: Array<{ reason: string; message: string }> = [];
  const strategy = nodeOversellStrategy({
    registry,
    committed: (node) => committed.get(node),
    record: (_node, reason, message) => events.push({ reason, message }),
    usage: (name) => published.get(name),
  });
  /** A kubelet's status write of `object` onto the stored `stored`: the Node stored after it. */
  const admit = (object: Json, config = FULL, stored: Json = object): Json => admitStatusWrite(strategy, object, stored, config);
  const reasons = async () =>
    (await registry.getSingleMetric(NODE_ALLOCATABLE_REASON_METRIC)!.get()).values.map(({ labels }) => `${labels.resource}=${labels.reason}`);
  return { admit, committed, published, events, reasons };
}

describe('NodeOversellStrategy with hotAction full (hot-nodes.rules.ts rule 5)', () => {
  const hotFull: NodeUsageEntry = { cpu: { ratio: 1, reason: 'hot-full', A: '4', R: '1500m', U: '3700m' } };
  const bound: ResourceAmounts = { cpu: 1500n, memory: GiB, pods: 3n };

  it('writes the bound requests for every resource, reason hot-full, no floor Event (the leader records NodeHot); keeps it at the kubelet next write; reopens', async () => {
    const { admit, committed, published, events, reasons } = harness();
    committed.set('worker-1', bound);
    published.set('worker-1', { cpu: { ratio: 1.5, reason: 'usage' } });
    const open = admit(kubeadmNode());
    expect(open.status.allocatable.cpu).toBe('6');

    published.set('worker-1', hotFull);
    const full = admit(open);
    expect(full.status.allocatable).toMatchObject({ cpu: '1500m', memory: '1Gi', 'ephemeral-storage': '0', pods: '3' });
    expect(full.metadata.annotations[FLOOR_ANNOTATION]).toBe('{"cpu":"1500m","memory":"1Gi","ephemeral-storage":"0","pods":"3"}');
    expect(JSON.parse(full.metadata.annotations[USAGE_ANNOTATION]).cpu.reason).toBe('hot-full');
    expect(events).toEqual([]);
    expect(await reasons()).toEqual(['cpu=hot-full', 'memory=hot-full', 'ephemeral-storage=hot-full', 'pods=hot-full']);

    // The kubelet's next write sends its raw values onto the stored full Node: full again.
    const kubeletWrite = { ...structuredClone(full), status: { ...full.status, allocatable: kubeadmNode().status.allocatable } };
    expect(admit(kubeletWrite, FULL, full).status.allocatable).toEqual(full.status.allocatable);
    expect(admit(full).status.allocatable).toEqual(full.status.allocatable); // reinvocation
    expect(events).toEqual([]);

    published.set('worker-1', { cpu: { ratio: 1.1, reason: 'usage', A: '4', R: '1500m', U: '2' } });
    const reopened = admit(full);
    expect(reopened.status.allocatable).toMatchObject({ cpu: '4400m', memory: '16290832Ki', pods: '110' });
    expect(reopened.metadata.annotations[FLOOR_ANNOTATION]).toBeUndefined();
    expect(events).toEqual([]); // no CommitmentFloorLifted: the floor was the full node's
  });

  it('full by the published entry but the pool back on ratio1: ratio 1 then the floor, as hot', async () => {
    const { admit, committed, published, events, reasons } = harness();
    committed.set('worker-1', bound);
    published.set('worker-1', hotFull);
    const node = admit(kubeadmNode(), RATIO1);
    expect(node.status.allocatable).toMatchObject({ cpu: '4', pods: '110' });
    expect(events).toEqual([]);
    expect(await reasons()).toContain('cpu=hot');
  });

  it('committed requests unknown: ratio 1, no Event', () => {
    const { admit, published, events } = harness();
    published.set('worker-1', hotFull);
    expect(admit(kubeadmNode()).status.allocatable).toMatchObject({ cpu: '4', pods: '110' });
    expect(events).toEqual([]);
  });
});
