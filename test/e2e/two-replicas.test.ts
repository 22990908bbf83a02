/**
 * Two replicas, each call to either (docs/status-coalescing.md, "Several replicas"). From 1.37
 * kube-apiserver resolves a Service's endpoint for every webhook call (WebhookRoundTripLoadBalancing,
 * beta and on by default), so one node's consecutive status writes reach different replicas; before,
 * a call went to whichever pod its pooled connection had been dialled to. The harness registers the
 * webhook by `url` on loopback, so a small HTTPS proxy on that url stands for the Service: it
 * answers each call from the next replica in turn. It works per call, not per connection: the API
 * server keeps its connections to a webhook open, and a proxy choosing per connection would send
 * nearly every call to one replica.
 *
 * Simulated kubelets (a 1 s update period, nothing due to report for 10 min) at steady state, six
 * of them: three on inflated nodes (coalescing on, the default) and three on nodes opted out by
 * label, which the webhook never sees — what their kubelets write is what a cluster without
 * overcommit writes. Every kubelet reports the same new image at the same moments (a real change,
 * stored at its next update). Each Node write is one watch event, counted per node.
 */
import { readFileSync } from 'node:fs';
import { Agent, createServer, request, type Server } from 'node:https';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  adminClient,
  adminKubeConfig,
  claimNodeNames,
  DISABLED_LABEL,
  e2eEnv,
  SimKubelet,
  tearDown,
  waitUntil,
  WebhookProcess,
  type KubeClient,
} from './harness/index.js';
import { freePort } from '../support/process.js';

const UPDATE_MS = 1_000;
const RATIOS = { cpu: 1.5, memory: 1.2 };
const MACHINE = { cpu: '4', memory: '16393232Ki', pods: '110', 'ephemeral-storage': '101430960Ki' };
/** What both replicas must write on every inflated node: cpu 4 × 1.5; memory 16393232 Ki × 1024 × 1.2 = 20144003481.6 bytes, floored. */
const INFLATED = { cpu: '6', memory: '20144003481' };
const GROUP_LABEL = 'e2e.kube-overcommit.io/two-replicas';
/** The image changes every kubelet reports, and the pause between them. */
const CHANGES = 4;
const CHANGE_EVERY_MS = 6_000;

const env = e2eEnv();
let admin: KubeClient;
let replicas: WebhookProcess[] = [];
let proxy: RoundRobinProxy | undefined;
let kubelets: SimKubelet[] = [];

/** An HTTPS server on the harness's webhook url that forwards each call to the next replica in turn. */
class RoundRobinProxy {
  /** Per call, in order: the replica it went to and the node of its review. */
  readonly calls: Array<{ replica: number; node: string | undefined }> = [];
  private readonly server: Server;
  private readonly agents: Agent[];
  private readonly ca: Buffer;
  private next = 0;

  constructor(private readonly upstreamPorts: readonly number[]) {
    const tlsDir = env.webhook.tlsDir;
    this.ca = readFileSync(join(tlsDir, '..', 'ca.crt'));
    this.agents = upstreamPorts.map(() => new Agent({ keepAlive: true }));
    this.server = createServer({ cert: readFileSync(join(tlsDir, 'tls.crt')), key: readFileSync(join(tlsDir, 'tls.key')) }, (req, res) =>
      this.forward(req, res),
    );
  }

  listen(): Promise<void> {
    return new Promise((resolve, reject) => {
      this.server.once('error', reject);
      this.server.listen(env.webhook.httpsPort, '127.0.0.1', () => resolve());
    });
  }

  close(): Promise<void> {
    for (const agent of this.agents) agent.destroy();
    this.server.closeAllConnections();
    return new Promise((resolve) => this.server.close(() => resolve()));
  }

  private forward(req: IncomingMessage, res: ServerResponse): void {
    const replica = this.next;
    this.next = (this.next + 1) % this.upstreamPorts.length;
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      const body = Buffer.concat(chunks);
      this.calls.push({ replica, node: reviewedName(body) });
      const upstream = request(
        {
          host: '127.0.0.1',
          port: this.upstreamPorts[replica],
          method: req.method,
          path: req.url,
          headers: { 'content-type': req.headers['content-type'] ?? 'application/json', 'content-length': body.length },
          ca: this.ca,
          agent: this.agents[replica],
        },
        (answer) => {
          res.writeHead(answer.statusCode ?? 502, { 'content-type': answer.headers['content-type'] ?? 'application/json' });
          answer.pipe(res);
        },
      );
      upstream.on('error', () => res.writeHead(502).end());
      upstream.end(body);
    });
  }
}

/** The name of the object an AdmissionReview is about. */
function reviewedName(body: Buffer): string | undefined {
  try {
    return JSON.parse(body.toString('utf8')).request?.name;
  } catch {
    return undefined;
  }
}

/** Every MODIFIED event of the group's Nodes (each one an etcd write), per node: its resourceVersion and allocatable. */
async function watchNodes(): Promise<{ events: Map<string, Array<{ rv: string; allocatable: any }>>; stop: () => { ended: unknown } }> {
  const { Watch } = await import('@kubernetes/client-node');
  const events = new Map<string, Array<{ rv: string; allocatable: any }>>();
  let ended: unknown;
  const controller = await new Watch(await adminKubeConfig(env)).watch(
    '/api/v1/nodes',
    { labelSelector: `${GROUP_LABEL}=true`, resourceVersion: (await admin.get('/api/v1/nodes')).metadata.resourceVersion },
    (type, node) => {
      if (type !== 'MODIFIED') return;
      const list = events.get(node.metadata.name) ?? [];
      list.push({ rv: node.metadata.resourceVersion, allocatable: node.status.allocatable });
      events.set(node.metadata.name, list);
    },
    (error) => (ended = error ?? 'closed by the server'),
  );
  return {
    events,
    stop: () => {
      const result = { ended };
      controller.abort();
      return result;
    },
  };
}

const nodeStatusReviews = async (replica: WebhookProcess) =>
  (await replica.metrics()).sum('kube_overcommit_admission_requests_total', { resource: 'nodes/status' });

beforeAll(async () => {
  admin = adminClient(env);
  const ports = [await freePort(), await freePort(), await freePort(), await freePort()];
  replicas = [0, 1].map(
    (i) =>
      new WebhookProcess(
        { ...env, webhook: { ...env.webhook, httpsPort: ports[2 * i]!, httpPort: ports[2 * i + 1]! } },
        { env: { POD_NAME: `kube-overcommit-e2e-replica-${i}` } },
      ),
  );
  for (const replica of replicas) await replica.start();
  proxy = new RoundRobinProxy([ports[0]!, ports[2]!]);
  await proxy.listen();
  const rv = await replicas[0]!.useConfig({ nodes: { defaultRatios: RATIOS, coalesceStatusWrites: true, statusReportPeriod: '10m' } });
  await replicas[1]!.waitForConfig(rv);
}, 60_000);

afterAll(async () => {
  await proxy?.close();
  await replicas[1]?.stop();
  await tearDown({ env, admin, webhook: replicas[0], kubelets });
}, 60_000);

describe('two replicas, each webhook call to either (the 1.37 API server’s per-call endpoint)', () => {
  it('Node writes with the webhook ÷ without stay 1.00 with coalescing; no inflated allocatable ever differs between calls; both replicas served', async () => {
    const names = claimNodeNames(env, 'sim-node', 6);
    kubelets = await Promise.all(
      names.map((name, i) =>
        SimKubelet.start(env, {
          name,
          capacity: MACHINE,
          labels: { [GROUP_LABEL]: 'true', ...(i >= 3 ? { [DISABLED_LABEL]: 'true' } : {}) },
          updateFrequencyMs: UPDATE_MS,
          reportFrequencyMs: 10 * 60_000,
        }),
      ),
    );
    const inflated = kubelets.slice(0, 3);
    const optedOut = kubelets.slice(3);
    // Steady: every node written as it will stay (inflated or raw), then two more updates each.
    await waitUntil('the inflated nodes inflated', async () => {
      const nodes = await Promise.all(inflated.map((k) => admin.get(`/api/v1/nodes/${k.name}`)));
      return nodes.every((n) => n.status.allocatable.cpu === INFLATED.cpu);
    });
    await Promise.all(kubelets.map((k) => k.waitForSyncs(2)));

    const reviewsBefore = await Promise.all(replicas.map(nodeStatusReviews));
    const watch = await watchNodes();
    const measuredFrom = Date.now();
    for (let change = 1; change <= CHANGES; change++) {
      for (const kubelet of kubelets) kubelet.setImages([{ names: [`registry.example/app:${change}`], sizeBytes: 1_000_000 * change }]);
      await new Promise((resolve) => setTimeout(resolve, CHANGE_EVERY_MS));
    }
    // The last change stored by every kubelet's next update, then two more updates each.
    await Promise.all(kubelets.map((k) => k.waitForSyncs(2)));
    const { ended } = watch.stop();
    const reviewsAfter = await Promise.all(replicas.map(nodeStatusReviews));

    expect(ended, 'the watch ended before the measurement did').toBeUndefined();
    for (const kubelet of kubelets) kubelet.assertHealthy();
    const writes = (group: SimKubelet[]) => group.map((k) => watch.events.get(k.name)?.length ?? 0);
    // Without the webhook each change is one write; with it, the same: every other call coalesced, whichever replica answered.
    expect(writes(optedOut), 'Node writes without the webhook').toEqual([CHANGES, CHANGES, CHANGES]);
    expect(writes(inflated), 'Node writes with the webhook').toEqual([CHANGES, CHANGES, CHANGES]);
    const ratio = writes(inflated).reduce((a, b) => a + b) / writes(optedOut).reduce((a, b) => a + b);
    console.log(`Node writes with the webhook ÷ without, two replicas: ${ratio.toFixed(2)}`);
    expect(ratio.toFixed(2)).toBe('1.00');

    // Every allocatable an inflated node showed — in the watch and in the answer to every PATCH, coalesced or not — is the one value.
    for (const kubelet of inflated) {
      const answered = kubelet.updates.filter((u) => u.at >= measuredFrom && u.ok).map((u) => u.stored.status.allocatable);
      const watched = (watch.events.get(kubelet.name) ?? []).map((e) => e.allocatable);
      expect(answered.length, `${kubelet.name}: PATCHes answered`).toBeGreaterThan((CHANGES * CHANGE_EVERY_MS) / UPDATE_MS / 2);
      const seen = new Set([...answered, ...watched].map((a) => JSON.stringify({ cpu: a.cpu, memory: a.memory })));
      expect([...seen], kubelet.name).toEqual([JSON.stringify(INFLATED)]);
    }

    // Both replicas answered status writes, and one node's consecutive calls went to different replicas.
    const served = reviewsAfter.map((after, i) => after - reviewsBefore[i]!);
    console.log(`nodes/status reviews per replica during the measurement: ${served.join(', ')}`);
    for (const count of served) expect(count).toBeGreaterThan(0);
    for (const kubelet of inflated) {
      const replicasInOrder = proxy!.calls.filter((c) => c.node === kubelet.name).map((c) => c.replica);
      const switches = replicasInOrder.filter((r, i) => i > 0 && r !== replicasInOrder[i - 1]).length;
      expect(switches, `${kubelet.name}: consecutive calls answered by different replicas`).toBeGreaterThan(replicasInOrder.length / 4);
    }
    // The opted-out nodes' kubelets were never sent to the webhook.
    for (const kubelet of optedOut)
      expect(
        proxy!.calls.filter((c) => c.node === kubelet.name),
        kubelet.name,
      ).toEqual([]);
  }, 120_000);
});
