/**
 * Hot nodes take no new pods (docs/usage-aware.md, "Hot nodes"), against the real control plane:
 * kube-scheduler places the pods, metrics-server (through the aggregation layer) serves the usage
 * that simulated kubelets' `/metrics/resource` report, the webhook's leader decides and publishes.
 *
 * Two 4-CPU nodes of a pool with `hotAction: full`: `hot`, with 2 pods of 1 CPU bound, and
 * `spare`, empty. `hot` turns hot (3.8 of 4 CPUs): its stored allocatable becomes exactly what its
 * pods request (cpu 2, memory 512Mi, pods 2), a NodeHot Event is recorded, the gauge counts it and
 * /plan says `hot-full`. Four pods for the pool all land on `spare`; a pod only `hot` could take
 * stays Pending with the scheduler's "Insufficient cpu" and "Too many pods"; a kubelet restart
 * re-admits every pod bound to `hot` (simulated kubelet's admission, test/support/kubelet-admission.ts).
 * Usage falls: after the window and coolFor `hot` reopens (NodeCooled) and the pending pod is placed there.
 *
 * Then the real kubelet's restart on a full node: kubemark's hollow kubelet has no usage a test
 * can set (its fake cAdvisor reports fixed figures, and it serves no `/metrics/resource` the test
 * controls), so its node is made full by publications written by hand while a stand-in holds the
 * leader's Lease (ratio 2, pods of 2 CPUs admitted on its 1 CPU, then hot-full); the restarted
 * kubelet re-admits both pods against the full allocatable. The gap: that node's hot decision is
 * not made from metrics; the decision from metrics is the first test's, whose restart is the
 * simulated kubelet's admission.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  adminClient,
  baseUnits,
  claimNodeNames,
  createNamespace,
  deleteAllPods,
  deleteNamespace,
  e2eEnv,
  getNode,
  HollowKubelet,
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
import { eventsFor } from './harness/workloads.js';

const NAMESPACE = 'e2e-hot-nodes';
const POOL_LABEL = 'e2e.kube-overcommit.io/hot-nodes';
const USAGE_ANNOTATION = 'kube-overcommit.io/usage';
const MACHINE = { cpu: '4', memory: '16Gi', pods: '110', 'ephemeral-storage': '100Gi' };
const GiB = 1024 ** 3;
const USAGE = { target: { cpu: 0.6 }, interval: '5s', window: '1m', staleAfter: '20s', fallbackAfter: '40s', maxStepUp: 1, hotAction: 'full', coolFor: '10s' };
const CONFIG = {
  nodes: {
    defaultRatios: { cpu: 1 },
    pools: [{ name: 'hot-nodes', nodeSelector: { matchLabels: { [POOL_LABEL]: 'true' } }, ratios: { cpu: 2 }, usage: USAGE }],
  },
};

let env: E2eEnv;
let admin: KubeClient;
let webhook: WebhookProcess;
let metricsServer: MetricsServer;
const endpoints: ResourceMetricsEndpoint[] = [];
const kubelets: SimKubelet[] = [];
let hollow: HollowKubelet | undefined;

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
  await hollow?.stop({ deleteNode: true });
  await Promise.all(endpoints.map((e) => e.stop()));
  await webhook?.stop();
  await metricsServer?.remove();
  if (env) {
    await releaseStandIn().catch(() => undefined);
    await deleteAllPods(admin, NAMESPACE, { force: true }).catch(() => undefined);
    await deleteNamespace(env, NAMESPACE).catch(() => undefined);
    await resetConfig(env).catch(() => undefined);
  }
  admin?.close();
});

/** A pod of NAMESPACE requesting `cpu` and 256Mi; `spec` merged in (where the scheduler may put it, or `nodeName`). */
function pod(name: string, cpu: string, spec: Record<string, unknown>): any {
  return {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { name },
    spec: {
      tolerations: [{ operator: 'Exists' }],
      automountServiceAccountToken: false,
      terminationGracePeriodSeconds: 0,
      containers: [{ name: 'app', image: 'registry.k8s.io/pause:3.10', resources: { requests: { cpu, memory: '256Mi' } } }],
      ...spec,
    },
  };
}

const createPod = (body: any) => admin.post(`/api/v1/namespaces/${NAMESPACE}/pods`, body);
const readPod = (name: string) => admin.get(`/api/v1/namespaces/${NAMESPACE}/pods/${name}`);

/** The published entry of a node, from the ConfigMap every replica reads. */
async function published(node: string): Promise<any> {
  const cm = await admin.get(`/api/v1/namespaces/${env.webhook.namespace}/configmaps/kube-overcommit-usage`).catch(() => undefined);
  const text = cm?.data?.['ratios.json'];
  return text ? JSON.parse(text)[node] : undefined;
}

/** The stored Node's allocatable (cpu, memory, pods) and its cpu usage reason, once `ok` holds for them. */
async function storedWhen(name: string, what: string, ok: (view: { cpu: bigint; memory: bigint; pods: bigint; reason?: string }) => boolean) {
  return waitUntil(
    `${name}: ${what}`,
    async () => {
      const node = await getNode(admin, name);
      const view = {
        cpu: baseUnits('cpu', node.allocatable.cpu!),
        memory: baseUnits('memory', node.allocatable.memory!),
        pods: baseUnits('pods', node.allocatable.pods!),
        reason: node.annotations[USAGE_ANNOTATION] ? JSON.parse(node.annotations[USAGE_ANNOTATION]).cpu?.reason : undefined,
      };
      return ok(view) ? { ...view, at: Date.now() } : undefined;
    },
    { timeoutMs: 150_000, intervalMs: 250, describe: async () => ({ node: await getNode(admin, name), published: await published(name) }) },
  );
}

const LEASE_PATH = () => `/apis/coordination.k8s.io/v1/namespaces/${env.webhook.namespace}/leases/kube-overcommit-usage`;
/** The usage Lease as the stand-in found it; set while the stand-in may hold it. */
let leaseBefore: any;

/** Frees the usage Lease the stand-in holds (no holder: the next webhook takes it at once). */
async function releaseStandIn(): Promise<void> {
  if (leaseBefore === undefined) return;
  const current = await admin.get(LEASE_PATH());
  if (current.spec?.holderIdentity === 'e2e-stand-in') {
    const { holderIdentity: _, renewTime: __, ...spec } = current.spec;
    await admin.put(LEASE_PATH(), { ...current, spec: { ...spec, leaseDurationSeconds: 1 } });
  }
  leaseBefore = undefined;
}

/** Writes a node's entry into the published ratios, as the leader would (the test stands in for it). */
async function publish(node: string, entry: unknown): Promise<void> {
  const path = `/api/v1/namespaces/${env.webhook.namespace}/configmaps/kube-overcommit-usage`;
  const cm = await admin.get(path);
  const ratios = JSON.parse(cm.data?.['ratios.json'] || '{}');
  ratios[node] = entry;
  await admin.put(path, { ...cm, data: { ...cm.data, 'ratios.json': JSON.stringify(ratios) } });
}

describe('hot nodes take no new pods (hotAction full) against a real scheduler and metrics-server', () => {
  it('a hot node gets no new pod while another has room, keeps its pods, and reopens after cooling', async () => {
    const tls = await kubeletServingCertificate(env);
    const [hotName, spareName] = claimNodeNames(env, 'sim-node', 2);
    const hotEndpoint = await ResourceMetricsEndpoint.start(hotName!, tls);
    const spareEndpoint = await ResourceMetricsEndpoint.start(spareName!, tls);
    endpoints.push(hotEndpoint, spareEndpoint);
    const [hot, spare] = await Promise.all(
      [hotEndpoint, spareEndpoint].map((endpoint) =>
        SimKubelet.start(env, { name: endpoint.node, capacity: MACHINE, kubeletPort: endpoint.port, labels: { [POOL_LABEL]: 'true' } }),
      ),
    );
    kubelets.push(hot!, spare!);
    const bound = ['bound-0', 'bound-1'];
    for (const name of bound) {
      await createPod(pod(name, '1', { nodeName: hot!.name }));
      await markRunning(admin, NAMESPACE, name);
    }
    const usage = (cpu: number, perPod: number) => ({
      cpu,
      memory: 3 * GiB,
      pods: bound.map((name) => ({ namespace: NAMESPACE, name, cpu: perPod, memory: 200 * 1024 ** 2 })),
    });
    hotEndpoint.set(usage(1, 0.4));
    spareEndpoint.set({ cpu: 0.2, memory: 1 * GiB, pods: [] });
    await webhook.useConfig(CONFIG);
    // Open: hot at a usage ratio above 1 (U 0.8 of R 2: ((2.4 − 0.8)/0.4 + 2)/4 = 1.5).
    await storedWhen(hot!.name, 'inflated by its usage ratio', (v) => v.reason === 'usage' && v.cpu > 4000n);
    const hotEventsBefore = (await eventsFor(admin, 'default', hot!.name, 'NodeHot')).length;

    // Hot: 3.8 of 4 CPUs > hotThreshold 0.9. Stored: exactly what its two pods request.
    hotEndpoint.set(usage(3.8, 1.8));
    const full = await storedWhen(hot!.name, 'full', (v) => v.reason === 'hot-full');
    expect([full.cpu, full.memory, full.pods]).toEqual([2000n, 512n * 1024n ** 2n, 2n]);
    expect((await published(hot!.name)).cpu).toMatchObject({ ratio: 1, reason: 'hot-full', A: '4', R: '2' });
    const hotEvents = await waitUntil('a NodeHot Event', async () => {
      const events = await eventsFor(admin, 'default', hot!.name, 'NodeHot');
      return events.length > hotEventsBefore ? events : undefined;
    });
    expect(hotEvents.at(-1).message).toContain('no new pod is placed or admitted here');
    expect((await webhook.metrics()).sum('kube_overcommit_usage_hot_nodes', { reason: 'hot-full' })).toBe(1);
    const plan = JSON.parse((await webhook.get('/plan')).body);
    const row = plan.nodes.find((r: any) => r.node === hot!.name);
    expect(row.ratioReasons).toMatchObject({ cpu: 'hot-full', memory: 'hot-full', pods: 'hot-full' });
    expect(row.planned).toMatchObject({ cpu: '2', memory: '512Mi', pods: '2' });

    // The scheduler: four pods for the pool all go to spare; one only hot may take stays Pending.
    const poolAffinity = { nodeSelector: { [POOL_LABEL]: 'true' } };
    const placed = ['new-0', 'new-1', 'new-2', 'new-3'];
    for (const name of placed) await createPod(pod(name, '500m', poolAffinity));
    await createPod(pod('wants-hot', '500m', { nodeSelector: { 'kubernetes.io/hostname': hot!.name } }));
    const nodesOf = await waitUntil('the four pods bound', async () => {
      const nodes = await Promise.all(placed.map(async (name) => (await readPod(name)).spec.nodeName as string | undefined));
      return nodes.every((n) => n !== undefined) ? nodes : undefined;
    });
    expect(nodesOf).toEqual([spare!.name, spare!.name, spare!.name, spare!.name]);
    const unschedulable = await waitUntil('wants-hot unschedulable', async () => {
      const condition = (await readPod('wants-hot')).status?.conditions?.find((c: any) => c.type === 'PodScheduled');
      return condition?.reason === 'Unschedulable' ? condition : undefined;
    });
    expect(unschedulable.message).toMatch(/Insufficient cpu/);
    expect(unschedulable.message).toMatch(/Too many pods/);
    expect((await readPod('wants-hot')).spec.nodeName).toBeUndefined();

    // A kubelet restart re-admits every pod bound to the full node.
    const restart = await hot!.readmitPods();
    expect(restart.rejected).toEqual([]);
    expect(restart.admitted.length).toBe(2);

    // Cooling: usage falls to 1 CPU; the window (1 m) forgets the peak, coolFor (10 s) passes: open again.
    hotEndpoint.set(usage(1, 0.4));
    const cooledAt = Date.now();
    const reopened = await storedWhen(hot!.name, 'reopened', (v) => v.reason === 'usage');
    expect(reopened.cpu).toBeGreaterThanOrEqual(4000n);
    // Not before the window (1 m) and coolFor (10 s) passed since the last sample at or above
    // coolThreshold, which is at most a metrics-server resolution and an interval (15 s) before usage fell.
    expect(reopened.at - cooledAt).toBeGreaterThanOrEqual(55_000);
    const cooledEvents = await waitUntil('a NodeCooled Event', async () => {
      const events = await eventsFor(admin, 'default', hot!.name, 'NodeCooled');
      return events.length > 0 ? events : undefined;
    });
    expect(cooledEvents.at(-1).message).toContain('usage below coolThreshold (cpu 0.8) for coolFor (10s)');
    const wantsHotNode = await waitUntil('wants-hot bound', async () => (await readPod('wants-hot')).spec.nodeName as string | undefined, {
      timeoutMs: 60_000,
    });
    expect(wantsHotNode).toBe(hot!.name);
  }, 600_000);

  it('the real kubelet restarting on a full node re-admits every pod (hollow kubelet; the decisions published by hand)', async () => {
    const [name] = claimNodeNames(env, 'sim-node', 1);
    // No leader: the webhook stops (releasing the Lease), a stand-in holds it for an hour, and the test publishes.
    await webhook.stop();
    leaseBefore = await admin.get(LEASE_PATH());
    const now = new Date().toISOString().replace(/Z$/, '000Z');
    await admin.put(LEASE_PATH(), {
      ...leaseBefore,
      spec: { ...leaseBefore.spec, holderIdentity: 'e2e-stand-in', leaseDurationSeconds: 3600, renewTime: now },
    });
    try {
      // Ratio 2 first (the ceiling): the hollow node's 1 CPU stored as 2, so that 2 CPUs of pods are admitted.
      await publish(name!, { cpu: { ratio: 2, reason: 'usage', A: '1', R: '0', U: '0' } });
      await webhook.start();
      hollow = await HollowKubelet.start(env, { name: name!, labels: { [POOL_LABEL]: 'true' } });
      await storedWhen(name!, 'inflated to 2 CPUs', (v) => v.cpu === 2000n && v.reason === 'usage');
      const pods = [
        { name: 'hollow-one-and-a-half-cpu', cpu: '1500m' },
        { name: 'hollow-half-cpu', cpu: '500m' },
      ];
      for (const p of pods) await createPod(pod(p.name, p.cpu, { nodeName: name }));
      const phases = await waitUntil('both pods admitted by the hollow kubelet', async () => {
        const now = await Promise.all(pods.map(async (p) => (await readPod(p.name)).status?.phase as string | undefined));
        return now.every((phase) => phase === 'Running' || phase === 'Failed') ? now : undefined;
      });
      expect(phases).toEqual(['Running', 'Running']);

      // Full: every resource at exactly what the two pods request (2 CPUs, 512Mi, 2 pods).
      await publish(name!, { cpu: { ratio: 1, reason: 'hot-full', A: '1', R: '2', U: '900m' } });
      const full = await storedWhen(name!, 'full', (v) => v.reason === 'hot-full');
      expect([full.cpu, full.memory, full.pods]).toEqual([2000n, 512n * 1024n ** 2n, 2n]);

      const restartedAt = Date.now();
      await hollow.restart();
      // The restarted kubelet (a new fake runtime) starts each pod it admits again; one it rejects goes Failed.
      const after = await waitUntil(
        'both pods admitted again, or one rejected',
        async () => {
          const statuses = await Promise.all(pods.map(async (p) => (await readPod(p.name)).status));
          const started = (s: any) => Date.parse(s?.containerStatuses?.[0]?.state?.running?.startedAt ?? '') >= Math.floor(restartedAt / 1000) * 1000;
          const settled = statuses.every((s) => (s?.phase === 'Running' && started(s)) || s?.phase === 'Failed');
          return settled ? statuses.map((s) => `${s.phase}${s.reason ? ` ${s.reason}` : ''}`) : undefined;
        },
        { timeoutMs: 60_000 },
      );
      expect(after).toEqual(['Running', 'Running']);
      const stored = await getNode(admin, name!);
      expect([stored.allocatable.cpu, stored.allocatable.pods]).toEqual(['2', '2']);
    } finally {
      await releaseStandIn();
    }
  }, 300_000);
});
