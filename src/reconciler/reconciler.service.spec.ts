import type { KubeConfig } from '@kubernetes/client-node';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { Counter, Gauge, Registry } from 'prom-client';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { backgroundTasks } from '../../test/fixtures/background.js';
import { configStore } from '../../test/fixtures/config-store.js';
import { kubeConfigFor } from '../../test/fixtures/kube-config.js';
import { IN_CLUSTER_ENV } from '../../test/fixtures/namespaces.js';
import { kubeadmNode } from '../../test/fixtures/nodes.js';
import { admitStatusWrite, nodeOversellStrategy } from '../../test/fixtures/node-oversell-strategy.js';
import type { ConfigStore } from '../config/config.store.js';
import { NodeCache } from '../kube/node-cache.service.js';
import { PodCache } from '../kube/pod-cache.service.js';
import { RECONCILE_NUDGES_METRIC, RECONCILER_ENABLED_METRIC, RECONCILER_LEADER_METRIC, Reconciler } from './reconciler.service.js';

/**
 * The API server the reconciler talks to: Nodes (list, watch), pods (list, watch: nothing), its
 * Lease (get, update), and nodes/<name>/status PATCHes, each admitted by the node-oversell
 * webhook as the API server would and stored. `held` keeps the PATCHes unanswered until released.
 */
class FakeApiServer {
  readonly nodes = new Map<string, any>();
  /** Each nudge as it arrived: the node, when (performance.now()), how many were then unanswered. */
  readonly nudges: Array<{ node: string; at: number; inFlight: number }> = [];
  held = false;
  private readonly waiting: Array<() => void> = [];
  private unanswered = 0;
  private lease: any = {
    apiVersion: 'coordination.k8s.io/v1',
    kind: 'Lease',
    metadata: { name: 'kube-overcommit-reconciler', resourceVersion: '1' },
    spec: {},
  };
  private readonly watches: http.ServerResponse[] = [];
  private readonly server = http.createServer((req, res) => {
    let body = '';
    req.on('data', (chunk) => (body += chunk));
    req.on('end', () => this.answer(req.method ?? 'GET', new URL(req.url ?? '/', 'http://fake'), body, res));
  });

  constructor(private readonly config: ConfigStore) {}

  async start(): Promise<KubeConfig> {
    await new Promise<void>((resolve) => this.server.listen(0, '127.0.0.1', resolve));
    return kubeConfigFor(`http://127.0.0.1:${(this.server.address() as AddressInfo).port}`);
  }

  async stop(): Promise<void> {
    this.release();
    for (const res of this.watches) res.end();
    this.server.closeAllConnections();
    await new Promise((resolve) => this.server.close(resolve));
  }

  /** Answers the PATCHes held so far, and those to come. */
  release(): void {
    this.held = false;
    for (const answer of this.waiting.splice(0)) answer();
  }

  private answer(method: string, url: URL, body: string, res: http.ServerResponse): void {
    const json = (status: number, object: unknown) => void res.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify(object));
    const path = url.pathname;
    if (url.searchParams.get('watch') === 'true') {
      res.writeHead(200, { 'content-type': 'application/json' }).flushHeaders();
      this.watches.push(res);
      return;
    }
    if (path === '/api/v1/nodes') return json(200, { metadata: { resourceVersion: '10' }, items: [...this.nodes.values()] });
    if (path === '/api/v1/pods') return json(200, { metadata: { resourceVersion: '10' }, items: [] });
    if (path.endsWith('/leases/kube-overcommit-reconciler')) {
      if (method === 'PUT')
        this.lease = { ...JSON.parse(body), metadata: { ...this.lease.metadata, resourceVersion: `${Number(this.lease.metadata.resourceVersion) + 1}` } };
      return json(200, this.lease);
    }
    const status = /^\/api\/v1\/nodes\/([^/]+)\/status$/.exec(path);
    if (method === 'PATCH' && status) return this.nudge(status[1]!, () => json(200, this.nodes.get(status[1]!)));
    json(404, { kind: 'Status', code: 404 });
  }

  /** An empty patch of the stored Node: the webhook's write stored, answered now or once released. */
  private nudge(name: string, reply: () => void): void {
    this.unanswered += 1;
    this.nudges.push({ node: name, at: performance.now(), inFlight: this.unanswered });
    const stored = this.nodes.get(name);
    this.nodes.set(
      name,
      admitStatusWrite(nodeOversellStrategy(), stored, stored, this.config.snapshot().config, 'system:serviceaccount:kube-overcommit:kube-overcommit'),
    );
    const answer = () => {
      this.unanswered -= 1;
      reply();
    };
    if (this.held) this.waiting.push(answer);
    else answer();
  }
}

describe('Reconciler', () => {
  let stop: () => Promise<void> = async () => {};
  afterEach(async () => {
    await stop();
  });

  /** `count` raw nodes of 4 CPUs under `config` (a ratio: each is due), and a leading reconciler. */
  async function reconcile(config: string, count: number) {
    const store = configStore(config);
    const api = new FakeApiServer(store);
    for (let i = 0; i < count; i++)
      api.nodes.set(`node-${i}`, { ...kubeadmNode({ name: `node-${i}` }), metadata: { ...kubeadmNode({ name: `node-${i}` }).metadata, resourceVersion: '5' } });
    const kube = await api.start();
    const registry = new Registry();
    const nudges = new Counter({ name: RECONCILE_NUDGES_METRIC, help: 'h', labelNames: ['outcome'], registers: [registry] });
    const gauge = (name: string) => new Gauge({ name, help: 'h', registers: [registry] });
    const nodes = new NodeCache(kube, IN_CLUSTER_ENV);
    const pods = new PodCache(kube, IN_CLUSTER_ENV, backgroundTasks());
    const commitments = { committed: () => undefined };
    const usage = { published: () => undefined, onRead: () => () => {} };
    const reconciler = new Reconciler(
      kube,
      IN_CLUSTER_ENV,
      store,
      nodes,
      pods,
      commitments as never,
      backgroundTasks(),
      usage as never,
      nudges,
      gauge(RECONCILER_LEADER_METRIC),
      gauge(RECONCILER_ENABLED_METRIC),
    );
    stop = async () => {
      await reconciler.onApplicationShutdown();
      await nodes.onApplicationShutdown();
      await pods.onApplicationShutdown();
      await api.stop();
    };
    const applied = async () => (await nudges.get()).values.find((v) => v.labels.outcome === 'applied')?.value ?? 0;
    return { api, start: () => reconciler.onModuleInit(), applied };
  }

  it('keeps at most 32 nudges in flight, and nudges every due node once they are answered', async () => {
    const { api, start, applied } = await reconcile('nodes: { defaultRatios: { cpu: 2 }, commitmentFloor: false }', 40);
    api.held = true;
    start();
    await vi.waitUntil(() => api.nudges.length >= 32, { timeout: 20_000, interval: 20 });
    api.release();
    await vi.waitUntil(async () => (await applied()) === 40, { timeout: 20_000, interval: 20 });
    expect(api.nudges.map(({ node }) => node).sort()).toEqual(Array.from({ length: 40 }, (_, i) => `node-${i}`).sort());
    expect(Math.max(...api.nudges.map(({ inFlight }) => inFlight))).toBe(32);
    expect([...api.nodes.values()].every((node) => node.status.allocatable.cpu === '8')).toBe(true);
  }, 60_000);

  /**
   * From the first nudge to the last of `count`, and its floor: a bucket of `rate` tokens, `rate`
   * more a second, gives `count` nudges in (count − rate − 1) / rate seconds at the least (less
   * 100 ms for the jitter of the requests' arrival; a loaded machine only takes longer).
   */
  async function span(config: string, count: number, rate: number) {
    const { api, start, applied } = await reconcile(config, count);
    start();
    await vi.waitUntil(async () => (await applied()) === count, { timeout: 30_000, interval: 20 });
    return { spanMs: api.nudges.at(-1)!.at - api.nudges[0]!.at, floorMs: ((count - rate - 1) * 1000) / rate - 100 };
  }

  it('nudges at most maxNodesPerSecond a second after a burst of as many (a token bucket): 15 nodes at 5/s', async () => {
    const { spanMs, floorMs } = await span('nodes: { defaultRatios: { cpu: 2 }, commitmentFloor: false, reconcile: { maxNodesPerSecond: 5 } }', 15, 5);
    expect(floorMs).toBe(1700);
    expect(spanMs).toBeGreaterThanOrEqual(floorMs);
  }, 60_000);

  it('paces at 100 nodes a second by default: 300 nodes', async () => {
    const { spanMs, floorMs } = await span('nodes: { defaultRatios: { cpu: 2 }, commitmentFloor: false }', 300, 100);
    expect(floorMs).toBe(1890);
    expect(spanMs).toBeGreaterThanOrEqual(floorMs);
  }, 60_000);
});
