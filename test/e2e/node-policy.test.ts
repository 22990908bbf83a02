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
 * with the webhook up or down); then one behaviour, two engines: the same sequence of kubelet,
 * third-party and platform writes driven through the policy path and through the webhook alone
 * stores the same Node after every step.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parse, parseAllDocuments } from 'yaml';
import {
  apiserverMetrics,
  claimNodeNames,
  createNamespace,
  deleteAllPods,
  getNode,
  HollowKubelet,
  nodeClient,
  nodesWebhookName,
  tearDown,
  waitUntil,
  type E2eEnv,
  type KubeClient,
  type WebhookProcess,
  webhookFixture,
} from './harness/index.js';

const NAMESPACE = 'e2e-node-policy';
const ROLE_LABEL = 'e2e.kube-overcommit.io/node-policy';
const POLICY = 'kube-overcommit-nodes';
const SHARD_LABEL = 'kube-overcommit.io/node-targets';
const MAP_API = '/apis/admissionregistration.k8s.io/v1';
const UPDATE_MS = 10_000;
const PODS = [
  { name: 'two-cpu', cpu: '2' },
  { name: 'half-cpu', cpu: '500m' },
];

let env: E2eEnv;
let admin: KubeClient;
let webhook: WebhookProcess;
let hollow: HollowKubelet | undefined;
/** Objects the component created, to delete after the file (other files run without the policy). */
const created: string[] = [];
let entryIndex = -1;

const config = (cpu: number, nodes: Record<string, unknown> = {}) => ({
  nodes: {
    defaultRatios: { cpu: 1, memory: 1 },
    pools: [{ name: 'policy', nodeSelector: { matchLabels: { [ROLE_LABEL]: 'yes' } }, ratios: { cpu } }],
    ...nodes,
  },
});

/** The component's files as shipped: its objects, and the matchConditions its patch adds to the nodes entry. */
function component(): { objects: any[]; matchConditions: any[] } {
  const dir = join(env.repoRoot, 'k8s', 'node-policy');
  const objects = ['policy.yaml', 'targets.yaml'].flatMap((file) =>
    parseAllDocuments(readFileSync(join(dir, file), 'utf8'))
      .map((doc) => doc.toJS())
      .filter(Boolean),
  );
  const kustomization = parse(readFileSync(join(dir, 'kustomization.yaml'), 'utf8'));
  const ops = parse(kustomization.patches[0].patch);
  return { objects, matchConditions: ops.find((op: any) => op.op === 'add').value };
}

function collectionPath(object: any): string {
  const [group, version] = object.apiVersion.includes('/') ? object.apiVersion.split('/') : ['', object.apiVersion];
  const base = group ? `/apis/${group}/${version}` : `/api/${version}`;
  const plural = `${object.kind.toLowerCase()}${object.kind.endsWith('y') ? '' : 's'}`.replace(/ys$/, 'ies');
  const ns = object.metadata.namespace ? `/namespaces/${env.webhook.namespace}` : '';
  return `${base}${ns}/${plural}`;
}

async function installComponent(): Promise<void> {
  const { objects, matchConditions } = component();
  for (const object of objects) {
    if (object.metadata.namespace) object.metadata.namespace = env.webhook.namespace;
    for (const subject of object.subjects ?? []) if (subject.namespace) subject.namespace = env.webhook.namespace;
    if (object.spec?.paramRef) object.spec.paramRef.namespace = env.webhook.namespace;
    await admin.post(collectionPath(object), object);
    created.push(`${collectionPath(object)}/${object.metadata.name}`);
  }
  const configuration = await admin.get(`${MAP_API}/mutatingwebhookconfigurations/${env.webhook.configurationName}`);
  entryIndex = configuration.webhooks.findIndex((w: any) => w.name === nodesWebhookName(env));
  await admin.patch(
    `${MAP_API}/mutatingwebhookconfigurations/${env.webhook.configurationName}`,
    [{ op: 'add', path: `/webhooks/${entryIndex}/matchConditions`, value: matchConditions }],
    'json',
  );
}

async function uninstallComponent(): Promise<void> {
  for (const path of created.reverse()) await admin.delete(path).catch(() => undefined);
  if (entryIndex >= 0)
    await admin
      .patch(
        `${MAP_API}/mutatingwebhookconfigurations/${env.webhook.configurationName}`,
        [{ op: 'remove', path: `/webhooks/${entryIndex}/matchConditions` }],
        'json',
      )
      .catch(() => undefined);
}

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

function pod(name: string, node: string, cpu: string): any {
  return {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { name, namespace: NAMESPACE },
    spec: {
      nodeSelector: { 'kubernetes.io/hostname': node },
      automountServiceAccountToken: false,
      terminationGracePeriodSeconds: 0,
      containers: [{ name: 'app', image: 'registry.k8s.io/pause:3.10', resources: { requests: { cpu, memory: '64Mi' } } }],
    },
  };
}

async function pods(): Promise<Map<string, any>> {
  const list = await admin.get(`/api/v1/namespaces/${NAMESPACE}/pods`);
  return new Map(list.items.map((p: any) => [p.metadata.name, p]));
}

beforeAll(async () => {
  ({ env, admin, webhook } = webhookFixture());
  await installComponent();
  await webhook.start();
  await createNamespace(env, NAMESPACE);
  await webhook.useConfig(config(3));
  const [name] = claimNodeNames(env, 'sim-node', 1);
  hollow = await HollowKubelet.start(env, { name: name!, labels: { [ROLE_LABEL]: 'yes' } });
}, 120_000);

afterAll(async () => {
  if (admin) await deleteAllPods(admin, NAMESPACE, { force: true }).catch(() => undefined);
  await hollow?.stop({ deleteNode: true });
  if (admin) await uninstallComponent();
  await tearDown({ env, admin, webhook, namespaces: [NAMESPACE] });
}, 60_000);

describe('the node-status policy on the real API server', () => {
  it('start-up says the policy path is active; the node’s target is published; the hollow node is inflated (raw cpu 1 → 3) and runs 2.5 CPUs of pods', async () => {
    expect(readFileSync(webhook.logFile!, 'utf8')).toContain(`node status path: the MutatingAdmissionPolicy ${POLICY}`);
    expect((await webhook.metrics()).sum('kube_overcommit_node_policy_active')).toBe(1);
    const entry = await waitUntil('the node’s entry published with target cpu 3', async () => {
      const text = (await publishedEntries()).get(hollow!.name);
      return text?.split('\n')[1] === 'cpu 1 1 3' ? text : undefined;
    });
    expect(entry.split('\n')[0]).toBe('v1');
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
