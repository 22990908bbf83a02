import fastJsonPatch from 'fast-json-patch';
import { describe, expect, it } from 'vitest';
import { kubeadmNode } from '../../test/fixtures/nodes.js';
import { planNodeStatus, RATIOS_ANNOTATION, RAW_ANNOTATION } from '../domain/node-rules/node-oversell.rules.js';
import { nodeStatusPatch } from '../node-oversell/node-oversell.strategy.js';
import { capMessage, capViolations, exclusiveCpuViolation, nodeCap } from './node-cap.js';
import { type NodeUsage } from '../domain/resources.js';

const KI = 1024n;

/** A kubeadm node as stored after node-oversell inflated it (cpu 4 → 6 at ratio 1.5). */
function inflatedNode() {
  const node = kubeadmNode();
  const plan = planNodeStatus(node, { pool: null, ratios: { cpu: 1.5 } })!;
  return fastJsonPatch.applyPatch(structuredClone(node), nodeStatusPatch(node, plan), true, false).newDocument;
}

describe('nodeCap', () => {
  it('is raw allocatable × ratio from node-oversell annotations', () => {
    const node = inflatedNode();
    expect(node.status.allocatable.cpu).toBe('6');
    const cap = nodeCap(node);
    expect(cap.source).toBe('annotations');
    expect(cap.cap).toEqual({ cpu: 6000n, memory: 16290832n * KI, 'ephemeral-storage': 93478772582n, pods: 110n });
    expect(cap.raw.cpu).toBe(4000n);
    expect(cap.ratios).toEqual({ cpu: 1.5 });
  });

  it('when the stored allocatable is raw (a kubelet wrote while the webhook was down), applies the recorded ratio to it', () => {
    const node = inflatedNode();
    node.status.allocatable.cpu = '3900m'; // the kubelet's new raw value, stored unmodified
    const cap = nodeCap(node);
    expect(cap.raw.cpu).toBe(3900n);
    expect(cap.cap.cpu).toBe(5850n);
  });

  it('without our annotations (or with unreadable ones) is the allocatable as stored', () => {
    expect(nodeCap(kubeadmNode()).cap).toEqual({ cpu: 4000n, memory: 16290832n * KI, 'ephemeral-storage': 93478772582n, pods: 110n });
    const bad = kubeadmNode({ annotations: { [RAW_ANNOTATION]: '{not json', [RATIOS_ANNOTATION]: '{"cpu":100}' } });
    expect(nodeCap(bad)).toMatchObject({ source: 'allocatable', cap: { cpu: 4000n } });
  });

  it('an opted-out node is capped at its raw value, whether or not its kubelet has re-reported yet', () => {
    for (const label of ['kube-overcommit.io/disabled', 'node-oversell/disable']) {
      const stillInflated = inflatedNode();
      stillInflated.metadata.labels[label] = 'true';
      expect(stillInflated.status.allocatable.cpu).toBe('6');
      const cap = nodeCap(stillInflated);
      expect(cap.source).toBe('opted-out');
      expect(cap.cap.cpu).toBe(4000n);
      expect(cap.ratios).toEqual({});

      const reReported = structuredClone(stillInflated);
      reReported.status.allocatable.cpu = '4'; // the kubelet's raw value; our annotations stay behind
      expect(nodeCap(reReported).cap.cpu).toBe(4000n);
    }
  });

  it('a node with no allocatable has no cap', () => {
    expect(nodeCap({ metadata: { name: 'x' } }).cap).toEqual({});
  });
});

describe('capViolations', () => {
  const cap = nodeCap(inflatedNode());
  const usage = (requests: NodeUsage['requests']): NodeUsage => ({ requests });

  it('allows up to the cap exactly', () => {
    expect(capViolations(cap, usage({ cpu: 5000n, pods: 10n }), { cpu: 1000n, pods: 1n })).toEqual([]);
  });

  it('refuses one unit over, naming resource, sum and cap', () => {
    const violations = capViolations(cap, usage({ cpu: 5001n, memory: 1n, pods: 10n }), { cpu: 1000n, memory: 1n, pods: 1n });
    expect(violations).toEqual([{ resource: 'cpu', onNode: 5001n, pod: 1000n, total: 6001n, cap: 6000n, raw: 4000n, ratio: 1.5 }]);
    const message = capMessage('worker-1', 'shop/checkout-6f8b9c7d4-*', violations, usage({ cpu: 5001n, pods: 10n }));
    expect(message).toBe(
      'kube-overcommit: pod shop/checkout-6f8b9c7d4-* would exceed the overcommit cap of node worker-1: ' +
        'cpu: 6001m requested (5001m by 10 pods on the node + 1 by this pod) > cap 6 (raw allocatable 4 × ratio 1.5)',
    );
  });

  it('like the scheduler, checks only resources the pod requests, and always the pod count', () => {
    const full = usage({ cpu: 7000n, memory: 10n ** 12n, pods: 110n });
    expect(capViolations(cap, full, { memory: 0n, pods: 1n }).map((v) => v.resource)).toEqual(['pods']);
    expect(capViolations(cap, full, { cpu: 1n, memory: 1n, pods: 1n }).map((v) => v.resource)).toEqual(['cpu', 'memory', 'pods']);
  });

  it('for a pod already on the node (a resize), checks only the resources it raises above what it holds', () => {
    const full = usage({ cpu: 7000n, memory: 10n ** 12n, pods: 110n });
    const held = { cpu: 1000n, memory: 2n ** 30n, pods: 1n };
    // cpu down, memory the same, the pod count unchanged: nothing to check on a node over its cap.
    expect(capViolations(cap, full, { cpu: 500n, memory: 2n ** 30n, pods: 1n }, held)).toEqual([]);
    expect(capViolations(cap, full, { cpu: 1001n, memory: 2n ** 30n, pods: 1n }, held)).toEqual([
      { resource: 'cpu', onNode: 7000n, pod: 1001n, total: 8001n, cap: 6000n, raw: 4000n, ratio: 1.5 },
    ]);
    // A resource it did not request before counts from 0.
    expect(
      capViolations(cap, usage({ 'ephemeral-storage': 93478772582n }), { 'ephemeral-storage': 1n, pods: 1n }, { pods: 1n }).map((v) => v.resource),
    ).toEqual(['ephemeral-storage']);
  });

  it('never checks a resource the node does not report', () => {
    const noStorage = nodeCap(kubeadmNode({ allocatable: { cpu: '4', memory: '8Gi', pods: '110' } }));
    expect(capViolations(noStorage, usage({}), { 'ephemeral-storage': 10n ** 15n, pods: 1n })).toEqual([]);
  });
});

describe('node cap: edges found by mutation testing (docs/testing.md)', () => {
  const cap = { cap: { cpu: 1_000n, pods: 110n }, raw: { cpu: 1_000n, pods: 110n }, ratios: {}, source: 'allocatable' as const };

  it('a node without metadata is capped at its allocatable', () => {
    expect(nodeCap({ status: { allocatable: { cpu: '4' } } })).toEqual({ cap: { cpu: 4_000n }, raw: { cpu: 4_000n }, ratios: {}, source: 'allocatable' });
  });

  it('every pod counts one against pods; a resource the pod does not request is not checked, however full the node', () => {
    const full: NodeUsage = { requests: { cpu: 2_000n, pods: 110n } };
    expect(capViolations(cap, full, {}).map((v) => [v.resource, v.pod])).toEqual([['pods', 1n]]);
    expect(capViolations(cap, { requests: { cpu: 2_000n } }, { cpu: 0n })).toEqual([]);
  });

  it('exclusiveCpuViolation: none for a pod without exclusive CPUs or a node without a raw cpu', () => {
    expect(exclusiveCpuViolation(cap, { requests: {}, exclusiveCpu: 5_000n }, 0n)).toBeNull();
    expect(exclusiveCpuViolation({ ...cap, raw: {} }, { requests: {}, exclusiveCpu: 5_000n }, 1_000n)).toBeNull();
    expect(exclusiveCpuViolation(cap, { requests: {}, exclusiveCpu: 5_000n }, 1_000n)).toEqual({ onNode: 5_000n, pod: 1_000n, total: 6_000n, raw: 1_000n });
  });
});
