import { KubeConfig } from '@kubernetes/client-node';
import { Logger } from '@nestjs/common';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { Counter, Gauge } from 'prom-client';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { backgroundTasks } from '../../test/fixtures/background.js';
import { configStore } from '../../test/fixtures/config-store.js';
import { IN_CLUSTER_ENV } from '../../test/fixtures/namespaces.js';
import { kubeadmNode } from '../../test/fixtures/nodes.js';
import { container, resizingPod, runningPod } from '../../test/fixtures/pods.js';
import { waitUntil } from '../../test/support/wait.js';
import { ConfigStore } from '../config/config.store.js';
import { PodCache } from '../kube/pod-cache.service.js';
import { resolveNodePolicy } from '../domain/node-rules/node-oversell.rules.js';
import { UsageRatios, usageSections } from './usage-ratios.service.js';

const CONFIG = 'nodes:\n  defaultRatios: { cpu: 2 }\n  defaultUsage: { target: { cpu: 0.6 }, interval: 5s, maxStepUp: 1 }\n';

/**
 * The parts of an API server UsageRatios talks to: nodes (list), pods (list, watch), the usage
 * ConfigMap (list, watch, get, create, update), the Lease (get, update), and metrics.k8s.io
 * (NodeMetrics, PodMetrics), answering 503 while `metricsDown`.
 */
class FakeApiServer {
  nodes: any[] = [];
  pods: any[] = [];
  nodeMetrics: any[] = [];
  podMetrics: any[] = [];
  configMap?: any;
  lease: any = {
    apiVersion: 'coordination.k8s.io/v1',
    kind: 'Lease',
    metadata: { name: 'kube-overcommit-usage', namespace: 'kube-overcommit', resourceVersion: '1' },
    spec: {},
  };
  readonly writes: string[] = [];
  private readonly watches: http.ServerResponse[] = [];
  private readonly podWatches: http.ServerResponse[] = [];
  private readonly server = http.createServer((req, res) => this.handle(req, res));
  url = '';

  async start(): Promise<void> {
    await new Promise<void>((resolve) => this.server.listen(0, '127.0.0.1', resolve));
    this.url = `http://127.0.0.1:${(this.server.address() as AddressInfo).port}`;
  }

  async stop(): Promise<void> {
    for (const res of [...this.watches, ...this.podWatches]) res.end();
    this.server.closeAllConnections();
    await new Promise((resolve) => this.server.close(resolve));
  }

  kube(): KubeConfig {
    const kube = new KubeConfig();
    kube.loadFromOptions({
      clusters: [{ name: 'fake', server: this.url, skipTLSVerify: true }],
      users: [{ name: 'webhook', token: 'not-used' }],
      contexts: [{ name: 'fake', cluster: 'fake', user: 'webhook' }],
      currentContext: 'fake',
    });
    return kube;
  }

  private handle(req: http.IncomingMessage, res: http.ServerResponse): void {
    let body = '';
    req.on('data', (chunk) => (body += chunk));
    req.on('end', () => this.answer(req.method ?? 'GET', new URL(req.url ?? '/', this.url), body, res));
  }

  private answer(method: string, url: URL, body: string, res: http.ServerResponse): unknown {
    const json = (status: number, object: unknown) => res.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify(object));
    const list = (items: unknown[]) => json(200, { metadata: { resourceVersion: '10' }, items });
    const path = url.pathname;
    const watch = url.searchParams.get('watch') === 'true';
    if (watch) {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.flushHeaders();
      if (path.endsWith('/configmaps')) this.watches.push(res);
      if (path === '/api/v1/pods') this.podWatches.push(res);
      return;
    }
    if (path === '/api/v1/nodes') return list(this.nodes);
    if (path === '/api/v1/pods') return list(this.pods);
    if (path === '/apis/metrics.k8s.io/v1beta1/nodes') return list(this.nodeMetrics);
    if (path === '/apis/metrics.k8s.io/v1beta1/pods') return list(this.podMetrics);
    if (path.endsWith('/leases/kube-overcommit-usage')) {
      if (method === 'PUT')
        this.lease = { ...JSON.parse(body), metadata: { ...this.lease.metadata, resourceVersion: String(Number(this.lease.metadata.resourceVersion) + 1) } };
      return json(200, this.lease);
    }
    if (path === '/api/v1/namespaces/kube-overcommit/configmaps') {
      if (method === 'GET') return list(this.configMap ? [this.configMap] : []);
      return this.store(JSON.parse(body), 'ADDED', res);
    }
    if (path === '/api/v1/namespaces/kube-overcommit/configmaps/kube-overcommit-usage') {
      if (method === 'PUT') return this.store(JSON.parse(body), 'MODIFIED', res);
      return this.configMap ? json(200, this.configMap) : json(404, { kind: 'Status', code: 404, reason: 'NotFound' });
    }
    json(404, { kind: 'Status', code: 404 });
  }

  /** A pod bound now: listed from here on, and sent to the pod watches. */
  addPod(pod: any): void {
    const object = { ...pod, metadata: { ...pod.metadata, resourceVersion: String(100 + this.pods.length) } };
    this.pods.push(object);
    for (const watch of this.podWatches) watch.write(`${JSON.stringify({ type: 'ADDED', object })}\n`);
  }

  private store(object: any, type: 'ADDED' | 'MODIFIED', res: http.ServerResponse): void {
    this.configMap = { ...object, metadata: { ...object.metadata, resourceVersion: String(this.writes.length + 20) } };
    this.writes.push(object.data['ratios.json']);
    for (const watch of this.watches) watch.write(`${JSON.stringify({ type, object: this.configMap })}\n`);
    res.writeHead(type === 'ADDED' ? 201 : 200, { 'content-type': 'application/json' }).end(JSON.stringify(this.configMap));
  }
}

function usageRatios(kube: KubeConfig, env: NodeJS.ProcessEnv, store: ConfigStore) {
  const gauge = (name: string, labelNames: string[]) => new Gauge({ name, help: name, labelNames, registers: [] });
  const ratio = gauge('ratio', ['node', 'resource']);
  const input = gauge('input', ['node', 'resource', 'input']);
  const publish = new Counter({ name: 'publish', help: 'publish', labelNames: ['result'], registers: [] });
  const errors = new Counter({ name: 'errors', help: 'errors', registers: [] });
  const hot = gauge('hot', ['reason']);
  const pods = new PodCache(kube, env, backgroundTasks());
  const events: Array<{ node: string; reason: string; message: string }> = [];
  const recorder = { record: (node: { name: string }, reason: string, message: string) => void events.push({ node: node.name, reason, message }) };
  const service = new UsageRatios(kube, env, pods, store, backgroundTasks(), ratio, input, publish, errors, hot, recorder);
  return { service, pods, ratio, input, publish, hot, events };
}

/** Resolves after the leader's next plan (a publication, written or unchanged); fails after 9 s without one. */
async function nextPlan(publish: Counter<string>): Promise<void> {
  const plans = async () => (await publish.get()).values.reduce((sum, { labels, value }) => sum + (labels.result === 'error' ? 0 : value), 0);
  const before = await plans();
  await waitUntil('the next plan', async () => (await plans()) !== before, { timeoutMs: 9_000, intervalMs: 50 });
}

const values = async (gauge: Gauge<string>) => (await gauge.get()).values.map(({ labels, value }) => ({ ...labels, value }));

describe('usageSections', () => {
  it('the default section and every pool section', () => {
    const store = configStore(
      `${CONFIG}  pools:\n  - name: a\n    nodeSelector: {matchLabels: {a: b}}\n    ratios: {cpu: 3}\n    usage: {}\n  - name: b\n    nodeSelector: {matchLabels: {b: c}}\n    ratios: {cpu: 3}\n`,
    );
    expect(usageSections(store.snapshot().config.nodes)).toHaveLength(2);
    expect(usageSections(configStore('nodes: {}\n').snapshot().config.nodes)).toEqual([]);
  });
});

describe('UsageRatios', () => {
  beforeAll(() => Logger.overrideLogger(false));
  afterAll(() => Logger.overrideLogger(['log', 'error', 'warn', 'debug', 'verbose']));

  let api: FakeApiServer | undefined;
  let stop: (() => Promise<void>) | undefined;
  afterEach(async () => {
    await stop?.();
    await api?.stop();
    api = stop = undefined;
  });

  it('outside a cluster: nothing published, the recorded ratio capped at the ceiling', () => {
    const store = configStore(CONFIG);
    const { service } = usageRatios(new KubeConfig(), {}, store);
    service.onModuleInit();
    const policy = resolveNodePolicy({}, store.snapshot().config.nodes);
    const stored = kubeadmNode({
      annotations: { 'kube-overcommit.io/allocatable-raw': '{"allocatable":{"cpu":"4"},"capacity":{"cpu":"4"}}', 'kube-overcommit.io/ratios': '{"cpu":5}' },
    });
    expect(service.effective('worker-1', policy, stored)).toMatchObject({ policy: { ratios: { cpu: 2 } }, decisions: { cpu: { ratio: 2, reason: 'stale' } } });
    expect(service.published('worker-1')).toBeUndefined();
  });

  it('the leader samples metrics.k8s.io, publishes each node ratio to the ConfigMap, and every replica reads it', async () => {
    api = new FakeApiServer();
    await api.start();
    api.nodes = [kubeadmNode({ name: 'busy' }), kubeadmNode({ name: 'idle' })];
    api.pods = [0, 1, 2, 3, 4].map((i) => runningPod(`p${i}`, 'busy', { containers: [container('app', { requests: { cpu: '1' } })] }));
    const now = new Date().toISOString();
    api.nodeMetrics = [
      { metadata: { name: 'busy' }, timestamp: now, window: '10s', usage: { cpu: '900m', memory: '3Gi' } },
      { metadata: { name: 'idle' }, timestamp: now, window: '10s', usage: { cpu: '100m', memory: '1Gi' } },
    ];
    // p4 was just placed: no usage measured for it yet, so R leaves it out (its request comes out of the room).
    api.podMetrics = api.pods.slice(0, 4).map((pod) => ({
      metadata: { name: pod.metadata.name, namespace: pod.metadata.namespace },
      timestamp: now,
      window: '10s',
      containers: [{ name: 'app', usage: { cpu: '200m', memory: '512Mi' } }],
    }));
    const kube = api.kube();
    const store = configStore(CONFIG);
    const { service, pods, ratio, input, publish } = usageRatios(kube, IN_CLUSTER_ENV, store);
    stop = async () => {
      await service.onApplicationShutdown();
      await pods.onApplicationShutdown();
    };
    service.onModuleInit();

    // The first tick comes after one interval (5 s).
    await waitUntil('busy published', () => service.published('busy') !== undefined, { timeoutMs: 9_000, intervalMs: 100 });
    expect(service.published('busy')).toEqual({ cpu: { ratio: 2, reason: 'usage', A: '4', R: '4', U: '800m' } });
    // idle: nothing bound, nothing used: e = estimatedLoad 0.4, (2.4/0.4)/4 = 1.5.
    expect(service.published('idle')).toEqual({ cpu: { ratio: 1.5, reason: 'usage', A: '4', R: '0', U: '0' } });
    expect(JSON.parse(api.writes[0]!)).toEqual({ busy: service.published('busy'), idle: service.published('idle') });

    const policy = resolveNodePolicy({}, store.snapshot().config.nodes);
    expect(service.effective('busy', policy, undefined).policy?.ratios.cpu).toBe(2);
    expect(await values(ratio)).toContainEqual({ node: 'idle', resource: 'cpu', value: 1.5 });
    expect(await values(input)).toContainEqual({ node: 'busy', resource: 'cpu', input: 'U', value: 0.8 });
    expect((await publish.get()).values).toContainEqual(expect.objectContaining({ labels: { result: 'written' }, value: 1 }));

    // A second replica: the Lease is held, so it only reads, and answers exactly as the leader does.
    const replica = usageRatios(kube, { ...IN_CLUSTER_ENV, POD_NAME: 'replica-2' }, configStore(CONFIG));
    const previousStop = stop;
    stop = async () => {
      await replica.service.onApplicationShutdown();
      await replica.pods.onApplicationShutdown();
      await previousStop();
    };
    replica.service.onModuleInit();
    await waitUntil('the replica reading busy', () => replica.service.published('busy') !== undefined, { timeoutMs: 9_000, intervalMs: 50 });
    for (const name of ['busy', 'idle']) {
      const stored = kubeadmNode({ name });
      expect(replica.service.effective(name, policy, stored)).toEqual(service.effective(name, policy, stored));
    }
    expect(api.lease.spec.holderIdentity).not.toBe('replica-2');
  }, 15_000);

  it('R counts what the kubelet admitted a measured pod at: a resize it deferred is not what the container runs with', async () => {
    api = new FakeApiServer();
    await api.start();
    api.nodes = [kubeadmNode({ name: 'busy' })];
    // web is measured; late (1 CPU) was just placed and is not: R leaves it out.
    api.pods = [
      resizingPod('web', 'busy', { desired: '3', allocated: '1', pending: 'Deferred' }),
      runningPod('late', 'busy', { containers: [container('app', { requests: { cpu: '1' } })] }),
    ];
    const now = new Date().toISOString();
    api.nodeMetrics = [{ metadata: { name: 'busy' }, timestamp: now, window: '10s', usage: { cpu: '900m', memory: '3Gi' } }];
    api.podMetrics = [
      {
        metadata: { name: 'web', namespace: api.pods[0].metadata.namespace },
        timestamp: now,
        window: '10s',
        containers: [{ name: 'app', usage: { cpu: '800m', memory: '1Gi' } }],
      },
    ];
    const { service, pods } = usageRatios(api.kube(), IN_CLUSTER_ENV, configStore(CONFIG));
    stop = async () => {
      await service.onApplicationShutdown();
      await pods.onApplicationShutdown();
    };
    service.onModuleInit();
    await waitUntil('busy published', () => service.published('busy') !== undefined, { timeoutMs: 9_000, intervalMs: 100 });
    // The scheduler counts web at 3 CPUs; the kubelet admitted 1, and that is what U = 800m is measured against.
    expect(service.published('busy')?.cpu).toMatchObject({ reason: 'usage', R: '1', U: '800m' });
  }, 15_000);

  it('a pod placed since the first sample holds its node until a sample measures it, for staleAfter at most (rule 5)', async () => {
    api = new FakeApiServer();
    await api.start();
    const names = ['never', 'measured', 'empty'];
    api.nodes = names.map((name) => kubeadmNode({ name }));
    let sampled = Date.now();
    const nextMetrics = () =>
      (api!.nodeMetrics = names.map((name) => ({
        metadata: { name },
        timestamp: new Date((sampled += 1_000)).toISOString(),
        window: '10s',
        usage: { cpu: '300m', memory: '1Gi' },
      })));
    nextMetrics();
    const store = configStore(
      'nodes:\n  defaultRatios: { cpu: 2 }\n  defaultUsage: { target: { cpu: 0.6 }, interval: 5s, staleAfter: 10s, fallbackAfter: 1m }\n',
    );
    const { service, pods, publish } = usageRatios(api.kube(), IN_CLUSTER_ENV, store);
    stop = async () => {
      await service.onApplicationShutdown();
      await pods.onApplicationShutdown();
    };
    service.onModuleInit();
    const nextTick = () => nextPlan(publish);
    const ratios = () => names.map((name) => service.published(name)?.cpu?.ratio);

    await nextTick(); // sample 1: all empty, wanted T ÷ L = 1.5, one step up
    expect(ratios()).toEqual([1.1, 1.1, 1.1]);
    const pod = (name: string, node: string) => runningPod(name, node, { containers: [container('app', { requests: { cpu: '1' } })] });
    api.addPod(pod('a', 'never'));
    api.addPod(pod('b', 'measured'));
    nextMetrics();
    await nextTick(); // sample 2: a and b placed since sample 1, not measured: both nodes hold
    expect(ratios()).toEqual([1.1, 1.1, 1.2]);
    expect(service.published('never')?.cpu).toMatchObject({ R: '0', reason: 'usage' });
    nextMetrics();
    api.podMetrics = [
      {
        metadata: { name: 'b', namespace: 'shop' },
        timestamp: new Date(sampled).toISOString(),
        window: '10s',
        containers: [{ name: 'app', usage: { cpu: '200m', memory: '64Mi' } }],
      },
    ];
    await nextTick(); // sample 3: b measured (U/R 0.2, e 0.4: ((2.4 − 0.2)/0.4 + 1)/4 = 1.62), a still held (found 5 s ago)
    expect(ratios()).toEqual([1.1, 1.2, 1.3]);
    nextMetrics();
    await nextTick(); // sample 4: a found about staleAfter (10 s) ago
    nextMetrics();
    await nextTick(); // sample 5: a found 15 s ago, never measured: left out of R, holds nothing
    expect(ratios()[0]).toBeGreaterThan(1.1);
    expect(service.published('never')?.cpu).toMatchObject({ R: '0', reason: 'usage' });
  }, 40_000);
  it('hotAction full: a node above hotThreshold is published hot-full, counted, written as full; it reopens once cool for coolFor', async () => {
    api = new FakeApiServer();
    await api.start();
    api.nodes = [kubeadmNode({ name: 'hot' }), kubeadmNode({ name: 'calm' })];
    api.pods = [runningPod('p0', 'hot', { containers: [container('app', { requests: { cpu: '1' } })] })];
    let sampled = Date.now();
    const metrics = (hotCpu: string) =>
      (api!.nodeMetrics = [
        { metadata: { name: 'hot' }, timestamp: new Date((sampled += 1_000)).toISOString(), window: '10s', usage: { cpu: hotCpu, memory: '1Gi' } },
        { metadata: { name: 'calm' }, timestamp: new Date(sampled).toISOString(), window: '10s', usage: { cpu: '100m', memory: '1Gi' } },
      ]);
    metrics('3900m');
    // percentile 50: the second sample's median is the lower one, so the node reads cool at once; coolFor 0s reopens it then.
    const store = configStore(
      'nodes:\n  defaultRatios: { cpu: 2 }\n  defaultUsage: { target: { cpu: 0.6 }, interval: 5s, window: 1m, percentile: 50, hotAction: full, coolFor: 0s }\n',
    );
    const { service, pods, publish, hot, events } = usageRatios(api.kube(), IN_CLUSTER_ENV, store);
    stop = async () => {
      await service.onApplicationShutdown();
      await pods.onApplicationShutdown();
    };
    service.onModuleInit();
    const nextTick = () => nextPlan(publish);

    await nextTick(); // 3.9 of 4 CPUs > 0.9: hot-full; calm at 0.1 is open
    expect(service.published('hot')).toEqual({ cpu: { ratio: 1, reason: 'hot-full', A: '4', R: '0', U: '0' } });
    expect(service.published('calm')?.cpu?.reason).toBe('usage');
    expect(await values(hot)).toEqual([
      { reason: 'hot', value: 0 },
      { reason: 'hot-full', value: 1 },
    ]);
    const policy = resolveNodePolicy({}, store.snapshot().config.nodes);
    expect(service.effective('hot', policy, undefined).policy).toMatchObject({ ratios: { cpu: 1 }, full: true });
    expect(service.effective('calm', policy, undefined).policy?.full).toBeUndefined();
    expect(events.map(({ node, reason }) => `${node} ${reason}`)).toEqual(['hot NodeHot']);

    metrics('100m');
    await nextTick(); // median of 3.9 and 0.1 = 0.1 < coolThreshold 0.8, coolFor 0s: reopened, one step up from 1
    expect(service.published('hot')?.cpu).toMatchObject({ ratio: 1.1, reason: 'usage' });
    expect(await values(hot)).toContainEqual({ reason: 'hot-full', value: 0 });
    expect(events.map(({ node, reason }) => `${node} ${reason}`)).toEqual(['hot NodeHot', 'hot NodeCooled']);
    expect(events[1]!.message).toBe('usage below coolThreshold (cpu 0.8) for coolFor (0s): the node takes new pods again');
  }, 25_000);
  it('a new leader keeps a node published hot-full hot, and counts its cooling from its own first reading (hot-nodes.rules.ts rule 6)', async () => {
    api = new FakeApiServer();
    await api.start();
    api.nodes = [kubeadmNode({ name: 'hot' })];
    api.nodeMetrics = [{ metadata: { name: 'hot' }, timestamp: new Date().toISOString(), window: '10s', usage: { cpu: '100m', memory: '1Gi' } }];
    const full = { hot: { cpu: { ratio: 1, reason: 'hot-full', A: '4', R: '0', U: '0' } } };
    api.configMap = {
      metadata: { name: 'kube-overcommit-usage', namespace: 'kube-overcommit', resourceVersion: '5' },
      data: { 'ratios.json': JSON.stringify(full) },
    };
    const store = configStore('nodes:\n  defaultRatios: { cpu: 2 }\n  defaultUsage: { target: { cpu: 0.6 }, interval: 5s, hotAction: full, coolFor: 8s }\n');
    const { service, pods, publish, events } = usageRatios(api.kube(), IN_CLUSTER_ENV, store);
    stop = async () => {
      await service.onApplicationShutdown();
      await pods.onApplicationShutdown();
    };
    service.onModuleInit();
    await nextPlan(publish);
    // Usage 0.1 of 4 CPUs is cool, but the cooling starts at this leader's first reading: still full.
    expect(service.published('hot')).toEqual({ cpu: { ratio: 1, reason: 'hot-full', A: '4', R: '0', U: '0' } });
    expect(events).toEqual([]);
  }, 15_000);
});
