/**
 * In-place pod resize (pods/resize, GA in 1.35) on the real kubelet: kubemark's hollow node
 * (1 CPU raw) in a pool at cpu ratio 3, the pod cap in deny mode, the webhook registered through
 * the shipped manifests (its pod-policy entry sends pods/resize UPDATE).
 *
 * What kubemark does with a resize: the kubelet's own allocation runs (its resize admission
 * against the Node as stored), and the pod's allocated requests take the new value
 * (status.containerStatuses[].allocatedResources and the pod-level status.allocatedResources);
 * then the actuation fails — kubemark's stub pod cgroup manager answers "not implemented" to
 * GetPodCgroupConfig — so the pod shows PodResizeInProgress, reason Error, retried at each sync,
 * and its actual requests stay as they were: the fake runtime reports none, so the kubelet keeps
 * the value it reported before. The container's (status.containerStatuses[].resources) changes
 * when the container starts again (a kubelet restart); the pod-level one (status.resources, read
 * from the pod's cgroup) never does: it stays at the pod's requests when it started. kube-scheduler
 * counts the pod at the largest of its desired, allocated and actual requests — the pod-level
 * ones, since the kubelet reports both — and so do the cap and the commitment floor.
 *
 * `other` (500m) and `web` (started at 1500m) are placed by kube-scheduler. In order: a resize of
 * `web` within the cap (to 2500m) is stored and allocated by the kubelet; one past it is refused
 * with the cap's message and changes nothing; with the ratio lowered to 1 the commitment floor
 * keeps the resized requests stored and the restarted kubelet re-admits both pods; on that node,
 * now over its cap, a resize down to 500m passes, and `web` still counts the 1500m it runs with
 * for kube-scheduler (no room for 100m more), the floor (2 CPUs stored) and the cap (a resize up
 * to 1500m passes, one past it is refused).
 *
 * Kubernetes 1.35's kubelet differs: before its admission it marks a resize Infeasible when the pod
 * would request more than the node's absolute allocatable ("Node didn't have enough capacity";
 * pkg/kubelet/allocation, removed in 1.36) — the raw value, whatever the stored, inflated one; under
 * kubemark that check reads memory 0 from the fake container manager, so there every resize is
 * Infeasible. The resize to 2500m is stored and never allocated, the pod keeps counting the 1500m
 * it was admitted at, and the cap still refuses the resize past it with the same message; the
 * tests that need the kubelet to allocate a resize run from 1.36.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  claimNodeNames,
  createNamespace,
  deleteAllPods,
  type E2eEnv,
  e2eEnv,
  getNode,
  HollowKubelet,
  KubeApiError,
  type KubeClient,
  kubeletMinor,
  kubeMinor,
  tearDown,
  waitUntil,
  webhookFixture,
  WebhookProcess,
} from './harness/index.js';
import { PAUSE_IMAGE, POD_POLICY_LABEL, postWithWarnings, resizeCpu } from './harness/workloads.js';

const NAMESPACE = 'e2e-resize';
/**
 * `pods/resize` is served from 1.33 (in-place resize beta, on). On 1.32 in-place resize is alpha and
 * off: no subresource, and a pod's resources cannot change at all; what the cap does there is the
 * 1.32 test below (docs/compatibility.md lists the skip).
 */
const SERVES_RESIZE = kubeMinor(e2eEnv()) >= 33;
/**
 * From 1.36 the kubelet allocates a resize when its admission (the stored, inflated Node) agrees; 1.35 under kubemark never does (see the header).
 * What the kubelet does follows the kubelet's minor (kubemark v1.37.2 on 1.38.0-beta.0, which has none).
 */
const ALLOCATES_RESIZES = kubeletMinor(e2eEnv()) >= 36;
/**
 * 1.33's kubelet allocates a resize too: it checks one against the stored Node's allocatable
 * (kubelet.go canResizePod, the inflated value); 1.34 and 1.35 check the absolute allocatable
 * (pkg/kubelet/allocation), Infeasible under kubemark. 1.33 reports no pod-level status (from 1.35).
 * The floor-and-restart tests below expect 1.36's values and are not run on 1.33
 * (docs/compatibility.md lists the skip).
 */
const KUBELET_ALLOCATES = ALLOCATES_RESIZES || kubeletMinor(e2eEnv()) === 33;
const POD_LEVEL_STATUS = kubeletMinor(e2eEnv()) >= 35;
/** The container's value, and the pod-level one where the kubelet reports it. */
const both = (cpu: string) => [cpu, POD_LEVEL_STATUS ? cpu : undefined];
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

const resize = (name: string, cpu: string) => resizeCpu(admin, NAMESPACE, name, cpu);

/** What the kubelet reports of `app`'s cpu and of the pod's (allocated, actual), and the pod's resize conditions. */
function resizeStatus(p: any) {
  const container = p.status?.containerStatuses?.find((c: any) => c.name === 'app');
  return {
    desired: p.spec.containers[0].resources.requests.cpu,
    allocated: [container?.allocatedResources?.cpu, p.status?.allocatedResources?.cpu],
    actual: [container?.resources?.requests?.cpu, p.status?.resources?.requests?.cpu],
    conditions: (p.status?.conditions ?? []).filter((c: any) => c.type.startsWith('PodResize')).map((c: any) => `${c.type}/${c.reason ?? ''}`),
  };
}

/** The condition kubemark's kubelet sets on a resize it allocated and could not actuate (see the header). */
const ACTUATION_FAILED = 'PodResizeInProgress/Error';

/** Waits until the kubelet has allocated `cpu` to `web` and tried to actuate it; answers what it reports. */
function allocated(cpu: string) {
  return waitUntil(
    `web allocated ${cpu}`,
    async () => {
      const status = resizeStatus(await get('web'));
      return status.allocated.every((value, i) => value === both(cpu)[i]) && status.conditions.includes(ACTUATION_FAILED) ? status : undefined;
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

describe.runIf(SERVES_RESIZE)('in-place resize on the real kubelet (kubemark), the pod cap in deny mode', () => {
  it('a resize within the cap is stored and allocated by the kubelet', async () => {
    await waitUntil('the hollow node inflated to cpu 3', async () => (await getNode(admin, kubelet!.name)).allocatable.cpu === '3');
    // In scope once the webhook knows the namespace: a dry-run pod of 4 CPUs on the node is refused.
    await waitUntil('the webhook to apply the cap in the namespace', async () => {
      const answer = await postWithWarnings(env, `/api/v1/namespaces/${NAMESPACE}/pods`, pod('probe', '4', kubelet!.name), { dryRun: 'All' });
      return answer.status === 403;
    });
    await admin.post(`/api/v1/namespaces/${NAMESPACE}/pods`, pod('other', '500m'));
    await admin.post(`/api/v1/namespaces/${NAMESPACE}/pods`, pod('web', '1500m'));
    await waitUntil(
      'other and web Running on the hollow node',
      async () => (await Promise.all(['other', 'web'].map(get))).every((p) => p.spec.nodeName === kubelet!.name && p.status.phase === 'Running'),
      { timeoutMs: 60_000 },
    );

    // 500m + 2500m ≤ 3.
    const answer = await resize('web', '2500m');
    expect(answer.status).toBe(200);
    expect(answer.body.spec.containers[0].resources.requests.cpu).toBe('2500m');
    if (KUBELET_ALLOCATES) {
      // Allocated by the kubelet; not actuated under kubemark: the pod runs with its 1500m.
      expect(await allocated('2500m')).toEqual({
        desired: '2500m',
        allocated: both('2500m'),
        actual: both('1500m'),
        conditions: [ACTUATION_FAILED],
      });
    } else {
      // 1.34 and 1.35: Infeasible (past the absolute allocatable: under kubemark, its memory 0); the pod keeps its 1500m.
      const pending = await waitUntil('the 1.35 kubelet to mark the resize', async () =>
        (await get('web')).status.conditions?.find((c: any) => c.type === 'PodResizePending'),
      );
      expect(pending).toMatchObject({
        reason: 'Infeasible',
        message: expect.stringMatching(/^Node didn't have enough capacity: /),
      });
      expect(resizeStatus(await get('web'))).toMatchObject({ desired: '2500m', actual: ['1500m', undefined] });
    }
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
    expect(resizeStatus(await get('web'))).toMatchObject(
      KUBELET_ALLOCATES ? { desired: '2500m', allocated: both('2500m') } : { desired: '2500m', allocated: ['1500m', undefined] },
    );
    expect((await capDenials()) - before).toBe(1);
  });

  it.runIf(ALLOCATES_RESIZES)(
    'ratio lowered to 1: the commitment floor keeps the resized requests stored, and the restarted kubelet re-admits both pods',
    async () => {
      await webhook.useConfig(config(1));
      const node = await waitUntil('the floor at 3 CPUs (500m + the resized 2500m)', async () => {
        const view = await getNode(admin, kubelet!.name);
        return view.allocatable.cpu === '3' && view.annotations[FLOOR_ANNOTATION] ? view : undefined;
      });
      expect(JSON.parse(node.annotations[FLOOR_ANNOTATION]!)).toEqual({ cpu: '3' });
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
      expect((await getNode(admin, kubelet!.name)).allocatable.cpu).toBe('3');
      // The container started again at its allocated 2500m; the pod-level actual stays at 1500m (see the header).
      expect(resizeStatus(await get('web'))).toMatchObject({ desired: '2500m', allocated: ['2500m', '2500m'], actual: ['2500m', '1500m'] });
    },
    150_000,
  );

  it.runIf(ALLOCATES_RESIZES)(
    'on the node now over its cap (3 CPUs requested, cap 1 × 1): a resize down passes; the pod still counts the 1500m it runs with for kube-scheduler, the floor and the cap',
    async () => {
      const down = await resize('web', '500m');
      expect(down.status).toBe(200);
      expect(await allocated('500m')).toMatchObject({ desired: '500m', allocated: ['500m', '500m'], actual: ['2500m', '1500m'] });
      // The floor: 500m + the 1500m web runs with (not its 500m desired and allocated).
      const node = await waitUntil('the floor at 2 CPUs', async () => {
        const view = await getNode(admin, kubelet!.name);
        return view.allocatable.cpu !== '3' ? view : undefined;
      });
      expect(node.allocatable.cpu).toBe('2');
      expect(JSON.parse(node.annotations[FLOOR_ANNOTATION]!)).toEqual({ cpu: '2' });
      // kube-scheduler counts the same 2 CPUs on the node: 100m more does not fit its allocatable of 2.
      await admin.post(`/api/v1/namespaces/${NAMESPACE}/pods`, pod('more', '100m'));
      const unschedulable = await waitUntil(
        '`more` Unschedulable',
        async () => (await get('more')).status.conditions?.find((c: any) => c.type === 'PodScheduled' && c.reason === 'Unschedulable'),
        { timeoutMs: 30_000, describe: async () => (await get('more')).status },
      );
      expect(unschedulable.message).toContain('Insufficient cpu');
      // The cap: up to what web holds is no increase; past it is.
      expect((await resize('web', '1500m')).status).toBe(200);
      const up = await resize('web', '1501m');
      expect(up.status).toBe(403);
      expect(up.body.message).toContain(
        `pod ${NAMESPACE}/web would exceed the overcommit cap of node ${kubelet!.name}: cpu: 2001m requested (500m by 1 pod on the node + 1501m by this pod) > cap 1 (raw allocatable 1 × ratio 1)`,
      );
    },
    120_000,
  );
});

describe.runIf(!SERVES_RESIZE)('Kubernetes 1.32: no in-place resize (alpha, off), so nothing for the cap to check', () => {
  it('pods/resize is not served (404), and a resize as a spec update is refused by the API server itself: the pod keeps its requests', async () => {
    await waitUntil('the hollow node inflated to cpu 3', async () => (await getNode(admin, kubelet!.name)).allocatable.cpu === '3');
    await admin.post(`/api/v1/namespaces/${NAMESPACE}/pods`, pod('web', '1500m'));
    await waitUntil('web Running on the hollow node', async () => (await get('web')).status.phase === 'Running', { timeoutMs: 60_000 });
    const before = await capDenials();

    expect((await resize('web', '2500m')).status).toBe(404);
    // What 1.32 with the InPlacePodVerticalScaling gate on would send as the resize: an UPDATE of the pod.
    const update = await get('web');
    update.spec.containers[0].resources.requests.cpu = '2500m';
    const refused = await admin.put(`/api/v1/namespaces/${NAMESPACE}/pods/web`, update).then(
      () => undefined,
      (error: unknown) => error,
    );
    expect(refused).toBeInstanceOf(KubeApiError);
    expect((refused as KubeApiError).status).toBe(422);
    expect(JSON.stringify((refused as KubeApiError).body)).toContain('pod updates may not change fields other than');
    expect(resizeStatus(await get('web'))).toMatchObject({ desired: '1500m' });
    // The webhook was not asked: the pod-policy entry registers pods/resize UPDATE, never pods UPDATE.
    expect((await capDenials()) - before).toBe(0);
  });
});
