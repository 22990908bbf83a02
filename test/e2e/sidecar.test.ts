/**
 * Sidecar injection (docs/sidecars.md) against a real control plane: the shipped
 * k8s/base (its sidecars entry with the matchCondition on the inject annotation), the built
 * product with the ServiceAccount's token, Deployments whose pods the ReplicaSet controller
 * creates, kube-scheduler placing them on a kwok node (registered by a simulated kubelet) where
 * kwok runs them.
 *
 * A namespace created a moment ago may not be in the webhook's namespace cache yet (its pods then
 * get no sidecars, with a warning): each test creates its namespace first and sends dry-run
 * probe pods until one comes back injected (waitForWebhookToSeeNamespace; dry runs are neither
 * stored nor counted in the product's metrics).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  apiserverMetrics,
  claimNodeNames,
  createNamespace,
  tearDown,
  SimKubelet,
  waitUntil,
  WebhookProcess,
  type E2eEnv,
  type KubeClient,
  type Metrics,
  webhookFixture,
} from './harness/index.js';
import {
  deployment,
  INJECT_ANNOTATION,
  INJECTED_ANNOTATION,
  onKwokNode,
  PAUSE_IMAGE,
  SIDECARS_LABEL,
  startKwokNode,
  suffix,
  waitForDeploymentPods,
  waitForWebhookToSeeNamespace,
} from './harness/workloads.js';

const PROXY_ENV = { name: 'HTTP_PROXY', value: 'http://127.0.0.1:15001' };

/** docs/sidecars.md's mesh template, shortened: a native sidecar, a regular sidecar, a volume, env for app containers. */
function meshTemplate(version: string) {
  return {
    name: 'mesh',
    initContainers: [
      {
        name: 'mesh-proxy',
        image: `registry.example.com/mesh/proxy:${version}`,
        restartPolicy: 'Always',
        resources: { requests: { cpu: '50m', memory: '64Mi' }, limits: { memory: '256Mi' } },
        volumeMounts: [{ name: 'mesh-certs', mountPath: '/etc/mesh/certs' }],
      },
    ],
    containers: [
      {
        name: 'log-shipper',
        image: `registry.example.com/obs/fluent-bit:${version}`,
        env: [{ name: 'SHIPPER_VERSION', value: version }],
        volumeMounts: [{ name: 'mesh-certs', mountPath: '/certs', readOnly: true }],
      },
    ],
    volumes: [{ name: 'mesh-certs', emptyDir: { medium: 'Memory' } }],
    env: [PROXY_ENV],
  };
}

function config(version: string) {
  return { nodes: { defaultRatios: { cpu: 1.5, memory: 1 } }, sidecars: { templates: [meshTemplate(version)] } };
}

let env: E2eEnv;
let admin: KubeClient;
let webhook: WebhookProcess;
let node: SimKubelet;
let ns: string;

function injections(m: Metrics, outcome = 'injected'): number {
  return m.sum('kube_overcommit_sidecar_injections_total', { template: 'mesh', outcome });
}

const names = (list: any[] | undefined) => (list ?? []).map((c) => c.name);

beforeAll(async () => {
  ({ env, admin, webhook } = webhookFixture());
  await webhook.start();
  await webhook.useConfig(config('1.0.0'));
  const [name] = claimNodeNames(env, 'kwok-node', 1);
  node = await startKwokNode(env, admin, { name: name!, capacity: { cpu: '8', memory: '32Gi', pods: '110' } });
  ns = `e2e-sidecars-${suffix()}`;
  await createNamespace(env, ns, { [SIDECARS_LABEL]: 'enabled' });
  await waitForWebhookToSeeNamespace(
    admin,
    ns,
    { annotations: { [INJECT_ANNOTATION]: 'mesh' } },
    (pod) => pod.metadata.annotations?.[INJECTED_ANNOTATION] === 'mesh',
  );
});

afterAll(() => tearDown({ env, admin, webhook, kubelets: [node], namespaces: [ns] }));

describe('sidecar injection against a real control plane', () => {
  it("(a) a Deployment's pods asking for a template come up with the native sidecar, the sidecar container, the volume and env, and the injected annotation; kwok runs them", async () => {
    await webhook.useConfig(config('1.0.0'));
    const before = injections(await webhook.metrics());
    await admin.post(
      `/apis/apps/v1/namespaces/${ns}/deployments`,
      deployment('shop', 2, {
        annotations: { [INJECT_ANNOTATION]: 'mesh' },
        spec: {
          ...onKwokNode(env, node.name),
          initContainers: [{ name: 'migrate', image: PAUSE_IMAGE }],
          containers: [
            { name: 'app', image: PAUSE_IMAGE },
            // A value the pod sets wins over the template's env.
            { name: 'worker', image: PAUSE_IMAGE, env: [{ name: 'HTTP_PROXY', value: 'http://proxy.internal:3128' }] },
          ],
        },
      }),
    );
    const pods = await waitForDeploymentPods(admin, ns, 'shop', 2);

    for (const pod of pods) {
      const name = pod.metadata.name;
      expect(pod.metadata.annotations[INJECTED_ANNOTATION], name).toBe('mesh');
      // The native sidecar first (it must serve the pod's own init containers), then the pod's.
      expect(names(pod.spec.initContainers), name).toEqual(['mesh-proxy', 'migrate']);
      const proxy = pod.spec.initContainers[0];
      expect(proxy.restartPolicy).toBe('Always');
      expect(proxy.image).toBe('registry.example.com/mesh/proxy:1.0.0');
      expect(proxy.resources.requests).toEqual({ cpu: '50m', memory: '64Mi' });
      // The pod's first container stays first; the sidecar container is appended.
      expect(names(pod.spec.containers), name).toEqual(['app', 'worker', 'log-shipper']);
      expect(pod.spec.containers[2].image).toBe('registry.example.com/obs/fluent-bit:1.0.0');
      expect(names(pod.spec.volumes), name).toContain('mesh-certs');
      expect(pod.spec.volumes.find((v: any) => v.name === 'mesh-certs').emptyDir).toEqual({ medium: 'Memory' });
      // env goes to the app containers only, never overriding theirs; not to sidecars or init containers.
      expect(pod.spec.containers[0].env).toEqual([PROXY_ENV]);
      expect(pod.spec.containers[1].env).toEqual([{ name: 'HTTP_PROXY', value: 'http://proxy.internal:3128' }]);
      expect(pod.spec.containers[2].env).toEqual([{ name: 'SHIPPER_VERSION', value: '1.0.0' }]);
      expect(pod.spec.initContainers[1].env).toBeUndefined();
      // Scheduled and running with its sidecars: the API server accepted what was injected.
      expect(pod.spec.nodeName).toBe(node.name);
      expect(pod.status.phase).toBe('Running');
      expect(names(pod.status.containerStatuses).sort(), name).toEqual(['app', 'log-shipper', 'worker']);
    }
    // Only the pods are injected: the ReplicaSet's template is as the Deployment wrote it.
    const [rs] = (await admin.get(`/apis/apps/v1/namespaces/${ns}/replicasets`, { labelSelector: 'app=shop' })).items;
    expect(names(rs.spec.template.spec.containers)).toEqual(['app', 'worker']);
    expect(injections(await webhook.metrics()) - before).toBe(2);
  });

  it('(b) a pod without the annotation is untouched (the shipped matchCondition keeps it from being sent)', async () => {
    await webhook.useConfig(config('1.0.0'));
    const sidecarsEntry = env.webhook.entries.find((e) => e.startsWith('sidecars.'))!;
    const exclusions = (m: Metrics) => m.sum('apiserver_admission_match_condition_exclusions_total', { name: sidecarsEntry });
    const calls = (m: Metrics) => m.sum('apiserver_admission_webhook_request_total', { name: sidecarsEntry });
    const [apiBefore, before] = [await apiserverMetrics(env), await webhook.metrics()];

    const spec = {
      ...onKwokNode(env, node.name),
      containers: [{ name: 'app', image: PAUSE_IMAGE, env: [{ name: 'MODE', value: 'plain' }] }],
      volumes: [{ name: 'scratch', emptyDir: {} }],
    };
    const created = await admin.post(`/api/v1/namespaces/${ns}/pods`, {
      apiVersion: 'v1',
      kind: 'Pod',
      metadata: { name: 'plain', annotations: { 'example.com/owner': 'team-a' } },
      spec,
    });
    const pod = await waitUntil('pod `plain` Running', async () => {
      const p = await admin.get(`/api/v1/namespaces/${ns}/pods/plain`);
      return p.status.phase === 'Running' ? p : undefined;
    });
    for (const p of [created, pod]) {
      expect(p.metadata.annotations).toEqual({ 'example.com/owner': 'team-a' });
      expect(p.spec.initContainers).toBeUndefined();
      expect(names(p.spec.containers)).toEqual(['app']);
      expect(p.spec.containers[0].env).toEqual([{ name: 'MODE', value: 'plain' }]);
      expect(names(p.spec.volumes)).toEqual(['scratch']);
    }

    const [apiAfter, after] = [await apiserverMetrics(env), await webhook.metrics()];
    expect(calls(apiAfter) - calls(apiBefore), 'sidecars entry calls').toBe(0);
    // `plain` is the only pod created between the two scrapes: its CREATE is the one exclusion.
    expect(exclusions(apiAfter) - exclusions(apiBefore), 'sidecars entry matchCondition exclusions').toBe(1);
    expect(after.sum('kube_overcommit_sidecar_injections_total') - before.sum('kube_overcommit_sidecar_injections_total')).toBe(0);
  });

  it('(c) a template edit in the ConfigMap applies to the next pod created, not to the pods that exist', async () => {
    await webhook.useConfig(config('1.0.0'));
    const dep = deployment('edit', 1, {
      annotations: { [INJECT_ANNOTATION]: 'mesh' },
      spec: { ...onKwokNode(env, node.name), containers: [{ name: 'app', image: PAUSE_IMAGE }] },
    });
    await admin.post(`/apis/apps/v1/namespaces/${ns}/deployments`, dep);
    const [first] = await waitForDeploymentPods(admin, ns, 'edit', 1);
    expect(first.spec.initContainers[0].image).toBe('registry.example.com/mesh/proxy:1.0.0');

    // kubectl apply of the edited ConfigMap; the webhook runs with it once /readyz names its resourceVersion.
    await webhook.useConfig(config('1.1.0'));
    const before = injections(await webhook.metrics());
    // The ReplicaSet is unchanged (same pod template): only the next pod it creates sees the edit.
    await admin.patch(`/apis/apps/v1/namespaces/${ns}/deployments/edit`, { spec: { replicas: 2 } }, 'merge');
    const pods = await waitForDeploymentPods(admin, ns, 'edit', 2);
    const second = pods.find((p) => p.metadata.uid !== first.metadata.uid)!;
    const old = pods.find((p) => p.metadata.uid === first.metadata.uid)!;
    expect(old, 'the first pod is still there').toBeDefined();
    expect(second.metadata.ownerReferences[0].uid).toBe(first.metadata.ownerReferences[0].uid);

    expect(second.metadata.annotations[INJECTED_ANNOTATION]).toBe('mesh');
    expect(second.spec.initContainers[0].image).toBe('registry.example.com/mesh/proxy:1.1.0');
    expect(second.spec.containers.find((c: any) => c.name === 'log-shipper').image).toBe('registry.example.com/obs/fluent-bit:1.1.0');
    expect(second.spec.containers.find((c: any) => c.name === 'log-shipper').env).toEqual([{ name: 'SHIPPER_VERSION', value: '1.1.0' }]);
    // The existing pod keeps what it got.
    expect(old.spec.initContainers[0].image).toBe('registry.example.com/mesh/proxy:1.0.0');
    expect(old.spec.containers.find((c: any) => c.name === 'log-shipper').image).toBe('registry.example.com/obs/fluent-bit:1.0.0');
    expect(injections(await webhook.metrics()) - before).toBe(1);
  });
});
