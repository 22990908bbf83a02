import { Logger } from '@nestjs/common';
import fastJsonPatch from 'fast-json-patch';
import { Counter, Registry } from 'prom-client';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { IN_CLUSTER_ENV, KnownNamespaces } from '../../test/fixtures/namespaces.js';
import { quietLog } from '../../test/fixtures/request-log.js';
import { kubeadmNode } from '../../test/fixtures/nodes.js';
import {
  bindingReview,
  container,
  deploymentPod,
  mirrorPod,
  podReview,
  resizeReview,
  resizingPod,
  runningPod,
  type ResizeState,
} from '../../test/fixtures/pods.js';
import type { AdmissionRequest } from '../admission/admission.types.js';
import { parseConfig, type OvercommitConfig } from '../overcommit.config.js';
import { planNodeStatus } from '../domain/node-rules/node-oversell.rules.js';
import { nodeStatusPatch } from '../node-oversell/node-oversell.strategy.js';
import type { LimitRangeLike } from './limit-range.js';
import { ORIGINAL_RESOURCES_ANNOTATION } from './pod-mutation.js';
import { cachedPod, PodsByNode, type CachedPod } from '../kube/pods-by-node.js';
import type { FactsCache, PodFacts } from './pod-facts.js';
import { CACHE_UNSYNCED, CAP_DENIALS, CAP_SKIPPED, CAP_WARNINGS, LIMITS_CHANGED, PODS_MUTATED, REQUESTS_CHANGED } from './pod-policy.metrics.js';
import { PodPolicyMetrics, PodPolicyStrategy } from './pod-policy.strategy.js';
import type { PodLike } from '../domain/pod-resources.js';

/** The same interface as PodFactsService, over plain objects. */
class FakeFacts implements PodFacts {
  available = true;
  synced: Record<FactsCache, boolean> = { pods: true, nodes: true, limitranges: true };
  readonly nodes = new Map<string, any>();
  readonly pods = new Map<string, CachedPod>();
  readonly ranges = new Map<string, LimitRangeLike[]>();
  readonly index = new PodsByNode();

  addPod(pod: PodLike): void {
    const cached = cachedPod(pod);
    this.pods.set(`${pod.metadata!.namespace}/${pod.metadata!.name}`, cached);
    this.index.upsert(cached);
  }
  isSynced(cache: FactsCache) {
    return this.synced[cache];
  }
  limitRanges(namespace: string) {
    return this.ranges.get(namespace) ?? [];
  }
  node(name: string) {
    return this.nodes.get(name);
  }
  pod(namespace: string, name: string) {
    return this.pods.get(`${namespace}/${name}`);
  }
  nodeUsage(nodeName: string, exclude?: string) {
    return this.index.usage(nodeName, exclude);
  }
}

function counters(registry: Registry) {
  const counter = (name: string, labelNames: string[] = []) => new Counter({ name, help: name, labelNames, registers: [registry] });
  return new PodPolicyMetrics(
    counter(PODS_MUTATED),
    counter(REQUESTS_CHANGED, ['resource', 'change']),
    counter(LIMITS_CHANGED, ['resource', 'change']),
    counter(CAP_DENIALS, ['resource']),
    counter(CAP_WARNINGS, ['resource']),
    counter(CAP_SKIPPED, ['reason']),
    counter(CACHE_UNSYNCED, ['cache']),
  );
}

async function value(registry: Registry, name: string, labels: Record<string, string> = {}): Promise<number> {
  const metric = await registry.getSingleMetric(name)!.get();
  const found = metric.values.find((v) => Object.entries(labels).every(([k, l]) => v.labels[k] === l));
  return found?.value ?? 0;
}

function config(yaml: string): OvercommitConfig {
  const parsed = parseConfig(yaml);
  if (!parsed.ok) throw new Error(parsed.errors.join('\n'));
  return parsed.value;
}

const MUTATE = config(`
pods:
  defaultRequests: { cpu: 100m, memory: 128Mi }
  limitToRequest: { memoryRequestPercent: 50, cpuLimitPerGiBPercent: 200, cpuRequestPercent: 25 }
`);
const DENY = config(`
pods:
  defaultRequests: { cpu: 100m, memory: 128Mi }
  cap: { mode: deny }
`);
const WARN = config('pods: { cap: { mode: warn } }');

/** A 4-core node stored by node-oversell at ratio cpu 1.5 (allocatable 6, raw 4 in its annotations). */
function inflatedNode(name: string) {
  const node = kubeadmNode({ name });
  const plan = planNodeStatus(node, { pool: null, ratios: { cpu: 1.5 } })!;
  return fastJsonPatch.applyPatch(structuredClone(node), nodeStatusPatch(node, plan), true, false).newDocument;
}

const request = (review: any) => review.request as AdmissionRequest;
/** The resources of container `name` (regular or init) once `result`'s patch, if any, is applied to the review's pod. */
function resourcesAfter(review: any, result: { patch?: fastJsonPatch.Operation[] }, name = 'checkout') {
  const pod = fastJsonPatch.applyPatch(structuredClone(review.request.object), result.patch ?? [], true, false).newDocument as any;
  return [...(pod.spec.initContainers ?? []), ...pod.spec.containers].find((c: any) => c.name === name)?.resources;
}
/**
 * What MUTATE makes of deploymentPod()'s checkout container (memory limit 1Gi), no LimitRange: a cpu
 * limit of 200 % per GiB = 2, requests at 25 % of it (500m) and 50 % of the memory limit.
 */
const MUTATED = { limits: { memory: '1Gi', cpu: '2' }, requests: { cpu: '500m', memory: '512Mi' } };

describe('PodPolicyStrategy', () => {
  let facts: FakeFacts;
  let registry: Registry;
  let labels: Map<string, Record<string, string>>;
  let metrics: PodPolicyMetrics;
  let strategy: PodPolicyStrategy;
  /** In a cluster by default, like FakeFacts; the namespace cache is the real one over `labels`. */
  const build = (env: NodeJS.ProcessEnv = IN_CLUSTER_ENV) => new PodPolicyStrategy(facts, new KnownNamespaces(labels, env), metrics);
  /** No cluster: no facts, and namespace labels never known. */
  const outsideCluster = (env: NodeJS.ProcessEnv = {}) => {
    facts.available = false;
    return build(env);
  };

  beforeAll(() => Logger.overrideLogger(false));
  afterAll(() => Logger.overrideLogger(['log', 'error', 'warn', 'debug', 'verbose']));
  beforeEach(() => {
    facts = new FakeFacts();
    registry = new Registry();
    metrics = counters(registry);
    labels = new Map([['shop', { 'kubernetes.io/metadata.name': 'shop', 'kube-overcommit.io/pod-policy': 'enabled' }]]);
    strategy = build();
  });

  describe('scope', () => {
    it('mutates a pod in a namespace whose labels match the selector', () => {
      const review = podReview(deploymentPod());
      expect(resourcesAfter(review, strategy.admit(request(review), MUTATE, quietLog))).toEqual(MUTATED);
    });

    it('in a cluster, unknown labels leave the pod and the binding alone, counted (not for dry runs)', async () => {
      labels.delete('shop');
      expect(strategy.admit(request(podReview(deploymentPod())), MUTATE, quietLog)).toEqual({});
      expect(strategy.admit(request(bindingReview('shop', 'x', 'worker-1')), DENY, quietLog)).toEqual({});
      expect(strategy.admit(request(podReview(deploymentPod(), { dryRun: true })), MUTATE, quietLog)).toEqual({});
      expect(await value(registry, CACHE_UNSYNCED, { cache: 'namespaces' })).toBe(2);
      expect(await value(registry, PODS_MUTATED)).toBe(0);
    });

    it('outside a cluster, unknown labels are in scope: the webhook entry selector decided', async () => {
      labels.clear();
      const review = podReview(deploymentPod());
      expect(resourcesAfter(review, outsideCluster().admit(request(review), MUTATE, quietLog))).toEqual(MUTATED);
      expect(await value(registry, CACHE_UNSYNCED, { cache: 'namespaces' })).toBe(0);
    });

    it('honours a custom namespaceSelector', () => {
      labels.set('shop', { team: 'payments' });
      const custom = config(
        'pods: { namespaceSelector: { matchExpressions: [{ key: team, operator: In, values: [payments] }] }, defaultRequests: { cpu: 10m } }',
      );
      const review = podReview(deploymentPod());
      // The one default set goes to the container without requests, the native sidecar.
      expect(resourcesAfter(review, strategy.admit(request(review), custom, quietLog), 'log-shipper')).toEqual({ requests: { cpu: '10m' } });
      expect(strategy.admit(request(podReview(deploymentPod())), MUTATE, quietLog)).toEqual({});
    });

    it('leaves a namespace that did not opt in untouched', () => {
      labels.set('shop', { 'kubernetes.io/metadata.name': 'shop' });
      expect(strategy.admit(request(podReview(deploymentPod())), MUTATE, quietLog)).toEqual({});
    });

    it('never touches the system namespaces or its own, labels matching or unknown, in a cluster or not (not counted)', async () => {
      const excluded = ['kube-system', 'kube-node-lease', 'kube-public', 'kube-overcommit'];
      for (const policy of [build(), outsideCluster()]) {
        for (const namespace of excluded) labels.set(namespace, { 'kube-overcommit.io/pod-policy': 'enabled' });
        for (const namespace of excluded) expect(policy.admit(request(podReview(deploymentPod({ namespace }))), MUTATE, quietLog), namespace).toEqual({});
        for (const namespace of excluded) labels.delete(namespace);
        for (const namespace of excluded) expect(policy.admit(request(podReview(deploymentPod({ namespace }))), MUTATE, quietLog), namespace).toEqual({});
      }
      expect(await value(registry, CACHE_UNSYNCED, { cache: 'namespaces' })).toBe(0);
      facts.available = true;
      const custom = build({ ...IN_CLUSTER_ENV, POD_NAMESPACE: 'platform' });
      labels.set('platform', { 'kube-overcommit.io/pod-policy': 'enabled' });
      labels.set('kube-overcommit', { 'kube-overcommit.io/pod-policy': 'enabled' });
      expect(custom.admit(request(podReview(deploymentPod({ namespace: 'platform' }))), MUTATE, quietLog)).toEqual({});
      const ownDefault = podReview(deploymentPod({ namespace: 'kube-overcommit' }));
      expect(resourcesAfter(ownDefault, custom.admit(request(ownDefault), MUTATE, quietLog))).toEqual(MUTATED);
    });

    it('skips mirror pods, in any namespace', () => {
      expect(strategy.admit(request(podReview(mirrorPod({ namespace: 'shop' }))), MUTATE, quietLog)).toEqual({});
      expect(strategy.admit(request(podReview(mirrorPod({ namespace: 'shop' }))), DENY, quietLog)).toEqual({});
    });

    it('does nothing with the default config', () => {
      expect(strategy.admit(request(podReview(deploymentPod())), config(''), quietLog)).toEqual({});
    });
  });

  describe('mutation', () => {
    it('clamps to the namespace LimitRange from the cache', () => {
      facts.ranges.set('shop', [{ spec: { limits: [{ type: 'Container', max: { cpu: '1' } }] } }]);
      const review = podReview(deploymentPod({ initContainers: null }));
      const patched: any = fastJsonPatch.applyPatch(
        structuredClone(review.request.object),
        strategy.admit(request(review), MUTATE, quietLog).patch!,
        true,
        false,
      ).newDocument;
      expect(patched.spec.containers[0].resources).toEqual({ limits: { memory: '1Gi', cpu: '1' }, requests: { cpu: '250m', memory: '512Mi' } });
    });

    it('leaves the pod alone while the LimitRange cache has not synced, and counts it', async () => {
      facts.synced.limitranges = false;
      expect(strategy.admit(request(podReview(deploymentPod())), MUTATE, quietLog)).toEqual({});
      expect(await value(registry, CACHE_UNSYNCED, { cache: 'limitranges' })).toBe(1);
    });

    it('outside a cluster mutates without LimitRange clamps', () => {
      labels.clear();
      facts.synced.limitranges = false;
      facts.ranges.set('shop', [{ spec: { limits: [{ type: 'Container', max: { cpu: '1' } }] } }]);
      const review = podReview(deploymentPod());
      expect(resourcesAfter(review, outsideCluster().admit(request(review), MUTATE, quietLog))).toEqual(MUTATED);
    });

    it('counts mutated pods and each changed request and limit, not on reinvocation nor dry runs', async () => {
      const review = podReview(deploymentPod());
      const result = strategy.admit(request(review), MUTATE, quietLog);
      expect(await value(registry, PODS_MUTATED)).toBe(1);
      expect(await value(registry, REQUESTS_CHANGED, { resource: 'memory', change: 'added' })).toBe(2);
      expect(await value(registry, REQUESTS_CHANGED, { resource: 'cpu', change: 'lowered' })).toBe(1);
      expect(await value(registry, LIMITS_CHANGED, { resource: 'cpu', change: 'added' })).toBe(1);
      const mutated = fastJsonPatch.applyPatch(structuredClone(review.request.object), result.patch!, true, false).newDocument;
      expect(strategy.admit(request(podReview(mutated)), MUTATE, quietLog)).toEqual({});
      strategy.admit(request(podReview(deploymentPod(), { dryRun: true })), MUTATE, quietLog);
      expect(await value(registry, PODS_MUTATED)).toBe(1);
    });
  });

  describe('node cap on pods/binding', () => {
    beforeEach(() => {
      facts.nodes.set('worker-1', inflatedNode('worker-1'));
      // 5 cores requested on a node capped at 6 (raw 4 × 1.5).
      facts.addPod(runningPod('busy-1', 'worker-1', { initContainers: null, containers: [container('app', { requests: { cpu: '3', memory: '1Gi' } })] }));
      facts.addPod(runningPod('busy-2', 'worker-1', { initContainers: null, containers: [container('app', { requests: { cpu: '2', memory: '1Gi' } })] }));
    });

    const pending = (name: string, cpu: string) => {
      const pod = runningPod(name, 'unused', { initContainers: null, containers: [container('app', { requests: { cpu, memory: '128Mi' } })] });
      delete pod.spec.nodeName;
      pod.status = { phase: 'Pending' };
      facts.addPod(pod);
      return pod;
    };

    it('admits a pod that fits exactly', () => {
      pending('fits', '1');
      expect(strategy.admit(request(bindingReview('shop', 'fits', 'worker-1')), DENY, quietLog)).toEqual({});
    });

    it('denies one over the cap in deny mode, naming node, resource, sum and cap', async () => {
      pending('big', '1001m');
      const result = strategy.admit(request(bindingReview('shop', 'big', 'worker-1')), DENY, quietLog);
      expect(result.deny?.code).toBe(403);
      expect(result.deny?.message).toBe(
        'kube-overcommit: pod shop/big would exceed the overcommit cap of node worker-1: ' +
          'cpu: 6001m requested (5 by 2 pods on the node + 1001m by this pod) > cap 6 (raw allocatable 4 × ratio 1.5)',
      );
      expect(await value(registry, CAP_DENIALS, { resource: 'cpu' })).toBe(1);
    });

    it('warns and admits in warn mode', async () => {
      pending('big', '2');
      const result = strategy.admit(request(bindingReview('shop', 'big', 'worker-1')), WARN, quietLog);
      expect(result.deny).toBeUndefined();
      expect(result.warnings).toEqual(['node worker-1 over its overcommit cap for cpu: 7 requested > cap 6']);
      expect(result.warnings![0].length).toBeLessThanOrEqual(120);
      expect(await value(registry, CAP_WARNINGS, { resource: 'cpu' })).toBe(1);
    });

    it('ignores bindings when the cap is off, and in namespaces that did not opt in', () => {
      pending('big', '8');
      expect(strategy.admit(request(bindingReview('shop', 'big', 'worker-1')), MUTATE, quietLog)).toEqual({});
      labels.set('shop', {});
      expect(strategy.admit(request(bindingReview('shop', 'big', 'worker-1')), DENY, quietLog)).toEqual({});
    });

    it('fails open, counted, when a cache is not synced, the pod or node is unknown, or there is no cluster', async () => {
      pending('big', '8');
      const bind = () => strategy.admit(request(bindingReview('shop', 'big', 'worker-1')), DENY, quietLog);
      facts.synced.pods = false;
      expect(bind()).toEqual({});
      expect(await value(registry, CACHE_UNSYNCED, { cache: 'pods' })).toBe(1);
      facts.synced.pods = true;
      facts.synced.nodes = false;
      expect(bind()).toEqual({});
      expect(await value(registry, CACHE_UNSYNCED, { cache: 'nodes' })).toBe(1);
      facts.synced.nodes = true;
      expect(strategy.admit(request(bindingReview('shop', 'nobody', 'worker-1')), DENY, quietLog)).toEqual({});
      expect(await value(registry, CAP_SKIPPED, { reason: 'pod-unknown' })).toBe(1);
      expect(strategy.admit(request(bindingReview('shop', 'big', 'worker-9')), DENY, quietLog)).toEqual({});
      expect(await value(registry, CAP_SKIPPED, { reason: 'node-unknown' })).toBe(1);
      labels.clear();
      expect(outsideCluster().admit(request(bindingReview('shop', 'big', 'worker-1')), DENY, quietLog)).toEqual({});
      expect(await value(registry, CAP_SKIPPED, { reason: 'no-cluster' })).toBe(1);
      expect(await value(registry, CAP_DENIALS, { resource: 'cpu' })).toBe(0);
    });

    it('does not count the pod being bound twice if the cache already has it on the node', () => {
      const pod = pending('again', '1');
      facts.addPod({ ...pod, spec: { ...pod.spec, nodeName: 'worker-1' } });
      expect(strategy.admit(request(bindingReview('shop', 'again', 'worker-1')), DENY, quietLog)).toEqual({});
    });
  });

  describe('node cap on pods/resize (in-place resize)', () => {
    /** A resizing pod on worker-1, in the facts (again under the same uid: the informer's update). */
    const onNode = (name: string, state: ResizeState) => {
      const pod = resizingPod(name, 'worker-1', state);
      pod.metadata.uid = `uid-${name}`;
      facts.addPod(pod);
      return pod;
    };
    /** `web` on worker-1 at `state`, and the review of a resize of its cpu to `cpu`. */
    const resize = (cpu: string, state: ResizeState = { desired: '1', allocated: '1' }) => {
      const stored = onNode('web', state);
      const sent = structuredClone(stored);
      sent.spec.containers[0].resources.requests.cpu = cpu;
      return request(resizeReview(stored, sent));
    };

    beforeEach(() => {
      facts.nodes.set('worker-1', inflatedNode('worker-1'));
      // 3 cores requested by another pod on a node capped at 6 (raw 4 × 1.5).
      facts.addPod(runningPod('busy', 'worker-1', { initContainers: null, containers: [container('app', { requests: { cpu: '3' } })] }));
    });

    it('admits a resize up within the cap (3 + 3 = 6), unchanged', () => {
      expect(strategy.admit(resize('3'), DENY, quietLog)).toEqual({});
    });

    it('denies a resize up past the cap with the message of a binding, counted', async () => {
      const result = strategy.admit(resize('3001m'), DENY, quietLog);
      expect(result.deny).toEqual({
        code: 403,
        message:
          'kube-overcommit: pod shop/web would exceed the overcommit cap of node worker-1: ' +
          'cpu: 6001m requested (3 by 1 pod on the node + 3001m by this pod) > cap 6 (raw allocatable 4 × ratio 1.5)',
      });
      expect(await value(registry, CAP_DENIALS, { resource: 'cpu' })).toBe(1);
    });

    it('warns and admits in warn mode', async () => {
      expect(strategy.admit(resize('4'), WARN, quietLog)).toEqual({ warnings: ['node worker-1 over its overcommit cap for cpu: 7 requested > cap 6'] });
      expect(await value(registry, CAP_WARNINGS, { resource: 'cpu' })).toBe(1);
    });

    it('a resize down, or one that changes nothing the cap counts, passes on a node already over its cap', () => {
      onNode('deferred', { desired: '4', allocated: '1', pending: 'Deferred' });
      // On the node: busy 3 + deferred 4 (its Deferred desired counts) + web 1 = 8 > 6.
      expect(strategy.admit(resize('500m'), DENY, quietLog)).toEqual({});
      expect(strategy.admit(resize('1'), DENY, quietLog)).toEqual({});
      expect(strategy.admit(resize('1001m'), DENY, quietLog).deny?.message).toContain('cpu: 8001m requested (7 by 2 pods on the node + 1001m by this pod)');
    });

    it("the node's other pods counted as the scheduler counts them: an Infeasible desired left out, a Deferred one and allocated above desired counted", () => {
      onNode('stuck', { desired: '4', allocated: '1', pending: 'Infeasible' });
      // busy 3 + stuck 1 (allocated; its Infeasible 4 left out) + web 2 = 6.
      expect(strategy.admit(resize('2'), DENY, quietLog)).toEqual({});
      onNode('stuck', { desired: '4', allocated: '1', pending: 'Deferred' });
      expect(strategy.admit(resize('2'), DENY, quietLog).deny?.message).toContain('cpu: 9 requested (7 by 2 pods on the node + 2 by this pod)');
      onNode('stuck', { desired: '500m', allocated: '1500m' });
      expect(strategy.admit(resize('2'), DENY, quietLog).deny?.message).toContain('cpu: 6500m requested (4500m by 2 pods on the node + 2 by this pod)');
    });

    it("the resized pod's own allocated cpu above its new desired: held, so no increase", () => {
      // web is allocated 2 (a resize down to 1 not yet actuated); asking 1500m raises nothing.
      facts.addPod(runningPod('more', 'worker-1', { initContainers: null, containers: [container('app', { requests: { cpu: '1' } })] }));
      expect(strategy.admit(resize('1500m', { desired: '1', allocated: '2' }), DENY, quietLog)).toEqual({});
    });

    it('never rewrites a resize: the cap off, a pod asking nothing, default requests configured', () => {
      const stored = runningPod('bare', 'worker-1', { initContainers: null, containers: [container('app')] });
      const sent = structuredClone(stored);
      sent.spec.containers[0].resources = { limits: { memory: '1Gi' } };
      expect(strategy.admit(request(resizeReview(stored, sent)), MUTATE, quietLog)).toEqual({});
      expect(strategy.admit(request(resizeReview(stored, sent)), DENY, quietLog)).toEqual({});
    });

    it('leaves alone a resize of a pod not bound yet, of a mirror pod, and one the API server refuses (a container renamed)', () => {
      const pending = resizingPod('web', 'worker-1', { desired: '1', allocated: '1' });
      delete pending.spec.nodeName;
      const big = structuredClone(pending);
      big.spec.containers[0].resources.requests.cpu = '8';
      expect(strategy.admit(request(resizeReview(pending, big)), DENY, quietLog)).toEqual({});
      const mirror = mirrorPod({ namespace: 'shop', nodeName: 'worker-1' });
      const bigMirror = structuredClone(mirror);
      bigMirror.spec.containers[0].resources.requests.cpu = '8';
      expect(strategy.admit(request(resizeReview(mirror, bigMirror)), DENY, quietLog)).toEqual({});
      const renamed = structuredClone(resize('8').object) as any;
      renamed.spec.containers[0].name = 'other';
      expect(strategy.admit(request(resizeReview(resizingPod('web', 'worker-1', { desired: '1', allocated: '1' }), renamed)), DENY, quietLog)).toEqual({});
    });
  });

  describe('exclusive CPUs on a node of a pool with exclusiveCpus', () => {
    const EXCLUSIVE = (mode: string, exclusiveCpus = true) =>
      config(`
nodes:
  pools:
    - { name: pinned, nodeSelector: { matchLabels: { kubernetes.io/hostname: worker-1 } }, ratios: { cpu: 1.5 }, exclusiveCpus: ${exclusiveCpus} }
pods: { cap: { mode: ${mode} } }
`);
    /** A Guaranteed pod (requests = limits) of `cpu` and 1Gi, bound to `node` or pending. */
    const guaranteed = (name: string, cpu: string, node?: string) => {
      const resources = { requests: { cpu, memory: '1Gi' }, limits: { cpu, memory: '1Gi' } };
      const pod = runningPod(name, node ?? 'unused', { initContainers: null, containers: [container('app', resources)] });
      if (node === undefined) {
        delete pod.spec.nodeName;
        pod.status = { phase: 'Pending' };
      }
      facts.addPod(pod);
      return pod;
    };

    beforeEach(() => {
      facts.nodes.set('worker-1', inflatedNode('worker-1'));
      // 3 whole cores exclusive on a 4-core node (cap 6 at ratio 1.5), plus 500m shared
      guaranteed('pinned-3', '3', 'worker-1');
      facts.addPod(runningPod('shared', 'worker-1', { initContainers: null, containers: [container('app', { requests: { cpu: '500m', memory: '1Gi' } })] }));
    });

    it('denies a binding that would take the exclusive CPUs past raw cpu, though the overcommit cap has room', async () => {
      guaranteed('two', '2');
      const result = strategy.admit(request(bindingReview('shop', 'two', 'worker-1')), EXCLUSIVE('deny'), quietLog);
      expect(result.deny?.message).toBe(
        'kube-overcommit: pod shop/two would exceed the overcommit cap of node worker-1: exclusive cpu: 5 requested (3 by pods on the node + 2 by this pod) ' +
          '> raw cpu allocatable 4 (the static CPU manager policy gives Guaranteed pods whole cores: never overcommitted)',
      );
      expect(await value(registry, CAP_DENIALS, { resource: 'exclusive-cpu' })).toBe(1);
      expect(await value(registry, CAP_DENIALS, { resource: 'cpu' })).toBe(0);
    });

    it('admits what fits: one more whole core, a fractional Guaranteed pod, a Burstable one (shared pool)', () => {
      guaranteed('one', '1');
      guaranteed('fraction', '1500m');
      const burstable = runningPod('burst', 'unused', {
        initContainers: null,
        containers: [container('app', { requests: { cpu: '1' }, limits: { cpu: '2' } })],
      });
      delete burstable.spec.nodeName;
      facts.addPod(burstable);
      for (const name of ['one', 'fraction', 'burst'])
        expect(strategy.admit(request(bindingReview('shop', name, 'worker-1')), EXCLUSIVE('deny'), quietLog), name).toEqual({});
    });

    it('warns and admits in warn mode; no check where the pool does not declare exclusiveCpus', async () => {
      guaranteed('two', '2');
      const bind = (cfg: OvercommitConfig) => strategy.admit(request(bindingReview('shop', 'two', 'worker-1')), cfg, quietLog);
      expect(bind(EXCLUSIVE('warn')).warnings).toEqual(['node worker-1 over its raw cpu for exclusive cpus: 5 requested > raw 4']);
      expect(await value(registry, CAP_WARNINGS, { resource: 'exclusive-cpu' })).toBe(1);
      expect(bind(EXCLUSIVE('deny', false))).toEqual({});
    });

    it('a Guaranteed pod created with spec.nodeName is checked the same way', () => {
      const pod = runningPod('direct', 'worker-1', {
        initContainers: null,
        containers: [container('app', { requests: { cpu: '2', memory: '1Gi' }, limits: { cpu: '2', memory: '1Gi' } })],
      });
      delete pod.metadata.uid;
      expect(strategy.admit(request(podReview(pod)), EXCLUSIVE('deny'), quietLog).deny?.message).toContain('exclusive cpu: 5 requested');
    });
  });

  describe('node cap on pods created with spec.nodeName', () => {
    beforeEach(() => {
      facts.nodes.set('worker-1', inflatedNode('worker-1'));
      facts.addPod(runningPod('busy', 'worker-1', { initContainers: null, containers: [container('app', { requests: { cpu: '5950m' } })] }));
    });

    it('counts the requests as mutated: the default request pushes it over', () => {
      const bare = deploymentPod({ nodeName: 'worker-1', initContainers: null, containers: [container('app')] });
      const result = strategy.admit(request(podReview(bare)), DENY, quietLog);
      expect(result.deny?.message).toMatch(/node worker-1: cpu: 6050m requested \(5950m by 1 pod on the node \+ 100m by this pod\) > cap 6/);
      expect(result.patch).toBeUndefined();
      expect(bare.spec.containers[0].resources).toEqual({}); // the request's object is not modified
    });

    it('admits with its patch when it fits; warns with its patch in warn mode', () => {
      const small = deploymentPod({ nodeName: 'worker-1', initContainers: null, containers: [container('app', { requests: { cpu: '50m' } })] });
      const fits = strategy.admit(request(podReview(small)), DENY, quietLog);
      expect(fits.deny).toBeUndefined();
      expect(fits.patch?.some((op) => op.path.endsWith(ORIGINAL_RESOURCES_ANNOTATION.replace('/', '~1')))).toBe(true);
      const warned = strategy.admit(
        request(podReview(deploymentPod({ nodeName: 'worker-1', initContainers: null, containers: [container('app')] }))),
        config('pods: { defaultRequests: { cpu: 100m }, cap: { mode: warn } }'),
        quietLog,
      );
      expect(warned.patch?.some((op) => op.path.endsWith(ORIGINAL_RESOURCES_ANNOTATION.replace('/', '~1')))).toBe(true);
      expect(warned.warnings).toEqual(['node worker-1 over its overcommit cap for cpu: 6050m requested > cap 6']);
    });
  });
});
