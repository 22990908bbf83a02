/**
 * Pod policies (docs/pod-policy.md) against a real control plane: the shipped
 * k8s/base (webhook entries, RBAC) applied with kubectl, the built product as its own process
 * with the ServiceAccount's token, the controller-manager making ReplicaSets and Pods,
 * kube-scheduler binding them (pods/binding goes through the webhook), kwok running them on
 * nodes registered by simulated kubelets (so the nodes webhook writes the raw/ratios
 * annotations the cap reads).
 *
 * The webhook learns namespaces from an informer: a namespace created a moment ago is not in
 * its cache yet, and its pods are then left alone (counted as cache_unsynced). Each test creates
 * its namespaces first and sends dry-run probe pods until one comes back mutated
 * (waitForWebhookToSeeNamespace) — dry runs go through the webhooks but are neither stored nor
 * counted in the product's metrics.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  apiserverMetrics,
  claimNodeNames,
  createNamespace,
  type E2eEnv,
  e2eEnv,
  getNode,
  type KubeClient,
  kubeMinor,
  listPods,
  type Metrics,
  sameQuantity,
  SimKubelet,
  tearDown,
  waitUntil,
  webhookFixture,
  WebhookProcess,
} from './harness/index.js';
import {
  deleteIfExists,
  deployment,
  eventsFor,
  INJECT_ANNOTATION,
  INJECTED_ANNOTATION,
  onKwokNode,
  ORIGINAL_RESOURCES_ANNOTATION,
  PAUSE_IMAGE,
  POD_POLICY_LABEL,
  postWithWarnings,
  SIDECARS_LABEL,
  startKwokNode,
  suffix,
  waitForDeploymentPods,
  waitForWebhookToSeeNamespace,
} from './harness/workloads.js';

const NODES = { defaultRatios: { cpu: 1.5, memory: 1 } };
const DEFAULT_REQUESTS = { cpu: '100m', memory: '128Mi' };
/**
 * Pod-level resources (spec.resources, KEP-2837) are on by default from 1.34 (beta); on 1.32 and
 * 1.33 the gate is alpha and off, and the API server drops spec.resources: tests (e) and (h) need
 * them (docs/compatibility.md lists the skip).
 */
const POD_LEVEL_RESOURCES = kubeMinor(e2eEnv()) >= 34;
const LIMIT_TO_REQUEST = { memoryRequestPercent: 50, cpuLimitPerGiBPercent: 200, cpuRequestPercent: 25 };
/** A template that only adds an env var: proof that /mutate saw a pod, without touching resources. */
const MARKER_TEMPLATE = { name: 'marker', env: [{ name: 'E2E_MARKER', value: 'injected' }] };
const POLICY_CONFIG = {
  nodes: NODES,
  pods: { defaultRequests: DEFAULT_REQUESTS, limitToRequest: LIMIT_TO_REQUEST },
  sidecars: { templates: [MARKER_TEMPLATE] },
};

/** docs/pod-policy.md's example: `app` asks for nothing, `checkout` has a memory limit. */
const APP_CONTAINERS = [
  { name: 'app', image: PAUSE_IMAGE },
  { name: 'checkout', image: PAUSE_IMAGE, resources: { limits: { memory: '1Gi' }, requests: { cpu: '250m', memory: '512Mi' } } },
];

let env: E2eEnv;
let admin: KubeClient;
let webhook: WebhookProcess;
/** A roomy kwok node for tests (a) and (b). */
let general: SimKubelet;
const namespaces: string[] = [];

async function newNamespace(prefix: string, labels: Record<string, string>): Promise<string> {
  const name = `${prefix}-${suffix()}`;
  await createNamespace(env, name, labels);
  namespaces.push(name);
  return name;
}

/** Waits until the webhook applies the pod policies in `namespace` (a probe gets the default requests). */
function waitForPolicyScope(namespace: string) {
  return waitForWebhookToSeeNamespace(admin, namespace, {}, (pod) =>
    sameQuantity('cpu', pod.spec.containers[0].resources?.requests?.cpu, DEFAULT_REQUESTS.cpu),
  );
}

function resources(pod: any, container: string): any {
  return pod.spec.containers.find((c: any) => c.name === container)?.resources ?? {};
}

/** A resource list compared by value ("2" = "2000m"): the keys, and each quantity. */
function expectQuantities(actual: Record<string, string> | undefined, expected: Record<string, string>, what: string): void {
  expect(Object.keys(actual ?? {}).sort(), what).toEqual(Object.keys(expected).sort());
  for (const [resource, quantity] of Object.entries(expected)) {
    expect(sameQuantity(resource, actual![resource], quantity), `${what}.${resource}: ${actual![resource]} vs ${quantity}`).toBe(true);
  }
}

function policyCounters(m: Metrics) {
  return {
    mutated: m.sum('kube_overcommit_pod_policy_pods_mutated_total'),
    cpuAdded: m.sum('kube_overcommit_pod_policy_requests_changed_total', { resource: 'cpu', change: 'added' }),
    memoryAdded: m.sum('kube_overcommit_pod_policy_requests_changed_total', { resource: 'memory', change: 'added' }),
    cpuRaised: m.sum('kube_overcommit_pod_policy_requests_changed_total', { resource: 'cpu', change: 'raised' }),
    requestsChanged: m.sum('kube_overcommit_pod_policy_requests_changed_total'),
    cpuLimitAdded: m.sum('kube_overcommit_pod_policy_limits_changed_total', { resource: 'cpu', change: 'added' }),
    limitsChanged: m.sum('kube_overcommit_pod_policy_limits_changed_total'),
    unsynced: m.sum('kube_overcommit_pod_policy_cache_unsynced_total'),
    capDenials: m.sum('kube_overcommit_pod_policy_cap_denials_total'),
    cpuCapDenials: m.sum('kube_overcommit_pod_policy_cap_denials_total', { resource: 'cpu' }),
    capWarnings: m.sum('kube_overcommit_pod_policy_cap_warnings_total'),
    cpuCapWarnings: m.sum('kube_overcommit_pod_policy_cap_warnings_total', { resource: 'cpu' }),
    capSkipped: m.sum('kube_overcommit_pod_policy_cap_skipped_total'),
    capSkippedPodUnknown: m.sum('kube_overcommit_pod_policy_cap_skipped_total', { reason: 'pod-unknown' }),
  };
}

function delta(before: Record<string, number>, after: Record<string, number>): Record<string, number> {
  return Object.fromEntries(Object.keys(after).map((k) => [k, after[k]! - before[k]!]));
}

beforeAll(async () => {
  ({ env, admin, webhook } = webhookFixture());
  await webhook.start();
  await webhook.useConfig(POLICY_CONFIG);
  const [name] = claimNodeNames(env, 'kwok-node', 1);
  general = await startKwokNode(env, admin, { name: name!, capacity: { cpu: '8', memory: '32Gi', pods: '110' } });
});

afterAll(() => tearDown({ env, admin, webhook, kubelets: [general], namespaces }));

describe('pod policies against a real control plane', () => {
  it('(a) a Deployment in an opted-in namespace: the pods its ReplicaSet creates get default requests and request-to-limit percentages, with the originals recorded', async () => {
    await webhook.useConfig(POLICY_CONFIG);
    const ns = await newNamespace('e2e-policy', { [POD_POLICY_LABEL]: 'enabled' });
    await waitForPolicyScope(ns);
    const before = policyCounters(await webhook.metrics());

    await admin.post(
      `/apis/apps/v1/namespaces/${ns}/deployments`,
      deployment('shop', 2, { spec: { ...onKwokNode(env, general.name), containers: APP_CONTAINERS } }),
    );
    const pods = await waitForDeploymentPods(admin, ns, 'shop', 2);

    for (const pod of pods) {
      const name = pod.metadata.name;
      expect(pod.spec.nodeName, name).toBe(general.name);
      // defaultRequests: a container with neither request nor limit.
      expectQuantities(resources(pod, 'app').requests, DEFAULT_REQUESTS, `${name} app requests`);
      expect(resources(pod, 'app').limits, `${name} app limits`).toBeUndefined();
      // limitToRequest: memory request 50 % of 1Gi; cpu limit 2 cores per GiB; cpu request 25 % of it.
      expectQuantities(resources(pod, 'checkout').requests, { cpu: '500m', memory: '512Mi' }, `${name} checkout requests`);
      expectQuantities(resources(pod, 'checkout').limits, { cpu: '2', memory: '1Gi' }, `${name} checkout limits`);
      // The originals, as the webhook received them, keyed by container.
      expect(JSON.parse(pod.metadata.annotations[ORIGINAL_RESOURCES_ANNOTATION]), `${name} ${ORIGINAL_RESOURCES_ANNOTATION}`).toEqual({
        app: {},
        checkout: { requests: { cpu: '250m', memory: '512Mi' }, limits: { memory: '1Gi' } },
      });
    }
    // Only pods are mutated: the ReplicaSet's template is as the Deployment wrote it.
    const [rs] = (await admin.get(`/apis/apps/v1/namespaces/${ns}/replicasets`, { labelSelector: 'app=shop' })).items;
    expect(rs.spec.template.spec.containers[0].resources ?? {}).toEqual({});
    expect(rs.spec.template.metadata.annotations?.[ORIGINAL_RESOURCES_ANNOTATION]).toBeUndefined();

    // Per pod: app's cpu and memory requests added, checkout's cpu request raised (250m → 500m)
    // and cpu limit added; checkout's memory request is 512Mi before and after.
    const counted = delta(before, policyCounters(await webhook.metrics()));
    expect(counted).toMatchObject({
      mutated: 2,
      cpuAdded: 2,
      memoryAdded: 2,
      cpuRaised: 2,
      requestsChanged: 6,
      cpuLimitAdded: 2,
      limitsChanged: 2,
      unsynced: 0,
    });
  });

  it('(b) namespaces that did not opt in: the same Deployment is untouched — not sent (plain namespace), and not run through the pod policies when the sidecars entry calls its path', async () => {
    await webhook.useConfig(POLICY_CONFIG);
    const plain = await newNamespace('e2e-plain', {});
    // Opted in for sidecars only: the sidecars entry calls /mutate/sidecars, which runs the sidecar
    // strategy alone; the pod policies never see this namespace's pods.
    const sidecarsOnly = await newNamespace('e2e-sidecars-only', { [SIDECARS_LABEL]: 'enabled' });
    const marker = { [INJECT_ANNOTATION]: MARKER_TEMPLATE.name };
    await waitForWebhookToSeeNamespace(
      admin,
      sidecarsOnly,
      { annotations: marker },
      (pod) => pod.metadata.annotations?.[INJECTED_ANNOTATION] === MARKER_TEMPLATE.name,
    );
    const beforeWebhook = policyCounters(await webhook.metrics());
    const policyEntry = env.webhook.entries.find((e) => e.startsWith('pod-policy.'))!;
    const calls = (m: Metrics) => m.sum('apiserver_admission_webhook_request_total', { name: policyEntry });
    const beforeCalls = calls(await apiserverMetrics(env));

    const spec = { ...onKwokNode(env, general.name), containers: APP_CONTAINERS };
    await admin.post(`/apis/apps/v1/namespaces/${plain}/deployments`, deployment('shop', 1, { spec }));
    await admin.post(`/apis/apps/v1/namespaces/${sidecarsOnly}/deployments`, deployment('shop', 1, { annotations: marker, spec }));
    const [plainPod] = await waitForDeploymentPods(admin, plain, 'shop', 1);
    const [sidecarPod] = await waitForDeploymentPods(admin, sidecarsOnly, 'shop', 1);

    for (const pod of [plainPod, sidecarPod]) {
      const name = `${pod.metadata.namespace}/${pod.metadata.name}`;
      expect(resources(pod, 'app'), `${name} app`).toEqual({});
      expectQuantities(resources(pod, 'checkout').requests, { cpu: '250m', memory: '512Mi' }, `${name} checkout requests`);
      expectQuantities(resources(pod, 'checkout').limits, { memory: '1Gi' }, `${name} checkout limits`);
      expect(pod.metadata.annotations?.[ORIGINAL_RESOURCES_ANNOTATION], name).toBeUndefined();
    }
    // The webhook did handle the sidecars-only pod (the marker template was injected into both containers).
    expect(sidecarPod.metadata.annotations[INJECTED_ANNOTATION]).toBe(MARKER_TEMPLATE.name);
    for (const c of sidecarPod.spec.containers) expect(c.env, c.name).toContainEqual(MARKER_TEMPLATE.env[0]);
    expect(plainPod.metadata.annotations?.[INJECTED_ANNOTATION]).toBeUndefined();

    // Nothing mutated, and not because a namespace was unknown to the cache: the selector decided.
    expect(delta(beforeWebhook, policyCounters(await webhook.metrics()))).toMatchObject({ mutated: 0, requestsChanged: 0, limitsChanged: 0, unsynced: 0 });
    // The shipped entry's namespaceSelector kept the API server from calling the pod-policy entry
    // at all (pods CREATE and pods/binding, in both namespaces).
    expect(calls(await apiserverMetrics(env)) - beforeCalls).toBe(0);
  });

  it.runIf(POD_LEVEL_RESOURCES)(
    '(e) pods with pod-level resources stay creatable: a resource set at pod level is left alone in the containers, the other one still gets the policy',
    async () => {
      // A default large enough that two containers' defaults (1 CPU) exceed the pod-level request (600m).
      const defaults = { cpu: '500m', memory: '128Mi' };
      await webhook.useConfig({ nodes: NODES, pods: { defaultRequests: defaults, limitToRequest: LIMIT_TO_REQUEST } });
      const ns = await newNamespace('e2e-pod-level', { [POD_POLICY_LABEL]: 'enabled' });
      await waitForWebhookToSeeNamespace(admin, ns, {}, (pod) => sameQuantity('cpu', pod.spec.containers[0].resources?.requests?.cpu, defaults.cpu));
      const before = policyCounters(await webhook.metrics());
      const podLevel = (name: string, resources: object, containers: object[]) => ({
        apiVersion: 'v1',
        kind: 'Pod',
        metadata: { name },
        spec: { ...onKwokNode(env, general.name), resources, containers },
      });

      // The pod of docs/pod-policy.md: cpu and memory at pod level, two containers asking for nothing.
      const whole = { requests: { cpu: '600m', memory: '1Gi' }, limits: { cpu: '2', memory: '2Gi' } };
      const created = await admin.post(
        `/api/v1/namespaces/${ns}/pods`,
        podLevel('whole', whole, [
          { name: 'app', image: PAUSE_IMAGE },
          { name: 'worker', image: PAUSE_IMAGE },
        ]),
      );
      for (const c of created.spec.containers) expect(c.resources ?? {}, c.name).toEqual({});
      expectQuantities(created.spec.resources.requests, whole.requests, 'whole pod-level requests');
      expectQuantities(created.spec.resources.limits, whole.limits, 'whole pod-level limits');
      expect(created.metadata.annotations?.[ORIGINAL_RESOURCES_ANNOTATION]).toBeUndefined();
      // kube-scheduler places it by its pod-level requests, kwok runs it.
      await waitUntil('`whole` bound and Running', async () => {
        const p = await admin.get(`/api/v1/namespaces/${ns}/pods/whole`);
        return p.spec.nodeName === general.name && p.status.phase === 'Running';
      });

      // Only cpu at pod level: memory gets the default and the percentage, cpu nothing (no cpu limit from memory).
      const cpuOnly = await admin.post(
        `/api/v1/namespaces/${ns}/pods`,
        podLevel('cpu-only', { requests: { cpu: '1' } }, [
          { name: 'app', image: PAUSE_IMAGE },
          { name: 'checkout', image: PAUSE_IMAGE, resources: { limits: { memory: '1Gi' } } },
        ]),
      );
      expectQuantities(resources(cpuOnly, 'app').requests, { memory: '128Mi' }, 'cpu-only app requests');
      expect(resources(cpuOnly, 'app').limits).toBeUndefined();
      expectQuantities(resources(cpuOnly, 'checkout').requests, { memory: '512Mi' }, 'cpu-only checkout requests');
      expectQuantities(resources(cpuOnly, 'checkout').limits, { memory: '1Gi' }, 'cpu-only checkout limits');
      // From 1.37 the API server also fills the pod-level requests of a pod with pod-level requests alone, after the
      // webhooks (PodLevelResourcesFixDefaulting): memory, the containers' sum as the policy left them (128Mi + 512Mi).
      const defaultedAfterWebhooks = kubeMinor(env) >= 37;
      expectQuantities(cpuOnly.spec.resources.requests, defaultedAfterWebhooks ? { cpu: '1', memory: '640Mi' } : { cpu: '1' }, 'cpu-only pod-level requests');

      // One pod mutated (cpu-only: two memory requests, one added and one lowered); no cpu touched.
      expect(delta(before, policyCounters(await webhook.metrics()))).toMatchObject({
        mutated: 1,
        cpuAdded: 0,
        memoryAdded: 1,
        requestsChanged: 2,
        limitsChanged: 0,
        unsynced: 0,
      });
    },
  );

  it('(f) a cpu limit derived from memory, without a cpu request percentage: the API server gives it a request equal to it, and the second /mutate call (the other entry) keeps the recorded originals', async () => {
    await webhook.useConfig({ nodes: NODES, pods: { limitToRequest: { cpuLimitPerGiBPercent: 200 } }, sidecars: { templates: [MARKER_TEMPLATE] } });
    // Opted in to both: the API server calls /mutate for each entry, the second time on the pod
    // as the first call's patch and its own defaulting left it.
    const ns = await newNamespace('e2e-derived-limit', { [POD_POLICY_LABEL]: 'enabled', [SIDECARS_LABEL]: 'enabled' });
    const marker = { [INJECT_ANNOTATION]: MARKER_TEMPLATE.name };
    await waitForWebhookToSeeNamespace(admin, ns, { annotations: marker }, (pod) => pod.metadata.annotations?.[INJECTED_ANNOTATION] === MARKER_TEMPLATE.name);

    const created = await admin.post(`/api/v1/namespaces/${ns}/pods`, {
      apiVersion: 'v1',
      kind: 'Pod',
      metadata: { name: 'derived', annotations: marker },
      spec: { ...onKwokNode(env, general.name), containers: [{ name: 'app', image: PAUSE_IMAGE, resources: { limits: { memory: '1Gi' } } }] },
    });
    // 200 % per GiB of a 1Gi memory limit: a 2-CPU limit, whose request the API server defaults to it.
    expectQuantities(resources(created, 'app').limits, { memory: '1Gi', cpu: '2' }, 'app limits');
    expectQuantities(resources(created, 'app').requests, { memory: '1Gi', cpu: '2' }, 'app requests');
    expect(JSON.parse(created.metadata.annotations?.[ORIGINAL_RESOURCES_ANNOTATION] ?? 'null')).toEqual({
      app: { requests: { memory: '1Gi' }, limits: { memory: '1Gi' } },
    });
    expect(created.metadata.annotations[INJECTED_ANNOTATION]).toBe(MARKER_TEMPLATE.name);
  });

  const cleanups: Array<() => Promise<void>> = [];
  async function runCleanups() {
    for (const cleanup of cleanups.splice(0)) await cleanup();
  }

  /**
   * (c) and (d). Why kube-scheduler ever binds past the cap: on its own it never does. The cap
   * is raw allocatable × ratio from the node's annotations, which is exactly the allocatable the
   * scheduler reads from the Node (and, by node-oversell's rule 3, never less than it: when the
   * stored value is raw — the webhook was down — the cap is raw × ratio, above it). So the cap
   * can only refuse a binding when the node holds pods the scheduler had not counted when it
   * decided: pods placed by something other than the scheduler (spec.nodeName: users, other
   * schedulers, operators) while the scheduler's pod is between its decision and its binding.
   *
   * That window is made deterministic here with a volume: pod `late` mounts a PVC of a
   * WaitForFirstConsumer StorageClass whose provisioner is this test. kube-scheduler picks the
   * node (2 one-CPU pods on it; raw 2 CPUs × ratio 1.5 = 3), assumes `late` there, writes the
   * PVC's selected-node annotation and waits in PreBind for the volume. Meanwhile pod `direct` is
   * created with spec.nodeName = that node: its CREATE passes the cap (2 + 1 ≤ 3). Then the test
   * "provisions" a PV for the claim, the PV controller binds it, and the scheduler sends the
   * binding of `late`: 4 CPUs requested > cap 3.
   */
  async function capScenario(mode: 'deny' | 'warn') {
    await webhook.useConfig({ nodes: NODES, pods: { defaultRequests: DEFAULT_REQUESTS, cap: { mode } } });
    const [nodeName] = claimNodeNames(env, 'kwok-node', 1);
    const kubelet = await startKwokNode(env, admin, { name: nodeName!, capacity: { cpu: '2', memory: '8Gi', pods: '110' } });
    const id = suffix();
    const storageClass = `e2e-wffc-${id}`;
    const pvName = `e2e-pv-${id}`;
    try {
      // The scheduler sees raw × ratio; the annotations the cap reads are there.
      const node = await waitUntil(`${nodeName} inflated to 3 CPUs`, async () => {
        const n = await getNode(admin, nodeName!);
        return sameQuantity('cpu', n.allocatable.cpu, '3') && n.recordedRatios?.cpu === 1.5 ? n : undefined;
      });
      expect(sameQuantity('cpu', node.recordedRaw!.allocatable.cpu, '2')).toBe(true);

      const ns = await newNamespace(`e2e-cap-${mode}`, { [POD_POLICY_LABEL]: 'enabled' });
      await waitForPolicyScope(ns);
      await admin.post('/apis/storage.k8s.io/v1/storageclasses', {
        apiVersion: 'storage.k8s.io/v1',
        kind: 'StorageClass',
        metadata: { name: storageClass },
        provisioner: 'e2e.kube-overcommit.io/manual',
        volumeBindingMode: 'WaitForFirstConsumer',
        reclaimPolicy: 'Retain',
      });
      const oneCpu = (name: string, extra: any = {}) => ({
        apiVersion: 'v1',
        kind: 'Pod',
        metadata: { name, labels: { e2e: 'cap' } },
        spec: {
          ...onKwokNode(env, nodeName!),
          ...extra,
          containers: [
            {
              name: 'pause',
              image: PAUSE_IMAGE,
              resources: { requests: { cpu: '1', memory: '64Mi' } },
              ...(extra.volumes ? { volumeMounts: [{ name: 'data', mountPath: '/data' }] } : {}),
            },
          ],
        },
      });
      const pod = (name: string) => admin.get(`/api/v1/namespaces/${ns}/pods/${name}`);

      // Two pods placed by kube-scheduler (their bindings pass the cap: 1 ≤ 3, 2 ≤ 3).
      for (const name of ['fill-0', 'fill-1']) await admin.post(`/api/v1/namespaces/${ns}/pods`, oneCpu(name));
      await waitUntil('fill-0 and fill-1 bound and Running', async () => {
        const pods = await Promise.all(['fill-0', 'fill-1'].map(pod));
        return pods.every((p) => p.spec.nodeName === nodeName && p.status.phase === 'Running');
      });
      // Counted from here: kube-scheduler may bind a pod created a moment ago before the webhook's
      // pod informer has it; that binding is admitted unchecked and counted as
      // cap_skipped{reason="pod-unknown"} (documented fail-open). `late` waits seconds in PreBind,
      // so its binding is checked.
      const before = policyCounters(await webhook.metrics());

      // `late` waits in PreBind for its volume: kube-scheduler has chosen the node (2 + 1 ≤ 3).
      const pvc = await admin.post(`/api/v1/namespaces/${ns}/persistentvolumeclaims`, {
        apiVersion: 'v1',
        kind: 'PersistentVolumeClaim',
        metadata: { name: 'data' },
        spec: { storageClassName: storageClass, accessModes: ['ReadWriteOnce'], resources: { requests: { storage: '1Gi' } } },
      });
      const claimVolume = { volumes: [{ name: 'data', persistentVolumeClaim: { claimName: 'data' } }] };
      // kube-scheduler reads the claim from its own informer, not in step with its pod informer:
      // a pod it sees first fails with `persistentvolumeclaim "data" not found`. For `late` that
      // could hide the denial: client-go's events recorder merges FailedScheduling Events about
      // the same object (the pod at one resourceVersion) into one series that keeps the first
      // note, and a retry that comes before the scheduler has seen its own status update of the
      // pod is about the same object. A probe pod that mounts the claim and fits no node shows
      // when the scheduler has the claim: its failure then names the node selector instead.
      const probeSelector = { ...onKwokNode(env, nodeName!).nodeSelector, 'e2e.kube-overcommit.io/no-such-node': 'true' };
      await admin.post(`/api/v1/namespaces/${ns}/pods`, oneCpu('claim-probe', { ...claimVolume, nodeSelector: probeSelector }));
      await waitUntil(
        'kube-scheduler to see the claim (`claim-probe` unschedulable for its node selector)',
        async () => {
          const condition = (await pod('claim-probe')).status.conditions?.find((c: any) => c.type === 'PodScheduled');
          return condition?.reason === 'Unschedulable' && !String(condition.message).includes('persistentvolumeclaim');
        },
        { describe: async () => (await pod('claim-probe')).status },
      );
      await admin.delete(`/api/v1/namespaces/${ns}/pods/claim-probe`, { gracePeriodSeconds: 0 });
      await admin.post(`/api/v1/namespaces/${ns}/pods`, oneCpu('late', claimVolume));
      await waitUntil('kube-scheduler to choose a node for `late` (PVC annotation volume.kubernetes.io/selected-node)', async () => {
        const claim = await admin.get(`/api/v1/namespaces/${ns}/persistentvolumeclaims/data`);
        return claim.metadata.annotations?.['volume.kubernetes.io/selected-node'] === nodeName;
      });
      expect((await pod('late')).spec.nodeName).toBeUndefined();

      // Meanwhile a pod lands on the node by spec.nodeName: within the cap when created (2 + 1 ≤ 3).
      const direct = await admin.post(`/api/v1/namespaces/${ns}/pods`, oneCpu('direct', { nodeName }));
      expect(direct.spec.nodeName).toBe(nodeName);
      // One more would not be (3 + 1 > 3): deny refuses the CREATE; warn admits it with a warning
      // (dry run here, so the node keeps 3 pods). This also shows the webhook's pod cache
      // counts `direct` before `late`'s binding is released.
      const capText = `cpu: 4 requested (3 by 3 pods on the node + 1 by this pod) > cap 3 (raw allocatable 2 × ratio 1.5)`;
      // Dry runs (not stored, not counted) until the webhook's pod cache has `direct`.
      const probe = await waitUntil('the webhook to count `direct` on the node (dry-run CREATE of one more)', async () => {
        const answer = await postWithWarnings(env, `/api/v1/namespaces/${ns}/pods`, oneCpu('over', { nodeName }), { dryRun: 'All' });
        return (mode === 'deny' ? answer.status === 403 : answer.warnings.length > 0) ? answer : undefined;
      });
      if (mode === 'deny') {
        const over = await postWithWarnings(env, `/api/v1/namespaces/${ns}/pods`, oneCpu('over', { nodeName }));
        expect(over.status).toBe(403);
        expect(over.body.message).toContain(`admission webhook "pod-policy.kube-overcommit.io" denied the request`);
        expect(over.body.message).toContain(`kube-overcommit: pod ${ns}/over would exceed the overcommit cap of node ${nodeName}: ${capText}`);
      } else {
        expect(probe.status).toBe(201);
        expect(probe.warnings).toEqual([`node ${nodeName} over its overcommit cap for cpu: 4 requested > cap 3`]);
      }

      // The "provisioner" creates the volume; the PV controller binds the claim; the scheduler's
      // PreBind completes and it sends the binding of `late`.
      await admin.post('/api/v1/persistentvolumes', {
        apiVersion: 'v1',
        kind: 'PersistentVolume',
        metadata: { name: pvName, annotations: { 'pv.kubernetes.io/provisioned-by': 'e2e.kube-overcommit.io/manual' } },
        spec: {
          storageClassName: storageClass,
          capacity: { storage: '1Gi' },
          accessModes: ['ReadWriteOnce'],
          persistentVolumeReclaimPolicy: 'Retain',
          claimRef: { apiVersion: 'v1', kind: 'PersistentVolumeClaim', namespace: ns, name: 'data', uid: pvc.metadata.uid },
          hostPath: { path: `/tmp/${pvName}` },
        },
      });
      return { ns, nodeName: nodeName!, before, capText, pod };
    } finally {
      cleanups.push(async () => {
        await kubelet.stop({ deleteNode: true }).catch(() => undefined);
        await deleteIfExists(admin, `/api/v1/persistentvolumes/${pvName}`).catch(() => undefined);
        await deleteIfExists(admin, `/apis/storage.k8s.io/v1/storageclasses/${storageClass}`).catch(() => undefined);
        kubelet.assertHealthy();
      });
    }
  }
  it("(c) cap in deny mode: kube-scheduler's binding past raw allocatable × ratio is refused; the pod stays Pending", async () => {
    try {
      const { ns, nodeName, before, capText, pod } = await capScenario('deny');
      const denial = await waitUntil(
        'a FailedScheduling event for `late` carrying the cap denial',
        async () => (await eventsFor(admin, ns, 'late', 'FailedScheduling')).find((e) => String(e.message ?? e.note).includes('overcommit cap')),
        { timeoutMs: 30_000, describe: async () => ({ pod: (await pod('late')).status, events: await eventsFor(admin, ns, 'late') }) },
      );
      expect(String(denial.message)).toContain(`admission webhook "pod-policy.kube-overcommit.io" denied the request`);
      expect(String(denial.message)).toContain(`kube-overcommit: pod ${ns}/late would exceed the overcommit cap of node ${nodeName}: ${capText}`);
      // kube-scheduler logs the refused binding with the webhook's answer.
      const refused = `admission webhook \\"pod-policy.kube-overcommit.io\\" denied the request: kube-overcommit: pod ${ns}/late would exceed the overcommit cap`;
      expect(readFileSync(join(env.logDir, 'kube-scheduler.log'), 'utf8')).toContain(refused);
      // The volume was bound (so the scheduler did get to its binding), and the pod stays Pending:
      // the scheduler retries, and now counts `direct`: no room.
      expect((await admin.get(`/api/v1/namespaces/${ns}/persistentvolumeclaims/data`)).status.phase).toBe('Bound');
      const late = await waitUntil(
        '`late` Unschedulable',
        async () => {
          const p = await pod('late');
          return p.status.conditions?.some((c: any) => c.type === 'PodScheduled' && c.status === 'False' && c.reason === 'Unschedulable') ? p : undefined;
        },
        { timeoutMs: 30_000, describe: async () => (await pod('late')).status },
      );
      expect(late.spec.nodeName).toBeUndefined();
      expect(late.status.phase).toBe('Pending');
      const onNode = (await listPods(admin, ns))
        .filter((p) => p.spec.nodeName === nodeName)
        .map((p) => p.metadata.name)
        .sort();
      expect(onNode).toEqual(['direct', 'fill-0', 'fill-1']);
      // One denial for the CREATE of `over`, one for the binding of `late`; cpu only; nothing skipped.
      expect(delta(before, policyCounters(await webhook.metrics()))).toMatchObject({
        capDenials: 2,
        cpuCapDenials: 2,
        capWarnings: 0,
        capSkipped: 0,
        unsynced: 0,
      });
    } finally {
      await runCleanups();
    }
  });

  it('(d) cap in warn mode: the same binding is admitted — the pod is bound and Running — and the warning is counted and returned to kube-scheduler', async () => {
    try {
      const { ns, nodeName, before, pod } = await capScenario('warn');
      const late = await waitUntil(
        '`late` bound and Running',
        async () => {
          const p = await pod('late');
          return p.spec.nodeName === nodeName && p.status.phase === 'Running' ? p : undefined;
        },
        { timeoutMs: 30_000, describe: async () => ({ pod: (await pod('late')).status, events: await eventsFor(admin, ns, 'late') }) },
      );
      expect(late.spec.nodeName).toBe(nodeName);
      const onNode = (await listPods(admin, ns))
        .filter((p) => p.spec.nodeName === nodeName)
        .map((p) => p.metadata.name)
        .sort();
      expect(onNode).toEqual(['direct', 'fill-0', 'fill-1', 'late']);
      // One warning (the binding of `late`; the dry-run CREATE of `over` is not counted).
      expect(delta(before, policyCounters(await webhook.metrics()))).toMatchObject({
        capWarnings: 1,
        cpuCapWarnings: 1,
        capDenials: 0,
        capSkipped: 0,
        unsynced: 0,
      });
      // The API server handed the warning to kube-scheduler, whose client logs it.
      const warning = `node ${nodeName} over its overcommit cap for cpu: 4 requested > cap 3`;
      await waitUntil("the warning in kube-scheduler's log", () => readFileSync(join(env.logDir, 'kube-scheduler.log'), 'utf8').includes(warning), {
        timeoutMs: 5_000,
      });
      expect((await eventsFor(admin, ns, 'late', 'FailedScheduling')).filter((e) => String(e.message).includes('overcommit cap'))).toEqual([]);
    } finally {
      await runCleanups();
    }
  });

  /**
   * (g) Exclusive CPUs: unlike the overcommit cap, kube-scheduler runs into this one on its own —
   * it sees the inflated allocatable and knows nothing of the static CPU manager policy. Two
   * 4-CPU nodes of a pool with `exclusiveCpus` at cpu ratio 2 (8 each for the scheduler):
   * `pinned` (Guaranteed, 4 whole CPUs) on A, `shared` (Burstable, 5 CPUs) on B, so A has more
   * room and every scheduler scores it first for a Guaranteed 2-CPU pod. Its binding takes A's
   * exclusive CPUs to 6 > raw 4 and is denied (6 ≤ 8, so the overcommit cap alone would admit
   * it). kube-scheduler learns nothing from a denied binding: it retries after its backoff and
   * picks A again (docs/pod-policy.md: "a node it keeps preferring keeps being refused"; its tie
   * between equal nodes is not random either, so a test relying on a coin flip failed on 1.35).
   * Once B has more room (`shared` deleted), the retry lands there.
   */
  it('(g) exclusive CPUs: a binding past raw cpu on a node of an exclusiveCpus pool is denied, and kube-scheduler retries it on another node', async () => {
    const [a, b] = claimNodeNames(env, 'kwok-node', 2) as [string, string];
    const pool = {
      name: 'pinned',
      nodeSelector: { matchExpressions: [{ key: 'kubernetes.io/hostname', operator: 'In', values: [a, b] }] },
      ratios: { cpu: 2 },
    };
    await webhook.useConfig({
      nodes: { ...NODES, pools: [{ ...pool, exclusiveCpus: true }] },
      pods: { defaultRequests: DEFAULT_REQUESTS, cap: { mode: 'deny' } },
    });
    const kubelets = await Promise.all([a, b].map((name) => startKwokNode(env, admin, { name, capacity: { cpu: '4', memory: '16Gi', pods: '110' } })));
    try {
      for (const name of [a, b])
        await waitUntil(`${name} inflated to 8 CPUs`, async () => sameQuantity('cpu', (await getNode(admin, name)).allocatable.cpu, '8'));
      const ns = await newNamespace('e2e-exclusive', { [POD_POLICY_LABEL]: 'enabled' });
      await waitForPolicyScope(ns);
      const pod = (name: string) => admin.get(`/api/v1/namespaces/${ns}/pods/${name}`);
      const manifest = (name: string, resources: any, nodes: string[]) => ({
        apiVersion: 'v1',
        kind: 'Pod',
        metadata: { name },
        spec: {
          ...onKwokNode(env, a),
          nodeSelector: undefined,
          affinity: {
            nodeAffinity: {
              requiredDuringSchedulingIgnoredDuringExecution: {
                nodeSelectorTerms: [{ matchExpressions: [{ key: 'kubernetes.io/hostname', operator: 'In', values: nodes }] }],
              },
            },
          },
          containers: [{ name: 'pause', image: PAUSE_IMAGE, resources }],
        },
      });
      const guaranteed = (cpu: string) => ({ requests: { cpu, memory: '1Gi' }, limits: { cpu, memory: '1Gi' } });
      const boundTo = (name: string, node: string) =>
        waitUntil(`${name} bound to ${node} and Running`, async () => {
          const p = await pod(name);
          return p.spec.nodeName === node && p.status.phase === 'Running' ? p : undefined;
        });
      await admin.post(`/api/v1/namespaces/${ns}/pods`, manifest('pinned', guaranteed('4'), [a]));
      await admin.post(
        `/api/v1/namespaces/${ns}/pods`,
        manifest('shared', { requests: { cpu: '5', memory: '1Gi' }, limits: { cpu: '8', memory: '1Gi' } }, [b]),
      );
      await boundTo('pinned', a);
      await boundTo('shared', b);
      // /plan shows the exclusive CPUs against raw cpu on both nodes of the pool.
      await waitUntil('/plan to show 4 exclusive CPUs of 4 on A, 0 on B', async () => {
        const plan = JSON.parse((await webhook.get('/plan')).body);
        const row = (node: string) => plan.nodes?.find((r: any) => r.node === node)?.exclusiveCpus;
        return (
          JSON.stringify([row(a), row(b)]) ===
          JSON.stringify([
            { requested: '4', raw: '4' },
            { requested: '0', raw: '4' },
          ])
        );
      });

      const exclusiveDenials = async () => (await webhook.metrics()).sum('kube_overcommit_pod_policy_cap_denials_total', { resource: 'exclusive-cpu' });
      const before = await exclusiveDenials();
      // The scheduler's first choice and its retry after the backoff: both on A, both denied. A
      // binding that comes before the webhook's pod informer has the pod is admitted unchecked
      // (cap_skipped{reason="pod-unknown"}: docs/pod-policy.md); such a pod is replaced.
      let name = '';
      let denied = 0;
      for (let attempt = 0; attempt < 5 && denied < 2; attempt++) {
        if (name) await admin.delete(`/api/v1/namespaces/${ns}/pods/${name}`, { gracePeriodSeconds: 0 });
        name = `two-${attempt}`;
        await admin.post(`/api/v1/namespaces/${ns}/pods`, manifest(name, guaranteed('2'), [a, b]));
        const outcome = await waitUntil(
          `two denied bindings of ${name}, or ${name} bound unchecked`,
          async () => {
            const count = (await exclusiveDenials()) - before;
            if (count >= 2) return { denied: count };
            return (await pod(name)).spec.nodeName ? { denied: 0 } : undefined;
          },
          { timeoutMs: 60_000, describe: async () => ({ pod: (await pod(name)).status, events: await eventsFor(admin, ns, name) }) },
        );
        denied = outcome.denied;
      }
      expect(denied).toBeGreaterThanOrEqual(2);
      expect((await pod(name)).spec.nodeName ?? '').toBe('');
      // kube-scheduler reported the denied binding on the pod.
      const failure = await waitUntil('a FailedScheduling event carrying the exclusive-CPU denial', async () =>
        (await eventsFor(admin, ns, name, 'FailedScheduling')).find((e) => String(e.message ?? e.note).includes('exclusive cpu')),
      );
      expect(String(failure.message ?? failure.note)).toContain(
        `kube-overcommit: pod ${ns}/${name} would exceed the overcommit cap of node ${a}: exclusive cpu: 6 requested (4 by pods on the node + 2 by this pod) > raw cpu allocatable 4`,
      );
      // B now has the most room: the next retry binds the pod there.
      await admin.delete(`/api/v1/namespaces/${ns}/pods/shared`, { gracePeriodSeconds: 0 });
      await waitUntil(
        `${name} bound and Running`,
        async () => {
          const p = await pod(name);
          return p.spec.nodeName && p.status.phase === 'Running' ? p : undefined;
        },
        { timeoutMs: 90_000, describe: async () => ({ pod: (await pod(name)).status, events: await eventsFor(admin, ns, name) }) },
      );
      expect((await pod(name)).spec.nodeName).toBe(b);
      expect((await pod('pinned')).spec.nodeName).toBe(a);
    } finally {
      for (const kubelet of kubelets) await kubelet.stop({ deleteNode: true }).catch(() => undefined);
    }
  });
  /**
   * (h) Pod-level resources (spec.resources), as the 1.37 kube-scheduler places them and the cap
   * counts them. One kwok node, raw 2 CPUs × 1.5 = 3. `limits-only` sets only a pod-level cpu
   * limit of 2 and containers asking no cpu: the API server gives it a pod-level request of 2
   * after the webhooks (PodLevelResourcesFixDefaulting), so the webhook sees no request at
   * CREATE and must default it as the API server will. `pod-level` asks 1 CPU at pod level over
   * containers asking 200m. Dry-run CREATEs with spec.nodeName show what the cap computes; the
   * scheduler's own decisions (bound, or Unschedulable with Insufficient cpu) agree at both edges.
   */
  it.runIf(POD_LEVEL_RESOURCES)(
    '(h) pod-level resources: kube-scheduler places pods by their pod-level requests (a limit alone defaulted to the request) exactly as the cap counts them',
    async () => {
      await webhook.useConfig({ nodes: NODES, pods: { defaultRequests: DEFAULT_REQUESTS, cap: { mode: 'deny' } } });
      const [nodeName] = claimNodeNames(env, 'kwok-node', 1);
      const kubelet = await startKwokNode(env, admin, { name: nodeName!, capacity: { cpu: '2', memory: '8Gi', pods: '110' } });
      try {
        await waitUntil(`${nodeName} inflated to 3 CPUs`, async () => sameQuantity('cpu', (await getNode(admin, nodeName!)).allocatable.cpu, '3'));
        const ns = await newNamespace('e2e-pod-level-cap', { [POD_POLICY_LABEL]: 'enabled' });
        await waitForPolicyScope(ns);
        const pod = (name: string) => admin.get(`/api/v1/namespaces/${ns}/pods/${name}`);
        const manifest = (name: string, resources: object, containerCpu?: string, nodeName?: string) => ({
          apiVersion: 'v1',
          kind: 'Pod',
          metadata: { name },
          spec: {
            ...onKwokNode(env, kubelet.name),
            ...(nodeName ? { nodeName } : {}),
            resources,
            containers: ['a', 'b'].map((c) => ({
              name: c,
              image: PAUSE_IMAGE,
              resources: { requests: { memory: '64Mi', ...(containerCpu ? { cpu: containerCpu } : {}) } },
            })),
          },
        });
        const created = (name: string, resources: object, containerCpu?: string) =>
          postWithWarnings(env, `/api/v1/namespaces/${ns}/pods`, manifest(name, resources, containerCpu, nodeName), { dryRun: 'All' });
        const boundAndRunning = (name: string) =>
          waitUntil(`${name} bound and Running`, async () => {
            const p = await pod(name);
            return p.spec.nodeName === nodeName && p.status.phase === 'Running' ? p : undefined;
          });
        const capText = (total: string, onNode: string, pods: string, own: string) =>
          `kube-overcommit: pod ${ns}/probe would exceed the overcommit cap of node ${nodeName}: cpu: ${total} requested (${onNode} by ${pods} on the node + ${own} by this pod) > cap 3 (raw allocatable 2 × ratio 1.5)`;
        const before = policyCounters(await webhook.metrics());

        // A pod-level limit alone: 2 CPUs requested, stored as the pod-level request, placed by it.
        await admin.post(`/api/v1/namespaces/${ns}/pods`, manifest('limits-only', { limits: { cpu: '2', memory: '1Gi' } }));
        const limitsOnly = await boundAndRunning('limits-only');
        // Defaulted by the API server: cpu from the pod-level limit (no container sets it), memory from the containers' 2 × 64Mi.
        expectQuantities(limitsOnly.spec.resources.requests, { cpu: '2', memory: '128Mi' }, 'limits-only pod-level requests (defaulted)');
        // The same pod with a pod-level limit of 1001m on the node: 2 + 1001m > 3, refused at CREATE though it sends no request.
        const over = await waitUntil('the webhook to count limits-only (dry-run CREATE of one more)', async () => {
          const answer = await created('probe', { limits: { cpu: '1001m' } });
          return answer.status === 403 ? answer : undefined;
        });
        expect(over.body.message).toContain(capText('3001m', '2', '1 pod', '1001m'));
        // 1 CPU at pod level over 200m of containers: 2 + 1 = 3, admitted; kube-scheduler binds it too.
        expect((await created('probe', { requests: { cpu: '1' } }, '100m')).status).toBe(201);
        await admin.post(`/api/v1/namespaces/${ns}/pods`, manifest('pod-level', { requests: { cpu: '1' } }, '100m'));
        await boundAndRunning('pod-level');
        // The node is full for both: 100m more at pod level (a limit alone, no container cpu) is past the cap...
        const full = await waitUntil('the webhook to count pod-level (dry-run CREATE of 100m more)', async () => {
          const answer = await created('probe', { limits: { cpu: '100m' } });
          return answer.status === 403 ? answer : undefined;
        });
        expect(full.body.message).toContain(capText('3100m', '3', '2 pods', '100m'));
        // ...and kube-scheduler finds no room for it (it counts pod-level at 1, not its containers' 200m).
        await admin.post(`/api/v1/namespaces/${ns}/pods`, manifest('no-room', { limits: { cpu: '100m' } }));
        const unschedulable = await waitUntil(
          '`no-room` Unschedulable',
          async () => (await pod('no-room')).status.conditions?.find((c: any) => c.type === 'PodScheduled' && c.reason === 'Unschedulable'),
          { timeoutMs: 30_000, describe: async () => (await pod('no-room')).status },
        );
        expect(unschedulable.message).toContain('Insufficient cpu');
        expect((await pod('no-room')).spec.nodeName).toBeUndefined();
        // Both bindings passed the cap; nothing was refused but the dry runs (not counted).
        expect(delta(before, policyCounters(await webhook.metrics()))).toMatchObject({ capDenials: 0, unsynced: 0 });
      } finally {
        await kubelet.stop({ deleteNode: true }).catch(() => undefined);
        kubelet.assertHealthy();
      }
    },
  );
});
