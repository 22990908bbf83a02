/**
 * The node-status policy (k8s/node-policy, docs/adr/0006-node-policy.md) on the real API server:
 * the shipped MutatingAdmissionPolicy, its binding, the shard ConfigMaps and RBAC, and the nodes
 * entry's matchCondition, applied from the component's files; the webhook as the product runs.
 *
 * In order: the path found and logged at start-up and the node's target published; the steady
 * state of a hollow kubelet (the kubelet's own code) at cpu ratio 3 — it keeps PATCHing every
 * 10 s, the policy serves and coalesces, the webhook is not called and the Node not written; the
 * outage (webhook stopped, kubelet restarted: both pods above the raw allocatable keep running,
 * the kubelet's condition and port changes are stored); the security target (a kubelet's token
 * cannot write the targets, and no write of its own stores more than floor(capacity × ratio),
 * with the webhook up or down); targets no one else can bend (a namespace user and an admin
 * refused an entry write, a labelled ConfigMap of their own no param, an emptied, recreated or
 * bent shard written back within one resync) and that name their Node and expire (with the
 * webhook down, an entry of another uid is ignored, one past its valid-until by the write's
 * heartbeat no longer inflates but keeps the floor's last known commitment); then one behaviour, two engines: the same sequence of kubelet, third-party and
 * platform writes driven through the policy path and through the webhook alone stores the same
 * Node after every step.
 */
import { readFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import fc from 'fast-check';
import {
  apiserverMetrics,
  claimNodeNames,
  createNamespace,
  deleteAllPods,
  e2eEnv,
  type E2eEnv,
  expectedAllocatable,
  getNode,
  HollowKubelet,
  inBaseUnits,
  installNodePolicy,
  type KubeClient,
  kubeletNode,
  kubeMinor,
  NODE_POLICY,
  nodeClient,
  nodeLease,
  pinnedPod,
  podsByName,
  renewedLease,
  tearDown,
  tokenClient,
  waitUntil,
  webhookFixture,
  type WebhookProcess,
} from './harness/index.js';

const NAMESPACE = 'e2e-node-policy';
const ROLE_LABEL = 'e2e.kube-overcommit.io/node-policy';
const SHARD_LABEL = 'kube-overcommit.io/node-targets';
const UPDATE_MS = 10_000;
const PODS = [
  { name: 'two-cpu', cpu: '2' },
  { name: 'half-cpu', cpu: '500m' },
];

let env: E2eEnv;
let admin: KubeClient;
let webhook: WebhookProcess;
let hollow: HollowKubelet | undefined;
/** The component as installed, removed after the file (other files run without the policy). */
let installed: { uninstall(): Promise<void> } | undefined;
/** The node the model-based sequences drive (no kubelet: the test writes as its kubelet). */
let modelNode: string;

/** The hollow node's pool at cpu `cpu`; the model's pool (one behaviour, two engines) at cpu `modelCpu`, memory 1.2. */
const config = (cpu: number, nodes: Record<string, unknown> = {}, modelCpu = 1.5) => ({
  nodes: {
    defaultRatios: { cpu: 1, memory: 1 },
    pools: [
      { name: 'policy', nodeSelector: { matchLabels: { [ROLE_LABEL]: 'yes' } }, ratios: { cpu } },
      { name: 'model', nodeSelector: { matchLabels: { [ROLE_LABEL]: 'model' } }, ratios: { cpu: modelCpu, memory: 1.2 } },
    ],
    ...nodes,
  },
});

/** Every published entry, by node name. */
async function publishedEntries(): Promise<Map<string, string>> {
  const list = await admin.get(`/api/v1/namespaces/${env.webhook.namespace}/configmaps`, { labelSelector: `${SHARD_LABEL}=v1` });
  return new Map(list.items.flatMap((cm: any) => Object.entries(cm.data ?? {})) as [string, string][]);
}

/** nodes/status reviews the webhook answered. */
async function statusReviews(): Promise<number> {
  return (await webhook.metrics()).sum('kube_overcommit_admission_requests_total', { resource: 'nodes/status' });
}

/** PATCHes of nodes/status the API server answered (every writer). */
async function statusPatches(): Promise<number> {
  return (await apiserverMetrics(env)).sum('apiserver_request_total', { resource: 'nodes', subresource: 'status', verb: 'PATCH' });
}

const pod = (name: string, node: string, cpu: string) => pinnedPod(NAMESPACE, name, node, cpu);

const pods = () => podsByName(admin, NAMESPACE);

/** MutatingAdmissionPolicy v1 is served from 1.36 (`npm run test:compat` runs this file on 1.35 too). */
const POLICY_SERVED = kubeMinor(e2eEnv()) >= 36;

beforeAll(async () => {
  ({ env, admin, webhook } = webhookFixture());
  if (POLICY_SERVED) installed = await installNodePolicy(env, admin);
  await webhook.start();
  await createNamespace(env, NAMESPACE);
  await webhook.useConfig(config(3));
  const [name, model] = claimNodeNames(env, 'sim-node', 2);
  modelNode = model!;
  hollow = await HollowKubelet.start(env, { name: name!, labels: { [ROLE_LABEL]: 'yes' } });
}, 120_000);

afterAll(async () => {
  if (admin) await deleteAllPods(admin, NAMESPACE, { force: true }).catch(() => undefined);
  await hollow?.stop({ deleteNode: true });
  if (admin && modelNode) {
    await admin.delete(`/api/v1/nodes/${modelNode}`).catch(() => undefined);
    await admin.delete(`/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/${modelNode}`).catch(() => undefined);
  }
  // The webhook first: it releases its Lease while the component's RBAC still lets it.
  await webhook?.stop();
  await installed?.uninstall();
  await tearDown({ env, admin, webhook, namespaces: [NAMESPACE] });
}, 60_000);

describe.runIf(!POLICY_SERVED)('an API server without MutatingAdmissionPolicy v1', () => {
  it('the webhook alone serves, and start-up says why; the hollow node is inflated as before', async () => {
    const log = readFileSync(webhook.logFile!, 'utf8');
    expect(log).toMatch(
      /node status path: the webhook alone \(the API server, v1\.\d+\.\d+, does not serve admissionregistration\.k8s\.io\/v1 MutatingAdmissionPolicy/,
    );
    expect((await webhook.metrics()).sum('kube_overcommit_node_policy_active')).toBe(0);
    await waitUntil('the node at cpu 3', async () => (await getNode(admin, hollow!.name)).allocatable.cpu === '3');
  }, 60_000);
});

describe.runIf(POLICY_SERVED)('the node-status policy on the real API server', () => {
  it('start-up says the policy path is active; the node’s target is published; the hollow node is inflated (raw cpu 1 → 3) and runs 2.5 CPUs of pods', async () => {
    expect(readFileSync(webhook.logFile!, 'utf8')).toContain(`node status path: the MutatingAdmissionPolicy ${NODE_POLICY}`);
    expect((await webhook.metrics()).sum('kube_overcommit_node_policy_active')).toBe(1);
    const entry = await waitUntil('the node’s entry published with target cpu 3', async () => {
      const text = (await publishedEntries()).get(hollow!.name);
      return text?.split('\n')[1] === 'cpu 1 1 3 1' ? text : undefined;
    });
    expect(entry.split('\n')[0]).toBe('v3');
    await waitUntil('the node at cpu 3', async () => (await getNode(admin, hollow!.name)).allocatable.cpu === '3');
    for (const { name, cpu } of PODS) await admin.post(`/api/v1/namespaces/${NAMESPACE}/pods`, pod(name, hollow!.name, cpu));
    await waitUntil(
      'both pods Running',
      async () => {
        const all = await pods();
        return PODS.every(({ name }) => all.get(name)?.status?.phase === 'Running');
      },
      { timeoutMs: 60_000 },
    );
  }, 120_000);

  it('steady state: the kubelet PATCHes every 10 s, the policy serves and coalesces them: no webhook call, no Node write', async () => {
    // Settled: the pods' image reported (a real change), then more than a kubelet period without a write.
    let last = { rv: '', since: Date.now() };
    await waitUntil(
      'the Node unchanged for more than a kubelet period',
      async () => {
        const node = await admin.get(`/api/v1/nodes/${hollow!.name}`);
        if (node.metadata.resourceVersion !== last.rv) last = { rv: node.metadata.resourceVersion, since: Date.now() };
        const reported = (node.status.images ?? []).some((i: any) => i.names?.includes('registry.k8s.io/pause:3.10'));
        return reported && Date.now() - last.since > UPDATE_MS * 1.2;
      },
      { timeoutMs: 9 * UPDATE_MS, intervalMs: 500 },
    );
    const [reviews0, patches0, rv0] = [await statusReviews(), await statusPatches(), last.rv];
    const versions = new Set<string>();
    const end = Date.now() + 45_000;
    while (Date.now() < end) {
      versions.add((await admin.get(`/api/v1/nodes/${hollow!.name}`)).metadata.resourceVersion);
      await new Promise((r) => setTimeout(r, 1_000));
    }
    const [reviews, patches] = [(await statusReviews()) - reviews0, (await statusPatches()) - patches0];
    console.log(`policy path, 45 s of steady state: ${patches} status PATCHes, ${reviews} webhook calls, ${versions.size} resourceVersion(s)`);
    expect(patches).toBeGreaterThanOrEqual(4);
    expect(reviews).toBe(0);
    expect([...versions]).toEqual([rv0]);
  }, 150_000);

  it('outage: webhook stopped, kubelet restarted: both pods (2.5 CPUs on a 1-CPU node) run again, the allocatable stays 3, the kubelet’s changes are stored', async () => {
    await webhook.stop();
    try {
      const before = await admin.get(`/api/v1/nodes/${hollow!.name}`);
      const restartedAt = Date.now();
      await hollow!.restart();
      const runningAgain = await waitUntil(
        'both pods running again under the restarted kubelet',
        async () => {
          const now = await pods();
          const states = PODS.map(({ name }) => {
            const p = now.get(name);
            const container = p?.status?.containerStatuses?.[0];
            return { name, phase: p?.status?.phase, reason: p?.status?.reason, started: Date.parse(container?.state?.running?.startedAt ?? '') };
          });
          // A rejected pod ends Failed for good: stop waiting, the assertion below says which.
          if (states.some((s) => s.phase === 'Failed')) return states;
          return states.every((s) => s.phase === 'Running' && s.started >= Math.floor(restartedAt / 1000) * 1000) ? states : undefined;
        },
        { timeoutMs: 60_000 },
      );
      expect(runningAgain.map((s) => [s.name, s.phase, s.reason])).toEqual(PODS.map(({ name }) => [name, 'Running', undefined]));
      const after = await admin.get(`/api/v1/nodes/${hollow!.name}`);
      expect(after.status.allocatable.cpu).toBe('3');
      // The restarted kubelet's real change (its new port) reached the API server.
      expect(after.status.daemonEndpoints.kubeletEndpoint.Port).toBe(hollow!.port);
      expect(after.status.daemonEndpoints.kubeletEndpoint.Port).not.toBe(before.status.daemonEndpoints.kubeletEndpoint.Port);
      // A condition change too: the node lifecycle controller's Unknown, written over by the kubelet's Ready=True.
      const ready = after.status.conditions.findIndex((c: any) => c.type === 'Ready');
      await admin.patch(`/api/v1/nodes/${hollow!.name}/status`, [{ op: 'replace', path: `/status/conditions/${ready}/status`, value: 'Unknown' }], 'json');
      const back = await waitUntil(
        'the kubelet’s Ready=True stored again',
        async () => {
          const node = await admin.get(`/api/v1/nodes/${hollow!.name}`);
          return node.status.conditions.find((c: any) => c.type === 'Ready')?.status === 'True' ? node : undefined;
        },
        { timeoutMs: 3 * UPDATE_MS },
      );
      expect(back.status.allocatable.cpu).toBe('3');
    } finally {
      await webhook.start();
    }
  }, 150_000);

  it('security: a kubelet’s token cannot write the targets, and no write of its own stores more than floor(capacity × ratio) = 3, webhook up or down', async () => {
    const kubelet = nodeClient(env, hollow!.name);
    try {
      const shards = (await admin.get(`/api/v1/namespaces/${env.webhook.namespace}/configmaps`, { labelSelector: `${SHARD_LABEL}=v1` })).items;
      expect(shards).toHaveLength(16);
      const denied = await kubelet.raw('PATCH', `/api/v1/namespaces/${env.webhook.namespace}/configmaps/${shards[0].metadata.name}`, {
        body: { data: { [hollow!.name]: 'v1\ncpu 1 1 100' } },
        contentType: 'application/merge-patch+json',
      });
      expect(denied.status).toBe(403);
      const forged = {
        'kube-overcommit.io/allocatable-raw': JSON.stringify({ allocatable: { cpu: '40' }, capacity: { cpu: '40' } }),
        'kube-overcommit.io/ratios': '{"cpu":10}',
      };
      const attempts = [
        { what: 'allocatable cpu 100', status: { allocatable: { cpu: '100' } } },
        { what: 'allocatable cpu 100 and a forged record', status: { allocatable: { cpu: '100' } }, annotations: forged },
        { what: 'the stored allocatable and a forged record', status: { allocatable: { cpu: '3' } }, annotations: forged },
      ];
      const stored: Array<[string, string, string]> = [];
      for (const up of [true, false]) {
        if (!up) await webhook.stop();
        try {
          for (const attempt of attempts) {
            if (attempt.annotations) await kubelet.patch(`/api/v1/nodes/${hollow!.name}`, { metadata: { annotations: attempt.annotations } }, 'merge');
            const reviews0 = up ? await statusReviews() : 0;
            const answer = await kubelet.patch(`/api/v1/nodes/${hollow!.name}/status`, { status: attempt.status }, 'strategic');
            stored.push([
              `${attempt.what}, webhook ${up ? 'up' : 'down'}`,
              answer.status.allocatable.cpu,
              up ? String((await statusReviews()) - reviews0) : '-',
            ]);
          }
        } finally {
          if (!up) await webhook.start();
        }
      }
      console.log(`forged kubelet writes (attempt, stored cpu, webhook calls): ${JSON.stringify(stored)}`);
      // floor(capacity 1 × ratio 3): what the webhook writes for each of them, and what the policy writes without it.
      for (const [what, cpu] of stored) expect(cpu, what).toBe('3');
    } finally {
      kubelet.close();
    }
  }, 120_000);
});

describe.runIf(POLICY_SERVED)('targets no one else can bend, that name their Node and expire', () => {
  const namespace = () => env.webhook.namespace;
  const shardPath = (name: string) => `/api/v1/namespaces/${namespace()}/configmaps/${name}`;
  /** The shard holding `node`'s entry: the one whose data names it. */
  async function shardOf(node: string): Promise<string> {
    const list = await admin.get(`/api/v1/namespaces/${namespace()}/configmaps`, { labelSelector: `${SHARD_LABEL}=v1` });
    return list.items.find((cm: any) => node in (cm.data ?? {})).metadata.name;
  }
  const drift = async () => (await webhook.metrics()).sum('kube_overcommit_node_target_drift_total');
  const RESYNC_MS = 30_000;

  it('a user with ConfigMap rights in the namespace cannot write an entry, nor make another ConfigMap a param; an admin’s emptied or recreated shard is refilled, and an entry bent with the guard lifted is undone, within one resync', async () => {
    const name = hollow!.name;
    const planned = await waitUntil('the hollow node’s entry', async () => (await publishedEntries()).get(name));
    const shard = await shardOf(name);
    const bent = planned.replace(/^cpu 1 1 3 /m, 'cpu 1 1 100 ');
    expect(bent).not.toBe(planned);

    // A namespace user with every ConfigMap verb (what a Role for an app team in this namespace grants).
    const user = 'e2e-configmap-editor';
    await admin.post(`/api/v1/namespaces/${namespace()}/serviceaccounts`, { apiVersion: 'v1', kind: 'ServiceAccount', metadata: { name: user } });
    await admin.post(`/apis/rbac.authorization.k8s.io/v1/namespaces/${namespace()}/roles`, {
      apiVersion: 'rbac.authorization.k8s.io/v1',
      kind: 'Role',
      metadata: { name: user },
      rules: [{ apiGroups: [''], resources: ['configmaps'], verbs: ['get', 'list', 'create', 'update', 'patch', 'delete'] }],
    });
    await admin.post(`/apis/rbac.authorization.k8s.io/v1/namespaces/${namespace()}/rolebindings`, {
      apiVersion: 'rbac.authorization.k8s.io/v1',
      kind: 'RoleBinding',
      metadata: { name: user },
      roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'Role', name: user },
      subjects: [{ kind: 'ServiceAccount', name: user, namespace: namespace() }],
    });
    const token = (
      await admin.post(`/api/v1/namespaces/${namespace()}/serviceaccounts/${user}/token`, {
        apiVersion: 'authentication.k8s.io/v1',
        kind: 'TokenRequest',
        spec: { expirationSeconds: 600 },
      })
    ).status.token;
    const editor = tokenClient(env, token, `system:serviceaccount:${namespace()}:${user}`);
    const guard = `/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicybindings/kube-overcommit-node-targets`;
    const guardBinding = await admin.get(guard);
    const forged = 'e2e-forged-node-targets';
    try {
      const write = (client: KubeClient) =>
        client.raw('PATCH', shardPath(shard), { body: { data: { [name]: bent } }, contentType: 'application/merge-patch+json' });
      const refused = await write(editor);
      expect(refused.status).toBe(403);
      expect(refused.body.message).toContain(`the node targets in ${shard} are written by kube-overcommit only`);
      // The user may read the shard (its Role says so), and its RBAC alone would have let it write.
      expect((await editor.raw('GET', shardPath(shard))).status).toBe(200);
      // A cluster admin is refused too.
      const adminRefused = await write(admin);
      expect(adminRefused.status).toBe(403);
      // A ConfigMap of the user's with the shards' label and a target for the node is no param (the bindings name theirs).
      const created = await editor.raw('POST', `/api/v1/namespaces/${namespace()}/configmaps`, {
        body: { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: forged, labels: { [SHARD_LABEL]: 'v1' } }, data: { [name]: bent } },
      });
      expect(created.status).toBe(201);
      await webhook.stop();
      let stored: string;
      try {
        // With the webhook down the policy alone decides: the kubelet's raw cpu 1 gets the published 3, never the forged 100.
        const kubelet = nodeClient(env, name);
        try {
          stored = (await kubelet.patch(`/api/v1/nodes/${name}/status`, { status: { allocatable: { cpu: '1' } } }, 'strategic')).status.allocatable.cpu;
        } finally {
          kubelet.close();
        }
      } finally {
        await webhook.start();
      }
      expect(stored).toBe('3');

      // The restarted webhook's leader has read the shards and published: from here a repair is a re-read's (counted as drift).
      await waitUntil(
        'the new leader publishing',
        async () => (await webhook.metrics()).sum('kube_overcommit_node_policy_leader') === 1 && (await publishedEntries()).has(name),
      );
      await new Promise((resolve) => setTimeout(resolve, 5_000));
      /** `change` made, then the time until the entry is as planned again and the drift it counted. */
      const repaired = async (what: string, change: () => Promise<unknown>) => {
        const drift0 = await drift();
        await change();
        const t0 = Date.now();
        await waitUntil(what, async () => (await publishedEntries()).get(name)?.split('\n')[1]?.startsWith('cpu 1 1 3 ') === true, {
          timeoutMs: RESYNC_MS + 10_000,
          intervalMs: 500,
        });
        return { what, ms: Date.now() - t0, drift: (await drift()) - drift0 };
      };
      const labels = (await admin.get(shardPath(shard))).metadata.labels;
      const repairs = [
        // An admin empties the shard (kubectl replace of targets.yaml): allowed by the guard.
        await repaired('the emptied shard refilled', async () => {
          const current = await admin.get(shardPath(shard));
          await admin.put(shardPath(shard), {
            apiVersion: 'v1',
            kind: 'ConfigMap',
            metadata: { name: shard, labels, resourceVersion: current.metadata.resourceVersion },
          });
        }),
        // Deleted and created again empty (kubectl delete, kubectl apply).
        await repaired('the recreated shard refilled', async () => {
          await admin.delete(shardPath(shard));
          await admin.post(`/api/v1/namespaces/${namespace()}/configmaps`, { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: shard, labels } });
        }),
      ];
      // With the guard lifted (its binding deleted by an admin) the entry is bent.
      await admin.delete(guard);
      try {
        // The API server's policy informer drops the binding within moments: the bent write goes through then.
        const accepted = await waitUntil('an admin’s write of a bent entry accepted', async () => ((await write(admin)).status === 200 ? true : undefined), {
          timeoutMs: 20_000,
          intervalMs: 500,
        });
        expect(accepted).toBe(true);
        repairs.push(await repaired('the bent entry written back', async () => undefined));
      } finally {
        await admin.post(`/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicybindings`, {
          apiVersion: guardBinding.apiVersion,
          kind: guardBinding.kind,
          metadata: { name: guardBinding.metadata.name, labels: guardBinding.metadata.labels },
          spec: guardBinding.spec,
        });
      }
      console.log(`shard repairs (time to the planned entry, drift counted): ${JSON.stringify(repairs)}`);
      for (const repair of repairs) {
        expect(repair.ms, repair.what).toBeLessThanOrEqual(RESYNC_MS + 5_000);
        expect(repair.drift, repair.what).toBeGreaterThanOrEqual(1);
      }
    } finally {
      editor.close();
      await admin.delete(`/api/v1/namespaces/${namespace()}/configmaps/${forged}`).catch(() => undefined);
      for (const path of [
        `/apis/rbac.authorization.k8s.io/v1/namespaces/${namespace()}/rolebindings/${user}`,
        `/apis/rbac.authorization.k8s.io/v1/namespaces/${namespace()}/roles/${user}`,
        `/api/v1/namespaces/${namespace()}/serviceaccounts/${user}`,
      ])
        await admin.delete(path).catch(() => undefined);
    }
  }, 240_000);

  it('webhook down: an entry serves only its own Node and inflates only before its valid-until (the write’s heartbeat as the clock), after which it keeps the floor’s last known commitment; a Node re-created under the name gets the kubelet’s own value', async () => {
    const kubelet = nodeClient(env, modelNode);
    const t0 = Date.now();
    const conditions = (heartbeat: string) => [
      {
        type: 'Ready',
        status: 'True',
        reason: 'KubeletReady',
        message: 'ready',
        lastHeartbeatTime: heartbeat,
        lastTransitionTime: new Date(t0).toISOString().replace(/\.\d{3}Z$/, 'Z'),
      },
    ];
    const status = (heartbeat: string) => ({ capacity: MODEL_CAPACITY, allocatable: RAWS[0], conditions: conditions(heartbeat) });
    const register = async () => {
      await admin.delete(`/api/v1/nodes/${modelNode}`).catch(() => undefined);
      await waitUntil('the model node gone', async () => (await admin.raw('GET', `/api/v1/nodes/${modelNode}`)).status === 404);
      const now = new Date().toISOString().replace(/\.\d{3}Z$/, 'Z');
      return (await kubelet.post('/api/v1/nodes', kubeletNode(modelNode, { labels: { [ROLE_LABEL]: 'model' }, taints: [], status: status(now) }))).metadata
        .uid as string;
    };
    const writeAt = async (heartbeat: Date) =>
      (await kubelet.patch(`/api/v1/nodes/${modelNode}/status`, { status: status(heartbeat.toISOString().replace(/\.\d{3}Z$/, 'Z')) }, 'merge')).status
        .allocatable.cpu as string;
    try {
      await webhook.useConfig(config(3));
      const uid = await register();
      // A pod bound to it requesting 5 CPUs: above the raw 4, within the target 6 (no kubelet runs it; it is committed).
      const floorPod = pinnedPod(NAMESPACE, 'committed-5', modelNode, '5');
      await admin.post(`/api/v1/namespaces/${NAMESPACE}/pods`, { ...floorPod, spec: { ...floorPod.spec, nodeSelector: undefined, nodeName: modelNode } });
      const entry = await waitUntil('the model node’s entry, for its uid, with the lapsed cpu at the committed 5', async () => {
        const lines = (await publishedEntries()).get(modelNode)?.split('\n');
        return lines?.[12] === uid && lines[1] === 'cpu 4 4 6 5' ? lines : undefined;
      });
      const validUntil = Date.parse(entry[13]!);
      console.log(`model node ${modelNode}: uid ${uid}, valid until ${entry[13]} (${Math.round((validUntil - Date.now()) / 60_000)} min from now)`);
      expect(validUntil - Date.now()).toBeGreaterThan(5 * 3_600_000);
      expect(validUntil - Date.now()).toBeLessThanOrEqual(6 * 3_600_000 + 1_000);
      await webhook.stop();
      let stored: Record<string, string> = {};
      try {
        // The kubelet's raw cpu 4, its heartbeat now: the published target. Its heartbeat past valid-until: its own value,
        // floored at the 5 committed when the entry was published, recorded as the floor's (no ratio).
        stored.now = await writeAt(new Date());
        stored.lapsed = await writeAt(new Date(validUntil + 1_000));
        const lapsedAnnotations = (await admin.get(`/api/v1/nodes/${modelNode}`)).metadata.annotations;
        expect([lapsedAnnotations['kube-overcommit.io/floor'], lapsedAnnotations['kube-overcommit.io/ratios']]).toEqual(['{"cpu":"5"}', '{}']);
        expect(lapsedAnnotations['kube-overcommit.io/pool']).toBeUndefined();
        stored.lastSecond = await writeAt(new Date(validUntil - 1_000));
        stored.lapsedAgain = await writeAt(new Date(validUntil + 2_000));
        // The webhook back, the entry still past its time: it reads the raw 4 back (the floor's record), never 5 as raw (7.5).
        await webhook.start();
        stored.webhookBack = await writeAt(new Date(validUntil + 3_000));
        await webhook.stop();
        await admin.request('DELETE', `/api/v1/namespaces/${NAMESPACE}/pods/committed-5`, { query: { gracePeriodSeconds: 0 } });
        // The Node deleted and registered again under its name (a new uid): the old entry is not its.
        const reborn = await register();
        expect(reborn).not.toBe(uid);
        stored.reborn = await writeAt(new Date());
      } finally {
        await webhook.start();
      }
      expect(stored).toEqual({ now: '6', lapsed: '5', lastSecond: '6', lapsedAgain: '5', webhookBack: '6', reborn: '4' });
      // Back up: the new Node's entry published for its uid, and its writes inflated again.
      const reborn = (await admin.get(`/api/v1/nodes/${modelNode}`)).metadata.uid;
      await waitUntil('the re-created node’s entry, for its uid', async () => (await publishedEntries()).get(modelNode)?.split('\n')[12] === reborn);
      stored = { back: await writeAt(new Date()) };
      expect(stored).toEqual({ back: '6' });
    } finally {
      kubelet.close();
    }
  }, 180_000);
});

/** One step of a sequence: who writes what (the kubelet's writes carry its clock, `t` seconds from the run's start). */
type Step =
  | { kind: 'heartbeat' }
  | { kind: 'report-due' }
  | { kind: 'raw-change' }
  | { kind: 'condition-change' }
  | { kind: 'lifecycle-unknown' }
  | { kind: 'forged-record' }
  | { kind: 'over-capacity' }
  | { kind: 'ratio-change' };

const MODEL_CAPACITY = { cpu: '4', memory: '16Gi', pods: '110' };
const RAWS = [
  { cpu: '4', memory: '15Gi', pods: '110' },
  { cpu: '3500m', memory: '14Gi', pods: '110' },
];

/** The kubelet's side of a run: its raw values, conditions and clock, as it would report them. */
interface KubeletState {
  raw: Record<string, string>;
  t: number;
  memoryPressure: { status: string; since: number };
  modelCpu: number;
}

const at = (t0: number, seconds: number) => new Date(t0 + seconds * 1000).toISOString().replace(/\.\d{3}Z$/, 'Z');

function conditions(state: KubeletState, t0: number) {
  const c = (type: string, status: string, reason: string, since: number) => ({
    type,
    status,
    reason,
    message: `${type} ${status}`,
    lastHeartbeatTime: at(t0, state.t),
    lastTransitionTime: at(t0, since),
  });
  return [
    c(
      'MemoryPressure',
      state.memoryPressure.status,
      state.memoryPressure.status === 'True' ? 'KubeletHasInsufficientMemory' : 'KubeletHasSufficientMemory',
      state.memoryPressure.since,
    ),
    c('Ready', 'True', 'KubeletReady', 0),
  ];
}

/** What the comparison reads of a stored Node: times as seconds from the run's start. */
function projection(node: any, t0: number) {
  const seconds = (time: string) => (Date.parse(time) - t0) / 1000;
  const ours = Object.fromEntries(Object.entries(node.metadata.annotations ?? {}).filter(([key]) => key.startsWith('kube-overcommit.io/')));
  return {
    allocatable: inBaseUnits(node.status.allocatable, ['cpu', 'memory', 'pods']),
    capacity: inBaseUnits(node.status.capacity, ['cpu', 'memory', 'pods']),
    annotations: ours,
    conditions: node.status.conditions.map((c: any) => [c.type, c.status, c.reason, seconds(c.lastHeartbeatTime), seconds(c.lastTransitionTime)]),
  };
}

/**
 * Drives `steps` on a fresh Node `modelNode` (registered by its kubelet's token, its Lease renewed
 * so the node lifecycle controller leaves it alone) and returns the stored Node after each step,
 * with the webhook's nodes/status reviews each step caused.
 */
async function drive(
  steps: Step[],
  label: 'policy' | 'webhook',
): Promise<Array<{ step: string; stored: ReturnType<typeof projection>; calls: number; raw: Record<string, string>; ratio: number }>> {
  const kubelet = nodeClient(env, modelNode);
  const t0 = Math.floor(Date.now() / 1000) * 1000;
  const state: KubeletState = { raw: RAWS[0]!, t: 0, memoryPressure: { status: 'False', since: 0 }, modelCpu: 1.5 };
  // The webhook alone: the targets withdrawn (nodes.admissionPolicy: false), the policy matches nothing.
  const paths = label === 'policy' ? {} : { admissionPolicy: false };
  await webhook.useConfig(config(3, paths, state.modelCpu));
  await admin.delete(`/api/v1/nodes/${modelNode}`).catch(() => undefined);
  await waitUntil('the model node gone', async () => (await admin.raw('GET', `/api/v1/nodes/${modelNode}`)).status === 404);
  const status = () => ({ capacity: MODEL_CAPACITY, allocatable: state.raw, conditions: conditions(state, t0) });
  await kubelet.post('/api/v1/nodes', kubeletNode(modelNode, { labels: { [ROLE_LABEL]: 'model' }, taints: [], status: status() }));
  const leasePath = `/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/${modelNode}`;
  await admin.delete(leasePath).catch(() => undefined);
  let lease = await kubelet.post('/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases', nodeLease(modelNode, 40));
  const renewal = setInterval(() => {
    void kubelet
      .put(leasePath, renewedLease(lease, modelNode, 40))
      .then((renewed) => (lease = renewed))
      .catch(() => undefined);
  }, 5_000);
  const writeStatus = (body: unknown) => kubelet.patch(`/api/v1/nodes/${modelNode}/status`, { status: body }, 'merge');
  const results = [];
  try {
    await writeStatus(status());
    await settle(label, state);
    for (const step of steps) {
      const reviews0 = await statusReviews();
      state.t += step.kind === 'report-due' ? 300 : 10;
      switch (step.kind) {
        case 'heartbeat':
        case 'report-due':
          await writeStatus(status());
          break;
        case 'raw-change':
          state.raw = state.raw === RAWS[0] ? RAWS[1]! : RAWS[0]!;
          await writeStatus(status());
          break;
        case 'condition-change':
          state.memoryPressure = { status: state.memoryPressure.status === 'True' ? 'False' : 'True', since: state.t };
          await writeStatus(status());
          break;
        case 'lifecycle-unknown': {
          // The node lifecycle controller's write (another user): Ready Unknown, then the kubelet's report.
          const node = await admin.get(`/api/v1/nodes/${modelNode}`);
          const ready = node.status.conditions.findIndex((c: any) => c.type === 'Ready');
          await admin.patch(`/api/v1/nodes/${modelNode}/status`, [{ op: 'replace', path: `/status/conditions/${ready}/status`, value: 'Unknown' }], 'json');
          await writeStatus(status());
          break;
        }
        case 'forged-record':
          // The kubelet may write its own Node's annotations: a record claiming raw cpu 40 at ratio 10.
          await kubelet.patch(
            `/api/v1/nodes/${modelNode}`,
            {
              metadata: {
                annotations: {
                  'kube-overcommit.io/allocatable-raw': JSON.stringify({ allocatable: { cpu: '40' }, capacity: { cpu: '40' } }),
                  'kube-overcommit.io/ratios': '{"cpu":10}',
                },
              },
            },
            'merge',
          );
          await writeStatus(status());
          break;
        case 'over-capacity':
          await writeStatus({ ...status(), allocatable: { ...state.raw, cpu: '100' } });
          await writeStatus(status());
          break;
        case 'ratio-change':
          state.modelCpu = state.modelCpu === 1.5 ? 2 : 1.5;
          await webhook.useConfig(config(3, paths, state.modelCpu));
          break;
      }
      await settle(label, state);
      const stored = projection(await admin.get(`/api/v1/nodes/${modelNode}`), t0);
      results.push({ step: step.kind, stored, calls: (await statusReviews()) - reviews0, raw: state.raw, ratio: state.modelCpu });
    }
  } finally {
    clearInterval(renewal);
    kubelet.close();
  }
  return results;
}

/**
 * Waits until the model node's stored allocatable is floor(raw × ratio) and stays so for 2 s (the
 * reconciler's nudge and the publisher, a second apart, have done their part), and, on the policy
 * path, the published entry carries the raw cpu.
 */
async function settle(label: 'policy' | 'webhook', state: KubeletState): Promise<void> {
  const expected = expectedAllocatable({ cpu: state.raw.cpu!, memory: state.raw.memory! }, { cpu: state.modelCpu, memory: 1.2 });
  let since = 0;
  await waitUntil(
    `${label}: the model node at floor(raw × ratio) for 2 s`,
    async () => {
      const stored = inBaseUnits((await admin.get(`/api/v1/nodes/${modelNode}`)).status.allocatable, ['cpu', 'memory']);
      const published = label === 'policy' ? (await publishedEntries()).get(modelNode)?.split('\n')[1]?.split(' ')[1] : state.raw.cpu;
      const ok = stored.cpu === expected.cpu && stored.memory === expected.memory && published === state.raw.cpu;
      since = ok ? since || Date.now() : 0;
      return ok && Date.now() - since >= 2_000;
    },
    {
      timeoutMs: 4 * UPDATE_MS,
      intervalMs: 250,
      describe: async () => ({
        expected: { cpu: String(expected.cpu), memory: String(expected.memory) },
        stored: (await admin.get(`/api/v1/nodes/${modelNode}`)).status.allocatable,
        published: (await publishedEntries()).get(modelNode),
      }),
    },
  );
}

describe.runIf(POLICY_SERVED)('one behaviour, two engines', () => {
  it('the same sequence of kubelet, third-party and platform writes through the policy path and through the webhook alone stores the same Node after every step, never compounding, never above floor(capacity × ratio)', async () => {
    const kinds: Step['kind'][] = [
      'heartbeat',
      'report-due',
      'raw-change',
      'condition-change',
      'lifecycle-unknown',
      'forged-record',
      'over-capacity',
      'ratio-change',
    ];
    const seed = Number(process.env.NODE_POLICY_SEED ?? Date.now() % 100_000);
    // Every kind once, then heartbeats and the rest at random: 24 steps.
    const [extra] = fc.sample(fc.array(fc.constantFrom(...kinds, 'heartbeat', 'heartbeat'), { minLength: 16, maxLength: 16 }), { seed, numRuns: 1 });
    const [order] = fc.sample(fc.shuffledSubarray(kinds, { minLength: kinds.length, maxLength: kinds.length }), { seed, numRuns: 1 });
    const steps: Step[] = [...order!, ...extra!].map((kind) => ({ kind }) as Step);
    // Only the model node writes from here: the webhook's review counter is its alone.
    await hollow?.stop({ deleteNode: true });
    hollow = undefined;
    console.log(`one behaviour, two engines: seed ${seed} (NODE_POLICY_SEED), steps ${steps.map((s) => s.kind).join(', ')}`);

    const policy = await drive(steps, 'policy');
    await webhook.useConfig(config(3, { admissionPolicy: false }));
    await waitUntil('the entries withdrawn', async () => (await publishedEntries()).size === 0);
    expect((await webhook.metrics()).sum('kube_overcommit_node_policy_active')).toBe(0);
    const servable = async () => (await webhook.metrics()).sum('kube_overcommit_node_policy_servable_calls_total');
    const servable0 = await servable();
    const webhookAlone = await drive(steps, 'webhook');
    const servableCalls = (await servable()) - servable0;
    await webhook.useConfig(config(3));

    const servedAlone = policy.filter((r) => r.calls === 0).length;
    console.log(
      `policy path: ${servedAlone} of ${steps.length} steps without a webhook call; webhook alone: ${webhookAlone.filter((r) => r.calls === 0).length}; calls per step ${JSON.stringify(policy.map((r) => [r.step, r.calls]))}`,
    );
    // Everything equal at every step, heartbeat times included (a kubelet write after another manager's moves the
    // kubelet's managedFields fieldsV1: a change that both engines store; the policy compared managedFields without
    // fieldsV1 until 2026-11-28 and coalesced it). A difference in heartbeats alone is reported as such.
    const withoutHeartbeats = (stored: ReturnType<typeof projection>) => ({
      ...stored,
      conditions: stored.conditions.map((c: unknown[]) => c.filter((_: unknown, k: number) => k !== 3)),
    });
    const heartbeatOnly: string[] = [];
    policy.forEach((result, i) => {
      const other = webhookAlone[i]!;
      expect(withoutHeartbeats(result.stored), `step ${i} (${result.step})`).toEqual(withoutHeartbeats(other.stored));
      // Conditions hold strings and numbers only (the projection's quantities are bigints: not compared here).
      if (JSON.stringify(result.stored.conditions) !== JSON.stringify(other.stored.conditions))
        heartbeatOnly.push(`step ${i} (${result.step}): ${JSON.stringify([result.stored.conditions, other.stored.conditions])}`);
      // Never compounds: floor(raw × ratio) of the kubelet's raw, whatever was forged; never above floor(capacity × ratio).
      const expected = expectedAllocatable({ cpu: result.raw.cpu!, memory: result.raw.memory! }, { cpu: result.ratio, memory: 1.2 });
      expect(result.stored.allocatable.cpu, `step ${i} (${result.step})`).toBe(expected.cpu);
      expect(result.stored.allocatable.memory, `step ${i} (${result.step})`).toBe(expected.memory);
      expect(result.stored.allocatable.cpu).toBeLessThanOrEqual(BigInt(4_000 * result.ratio));
    });
    if (heartbeatOnly.length > 0) console.log(`heartbeat times that differ between the engines: ${heartbeatOnly.join('; ')}`);
    expect(heartbeatOnly, 'steps whose heartbeat times differ between the engines').toEqual([]);
    // A heartbeat the webhook alone coalesced (its stored heartbeats did not move) the policy served alone; one it stored
    // (a managedFields change) the policy left to the webhook. The webhook alone was called for each.
    const heartbeats = policy
      .map((r, i) => ({ viaPolicy: r, viaWebhook: webhookAlone[i]!, previous: webhookAlone[i - 1] }))
      .filter(({ viaPolicy, previous }) => viaPolicy.step === 'heartbeat' && previous !== undefined);
    const coalescedByWebhook = (h: (typeof heartbeats)[number]) =>
      JSON.stringify(h.viaWebhook.stored.conditions) === JSON.stringify(h.previous!.stored.conditions);
    const coalesced = heartbeats.filter(coalescedByWebhook);
    expect(coalesced.length, 'heartbeat steps the webhook alone coalesced').toBeGreaterThan(0);
    for (const h of heartbeats) {
      if (coalescedByWebhook(h)) expect(h.viaPolicy.calls).toBe(0);
      else expect(h.viaPolicy.calls).toBeGreaterThanOrEqual(1);
      expect(h.viaWebhook.calls).toBeGreaterThanOrEqual(1);
    }
    // The webhook alone counted those heartbeats as calls the policy could have served.
    expect(servableCalls).toBeGreaterThanOrEqual(coalesced.length);
  }, 600_000);
});
