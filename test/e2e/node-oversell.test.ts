/**
 * Node oversell against a real control plane (the rules in src/domain/node-rules/node-oversell.rules.ts,
 * scenarios 1–8): the shipped k8s/base applied with kubectl, the built
 * product as its own process with the ServiceAccount's RBAC, simulated kubelets that
 * authenticate as system:node:<name> and follow the kubelet's status algorithm, kube-scheduler
 * and kwok for the scheduling scenario.
 *
 * Kubelets here update every UPDATE_MS (a real one: 10 s) and report every REPORT_MS even
 * without a change (a real one: 5 min ± 50 %). What a real cluster sees later than here:
 * transitions that only a report carries (scenario 4, run without the reconciler, which
 * otherwise nudges such nodes at once: test/e2e/reconciler.test.ts; and scenario 6).
 */
import { readFileSync } from 'node:fs';
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import {
  apiserverMetrics,
  applyConfig,
  claimNodeNames,
  configMapEvents,
  countPods,
  createNamespace,
  deleteAllPods,
  deleteNamespace,
  DISABLED_LABEL,
  entryUrl,
  expectedAllocatable,
  getNode,
  inBaseUnits,
  KubeApiError,
  listPods,
  nodeClient,
  MANAGED_RESOURCES,
  nodesWebhookName,
  POOL_ANNOTATION,
  RATIOS_ANNOTATION,
  RAW_ANNOTATION,
  tearDown,
  SimKubelet,
  tokenClient,
  waitUntil,
  webhookCallCounts,
  WebhookProcess,
  type E2eEnv,
  type KubeClient,
  type NodeView,
  type SimKubeletOptions,
  viewNode,
  webhookFixture,
} from './harness/index.js';

const UPDATE_MS = 1_000;
const REPORT_MS = 4_000;

/** The default ratios of most scenarios, and a pool. */
const RATIOS = { cpu: 1.5, memory: 1.2 };
const POOL_LABEL = 'e2e.kube-overcommit.io/pool';
const POOL_RATIOS = { cpu: 3 };
const CONFIG = {
  nodes: {
    defaultRatios: RATIOS,
    pools: [{ name: 'batch', nodeSelector: { matchLabels: { [POOL_LABEL]: 'batch' } }, ratios: { ...POOL_RATIOS, memory: 1 } }],
  },
};

/** A kubeadm worker's figures (4 CPUs, 200m reserved; ~16 GiB) and two extended resources that must never change. */
const WORKER = {
  capacity: { cpu: '4', memory: '16393232Ki', pods: '110', 'ephemeral-storage': '101430960Ki', 'hugepages-2Mi': '0', 'example.com/gpu': '2' },
  allocatable: { cpu: '3800m', memory: '16290832Ki', pods: '110', 'ephemeral-storage': '93478772582', 'hugepages-2Mi': '0', 'example.com/gpu': '2' },
};

let env: E2eEnv;
let admin: KubeClient;
let webhook: WebhookProcess;
let kubelets: SimKubelet[] = [];

async function startKubelet(options: Omit<SimKubeletOptions, 'capacity'> & Partial<Pick<SimKubeletOptions, 'capacity'>>): Promise<SimKubelet> {
  const kubelet = await SimKubelet.start(env, {
    capacity: WORKER.capacity,
    allocatable: options.capacity ? undefined : WORKER.allocatable,
    updateFrequencyMs: UPDATE_MS,
    reportFrequencyMs: REPORT_MS,
    ...options,
  });
  kubelets.push(kubelet);
  return kubelet;
}

/** The managed resources of a node in base units, against floor(raw × ratios). */
function expectInflated(node: NodeView, raw: Record<string, string>, ratios: Record<string, number>): void {
  const managed = Object.keys(raw).filter((r) => (MANAGED_RESOURCES as readonly string[]).includes(r));
  expect(inBaseUnits(node.allocatable, managed), `${node.name} allocatable`).toEqual(
    Object.fromEntries(Object.entries(expectedAllocatable(raw, ratios)).filter(([r]) => managed.includes(r))),
  );
}

function isInflated(node: NodeView, raw: Record<string, string>, ratios: Record<string, number>): boolean {
  try {
    expectInflated(node, raw, ratios);
    return true;
  } catch {
    return false;
  }
}

/** Waits until the stored allocatable is floor(raw × ratios); returns the node. */
function waitInflated(kubelet: SimKubelet, ratios: Record<string, number>, timeoutMs = 15_000): Promise<NodeView> {
  return waitUntil(
    `${kubelet.name} allocatable = floor(raw × ${JSON.stringify(ratios)})`,
    async () => {
      const node = await getNode(admin, kubelet.name);
      expectInflated(node, kubelet.rawAllocatable, ratios);
      return node;
    },
    { timeoutMs, describe: () => ({ raw: kubelet.rawAllocatable, stats: kubelet.stats }) },
  );
}

beforeAll(async () => {
  ({ env, admin, webhook } = webhookFixture());
  await webhook.start();
});

afterEach(async () => {
  // Every scenario's kubelets: no failed status update, ever; then they go away.
  const stopping = kubelets;
  kubelets = [];
  try {
    for (const kubelet of stopping) kubelet.assertHealthy();
  } finally {
    await Promise.all(stopping.map((k) => k.stop({ deleteNode: true })));
  }
});

afterAll(() => tearDown({ env, admin, webhook }));

describe('node oversell against a real control plane', () => {
  it('0. the shipped k8s/base is in force: webhook entries on the local URL, the Deployment admitted but never run, the webhook with only its RBAC', async () => {
    const mwc = await admin.get(`/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations/${env.webhook.configurationName}`);
    const nodes = mwc.webhooks.find((w: any) => w.name === nodesWebhookName(env));
    expect(nodes).toMatchObject({
      clientConfig: { url: entryUrl(env, nodes.name) },
      failurePolicy: 'Ignore',
      sideEffects: 'None',
      reinvocationPolicy: 'IfNeeded',
    });
    expect(nodes.timeoutSeconds).toBeLessThanOrEqual(2);
    // PodSecurity `restricted` admitted the Deployment's pods; the overlay's nodeSelector keeps them Pending (no kubelet runs them).
    const pods = await waitUntil('the 2 pods of the Deployment', async () => {
      const list = await listPods(admin, env.webhook.namespace);
      return list.length === 2 ? list : undefined;
    });
    for (const pod of pods) {
      expect(pod.status.phase).toBe('Pending');
      expect(pod.spec.nodeName).toBeUndefined();
    }
    // The webhook's credential is the ServiceAccount's token: it may read its ConfigMap and patch
    // nodes/status (the reconciler's nudge), not write Nodes themselves or read Secrets.
    const token = /token: "([^"]+)"/.exec(readFileSync(env.webhook.kubeconfig, 'utf8'))![1]!;
    const sa = tokenClient(env, token, 'kube-overcommit');
    try {
      const review = await sa.post('/apis/authentication.k8s.io/v1/selfsubjectreviews', { apiVersion: 'authentication.k8s.io/v1', kind: 'SelfSubjectReview' });
      expect(review.status.userInfo.username).toBe('system:serviceaccount:kube-overcommit:kube-overcommit');
      const can = async (resourceAttributes: Record<string, string>) =>
        (await sa.post('/apis/authorization.k8s.io/v1/selfsubjectaccessreviews', { spec: { resourceAttributes } })).status.allowed as boolean;
      expect(await can({ verb: 'watch', resource: 'configmaps', namespace: env.webhook.namespace, name: env.webhook.configMap })).toBe(true);
      expect(await can({ verb: 'create', resource: 'events', namespace: env.webhook.namespace })).toBe(true);
      expect(await can({ verb: 'get', resource: 'configmaps', namespace: 'kube-system', name: 'anything' })).toBe(false);
      expect(await can({ verb: 'patch', resource: 'nodes', subresource: 'status' })).toBe(true);
      expect(await can({ verb: 'update', resource: 'nodes', subresource: 'status' })).toBe(false);
      expect(await can({ verb: 'patch', resource: 'nodes' })).toBe(false);
      const lease = { group: 'coordination.k8s.io', resource: 'leases', namespace: env.webhook.namespace };
      expect(await can({ ...lease, verb: 'update', name: 'kube-overcommit-reconciler' })).toBe(true);
      expect(await can({ ...lease, verb: 'update', name: 'another' })).toBe(false);
      expect(await can({ ...lease, verb: 'create' })).toBe(false);
      expect(await can({ verb: 'list', resource: 'secrets', namespace: env.webhook.namespace })).toBe(false);
    } finally {
      sa.close();
    }
  });

  it('1. nodes register and heartbeat: allocatable inflated by the ratios, capacity untouched, annotations record raw, capacity and ratios', async () => {
    await webhook.useConfig(CONFIG);
    const [a, b, c] = claimNodeNames(env, 'sim-node', 3);
    const worker = await startKubelet({ name: a! });
    const big = await startKubelet({ name: b!, capacity: { cpu: '16', memory: '64Gi', pods: '250', 'ephemeral-storage': '200Gi' } });
    const batch = await startKubelet({ name: c!, labels: { [POOL_LABEL]: 'batch' } });

    // Registration (Node CREATE) is already inflated.
    expectInflated(viewNode(worker.registered), worker.rawAllocatable, RATIOS);
    expectInflated(viewNode(batch.registered), batch.rawAllocatable, POOL_RATIOS);

    await Promise.all([worker, big, batch].map((k) => k.waitForPatches(3)));
    for (const [kubelet, ratios, pool] of [
      [worker, RATIOS, undefined],
      [big, RATIOS, undefined],
      [batch, POOL_RATIOS, 'batch'],
    ] as const) {
      const node = await getNode(admin, kubelet.name);
      expect(node.ready).toBe(true);
      expectInflated(node, kubelet.rawAllocatable, ratios);
      // Capacity and the resources we do not manage, exactly as the kubelet reports them.
      expect(inBaseUnits(node.capacity)).toEqual(inBaseUnits(kubelet.rawCapacity));
      for (const r of ['hugepages-2Mi', 'example.com/gpu']) if (r in kubelet.rawAllocatable) expect(node.allocatable[r]).toBe(kubelet.rawAllocatable[r]);
      // The record: raw allocatable and capacity of the managed resources, the ratios applied.
      const managed = (list: Record<string, string>) => inBaseUnits(list, MANAGED_RESOURCES);
      expect(managed(node.recordedRaw!.allocatable)).toEqual(managed(kubelet.rawAllocatable));
      expect(managed(node.recordedRaw!.capacity)).toEqual(managed(kubelet.rawCapacity));
      expect(node.recordedRatios).toEqual(ratios);
      expect(node.annotations[POOL_ANNOTATION]).toBe(pool);
      // Every status update the API server answered was inflated exactly once (never compounded).
      for (const update of kubelet.updates.filter((u) => u.ok)) expectInflated(viewNode(update.stored), kubelet.rawAllocatable, ratios);
      // The known cost: the stored value differs from what the kubelet computes, so it PATCHes at every update.
      expect(kubelet.updates.every((u) => u.reason === 'changed')).toBe(true);
      expect(kubelet.stats.skipped).toBe(0);
    }

    const metrics = await webhook.metrics();
    expect(metrics.value('kube_overcommit_node_allocatable_raw', { node: a!, resource: 'cpu' })).toBe(3.8);
    expect(metrics.value('kube_overcommit_node_allocatable_overcommitted', { node: a!, resource: 'cpu' })).toBe(5.7);
    expect(metrics.value('kube_overcommit_node_ratio', { node: c!, resource: 'cpu', pool: 'batch' })).toBe(3);
  });

  it('2. third parties writing nodes/status with the stored allocatable (conditions only) do not compound it', async () => {
    await webhook.useConfig(CONFIG);
    const [name] = claimNodeNames(env, 'sim-node', 1);
    const kubelet = await startKubelet({ name: name! });
    await kubelet.waitForPatches(1);
    const path = `/api/v1/nodes/${name}/status`;

    // As the node lifecycle controller does: read the Node, change a condition, UpdateStatus
    // (PUT) the whole object back — its allocatable is the inflated one it read. The kubelet keeps
    // running meanwhile; a conflict is retried as a controller would.
    for (let i = 0; i < 15; i++) {
      const stored = await waitUntil(`PUT ${path} #${i}`, async () => {
        const node = await admin.get(`/api/v1/nodes/${name}`);
        const now = new Date().toISOString().replace(/\.\d+Z$/, 'Z');
        node.status.conditions = [
          ...node.status.conditions.filter((c: any) => c.type !== 'E2ELifecycle'),
          { type: 'E2ELifecycle', status: 'False', reason: 'E2E', message: `update ${i}`, lastHeartbeatTime: now, lastTransitionTime: now },
        ];
        try {
          return await admin.put(path, node);
        } catch (error) {
          if (error instanceof KubeApiError && error.status === 409) return undefined;
          throw error;
        }
      });
      expectInflated(viewNode(stored), kubelet.rawAllocatable, RATIOS);
    }
    // As node-problem-detector does: a strategic merge PATCH of its condition only.
    for (let i = 0; i < 10; i++) {
      const now = new Date().toISOString().replace(/\.\d+Z$/, 'Z');
      const stored = await admin.patch(path, {
        status: {
          conditions: [{ type: 'E2EProblem', status: 'False', reason: 'E2E', message: `patch ${i}`, lastHeartbeatTime: now, lastTransitionTime: now }],
        },
      });
      expectInflated(viewNode(stored), kubelet.rawAllocatable, RATIOS);
    }
    // And `kubectl edit`-style: a JSON merge patch of the status that carries the allocatable it read.
    const read = await getNode(admin, name!);
    const stored = await admin.patch(path, { status: { allocatable: read.allocatable } }, 'merge');
    expectInflated(viewNode(stored), kubelet.rawAllocatable, RATIOS);

    await kubelet.waitForPatches(2);
    const node = await getNode(admin, name!);
    expectInflated(node, kubelet.rawAllocatable, RATIOS);
    expect(inBaseUnits(node.recordedRaw!.allocatable)).toEqual(inBaseUnits(kubelet.rawAllocatable, MANAGED_RESOURCES));
    expect(node.object.status.conditions.map((c: any) => c.type)).toEqual(expect.arrayContaining(['Ready', 'E2ELifecycle', 'E2EProblem']));
    for (const update of kubelet.updates.filter((u) => u.ok)) expectInflated(viewNode(update.stored), kubelet.rawAllocatable, RATIOS);
  });

  it('3. a ConfigMap edit (kubectl apply) reaches every node at its next kubelet update; an invalid edit changes nothing, with a Warning Event and the failure metric', async () => {
    await webhook.useConfig(CONFIG);
    const names = claimNodeNames(env, 'sim-node', 3);
    const nodes = await Promise.all(
      names.map((name, i) => startKubelet({ name, ...(i === 2 ? { capacity: { cpu: '7', memory: '30Gi', pods: '110' } } : {}) })),
    );
    await Promise.all(nodes.map((k) => waitInflated(k, RATIOS)));

    const edited = { cpu: 2, memory: 1.1, pods: 1.5 };
    await webhook.useConfig({ nodes: { defaultRatios: edited } });
    const loadedAt = Date.now();
    await Promise.all(nodes.map((k) => waitInflated(k, edited)));
    // The reconciler may have nudged the nodes first: wait for each kubelet's own next write.
    await Promise.all(nodes.map((k) => waitUntil(`${k.name}: a status update after the edit`, () => k.updates.some((u) => u.ok && u.at > loadedAt))));
    for (const kubelet of nodes) {
      // The first status update sent after the webhook loaded the edit already carries it.
      const next = kubelet.updates.find((u) => u.ok && u.at > loadedAt)!;
      expect(next, `${kubelet.name}: a status update after the edit`).toBeDefined();
      expectInflated(viewNode(next.stored), kubelet.rawAllocatable, edited);
      expect((await getNode(admin, kubelet.name)).recordedRatios).toEqual(edited);
    }

    // Invalid edits: a ratio out of range plus an unknown resource; then a YAML syntax error.
    const before = await webhook.metrics();
    const failures0 = before.sum('kube_overcommit_config_reloads_total', { result: 'failure' });
    const generation0 = before.value('kube_overcommit_config_generation');
    const events0 = (await configMapEvents(env, 'InvalidConfig')).length;
    const origin0 = (await webhook.readyz()).details.config.origin;
    const invalid = ['nodes:\n  defaultRatios: { cpu: 20, gpu: 2 }\n', 'nodes: { defaultRatios: { cpu: 1.5 }\n'];
    for (const [i, text] of invalid.entries()) {
      await applyConfig(env, text);
      const events = await waitUntil(`Warning Event InvalidConfig #${i + 1} on the ConfigMap`, async () => {
        const list = await configMapEvents(env, 'InvalidConfig');
        return list.length >= events0 + i + 1 ? list : undefined;
      });
      const event = events.at(-1);
      expect(event.type).toBe('Warning');
      expect(event.involvedObject).toMatchObject({ kind: 'ConfigMap', name: env.webhook.configMap, namespace: env.webhook.namespace });
      if (i === 0) expect(event.message).toMatch(/nodes\.defaultRatios\.cpu/);
      await waitUntil(
        `kube_overcommit_config_reloads_total{result="failure"} = ${failures0 + i + 1}`,
        async () => (await webhook.metrics()).sum('kube_overcommit_config_reloads_total', { result: 'failure' }) === failures0 + i + 1,
      );
    }
    const after = await webhook.metrics();
    expect(after.value('kube_overcommit_config_generation')).toBe(generation0);
    expect((await webhook.readyz()).details.config.origin).toBe(origin0);
    // The nodes keep the last good ratios through further kubelet updates.
    await Promise.all(nodes.map((k) => k.waitForPatches(2)));
    for (const kubelet of nodes) expectInflated(await getNode(admin, kubelet.name), kubelet.rawAllocatable, edited);
  });

  it('4. the opt-out label brings the raw allocatable back at the next kubelet update; removing it inflates again', async () => {
    // Without the reconciler: what the kubelet alone does.
    await webhook.useConfig({ nodes: { ...CONFIG.nodes, reconcile: { enabled: false } } });
    const [a, b] = claimNodeNames(env, 'sim-node', 2);
    const kubelet = await startKubelet({ name: a! });
    const legacy = await startKubelet({ name: b! });
    await Promise.all([waitInflated(kubelet, RATIOS), waitInflated(legacy, RATIOS)]);

    // The webhook's objectSelector skips opted-out nodes: the kubelet's next PATCH (its raw
    // value differs from the stored one) is stored as sent.
    const labelledAt = Date.now(); // an update sent before the labels land may still see them
    await admin.patch(`/api/v1/nodes/${a}`, { metadata: { labels: { [DISABLED_LABEL]: 'true' } } }, 'merge');
    await admin.patch(`/api/v1/nodes/${b}`, { metadata: { labels: { 'node-oversell/disable': 'true' } } }, 'merge');
    for (const k of [kubelet, legacy]) {
      await waitInflated(k, {});
      // The first update stored as sent: the kubelet's, because its raw value differed.
      // (The kubelet records its update once the answer is read: after the GET may have seen it.)
      const restoring = await vi.waitFor(() => {
        const update = k.updates.find((u) => u.ok && u.at > labelledAt && isInflated(viewNode(u.stored), k.rawAllocatable, {}));
        if (!update) throw new Error(`${k.name}: no update stored its raw value yet`);
        return update;
      });
      expect(restoring.reason).toBe('changed');
    }
    // From then on the kubelet has nothing to send until its report is due.
    await kubelet.waitForSyncs(2);
    expect(kubelet.stats.skipped).toBeGreaterThan(0);

    await admin.patch(`/api/v1/nodes/${a}`, { metadata: { labels: { [DISABLED_LABEL]: null } } }, 'merge');
    const unlabelledAt = Date.now();
    await waitInflated(kubelet, RATIOS, REPORT_MS * 2 + 10_000);
    // Nothing differs for the kubelet, so only its periodic report (5 min in a real cluster) is
    // sent, and that is what the webhook inflates.
    const inflating = kubelet.updates.find((u) => u.ok && u.at > unlabelledAt)!;
    expect(inflating.reason).toBe('report');
    expectInflated(viewNode(inflating.stored), kubelet.rawAllocatable, RATIOS);
    expect((await getNode(admin, a!)).recordedRatios).toEqual(RATIOS);
  });

  it('5. kube-scheduler places 1.5× as many 1-CPU pods on the same kwok nodes with cpu ratio 1.5 as with ratio 1', async () => {
    const group = `sched-${Date.now().toString(36)}`;
    const names = claimNodeNames(env, 'kwok-node', 2);
    const capacity = { cpu: '4', memory: '32Gi', pods: '110' };
    await webhook.useConfig({ nodes: { defaultRatios: { cpu: 1, memory: 1 } } });
    const nodes = await Promise.all(names.map((name) => startKubelet({ name, kwok: true, capacity, labels: { 'e2e.kube-overcommit.io/group': group } })));
    // kwok has taken them over (it keeps their Leases).
    await Promise.all(
      names.map((name) => waitUntil(`kwok's Lease for ${name}`, () => admin.get(`/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/${name}`))),
    );
    const namespace = `e2e-${group}`;
    await createNamespace(env, namespace);
    const pod = (i: number) => ({
      apiVersion: 'v1',
      kind: 'Pod',
      metadata: { name: `one-cpu-${i}`, labels: { app: 'one-cpu' } },
      spec: {
        nodeSelector: { 'e2e.kube-overcommit.io/group': group },
        tolerations: [{ key: env.kwok.taint.key, operator: 'Exists', effect: 'NoSchedule' }],
        automountServiceAccountToken: false,
        terminationGracePeriodSeconds: 1,
        containers: [{ name: 'pause', image: 'registry.k8s.io/pause:3.10', resources: { requests: { cpu: '1', memory: '64Mi' } } }],
      },
    });
    const PODS = 16;
    const place = async (expectBound: number) => {
      for (let i = 0; i < PODS; i++) await admin.post(`/api/v1/namespaces/${namespace}/pods`, pod(i));
      return waitUntil(
        `${expectBound} of ${PODS} pods bound and Running, the rest Unschedulable`,
        async () => {
          const counts = countPods(await listPods(admin, namespace));
          return counts.bound === expectBound && counts.running === expectBound && counts.unschedulable === PODS - expectBound ? counts : undefined;
        },
        { timeoutMs: 90_000, intervalMs: 500, describe: async () => countPods(await listPods(admin, namespace)) },
      );
    };
    try {
      await Promise.all(nodes.map((k) => waitInflated(k, {})));
      const withoutOversell = await place(8);
      await deleteAllPods(admin, namespace);

      await webhook.useConfig({ nodes: { defaultRatios: { cpu: 1.5, memory: 1 } } });
      await Promise.all(nodes.map((k) => waitInflated(k, { cpu: 1.5 }, REPORT_MS * 2 + 10_000)));
      const withOversell = await place(12);

      expect(withOversell.running).toBe(withoutOversell.running * 1.5);
      for (const name of names) {
        expect(withoutOversell.byNode[name]).toBe(4);
        expect(withOversell.byNode[name]).toBe(6);
      }
      await deleteAllPods(admin, namespace);
    } finally {
      await deleteNamespace(env, namespace);
    }
  });

  it('6. webhook down: heartbeats keep succeeding and nodes stay Ready with raw values; back up: inflation resumes from the fresh raw values, without compounding', async () => {
    await webhook.useConfig(CONFIG);
    const names = claimNodeNames(env, 'sim-node', 2);
    const [hotAdd, steady] = await Promise.all(names.map((name) => startKubelet({ name })));
    await Promise.all([hotAdd!, steady!].map((k) => waitInflated(k, RATIOS)));
    const webhookName = nodesWebhookName(env);
    const before = webhookCallCounts(await apiserverMetrics(env), webhookName);

    await webhook.stop();
    const stoppedAt = Date.now();
    // A CPU hot-add while the webhook is away: 4 → 6 CPUs, 200m still reserved.
    hotAdd!.setResources({ capacity: { cpu: '6' }, allocatable: { cpu: '5800m' } });
    await Promise.all(
      [hotAdd!, steady!].map(async (k) => {
        await waitInflated(k, {}); // stored as the kubelet sent it (failurePolicy Ignore)
        await k.waitForSyncs(2);
        k.assertHealthy();
        const node = await getNode(admin, k.name);
        expect(node.ready).toBe(true);
        expect(node.taints.map((t) => t.key)).not.toEqual(expect.arrayContaining(['node.kubernetes.io/unreachable', 'node.kubernetes.io/not-ready']));
        expect(k.updates.filter((u) => u.at > stoppedAt).every((u) => u.ok)).toBe(true);
      }),
    );
    const during = webhookCallCounts(await apiserverMetrics(env), webhookName);
    expect(during.failOpen).toBeGreaterThan(before.failOpen);

    await webhook.start();
    const restartedAt = Date.now();
    await Promise.all(
      [hotAdd!, steady!].map(async (k) => {
        const node = await waitInflated(k, RATIOS, REPORT_MS * 2 + 10_000);
        expect(inBaseUnits(node.recordedRaw!.allocatable)).toEqual(inBaseUnits(k.rawAllocatable, MANAGED_RESOURCES));
        expect(inBaseUnits(node.recordedRaw!.capacity)).toEqual(inBaseUnits(k.rawCapacity, MANAGED_RESOURCES));
      }),
    );
    expect((await getNode(admin, hotAdd!.name)).allocatable.cpu).toBe('8700m');
    // And it stays there: further kubelet updates and reinvocations do not compound.
    await Promise.all([hotAdd!, steady!].map((k) => k.waitForPatches(3)));
    for (const k of [hotAdd!, steady!]) {
      expectInflated(await getNode(admin, k.name), k.rawAllocatable, RATIOS);
      for (const update of k.updates.filter((u) => u.ok && u.at > restartedAt)) {
        const stored = viewNode(update.stored);
        // Each answer is either still raw (before the webhook saw the node again) or exactly inflated.
        expect(isInflated(stored, k.rawAllocatable, RATIOS) || isInflated(stored, k.rawAllocatable, {})).toBe(true);
      }
    }
  });

  it('7. TLS files rotated while kubelets keep updating: no admission call fails, the webhook reloads', async () => {
    await webhook.useConfig(CONFIG);
    const names = claimNodeNames(env, 'sim-node', 3);
    const nodes = await Promise.all(names.map((name) => startKubelet({ name })));
    await Promise.all(nodes.map((k) => waitInflated(k, RATIOS)));
    const webhookName = nodesWebhookName(env);
    const before = webhookCallCounts(await apiserverMetrics(env), webhookName);
    const reloads0 = (await webhook.metrics()).sum('kube_overcommit_tls_reloads_total', { result: 'success' });
    const patches0 = nodes.map((k) => k.stats.patchSuccesses);

    const ROTATIONS = 3;
    for (let i = 1; i <= ROTATIONS; i++) {
      const { serialNumber } = await webhook.rotateCertificate();
      await waitUntil(
        `rotation ${i}: the webhook serves certificate ${serialNumber}`,
        async () => (await webhook.servedCertificate()).serialNumber === serialNumber,
      );
      await Promise.all(nodes.map((k) => k.waitForPatches(2)));
    }
    const metrics = await webhook.metrics();
    expect(metrics.sum('kube_overcommit_tls_reloads_total', { result: 'success' })).toBe(reloads0 + ROTATIONS);
    expect(metrics.sum('kube_overcommit_tls_reloads_total', { result: 'failure' })).toBe(0);

    const after = webhookCallCounts(await apiserverMetrics(env), webhookName);
    const patched = nodes.reduce((sum, k, i) => sum + k.stats.patchSuccesses - patches0[i]!, 0);
    expect(after.failOpen, 'calls that failed open').toBe(before.failOpen);
    expect(after.notOk, 'calls answered other than 200').toBe(before.notOk);
    expect(after.rejections, 'calls rejected').toBe(before.rejections);
    expect(after.ok - before.ok).toBeGreaterThanOrEqual(patched);
    for (const k of nodes) expectInflated(await getNode(admin, k.name), k.rawAllocatable, RATIOS);
  });

  it('8. a kubelet forging our annotations with its own credentials (NodeRestriction) cannot raise its allocatable past floor(capacity × ratio)', async () => {
    await webhook.useConfig(CONFIG);
    const [name] = claimNodeNames(env, 'sim-node', 1);
    const kubelet = await startKubelet({ name: name! });
    await waitInflated(kubelet, RATIOS);
    const asNode = nodeClient(env, name!);
    const bound = expectedAllocatable(kubelet.rawCapacity, RATIOS);
    const managed = (list: Record<string, string>) => Object.fromEntries(MANAGED_RESOURCES.filter((r) => r in list).map((r) => [r, list[r]]));
    const expectBounded = (node: NodeView, what: string) => {
      for (const r of ['cpu', 'memory'] as const)
        expect(inBaseUnits(node.allocatable, [r])[r]! <= bound[r]!, `${what}: ${r} ${node.allocatable[r]} ≤ floor(capacity × ratio)`).toBe(true);
    };
    try {
      for (let i = 0; i < 8; i++) {
        // The attack: raw = the stored (inflated) value, ratios {} — as its own Node's annotations...
        const read = await getNode(asNode, name!);
        const forged = {
          [RAW_ANNOTATION]: JSON.stringify({ allocatable: managed(read.allocatable), capacity: managed(read.capacity) }),
          [RATIOS_ANNOTATION]: '{}',
        };
        await asNode.patch(`/api/v1/nodes/${name}`, { metadata: { annotations: forged } }, 'merge');
        // ...then a status write carrying the stored value, with the forged record, or without any.
        const annotations = i % 2 === 0 ? forged : { [RAW_ANNOTATION]: null, [RATIOS_ANNOTATION]: null };
        const stored = viewNode(
          await asNode.patch(`/api/v1/nodes/${name}/status`, { metadata: { annotations }, status: { allocatable: read.allocatable } }, 'merge'),
        );
        expectBounded(stored, `forged write ${i}`);
      }
      // The kubelet's next update brings back floor(raw × ratio); none of its writes went past the bound.
      await kubelet.syncNow({ force: true });
      const node = await waitInflated(kubelet, RATIOS);
      expectBounded(node, 'after the kubelet');
      for (const update of kubelet.updates.filter((u) => u.ok)) expectBounded(viewNode(update.stored), 'kubelet update');
    } finally {
      asNode.close();
    }
  });
});
