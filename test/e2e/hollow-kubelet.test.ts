/**
 * The real kubelet in the loop: kubemark's hollow node (`kubemark --morph=kubelet`, the kubelet's
 * own status loop, node status setters, pod admission handlers and pod workers over a fake
 * container runtime and fake cAdvisor: 1 CPU, 3840 Mi, 110 pods) against the control plane, the
 * webhook registered through the shipped manifests and its shipped defaults
 * (nodes.coalesceStatusWrites on, the reconciler on, the commitment floor on).
 *
 * Two hollow kubelets: `inflated` (a pool at cpu ratio 3) and `plain` (ratio 1). In order:
 * pods beyond the raw allocatable run; the status loop's cadence from the webhook's own request
 * counter, with the Node's resourceVersion still while its kubelet keeps posting and, with
 * coalescing off, moving at each PATCH; the reconciler inflating the idle plain node without a
 * kubelet write; a kubelet restart's real change stored at once; the 1.37 kubelet's
 * status.declaredFeatures stored, and a change of it or a new condition type stored at once,
 * with coalescing going on under a condition that has no heartbeat; the commitment floor (ratio
 * lowered to 1, then a restart: every pod re-admitted); the guard measured in docs/operating.md;
 * the same restart with the webhook unreachable (the pod above raw rejected, OutOfcpu); a node
 * opted out by label (out of the webhook's path: the same rejection); liveness (both kubelets
 * stopped: both nodes go Unknown, the coalesced one as fast as the other).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  apiserverMetrics,
  claimNodeNames,
  createNamespace,
  deleteAllPods,
  DISABLED_LABEL,
  type E2eEnv,
  getNode,
  HOLLOW_MACHINE,
  HollowKubelet,
  type KubeClient,
  kubeletMinor,
  kubeMinor,
  nodeClient,
  pinnedPod,
  podsByName,
  SimKubelet,
  tearDown,
  TerminalStateError,
  waitUntil,
  webhookFixture,
  WebhookProcess,
} from './harness/index.js';

const NAMESPACE = 'e2e-hollow-kubelet';
const ROLE_LABEL = 'e2e.kube-overcommit.io/hollow';
const FLOOR_ANNOTATION = 'kube-overcommit.io/floor';
const GUARD_ENTRY = 'guard.kube-overcommit.io';
/** docs/operating.md ("A guard against the outage"). */
const GUARD_EXPRESSION =
  "request.userInfo.username == 'system:node:' + oldObject.metadata.name && has(oldObject.metadata.annotations) && " +
  "('kube-overcommit.io/ratios' in oldObject.metadata.annotations || 'kube-overcommit.io/floor' in oldObject.metadata.annotations)";
/** The kubelet's nodeStatusUpdateFrequency (kubemark sets the kubelet's default, 10 s). */
const UPDATE_MS = 10_000;
/**
 * What a 1.37 kubelet declares in status.declaredFeatures with its default feature gates: the
 * features of component-helpers' nodedeclaredfeatures whose gate is on by default in 1.37, sorted.
 */
const DECLARED_FEATURES = [
  'ExtendWebSocketsToKubelet',
  'InPlacePodLevelResourcesVerticalScaling',
  'InPlacePodVerticalScalingInitContainers',
  'RestartAllContainersOnContainerExits',
];
const PODS = [
  { name: 'two-cpu', cpu: '2' },
  { name: 'half-cpu', cpu: '500m' },
];

let env: E2eEnv;
let admin: KubeClient;
let webhook: WebhookProcess;
let inflated: HollowKubelet | undefined;
let plain: HollowKubelet | undefined;
/** A simulated kubelet (test/support/sim-kubelet.ts) on the same machine as the hollow ones, in the inflated pool: its calibration. */
let sim: SimKubelet | undefined;

function config(ratios: { inflated: number; plain?: number }, nodes: Record<string, unknown> = {}) {
  const pool = (name: string, role: string, cpu: number) => ({ name, nodeSelector: { matchLabels: { [ROLE_LABEL]: role } }, ratios: { cpu } });
  return {
    nodes: {
      defaultRatios: { cpu: 1, memory: 1 },
      pools: [pool('hollow-inflated', 'inflated', ratios.inflated), ...(ratios.plain ? [pool('hollow-plain', 'plain', ratios.plain)] : [])],
      ...nodes,
    },
  };
}

const pod = (name: string, node: string, cpu: string) => pinnedPod(NAMESPACE, name, node, cpu);

const pods = () => podsByName(admin, NAMESPACE);

/**
 * The guard measured (not shipped): a second webhook configuration whose one entry calls the
 * nodes path with failurePolicy Fail, only for a kubelet's own status writes of a node that
 * carries our ratios or floor annotation.
 */
async function installGuard(): Promise<string> {
  const shipped = await admin.get(`/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations/${env.webhook.configurationName}`);
  const nodes = shipped.webhooks.find((w: any) => w.name.startsWith('nodes.'));
  const name = 'kube-overcommit-guard-e2e';
  await admin.post('/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations', {
    apiVersion: 'admissionregistration.k8s.io/v1',
    kind: 'MutatingWebhookConfiguration',
    metadata: { name },
    webhooks: [
      {
        name: GUARD_ENTRY,
        clientConfig: nodes.clientConfig,
        rules: [{ apiGroups: [''], apiVersions: ['v1'], operations: ['UPDATE'], resources: ['nodes/status'], scope: 'Cluster' }],
        matchConditions: [{ name: 'kubelet-of-inflated-node', expression: GUARD_EXPRESSION }],
        failurePolicy: 'Fail',
        sideEffects: 'None',
        timeoutSeconds: 2,
        admissionReviewVersions: ['v1'],
      },
    ],
  });
  return name;
}

/**
 * Waits until the kubelet (re)started at `since` runs every pod of PODS: Running, its container
 * started since then and ready. The fake runtime of a restarted kubelet holds no container, so
 * a pod it admits is started again; one it rejects goes Failed, which fails the wait at once.
 */
async function runningAgainSince(since: number): Promise<void> {
  await waitUntil(
    'both pods running again under the restarted kubelet',
    async () => {
      const now = await pods();
      return PODS.every(({ name }) => {
        const p = now.get(name);
        if (p?.status?.phase === 'Failed') throw new TerminalStateError(`${name} Failed under the restarted kubelet: ${JSON.stringify(p.status)}`);
        const container = p?.status?.containerStatuses?.[0];
        return (
          p?.status?.phase === 'Running' && container?.ready === true && Date.parse(container.state?.running?.startedAt) >= Math.floor(since / 1000) * 1000
        );
      });
    },
    { timeoutMs: 60_000, describe: async () => [...(await pods()).values()].map((p) => [p.metadata.name, p.status]) },
  );
}
const readyStatus = (node: any): string | undefined => node?.status?.conditions?.find((c: any) => c.type === 'Ready')?.status;

/** nodes/status reviews the webhook answered, and its coalescing decisions. */
async function webhookCounts(): Promise<{ statusReviews: number; coalesced: number }> {
  const metrics = await webhook.metrics();
  return {
    statusReviews: metrics.sum('kube_overcommit_admission_requests_total', { resource: 'nodes/status' }),
    coalesced: metrics.sum('kube_overcommit_status_writes_total', { decision: 'coalesced' }),
  };
}

/** The paths whose values differ between two objects (for a failure's message). */
function changedPaths(a: any, b: any, path = ''): string[] {
  if (typeof a !== 'object' || typeof b !== 'object' || a === null || b === null) return a === b ? [] : [path || '/'];
  return [...new Set([...Object.keys(a), ...Object.keys(b)])].flatMap((k) => changedPaths(a[k], b[k], `${path}/${k}`));
}

/**
 * Samples the Nodes every second for `ms` (a measurement window: it waits the time out) and
 * returns every resourceVersion each stored, in order, without repeats, and what each new
 * version changed (managedFields times and the resourceVersion aside).
 */
async function resourceVersionsOver(ms: number): Promise<Record<string, { versions: string[]; changes: string[][] }>> {
  const names = [inflated!.name, plain!.name, sim!.name];
  const seen = Object.fromEntries(names.map((name) => [name, { versions: [] as string[], changes: [] as string[][], last: undefined as any }]));
  const end = Date.now() + ms;
  while (Date.now() < end) {
    for (const name of names) {
      const node = await admin.get(`/api/v1/nodes/${name}`);
      const entry = seen[name]!;
      if (entry.versions.at(-1) === node.metadata.resourceVersion) continue;
      if (entry.last) entry.changes.push(changedPaths(entry.last, node).filter((p) => !/resourceVersion|managedFields\/\d+\/time/.test(p)));
      entry.versions.push(node.metadata.resourceVersion);
      entry.last = node;
    }
    await new Promise((r) => setTimeout(r, Math.min(1_000, Math.max(0, end - Date.now()))));
  }
  return Object.fromEntries(names.map((name) => [name, { versions: seen[name]!.versions, changes: seen[name]!.changes }]));
}

beforeAll(async () => {
  ({ env, admin, webhook } = webhookFixture());
  await webhook.start();
  await createNamespace(env, NAMESPACE);
  await webhook.useConfig(config({ inflated: 3 }));
  const [inflatedName, plainName, simName] = claimNodeNames(env, 'sim-node', 3);
  [inflated, plain, sim] = await Promise.all([
    HollowKubelet.start(env, { name: inflatedName!, labels: { [ROLE_LABEL]: 'inflated' } }),
    HollowKubelet.start(env, { name: plainName!, labels: { [ROLE_LABEL]: 'plain' } }),
    SimKubelet.start(env, { name: simName!, capacity: HOLLOW_MACHINE, labels: { [ROLE_LABEL]: 'inflated' } }),
  ]);
}, 120_000);

afterAll(async () => {
  // Pods of a stopped kubelet are never confirmed deleted: forced.
  if (admin) await deleteAllPods(admin, NAMESPACE, { force: true }).catch(() => undefined);
  await Promise.all([inflated, plain].map((k) => k?.stop({ deleteNode: true })));
  await tearDown({ env, admin, webhook, kubelets: [sim], namespaces: [NAMESPACE] });
}, 60_000);

describe('the real kubelet (kubemark hollow node) with the webhook on its shipped defaults', () => {
  it('inflates the hollow node (raw cpu 1 → 3) and pods requesting 2.5 CPUs, beyond the raw allocatable, run there', async () => {
    const node = await waitUntil('the inflated node at cpu 3', async () => {
      const view = await getNode(admin, inflated!.name);
      return view.allocatable.cpu === '3' ? view : undefined;
    });
    expect(node.recordedRaw?.allocatable).toMatchObject({ cpu: HOLLOW_MACHINE.cpu, memory: HOLLOW_MACHINE.memory, pods: HOLLOW_MACHINE.pods });
    // The kubelet is binDir's kubemark: the release's own, or on a release without one (1.38) an older minor's.
    expect((await admin.get(`/api/v1/nodes/${inflated!.name}`)).status.nodeInfo.kubeletVersion).toBe(env.kubeletVersion);
    expect((await getNode(admin, plain!.name)).allocatable.cpu).toBe('1');
    for (const { name, cpu } of PODS) await admin.post(`/api/v1/namespaces/${NAMESPACE}/pods`, pod(name, inflated!.name, cpu));
    await waitUntil(
      'both pods Running on the inflated node',
      async () => {
        const all = await pods();
        return PODS.every(({ name }) => all.get(name)?.status?.phase === 'Running' && all.get(name)?.spec?.nodeName === inflated!.name);
      },
      { timeoutMs: 60_000, describe: async () => [...(await pods()).values()].map((p) => [p.metadata.name, p.status]) },
    );
  }, 90_000);

  it('status loop: the inflated kubelet PATCHes every 10 s like the simulated one, the plain one not at all; with coalescing (default) no Node moves for ≥ 35 s, without it the inflated ones move at each PATCH', async () => {
    // Settled: the pods' image in the node's status.images (the kubelet's image cache refreshes
    // up to 30 s after a pull: a real change, stored at its next tick), then a kubelet period
    // without a write.
    let last = { rv: '', since: Date.now() };
    await waitUntil(
      'the pulled image reported, then the inflated Node unchanged for more than a kubelet period',
      async () => {
        const node = await admin.get(`/api/v1/nodes/${inflated!.name}`);
        if (node.metadata.resourceVersion !== last.rv) last = { rv: node.metadata.resourceVersion, since: Date.now() };
        const reported = (node.status.images ?? []).some((i: any) => i.names?.includes('registry.k8s.io/pause:3.10'));
        return reported && Date.now() - last.since > UPDATE_MS * 1.2;
      },
      { timeoutMs: 9 * UPDATE_MS, intervalMs: 500 },
    );
    const before = await webhookCounts();
    const simBefore = sim!.stats.patchSuccesses;
    const t0 = Date.now();
    const coalescedWindow = await resourceVersionsOver(45_000);
    const after = await webhookCounts();
    const minutes = (Date.now() - t0) / 60_000;
    const simPerMinute = (sim!.stats.patchSuccesses - simBefore) / minutes;
    // The hollow kubelet's: every review but the simulated kubelet's (the plain one has nothing to write for 5 min).
    const hollowPerMinute = (after.statusReviews - before.statusReviews) / minutes - simPerMinute;
    // 10 s ticks (+ up to 4 % jitter), each a PATCH while the node is inflated: the same cadence
    // from both, as a ratio over the same window (a loaded machine slows both alike).
    expect(simPerMinute).toBeGreaterThan(0);
    expect(hollowPerMinute / simPerMinute).toBeGreaterThanOrEqual(0.7);
    expect(hollowPerMinute / simPerMinute).toBeLessThanOrEqual(1.4);
    console.log(`status PATCHes a minute, inflated and coalesced: hollow kubelet ${hollowPerMinute.toFixed(2)}, simulated kubelet ${simPerMinute.toFixed(2)}`);
    expect(after.coalesced - before.coalesced).toBeGreaterThanOrEqual(6);
    for (const [name, what] of [
      [inflated!.name, 'the inflated Node, coalesced'],
      [sim!.name, 'the simulated kubelet’s Node, coalesced'],
      [plain!.name, 'the plain Node'],
    ]) {
      expect(coalescedWindow[name!]!.versions, `${what}; changes: ${JSON.stringify(coalescedWindow[name!]!.changes)}`).toHaveLength(1);
    }

    await webhook.useConfig(config({ inflated: 3 }, { coalesceStatusWrites: false }));
    const uncoalesced = await resourceVersionsOver(30_000);
    expect(uncoalesced[inflated!.name]!.versions.length, 'inflated Node versions without coalescing').toBeGreaterThanOrEqual(3);
    expect(uncoalesced[sim!.name]!.versions.length, 'the simulated kubelet’s Node versions without coalescing').toBeGreaterThanOrEqual(3);
    expect(uncoalesced[plain!.name]!.versions, 'the plain Node').toHaveLength(1);

    // What the webhook receives from each: a status update under the node's own user, its
    // manager's entry on the status subresource (`hollow-kubelet` is kubemark's User-Agent; a
    // real kubelet's, and the simulated one's, is `kubelet`), the four standard conditions.
    for (const [kubelet, manager] of [
      [inflated!.name, 'hollow-kubelet'],
      [sim!.name, 'kubelet'],
    ] as const) {
      const node = await admin.get(`/api/v1/nodes/${kubelet}`);
      const entry = node.metadata.managedFields.find((f: any) => f.subresource === 'status' && f.manager === manager);
      expect(entry, `${kubelet}: ${manager}'s status entry`).toMatchObject({ operation: 'Update', apiVersion: 'v1' });
      expect(node.status.conditions.map((c: any) => c.type).sort(), kubelet).toEqual(['DiskPressure', 'MemoryPressure', 'PIDPressure', 'Ready']);
    }
    sim!.assertHealthy();
    await sim!.stop({ deleteNode: true });
    sim = undefined;
    await webhook.useConfig(config({ inflated: 3 }));
  }, 240_000);

  it('the reconciler brings the idle plain node to a new ratio at once, by its own write (the heartbeats unchanged), not the kubelet’s', async () => {
    const nudged = async () => (await webhook.metrics()).sum('kube_overcommit_reconcile_nudges_total', { outcome: 'applied' });
    const nudgesBefore = await nudged();
    const conditionsBefore = (await admin.get(`/api/v1/nodes/${plain!.name}`)).status.conditions;
    await webhook.useConfig(config({ inflated: 3, plain: 2 }));
    const node = await waitUntil('the plain node at cpu 2', async () => {
      const view = await getNode(admin, plain!.name);
      return view.allocatable.cpu === '2' ? view : undefined;
    });
    // By one write that is not the kubelet's: the reconciler's one nudge (the inflated node already matches).
    expect(await nudged()).toBe(nudgesBefore + 1);
    // The reconciler's nudge is an empty PATCH: a kubelet's write would have stored new heartbeats with the new value.
    expect(node.object.status.conditions).toEqual(conditionsBefore);
  }, 60_000);

  it('a kubelet restart’s real change (its new port in status.daemonEndpoints) is stored at once, coalescing on', async () => {
    const before = await admin.get(`/api/v1/nodes/${inflated!.name}`);
    await inflated!.restart();
    const node = await waitUntil('the new kubelet port stored', async () => {
      const n = await admin.get(`/api/v1/nodes/${inflated!.name}`);
      return n.status.daemonEndpoints?.kubeletEndpoint?.Port === inflated!.port && n;
    });
    expect(node.metadata.resourceVersion).not.toBe(before.metadata.resourceVersion);
    expect(node.status.allocatable.cpu).toBe('3');
  }, 90_000);

  it('1.36+: the kubelet’s status.declaredFeatures is stored on the inflated, coalesced node; a write that changes it, or adds a condition type (any minor), is stored at once, and the kubelet’s own rewrite at its next update', async () => {
    const path = `/api/v1/nodes/${inflated!.name}/status`;
    const before = await admin.get(`/api/v1/nodes/${inflated!.name}`);
    // The kubelet's default: the features whose gates are on by default, sorted (pkg/kubelet, component-helpers'
    // nodedeclaredfeatures). NodeDeclaredFeatures is alpha and off in 1.35 (the kubelet declares nothing, the API server
    // drops the field), on from 1.36 in both.
    const declares = Math.min(kubeMinor(env), kubeletMinor(env)) >= 36;
    expect(before.status.declaredFeatures).toEqual(declares ? DECLARED_FEATURES : undefined);
    expect(before.status.allocatable.cpu).toBe('3');
    const decisions = async () => {
      const metrics = await webhook.metrics();
      const count = (decision: string, reason: string) => metrics.sum('kube_overcommit_status_writes_total', { decision, reason });
      return {
        statusChanged: count('passed', 'status-changed'),
        conditionChanged: count('passed', 'condition-changed'),
        coalesced: count('coalesced', 'heartbeat'),
      };
    };
    const decisionsBefore = await decisions();

    // A status write under the node's own identity, the heartbeats untouched, only declaredFeatures changed: stored at once.
    const asNode = nodeClient(env, inflated!.name);
    try {
      if (declares) {
        const fewer = await asNode.patch(path, { status: { declaredFeatures: DECLARED_FEATURES.slice(1) } }, 'strategic');
        expect(fewer.metadata.resourceVersion).not.toBe(before.metadata.resourceVersion);
        expect(fewer.status.declaredFeatures).toEqual(DECLARED_FEATURES.slice(1));
        expect(fewer.status.conditions).toEqual(before.status.conditions);
        // The kubelet writes its own list back at its next update: stored too.
        const seen: unknown[] = [];
        await waitUntil(
          'the kubelet’s declaredFeatures stored again',
          async () => {
            const node = await admin.get(`/api/v1/nodes/${inflated!.name}`);
            seen.push(node.status.declaredFeatures);
            return node.status.declaredFeatures?.length === DECLARED_FEATURES.length;
          },
          { timeoutMs: 3 * UPDATE_MS, intervalMs: 500 },
        );
        expect(seen.at(-1)).toEqual(DECLARED_FEATURES);
      }

      // A 1.37 node lifecycle condition, as an administrator sets it (no heartbeat: stored as null), written as the node: stored at once.
      const maintenance = { type: 'MaintenancePlanned', status: 'True', reason: 'KernelUpgrade', message: 'planned by the e2e test' };
      const planned = await asNode.patch(path, { status: { conditions: [maintenance] } }, 'strategic');
      expect(planned.status.conditions.find((c: any) => c.type === 'MaintenancePlanned')).toMatchObject({ ...maintenance, lastHeartbeatTime: null });
      // The kubelet keeps that condition and posts on. Its first write after another manager's moves its managedFields
      // entry last (a change: stored), and a report of the images it pulled since its restart is one too; a write that
      // changes nothing but heartbeats is coalesced, though one heartbeat is null. Sampled until the Node has stayed at
      // one resourceVersion while the two hollow kubelets (their nodes inflated) posted four reviews, two coalesced.
      const changes: string[][] = [];
      let last = { node: planned, counts: await webhookCounts() };
      const still = await waitUntil(
        'the inflated Node at one resourceVersion over four status reviews, two coalesced',
        async () => {
          const [node, now] = [await admin.get(`/api/v1/nodes/${inflated!.name}`), await webhookCounts()];
          if (node.metadata.resourceVersion !== last.node.metadata.resourceVersion) {
            changes.push(changedPaths(last.node, node).filter((p) => !/resourceVersion|managedFields\/\d+\/time|lastHeartbeatTime/.test(p)));
            last = { node, counts: now };
          }
          return now.statusReviews - last.counts.statusReviews >= 4 && now.coalesced - last.counts.coalesced >= 2 && last.node;
        },
        { timeoutMs: 9 * UPDATE_MS, intervalMs: 500 },
      );
      console.log(`stored writes of the inflated Node before it stayed still: ${JSON.stringify(changes)}`);
      for (const paths of changes) expect(paths, 'a stored write that changed nothing but heartbeats').not.toEqual([]);
      expect(still.status.conditions.find((c: any) => c.type === 'MaintenancePlanned')).toMatchObject({ ...maintenance, lastHeartbeatTime: null });
      const decisionsAfter = await decisions();
      // Passed as status changes: the kubelet's managedFields move after the administrator's write, and from 1.36 the
      // two declaredFeatures writes.
      expect(decisionsAfter.statusChanged - decisionsBefore.statusChanged, 'passed: status-changed').toBeGreaterThanOrEqual(declares ? 2 : 1);
      expect(decisionsAfter.conditionChanged - decisionsBefore.conditionChanged, 'passed: condition-changed').toBeGreaterThanOrEqual(1);
      expect(decisionsAfter.coalesced - decisionsBefore.coalesced, 'coalesced').toBeGreaterThanOrEqual(2);
    } finally {
      await admin.patch(path, { status: { conditions: [{ type: 'MaintenancePlanned', $patch: 'delete' }] } }, 'strategic').catch(() => undefined);
      asNode.close();
    }
  }, 150_000);

  it('commitment floor: ratio lowered to 1, the kubelet restarts and re-admits both pods (2.5 CPUs on a 1-CPU node)', async () => {
    await webhook.useConfig(config({ inflated: 1, plain: 2 }));
    const node = await waitUntil('the floor at 2500m', async () => {
      const view = await getNode(admin, inflated!.name);
      return view.allocatable.cpu === '2500m' ? view : undefined;
    });
    expect(JSON.parse(node.annotations[FLOOR_ANNOTATION]!)).toEqual({ cpu: '2500m' });
    const restartedAt = Date.now();
    await inflated!.restart();
    // Re-admitted: the new kubelet (a new fake runtime) runs each pod's container again.
    await runningAgainSince(restartedAt);
    expect((await getNode(admin, inflated!.name)).allocatable.cpu).toBe('2500m');
  }, 120_000);

  it('measured, not shipped: a guard entry (failurePolicy Fail, matchConditions: the kubelet’s own writes of an inflated node) keeps the floor through an outage and a restart, and blocks every status write of that kubelet meanwhile', async () => {
    const guard = await installGuard();
    await webhook.stop();
    try {
      const rejections = async () => (await apiserverMetrics(env)).sum('apiserver_admission_webhook_rejection_count', { name: GUARD_ENTRY, type: 'admit' });
      const rejectedBefore = await rejections();
      const before = await admin.get(`/api/v1/nodes/${inflated!.name}`);
      const restartedAt = Date.now();
      await inflated!.restart({ waitForReady: false });
      // Protected: the kubelet's status writes are refused, the stored floor stays, both pods are re-admitted against it.
      await runningAgainSince(restartedAt);
      await waitUntil('three status writes refused', async () => (await rejections()) >= rejectedBefore + 3, { timeoutMs: 6 * UPDATE_MS });
      const after = await admin.get(`/api/v1/nodes/${inflated!.name}`);
      expect(after.status.allocatable.cpu).toBe('2500m');
      // Blocked: nothing the kubelet reports is stored — its new port, its heartbeats — while its Lease keeps it Ready.
      expect(after.status.daemonEndpoints.kubeletEndpoint.Port).toBe(before.status.daemonEndpoints.kubeletEndpoint.Port);
      expect(after.status.daemonEndpoints.kubeletEndpoint.Port).not.toBe(inflated!.port);
      expect(after.status.conditions).toEqual(before.status.conditions);
      expect(readyStatus(after)).toBe('True');
    } finally {
      await admin.delete(`/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations/${guard}`);
    }
  }, 150_000);

  it('the same restart with the webhook unreachable (and no guard) stores the raw cpu 1 and rejects the 2-CPU pod (OutOfcpu, Failed)', async () => {
    expect(webhook.running).toBe(false);
    try {
      await inflated!.restart();
      await waitUntil('the raw cpu 1 stored', async () => (await getNode(admin, inflated!.name)).allocatable.cpu === '1');
      const rejected = await waitUntil(
        'the 2-CPU pod rejected',
        async () => {
          const p = (await pods()).get('two-cpu');
          return p?.status?.phase === 'Failed' && p;
        },
        { timeoutMs: 60_000, describe: async () => [...(await pods()).values()].map((p) => [p.metadata.name, p.status]) },
      );
      expect(rejected.status.reason).toBe('OutOfcpu');
      expect((await pods()).get('half-cpu')?.status?.phase).toBe('Running');
    } finally {
      await webhook.start();
    }
  }, 120_000);

  it('a node opted out by label leaves the webhook’s path: its kubelet stores the raw cpu 1 under a pod of 1.5 CPU, and a restart rejects that pod (OutOfcpu)', async () => {
    // The webhook is back: the reconciler has put the plain node at its plan, cpu 2.
    await waitUntil('the plain node at cpu 2', async () => (await getNode(admin, plain!.name)).allocatable.cpu === '2', { timeoutMs: 3 * UPDATE_MS });
    await admin.post(`/api/v1/namespaces/${NAMESPACE}/pods`, pod('opted-out', plain!.name, '1500m'));
    await waitUntil('the 1.5-CPU pod Running on the plain node', async () => (await pods()).get('opted-out')?.status?.phase === 'Running', {
      timeoutMs: 60_000,
    });
    await admin.patch(`/api/v1/nodes/${plain!.name}`, { metadata: { labels: { [DISABLED_LABEL]: 'true' } } }, 'merge');
    try {
      // The shipped objectSelector sends no write of the node to the webhook: nothing applies the floor.
      await waitUntil('the raw cpu 1 stored', async () => (await getNode(admin, plain!.name)).allocatable.cpu === '1', { timeoutMs: 3 * UPDATE_MS });
      await plain!.restart();
      const rejected = await waitUntil(
        'the 1.5-CPU pod rejected',
        async () => {
          const p = (await pods()).get('opted-out');
          return p?.status?.phase === 'Failed' ? p : undefined;
        },
        { timeoutMs: 60_000 },
      );
      expect(rejected.status.reason).toBe('OutOfcpu');
    } finally {
      await admin.patch(`/api/v1/nodes/${plain!.name}`, { metadata: { labels: { [DISABLED_LABEL]: null } } }, 'merge');
    }
  }, 150_000);

  it('liveness: both kubelets stopped, both nodes go Unknown within the controller’s grace period, the coalesced node as fast as the other', async () => {
    // The inflated node inflated and coalesced again, the plain one back at its raw value (nothing to coalesce).
    await webhook.useConfig(config({ inflated: 3 }));
    await waitUntil(
      'inflated at cpu 3, plain at cpu 1',
      async () => {
        const [a, b] = await Promise.all([getNode(admin, inflated!.name), getNode(admin, plain!.name)]);
        return a.allocatable.cpu === '3' && b.allocatable.cpu === '1';
      },
      { timeoutMs: 3 * UPDATE_MS },
    );
    const coalesced = (await webhookCounts()).coalesced;
    await waitUntil('a coalesced write', async () => (await webhookCounts()).coalesced > coalesced, { timeoutMs: 4 * UPDATE_MS });
    const stoppedAt = Date.now();
    await Promise.all([inflated!.stop(), plain!.stop()]);
    const unknownAfter: Record<string, number> = {};
    await waitUntil(
      'both nodes Ready=Unknown',
      async () => {
        for (const kubelet of [inflated!, plain!]) {
          if (unknownAfter[kubelet.name] === undefined && readyStatus(await admin.get(`/api/v1/nodes/${kubelet.name}`)) === 'Unknown')
            unknownAfter[kubelet.name] = Date.now() - stoppedAt;
        }
        return Object.keys(unknownAfter).length === 2;
      },
      { timeoutMs: 90_000, intervalMs: 500 },
    );
    // node-monitor-grace-period 50 s (v1.34's default) after the last Lease renewal, checked every 5 s.
    console.log(`Ready=Unknown after the kubelets stopped: ${JSON.stringify(unknownAfter)} ms`);
    // The inflated node as fast as the plain one, its baseline in the same run (the controller checks every 5 s, Leases renew every 10 s).
    const ratio = unknownAfter[inflated!.name]! / unknownAfter[plain!.name]!;
    expect(ratio).toBeGreaterThanOrEqual(0.7);
    expect(ratio).toBeLessThanOrEqual(1.4);
  }, 150_000);
});
