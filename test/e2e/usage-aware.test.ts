/**
 * Usage-aware ratios (docs/usage-aware.md) against real parts: metrics-server built from its Go
 * module, served through kube-apiserver's aggregation layer, scraping simulated kubelets'
 * `/metrics/resource` with usage the test sets; the webhook reads usage only through
 * metrics.k8s.io. Two 4-CPU nodes, cpu ceiling 2, target 0.6:
 *
 *   busy: 4 pods of 1 CPU bound, using 0.15 each (U 0.6): ((2.4 − 0.6)/0.4 + 4)/4 = 2.125, the ceiling 2;
 *   idle: nothing bound, nothing used: e = estimatedLoad 0.4, ratio 0.6 / 0.4 = 1.5.
 *
 * Then metrics-server stops: after staleAfter the ratios hold (reason stale), after fallbackAfter
 * they drop to 1; it starts again and they come back. Then a spike on busy: ratio 1 (hot), and
 * the commitment floor keeps the 4 bound CPUs. The kubelets update every 10 s, as a kubelet
 * does, so an inflated node takes a new ratio within 10 s of its publication; a node stored at
 * its raw value (ratio 1) takes a raised ratio at its kubelet's next unconditional report
 * (nodeStatusReportFrequency: 5 min in a cluster, 20 s here to keep the test short).
 */
import { readFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { freePort } from '../support/process.js';
import {
  adminClient,
  baseUnits,
  claimNodeNames,
  createNamespace,
  deleteAllPods,
  deleteNamespace,
  e2eEnv,
  getNode,
  kubeletServingCertificate,
  markRunning,
  MetricsServer,
  resetConfig,
  ResourceMetricsEndpoint,
  SimKubelet,
  waitUntil,
  WebhookProcess,
  type E2eEnv,
  type KubeClient,
} from './harness/index.js';

const USAGE_ANNOTATION = 'kube-overcommit.io/usage';
const NAMESPACE = 'e2e-usage-aware';
const MACHINE = { cpu: '4', memory: '16Gi', pods: '110', 'ephemeral-storage': '100Gi' };
const GiB = 1024 ** 3;
const CONFIG = {
  nodes: {
    defaultRatios: { cpu: 2 },
    defaultUsage: { target: { cpu: 0.6 }, interval: '5s', window: '1m', staleAfter: '20s', fallbackAfter: '40s', maxStepUp: 1, percentile: 95 },
  },
};

let env: E2eEnv;
let admin: KubeClient;
let webhook: WebhookProcess;
/** The second replica of the leader change. */
let replica: WebhookProcess | undefined;
let metricsServer: MetricsServer;
const endpoints: ResourceMetricsEndpoint[] = [];
const kubelets: SimKubelet[] = [];

beforeAll(async () => {
  env = e2eEnv();
  admin = adminClient(env);
  metricsServer = new MetricsServer(env);
  await metricsServer.start();
  await createNamespace(env, NAMESPACE);
  webhook = new WebhookProcess(env);
  await webhook.start();
}, 900_000);

afterAll(async () => {
  await Promise.all(kubelets.map((k) => k.stop({ deleteNode: true })));
  await Promise.all(endpoints.map((e) => e.stop()));
  await webhook?.stop();
  await replica?.stop();
  await metricsServer?.remove();
  if (env) {
    await deleteAllPods(admin, NAMESPACE, { force: true }).catch(() => undefined);
    await deleteNamespace(env, NAMESPACE).catch(() => undefined);
    await resetConfig(env).catch(() => undefined);
  }
  admin?.close();
});

async function bindPods(node: string, count: number, cpu: string): Promise<string[]> {
  const names: string[] = [];
  for (let i = 0; i < count; i++) {
    const name = `${node}-${i}`;
    await admin.post(`/api/v1/namespaces/${NAMESPACE}/pods`, {
      apiVersion: 'v1',
      kind: 'Pod',
      metadata: { name },
      spec: {
        nodeName: node,
        tolerations: [{ operator: 'Exists' }],
        containers: [{ name: 'app', image: 'registry.k8s.io/pause:3.10', resources: { requests: { cpu, memory: '256Mi' } } }],
      },
    });
    await markRunning(admin, NAMESPACE, name);
    names.push(name);
  }
  return names;
}

/** The published decision for a node's cpu, from the ConfigMap every replica reads. */
async function published(node: string): Promise<{ ratio: number; reason: string; A?: string; R?: string; U?: string } | undefined> {
  const cm = await admin.get(`/api/v1/namespaces/${env.webhook.namespace}/configmaps/kube-overcommit-usage`).catch(() => undefined);
  const text = cm?.data?.['ratios.json'];
  return text ? JSON.parse(text)[node]?.cpu : undefined;
}

/** The ConfigMap's inputs.json entry for a node (rule 8). */
async function publishedInputs(node: string): Promise<{ at: number; U: { cpu?: string } } | undefined> {
  const cm = await admin.get(`/api/v1/namespaces/${env.webhook.namespace}/configmaps/kube-overcommit-usage`).catch(() => undefined);
  const text = cm?.data?.['inputs.json'];
  return text ? JSON.parse(text)[node] : undefined;
}

/** What the leader did, for a wait that times out: its publications, failed metrics reads, background errors, and the ConfigMap. */
async function leaderState(): Promise<Record<string, unknown>> {
  const metrics = await webhook.metrics();
  const cm = await admin.get(`/api/v1/namespaces/${env.webhook.namespace}/configmaps/kube-overcommit-usage`).catch((e) => String(e));
  return {
    written: metrics.sum('kube_overcommit_usage_publish_total', { result: 'written' }),
    unchanged: metrics.sum('kube_overcommit_usage_publish_total', { result: 'unchanged' }),
    publishErrors: metrics.sum('kube_overcommit_usage_publish_total', { result: 'error' }),
    metricsErrors: metrics.sum('kube_overcommit_usage_metrics_errors_total'),
    backgroundErrors: metrics.sum('kube_overcommit_background_errors_total', { task: 'usage-ratios' }),
    configMap: typeof cm === 'string' ? cm : cm.data,
  };
}

/** Waits until the stored Node's cpu allocatable is `cpu` with the cpu reason `reason` in its usage annotation; returns when (ms). */
async function storedCpu(kubelet: SimKubelet, cpu: string, reason: string, timeoutMs: number): Promise<number> {
  await waitUntil(
    `${kubelet.name}: stored cpu ${cpu}, reason ${reason}`,
    async () => {
      const node = await getNode(admin, kubelet.name);
      const usage = node.annotations[USAGE_ANNOTATION] ? JSON.parse(node.annotations[USAGE_ANNOTATION]) : {};
      return baseUnits('cpu', node.allocatable.cpu!) === baseUnits('cpu', cpu) && usage.cpu?.reason === reason ? true : undefined;
    },
    {
      timeoutMs,
      intervalMs: 250,
      describe: async () => {
        const node = await getNode(admin, kubelet.name);
        return { allocatable: node.allocatable.cpu, usage: node.annotations[USAGE_ANNOTATION], leader: await leaderState() };
      },
    },
  );
  return Date.now();
}

describe('usage-aware ratios against a real control plane and metrics-server', () => {
  it('derives each node ratio from metrics.k8s.io, holds then drops it when metrics stop, and drops it at once on a spike', async () => {
    const tls = await kubeletServingCertificate(env);
    const [busyName, idleName] = claimNodeNames(env, 'sim-node', 2);
    const busyEndpoint = await ResourceMetricsEndpoint.start(busyName!, tls);
    const idleEndpoint = await ResourceMetricsEndpoint.start(idleName!, tls);
    endpoints.push(busyEndpoint, idleEndpoint);
    const [busy, idle] = await Promise.all(
      [busyEndpoint, idleEndpoint].map((endpoint) =>
        SimKubelet.start(env, { name: endpoint.node, capacity: MACHINE, kubeletPort: endpoint.port, reportFrequencyMs: 20_000 }),
      ),
    );
    kubelets.push(busy!, idle!);
    const pods = await bindPods(busy!.name, 4, '1');
    const calm = { cpu: 0.9, memory: 3 * GiB, pods: pods.map((name) => ({ namespace: NAMESPACE, name, cpu: 0.15, memory: 512 * 1024 ** 2 })) };
    busyEndpoint.set(calm);
    idleEndpoint.set({ cpu: 0.1, memory: 1 * GiB, pods: [] });
    await webhook.useConfig(CONFIG);

    // Measured: busy U 0.6 of R 4 → the ceiling 2; idle → 1.5 (raised from 1: at the kubelets' next report).
    await waitUntil('busy published at ratio 2', async () => ((await published(busy!.name))?.ratio === 2 ? true : undefined), {
      timeoutMs: 90_000,
      intervalMs: 250,
      describe: leaderState,
    });
    await storedCpu(busy!, '8', 'usage', 30_000);
    const decision = await published(busy!.name);
    expect(decision).toMatchObject({ ratio: 2, reason: 'usage', A: '4', R: '4' });
    expect(baseUnits('cpu', decision!.U!)).toBeGreaterThanOrEqual(500n);
    expect(baseUnits('cpu', decision!.U!)).toBeLessThanOrEqual(700n);
    await storedCpu(idle!, '6', 'usage', 30_000);
    const annotation = JSON.parse((await getNode(admin, busy!.name)).annotations[USAGE_ANNOTATION]!);
    expect(annotation.cpu).toEqual(decision);

    // metrics-server stops: stale. First held (never raised), then ratio 1; the floor keeps busy's 4 bound CPUs.
    await metricsServer.stop();
    const stoppedAt = Date.now();
    await storedCpu(busy!, '8', 'stale', 45_000);
    await storedCpu(idle!, '4', 'stale', 60_000);
    // Not before fallbackAfter (40 s) since the last sample, which is at most a metric resolution and an interval (15 s) before the stop.
    expect(Date.now() - stoppedAt).toBeGreaterThanOrEqual(25_000);
    await storedCpu(busy!, '4', 'stale', 30_000);

    // Back: fresh samples, the ratios return (one step of maxStepUp 1 per interval).
    await metricsServer.start();
    await storedCpu(busy!, '8', 'usage', 90_000);

    // A spike on busy: node usage 3.8 of 4 CPUs, above hotThreshold 0.9 → ratio 1 at once; busy is
    // inflated (8 stored), so its kubelet writes at each period: stored within two of its writes
    // after publication (the first may be admitted before the webhook's cache has it), counted,
    // not timed.
    busyEndpoint.set({ ...calm, cpu: 3.8 });
    await waitUntil('busy published hot', async () => ((await published(busy!.name))?.reason === 'hot' ? true : undefined), {
      timeoutMs: 60_000,
      intervalMs: 100,
    });
    const publishedAt = Date.now();
    const hotAt = await storedCpu(busy!, '4', 'hot', 30_000);
    const writes = busy!.updates.filter((u) => u.ok && u.at >= publishedAt && u.at <= hotAt);
    expect(
      writes.length,
      `the kubelet's writes until cpu 4 was seen: ${JSON.stringify(writes.map((u) => u.at - publishedAt))} ms after publication`,
    ).toBeLessThanOrEqual(2);
    expect((await busy!.readmitPods()).rejected).toEqual([]);
    // idle is untouched by busy's spike.
    expect(baseUnits('cpu', (await getNode(admin, idle!.name)).allocatable.cpu!)).toBe(6000n);
  }, 600_000);

  /**
   * Rule 8 (docs/usage-aware.md, "Who computes, who writes"): a new leader starts each node's
   * history from the smoothed inputs its predecessor published. Usage on `rising` climbs from
   * 1.2 to 2 CPUs (ratio 1.75, then 1.2); the leader stops at that peak and usage falls back to
   * 1.2. The new leader's window (3 m here) starts with the old one's (U 2), so it keeps 1.2 until
   * the peak leaves it; starting without history, its first sample (U 1.2) would publish 1.75
   * within an interval (maxStepUp is 1 here).
   */
  it('a leader change under rising usage: the new leader starts from the published inputs, not from nothing', async () => {
    const tls = await kubeletServingCertificate(env);
    const [name] = claimNodeNames(env, 'sim-node', 1);
    const endpoint = await ResourceMetricsEndpoint.start(name!, tls);
    endpoints.push(endpoint);
    const kubelet = await SimKubelet.start(env, { name: name!, capacity: MACHINE, kubeletPort: endpoint.port, reportFrequencyMs: 20_000 });
    kubelets.push(kubelet);
    const pods = await bindPods(name!, 4, '1');
    const using = (perPod: number) =>
      endpoint.set({
        cpu: 4 * perPod + 0.1,
        memory: 3 * GiB,
        pods: pods.map((pod) => ({ namespace: NAMESPACE, name: pod, cpu: perPod, memory: 512 * 1024 ** 2 })),
      });
    using(0.3);
    // A 3-minute window: the peak outlives the hand-over with room to spare.
    await webhook.useConfig({ nodes: { ...CONFIG.nodes, defaultUsage: { ...CONFIG.nodes.defaultUsage, window: '3m' } } });
    const ratioIs = (ratio: number, U: string, timeoutMs = 90_000) =>
      waitUntil(
        `${name} published at ${ratio}, U ${U}`,
        async () => {
          const decision = await published(name!);
          return decision?.ratio === ratio && baseUnits('cpu', decision.U ?? '0') === baseUnits('cpu', U) ? decision : undefined;
        },
        { timeoutMs, intervalMs: 250, describe: leaderState },
      );
    // U 1.2, e 0.4: ((2.4 − 1.2)/0.4 + 4)/4 = 1.75; then U 2, e 0.5: (0.4/0.5 + 4)/4 = 1.2.
    await ratioIs(1.75, '1200m');
    using(0.5);
    await ratioIs(1.2, '2');
    expect(baseUnits('cpu', (await publishedInputs(name!))!.U.cpu!)).toBe(2000n);

    // A second replica waits on the Lease; the leader stops (releasing it) and usage falls back.
    const [httpPort, httpsPort] = [await freePort(), await freePort()];
    replica = new WebhookProcess(
      { ...env, webhook: { ...env.webhook, httpPort, httpsPort } },
      { env: { POD_NAME: `kube-overcommit-e2e-replica-${process.pid}` } },
    );
    await replica.start();
    await webhook.stop();
    using(0.3);
    await waitUntil(
      'the replica leading, from the published inputs',
      () => /[1-9]\d* nodes start from the published inputs/.test(readFileSync(replica!.logFile!, 'utf8')),
      {
        timeoutMs: 30_000,
      },
    );
    // metrics.k8s.io serves the dip (one metrics-server resolution), then the new leader plans it
    // over a few intervals: still 1.2, U 2, the peak its window started with.
    await waitUntil(
      `${name}'s NodeMetrics at the dip`,
      async () => {
        const metrics = await admin.get(`/apis/metrics.k8s.io/v1beta1/nodes/${name}`).catch(() => undefined);
        return metrics && baseUnits('cpu', metrics.usage.cpu) <= 1500n ? true : undefined;
      },
      { timeoutMs: 45_000 },
    );
    const plannedBefore = (await replica.metrics()).sum('kube_overcommit_usage_publish_total');
    await waitUntil(
      'three plans by the new leader since the dip',
      async () => (await replica!.metrics()).sum('kube_overcommit_usage_publish_total') >= plannedBefore + 3,
      {
        timeoutMs: 30_000,
      },
    );
    expect(await published(name!)).toMatchObject({ ratio: 1.2, reason: 'usage', U: '2' });
    // The peak leaves the window (3 m): the new leader raises the ratio for the usage it measures.
    await ratioIs(1.75, '1200m', 240_000);
  }, 600_000);
});
