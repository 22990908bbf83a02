/**
 * In-place pod resize (pods/resize, GA in 1.35) on the real kubelet: kubemark's hollow node
 * (1 CPU raw) in a pool at cpu ratio 3, the pod cap in deny mode, the webhook registered through
 * the shipped manifests (its pod-policy entry sends pods/resize UPDATE).
 *
 * `other` (500m) and `web` (500m, resized) are placed by kube-scheduler. In order: a resize of
 * `web` within the cap is stored and allocated by the kubelet; one past it is refused with the
 * cap's message and changes nothing; with the ratio lowered to 1 the commitment floor keeps the
 * resized requests stored and the restarted kubelet re-admits both pods; on that node, now over
 * its cap, a resize down passes and one up is refused.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  claimNodeNames,
  createNamespace,
  deleteAllPods,
  getNode,
  HollowKubelet,
  KubeApiError,
  tearDown,
  waitUntil,
  WebhookProcess,
  type E2eEnv,
  type KubeClient,
  webhookFixture,
} from './harness/index.js';
import { PAUSE_IMAGE, POD_POLICY_LABEL, postWithWarnings } from './harness/workloads.js';

const NAMESPACE = 'e2e-resize';
const ROLE_LABEL = 'e2e.kube-overcommit.io/resize';
const FLOOR_ANNOTATION = 'kube-overcommit.io/floor';

let env: E2eEnv;
let admin: KubeClient;
let webhook: WebhookProcess;
let kubelet: HollowKubelet | undefined;

function config(cpu: number) {
  return {
    nodes: { defaultRatios: { cpu: 1, memory: 1 }, pools: [{ name: 'resize', nodeSelector: { matchLabels: { [ROLE_LABEL]: 'hollow' } }, ratios: { cpu } }] },
    pods: { cap: { mode: 'deny' } },
  };
}

function pod(name: string, cpu: string, nodeName?: string): any {
  return {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { name, namespace: NAMESPACE },
    spec: {
      ...(nodeName ? { nodeName } : { nodeSelector: { 'kubernetes.io/hostname': kubelet!.name } }),
      automountServiceAccountToken: false,
      terminationGracePeriodSeconds: 0,
      containers: [{ name: 'app', image: PAUSE_IMAGE, resources: { requests: { cpu, memory: '64Mi' } } }],
    },
  };
}

const get = (name: string) => admin.get(`/api/v1/namespaces/${NAMESPACE}/pods/${name}`);

/** `kubectl patch pod <name> --subresource resize`: the cpu request of container `app`. Resolves with the HTTP status and the body. */
async function resize(name: string, cpu: string): Promise<{ status: number; body: any }> {
  const patch = { spec: { containers: [{ name: 'app', resources: { requests: { cpu } } }] } };
  try {
    return { status: 200, body: await admin.patch(`/api/v1/namespaces/${NAMESPACE}/pods/${name}/resize`, patch) };
  } catch (error) {
    if (error instanceof KubeApiError) return { status: error.status, body: error.body };
    throw error;
  }
}

/** What the kubelet reports of `app`'s cpu, and the pod's resize conditions. */
function resizeStatus(p: any) {
  const container = p.status?.containerStatuses?.find((c: any) => c.name === 'app');
  return {
    desired: p.spec.containers[0].resources.requests.cpu,
    allocated: container?.allocatedResources?.cpu,
    actual: container?.resources?.requests?.cpu,
    conditions: (p.status?.conditions ?? []).filter((c: any) => c.type.startsWith('PodResize')).map((c: any) => `${c.type}/${c.reason ?? ''}`),
  };
}

/** Waits until the kubelet has allocated `cpu` to `web` (and holds no resize pending or in progress); answers what it reports. */
function allocated(cpu: string) {
  return waitUntil(
    `web allocated ${cpu}`,
    async () => {
      const status = resizeStatus(await get('web'));
      return status.allocated === cpu && status.conditions.length === 0 ? status : undefined;
    },
    { timeoutMs: 60_000, describe: async () => resizeStatus(await get('web')) },
  );
}

const capDenials = async () => (await webhook.metrics()).sum('kube_overcommit_pod_policy_cap_denials_total', { resource: 'cpu' });

beforeAll(async () => {
  ({ env, admin, webhook } = webhookFixture());
  await webhook.start();
  await webhook.useConfig(config(3));
  await createNamespace(env, NAMESPACE, { [POD_POLICY_LABEL]: 'enabled' });
  const [name] = claimNodeNames(env, 'sim-node', 1);
  kubelet = await HollowKubelet.start(env, { name: name!, labels: { [ROLE_LABEL]: 'hollow' } });
}, 120_000);

afterAll(async () => {
  // Pods of a stopped kubelet are never confirmed deleted: forced.
  if (admin) await deleteAllPods(admin, NAMESPACE, { force: true }).catch(() => undefined);
  await kubelet?.stop({ deleteNode: true });
  await tearDown({ env, admin, webhook, namespaces: [NAMESPACE] });
}, 60_000);

describe('in-place resize on the real kubelet (kubemark), the pod cap in deny mode', () => {
  it('a resize within the cap is stored and allocated by the kubelet', async () => {
    await waitUntil('the hollow node inflated to cpu 3', async () => (await getNode(admin, kubelet!.name)).allocatable.cpu === '3');
    // In scope once the webhook knows the namespace: a dry-run pod of 4 CPUs on the node is refused.
    await waitUntil('the webhook to apply the cap in the namespace', async () => {
      const answer = await postWithWarnings(env, `/api/v1/namespaces/${NAMESPACE}/pods`, pod('probe', '4', kubelet!.name), { dryRun: 'All' });
      return answer.status === 403;
    });
    for (const name of ['other', 'web']) await admin.post(`/api/v1/namespaces/${NAMESPACE}/pods`, pod(name, '500m'));
    await waitUntil(
      'other and web Running on the hollow node',
      async () => (await Promise.all(['other', 'web'].map(get))).every((p) => p.spec.nodeName === kubelet!.name && p.status.phase === 'Running'),
      { timeoutMs: 60_000 },
    );

    // 500m + 1500m ≤ 3.
    const answer = await resize('web', '1500m');
    expect(answer.status).toBe(200);
    expect(answer.body.spec.containers[0].resources.requests.cpu).toBe('1500m');
    const status = await allocated('1500m');
    expect(status).toMatchObject({ desired: '1500m', allocated: '1500m', conditions: [] });
    console.log(`web after the resize: ${JSON.stringify(status)}`);
    expect((await get('web')).status.phase).toBe('Running');
  }, 150_000);

  it('a resize past the cap is refused with the cap’s message, and the pod keeps its requests', async () => {
    const before = await capDenials();
    const answer = await resize('web', '2501m');
    expect(answer.status).toBe(403);
    expect(answer.body.message).toBe(
      `admission webhook "pod-policy.kube-overcommit.io" denied the request: kube-overcommit: pod ${NAMESPACE}/web would exceed the overcommit cap of node ${kubelet!.name}: ` +
        'cpu: 3001m requested (500m by 1 pod on the node + 2501m by this pod) > cap 3 (raw allocatable 1 × ratio 3)',
    );
    expect(resizeStatus(await get('web'))).toMatchObject({ desired: '1500m', allocated: '1500m', conditions: [] });
    expect((await capDenials()) - before).toBe(1);
  });

  it('ratio lowered to 1: the commitment floor keeps the resized requests stored, and the restarted kubelet re-admits both pods', async () => {
    await webhook.useConfig(config(1));
    const node = await waitUntil('the floor at 2 CPUs (500m + the resized 1500m)', async () => {
      const view = await getNode(admin, kubelet!.name);
      return view.allocatable.cpu === '2' ? view : undefined;
    });
    expect(JSON.parse(node.annotations[FLOOR_ANNOTATION]!)).toEqual({ cpu: '2' });
    const restartedAt = Date.now();
    await kubelet!.restart();
    // Re-admitted: the new kubelet (a new fake runtime) starts each pod's container again; a rejected one goes Failed.
    const phases = await waitUntil(
      'both pods running again under the restarted kubelet',
      async () => {
        const pods = await Promise.all(['other', 'web'].map(get));
        const started = (p: any) => Date.parse(p.status?.containerStatuses?.[0]?.state?.running?.startedAt) >= Math.floor(restartedAt / 1000) * 1000;
        const done = pods.every((p) => p.status.phase === 'Failed' || (p.status.phase === 'Running' && started(p)));
        return done ? Object.fromEntries(pods.map((p) => [p.metadata.name, { phase: p.status.phase, reason: p.status.reason }])) : undefined;
      },
      { timeoutMs: 60_000, describe: async () => (await Promise.all(['other', 'web'].map(get))).map((p) => [p.metadata.name, p.status]) },
    );
    expect(phases).toEqual({ other: { phase: 'Running', reason: undefined }, web: { phase: 'Running', reason: undefined } });
    expect((await getNode(admin, kubelet!.name)).allocatable.cpu).toBe('2');
    expect(resizeStatus(await get('web'))).toMatchObject({ desired: '1500m', allocated: '1500m' });
  }, 150_000);

  it('on the node now over its cap (2 CPUs requested, cap 1 × 1): a resize down passes, one up is refused', async () => {
    const down = await resize('web', '1200m');
    expect(down.status).toBe(200);
    await allocated('1200m');
    const up = await resize('web', '1201m');
    expect(up.status).toBe(403);
    expect(up.body.message).toContain('cpu: 1701m requested (500m by 1 pod on the node + 1201m by this pod) > cap 1 (raw allocatable 1 × ratio 1)');
  }, 90_000);
});
