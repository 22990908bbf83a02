import { KubeConfig } from '@kubernetes/client-node';
import { Logger } from '@nestjs/common';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { backgroundTasks } from '../../test/fixtures/background.js';
import { configStore } from '../../test/fixtures/config-store.js';
import { kubeConfigFor } from '../../test/fixtures/kube-config.js';
import { kubeadmNode } from '../../test/fixtures/nodes.js';
import { container, runningPod } from '../../test/fixtures/pods.js';
import { Gauge, Registry } from 'prom-client';
import { BACKGROUND_ERRORS } from '../common/background-tasks.js';
import { ConfigStore } from '../config/config.store.js';
import { NON_TERMINAL_PODS, PodCache } from '../kube/pod-cache.service.js';
import { PodsByNode } from '../kube/pods-by-node.js';
import { NodeCache, trimCachedNode } from '../kube/node-cache.service.js';
import { watchForPlan } from '../plan/plan-caches.js';
import { PodFactsService } from './pod-facts.service.js';
import { admittedPodRequests, scheduledPodRequests } from '../domain/pod-resources.js';

const CAP_AND_DEFAULTS = 'pods:\n  cap: { mode: deny }\n  defaultRequests: { cpu: 100m }\n';
const CAP_ONLY = 'pods:\n  cap: { mode: warn }\n';
const NO_POD_POLICY = 'nodes:\n  defaultRatios: { cpu: 1.5 }\n';

/** The shared caches of the last podFacts(): GET /plan reads them directly. */
let caches: { nodes: NodeCache; pods: PodCache } | undefined;

function podFacts(
  kube: KubeConfig,
  env: NodeJS.ProcessEnv,
  store: ConfigStore,
  gauge: Gauge<string>,
  pods = new PodCache(kube, env, backgroundTasks()),
): PodFactsService {
  caches = { nodes: new NodeCache(kube, env), pods };
  return new PodFactsService(kube, env, store, gauge, caches.pods, caches.nodes);
}

const planWatch = () => watchForPlan(caches!.nodes, caches!.pods);

function syncedGauge(): Gauge<string> {
  return new Gauge({ name: 'synced', help: 'test', labelNames: ['cache'], registers: [] });
}

async function gaugeValues(gauge: Gauge<string>): Promise<Record<string, number>> {
  return Object.fromEntries((await gauge.get()).values.map((v) => [String(v.labels.cache), v.value]));
}

/**
 * A minimal API server: list and watch for pods, nodes and limitranges. Lists answer from
 * `objects`; watches stay open until the test pushes events with `emit`.
 */
class FakeApiServer {
  readonly requests: URL[] = [];
  readonly objects: Record<string, any[]> = { pods: [], nodes: [], limitranges: [] };
  private readonly watches = new Map<string, http.ServerResponse[]>();
  private readonly server = http.createServer((req, res) => this.handle(req, res));
  url = '';

  async start(): Promise<void> {
    await new Promise<void>((resolve) => this.server.listen(0, '127.0.0.1', resolve));
    this.url = `http://127.0.0.1:${(this.server.address() as AddressInfo).port}`;
  }

  async stop(): Promise<void> {
    for (const list of this.watches.values()) for (const res of list) res.end();
    this.server.closeAllConnections();
    await new Promise((resolve) => this.server.close(resolve));
  }

  emit(resource: string, type: 'ADDED' | 'MODIFIED' | 'DELETED', object: any): void {
    for (const res of this.watches.get(resource) ?? []) res.write(`${JSON.stringify({ type, object })}\n`);
  }

  /** Whether a watch of `resource` is open (the client has not closed it). */
  watching(resource: string): boolean {
    return (this.watches.get(resource) ?? []).length > 0;
  }

  private handle(req: http.IncomingMessage, res: http.ServerResponse): void {
    const url = new URL(req.url ?? '/', this.url);
    this.requests.push(url);
    const resource = url.pathname.split('/').pop()!;
    const items = this.objects[resource];
    if (req.method !== 'GET' || !items) {
      res.writeHead(404).end();
      return;
    }
    if (url.searchParams.get('watch') === 'true') {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.flushHeaders();
      this.watches.set(resource, [...(this.watches.get(resource) ?? []), res]);
      res.on('close', () =>
        this.watches.set(
          resource,
          (this.watches.get(resource) ?? []).filter((open) => open !== res),
        ),
      );
      return;
    }
    const kind = { pods: 'PodList', nodes: 'NodeList', limitranges: 'LimitRangeList' }[resource];
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end(JSON.stringify({ kind, apiVersion: 'v1', metadata: { resourceVersion: '100' }, items }));
  }
}

const until = (check: () => boolean) => vi.waitUntil(check, { timeout: 3_000, interval: 10 });

describe('PodFactsService', () => {
  beforeAll(() => Logger.overrideLogger(false));
  afterAll(() => Logger.overrideLogger(['log', 'error', 'warn', 'debug', 'verbose']));

  it('outside a cluster: no caches, nothing synced, nothing known', async () => {
    const facts = podFacts(new KubeConfig(), {}, configStore(CAP_AND_DEFAULTS), syncedGauge());
    facts.onModuleInit();
    expect(facts.available).toBe(false);
    expect(planWatch()).toBe(false);
    expect(caches!.nodes.nodes()).toEqual([]);
    expect(facts.isSynced('pods')).toBe(false);
    expect(facts.node('worker-1')).toBeUndefined();
    expect(facts.limitRanges('shop')).toEqual([]);
    expect(facts.nodeUsage('worker-1')).toEqual({ requests: { pods: 0n } });
    await facts.onApplicationShutdown();
  });

  describe('against an API server', () => {
    let api: FakeApiServer;
    let facts: PodFactsService;

    afterEach(async () => {
      await facts?.onApplicationShutdown();
      await caches?.nodes.onApplicationShutdown();
      await caches?.pods.onApplicationShutdown();
      await api?.stop();
    });

    const kubeFor = (server: FakeApiServer) => kubeConfigFor(server.url);

    it('runs only the caches the pod policy in force reads, following config changes', async () => {
      api = new FakeApiServer();
      await api.start();
      api.objects.nodes.push(kubeadmNode({ name: 'worker-1' }));
      const store = configStore(NO_POD_POLICY);
      const gauge = syncedGauge();
      facts = podFacts(kubeFor(api), { OVERCOMMIT_KUBECONFIG: '/dev/null' }, store, gauge);
      facts.onModuleInit();
      expect(await gaugeValues(gauge)).toEqual({});

      // The cap reads pods and nodes; no mutation, so no LimitRanges.
      store.apply(CAP_ONLY, 'test');
      await until(() => facts.isSynced('pods') && facts.isSynced('nodes'));
      expect(facts.node('worker-1')?.metadata?.name).toBe('worker-1');
      expect(facts.isSynced('limitranges')).toBe(false);
      // One LIST of each, both for the cap: under no pod policy nothing was listed (every Node
      // write would come back as an event), which a request answered before these would show.
      const lists = api.requests.filter((u) => u.searchParams.get('watch') !== 'true').map((u) => u.pathname);
      expect(lists.sort()).toEqual(['/api/v1/nodes', '/api/v1/pods']);
      expect(await gaugeValues(gauge)).toEqual({ pods: 1, nodes: 1 });

      // Policy removed: caches stopped and forgotten.
      store.apply(NO_POD_POLICY, 'test');
      expect(facts.isSynced('nodes')).toBe(false);
      expect(facts.node('worker-1')).toBeUndefined();
      expect(await gaugeValues(gauge)).toEqual({});
      // A stopped cache takes no more events: one sent to its watch is not seen, though a later one
      // to the caches started again is.
      api.emit('nodes', 'ADDED', kubeadmNode({ name: 'worker-2' }));
      store.apply(CAP_ONLY, 'test');
      await until(
        () => facts.isSynced('nodes') && api.requests.filter((u) => u.pathname === '/api/v1/nodes' && u.searchParams.get('watch') === 'true').length === 2,
      );
      api.emit('nodes', 'ADDED', kubeadmNode({ name: 'worker-3' }));
      await until(() => facts.node('worker-3') !== undefined);
      expect(facts.node('worker-2')).toBeUndefined();
    });

    it('the first plan starts the node and pod caches, one LIST each, kept whatever the pod policy', async () => {
      api = new FakeApiServer();
      await api.start();
      api.objects.nodes.push(kubeadmNode({ name: 'worker-1' }));
      const store = configStore(NO_POD_POLICY);
      facts = podFacts(kubeFor(api), { OVERCOMMIT_KUBECONFIG: '/dev/null' }, store, syncedGauge());
      facts.onModuleInit();
      expect(caches!.nodes.nodes()).toEqual([]);
      expect(planWatch()).toBe(false); // started, not listed yet
      await until(() => planWatch());
      expect(caches!.nodes.nodes().map((node) => node.metadata?.name)).toEqual(['worker-1']);
      store.apply(CAP_ONLY, 'test');
      store.apply(NO_POD_POLICY, 'test');
      expect(planWatch()).toBe(true);
      for (let i = 0; i < 3; i++) planWatch();
      const lists = api.requests.filter((u) => u.pathname === '/api/v1/nodes' && u.searchParams.get('watch') !== 'true');
      expect(lists).toHaveLength(1);
    });

    it('caches Nodes without managedFields or status.images, and pods without managedFields', async () => {
      api = new FakeApiServer();
      await api.start();
      const listed = kubeadmNode({ name: 'worker-1' });
      const pod = runningPod('one', 'worker-1', { initContainers: null });
      expect(listed.metadata.managedFields).toHaveLength(1);
      expect(listed.status.images).toHaveLength(50);
      expect(pod.metadata.managedFields).toHaveLength(1);
      api.objects.nodes.push(listed);
      api.objects.pods.push(pod);
      facts = podFacts(kubeFor(api), { OVERCOMMIT_KUBECONFIG: '/dev/null' }, configStore(CAP_ONLY), syncedGauge());
      facts.onModuleInit();
      await until(() => facts.isSynced('nodes') && facts.isSynced('pods') && api.watching('nodes'));
      api.emit('nodes', 'ADDED', kubeadmNode({ name: 'worker-2' }));
      await until(() => facts.node('worker-2') !== undefined);
      for (const name of ['worker-1', 'worker-2']) {
        const node = facts.node(name) as any;
        expect(node.metadata.managedFields, name).toBeUndefined();
        expect(node.status.images, name).toBeUndefined();
        expect(node.status.allocatable, name).toEqual(listed.status.allocatable);
        expect(node.metadata.labels['kubernetes.io/hostname'], name).toBe(name);
      }
      // Kept of a pod: identity, node, phase and both accountings of its requests, nothing else.
      expect(facts.pod('shop', 'one')).toEqual({
        metadata: { name: 'one', namespace: 'shop', uid: pod.metadata.uid, resourceVersion: pod.metadata.resourceVersion },
        spec: { nodeName: pod.spec.nodeName },
        status: { phase: pod.status.phase },
        requests: scheduledPodRequests(pod),
        admitted: admittedPodRequests(pod),
      });
    });

    it('a pod event handler that throws is counted, and the watch keeps indexing the next events', async () => {
      api = new FakeApiServer();
      await api.start();
      const registry = new Registry();
      const kube = kubeFor(api);
      const env = { OVERCOMMIT_KUBECONFIG: '/dev/null' };
      facts = podFacts(kube, env, configStore(CAP_ONLY), syncedGauge(), new PodCache(kube, env, backgroundTasks(registry)));
      facts.onModuleInit();
      await until(() => facts.isSynced('pods') && api.watching('pods'));
      const upsert = vi.spyOn(PodsByNode.prototype, 'upsert').mockImplementationOnce(() => {
        throw new TypeError('Cannot convert object to primitive value');
      });
      try {
        api.emit('pods', 'ADDED', runningPod('one', 'worker-1', { initContainers: null }));
        api.emit('pods', 'ADDED', runningPod('two', 'worker-1', { initContainers: null }));
        await until(() => facts.nodeUsage('worker-1').requests.pods === 1n);
      } finally {
        upsert.mockRestore();
      }
      const errors = (await registry.getSingleMetric(BACKGROUND_ERRORS)!.get()).values.find((v) => v.labels.task === 'informer-event');
      expect(errors?.value).toBe(1);
    });

    it('trimCachedNode leaves a Node without those fields as it is', () => {
      expect(trimCachedNode({ metadata: { name: 'bare' }, status: { allocatable: { cpu: '1' } } })).toEqual({
        metadata: { name: 'bare' },
        status: { allocatable: { cpu: '1' } },
      });
    });

    it('lists and watches non-terminal pods, nodes and LimitRanges, and keeps pods indexed by node', async () => {
      api = new FakeApiServer();
      await api.start();
      const one = runningPod('one', 'worker-1', { initContainers: null, containers: [container('app', { requests: { cpu: '1', memory: '1Gi' } })] });
      const two = runningPod('two', 'worker-1', { initContainers: null, containers: [container('app', { requests: { cpu: '500m' } })] });
      api.objects.pods.push(one, two);
      api.objects.nodes.push(kubeadmNode({ name: 'worker-1' }));
      api.objects.limitranges.push({ metadata: { name: 'defaults', namespace: 'shop' }, spec: { limits: [{ type: 'Container', max: { cpu: '2' } }] } });

      facts = podFacts(kubeFor(api), { OVERCOMMIT_KUBECONFIG: '/dev/null' }, configStore(CAP_AND_DEFAULTS), syncedGauge());
      facts.onModuleInit();

      expect(facts.available).toBe(true);
      await until(() => (['pods', 'nodes', 'limitranges'] as const).every((cache) => facts.isSynced(cache)));
      expect(facts.node('worker-1')?.metadata?.name).toBe('worker-1');
      expect(facts.pod('shop', 'one')?.metadata?.uid).toBe(one.metadata.uid);
      expect(facts.limitRanges('shop')).toHaveLength(1);
      expect(facts.limitRanges('other')).toEqual([]);
      expect(facts.nodeUsage('worker-1').requests).toEqual({ pods: 2n, cpu: 1500n, memory: 1024n ** 3n });
      expect(facts.nodeUsage('worker-1', two.metadata.uid).requests).toEqual({ pods: 1n, cpu: 1000n, memory: 1024n ** 3n });

      // Terminal pods are filtered by the API server, on the list and on the watch.
      const pods = api.requests.filter((u) => u.pathname === '/api/v1/pods');
      expect(pods.length).toBeGreaterThanOrEqual(2);
      for (const url of pods) expect(url.searchParams.get('fieldSelector')).toBe(NON_TERMINAL_PODS);

      await until(() => api.watching('pods'));
      // A new pod bound to the node, then one leaving the selector (Succeeded → DELETED).
      const three = runningPod('three', 'worker-1', { initContainers: null, containers: [container('app', { requests: { cpu: '250m' } })] });
      api.emit('pods', 'ADDED', three);
      await until(() => facts.nodeUsage('worker-1').requests.pods === 3n);
      expect(facts.nodeUsage('worker-1').requests.cpu).toBe(1750n);
      api.emit('pods', 'DELETED', { ...one, status: { phase: 'Succeeded' } });
      await until(() => facts.nodeUsage('worker-1').requests.pods === 2n);
      expect(facts.nodeUsage('worker-1').requests).toEqual({ pods: 2n, cpu: 750n });
      // A pending pod is known by name (for pods/binding) but on no node.
      const pending = runningPod('pending', 'x', { initContainers: null });
      delete pending.spec.nodeName;
      pending.status = { phase: 'Pending' };
      api.emit('pods', 'ADDED', pending);
      await until(() => facts.pod('shop', 'pending') !== undefined);
      expect(facts.nodeUsage('worker-1').requests.pods).toBe(2n);
    });
  });
});
