/**
 * Keys named like Object.prototype members, against a real control plane. `constructor` and
 * `toString` are legal label keys, and kube-apiserver stores a CSI volume's `volumeAttributes`
 * whatever its keys (`__proto__` included): the webhook must select nodes and namespaces by such
 * labels as the API server would, and admit such pods as it admits any other.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  claimNodeNames,
  createNamespace,
  getNode,
  tearDown,
  sameQuantity,
  SimKubelet,
  waitUntil,
  WebhookProcess,
  type E2eEnv,
  type KubeClient,
  webhookFixture,
} from './harness/index.js';
import { PAUSE_IMAGE, POD_POLICY_LABEL, suffix, waitForWebhookToSeeNamespace } from './harness/workloads.js';

const DEFAULT_REQUESTS = { cpu: '100m', memory: '128Mi' };
const CONFIG = {
  nodes: { defaultRatios: { cpu: 1.5 }, pools: [{ name: 'ctor', nodeSelector: { matchLabels: { constructor: 'x', toString: 'y' } }, ratios: { cpu: 2 } }] },
  pods: { namespaceSelector: { matchLabels: { [POD_POLICY_LABEL]: 'enabled', toString: 'yes' } }, defaultRequests: DEFAULT_REQUESTS },
};
const CAPACITY = { cpu: '4', memory: '16Gi', pods: '110' };

let env: E2eEnv;
let admin: KubeClient;
let webhook: WebhookProcess;
const kubelets: SimKubelet[] = [];
const namespaces: string[] = [];

beforeAll(async () => {
  ({ env, admin, webhook } = webhookFixture());
  await webhook.start();
  await webhook.useConfig(CONFIG);
});

afterAll(() => tearDown({ env, admin, webhook, kubelets, namespaces }));

describe('keys named like Object.prototype members against a real control plane', () => {
  it('a pool selecting nodes by the labels `constructor` and `toString` takes exactly the nodes that carry both; the others get the default ratios', async () => {
    const [labelled, half, plain] = claimNodeNames(env, 'sim-node', 3);
    const start = async (name: string, labels: Record<string, string>) => {
      const kubelet = await SimKubelet.start(env, { name, capacity: CAPACITY, labels, updateFrequencyMs: 1_000, reportFrequencyMs: 5_000 });
      kubelets.push(kubelet);
    };
    await start(labelled!, { constructor: 'x', toString: 'y' });
    await start(half!, { constructor: 'x' });
    await start(plain!, {});
    const cpu = async (name: string) => (await getNode(admin, name)).allocatable.cpu;
    for (const [name, expected] of [
      [labelled!, '8'],
      [half!, '6'],
      [plain!, '6'],
    ] as const) {
      await waitUntil(`${name} allocatable cpu ${expected}`, async () => sameQuantity('cpu', await cpu(name), expected), { timeoutMs: 20_000 });
    }
    expect((await getNode(admin, labelled!)).annotations['kube-overcommit.io/pool']).toBe('ctor');
    for (const name of [half!, plain!]) expect((await getNode(admin, name)).annotations['kube-overcommit.io/pool'], name).toBeUndefined();
  });

  it('a namespace selected by the label `toString` gets the pod policy, for a pod whose CSI volume attributes hold `__proto__` and `constructor`', async () => {
    const ns = `e2e-proto-${suffix()}`;
    await createNamespace(env, ns, { [POD_POLICY_LABEL]: 'enabled', toString: 'yes' });
    namespaces.push(ns);
    await waitForWebhookToSeeNamespace(admin, ns, {}, (pod) => sameQuantity('cpu', pod.spec.containers[0].resources?.requests?.cpu, DEFAULT_REQUESTS.cpu));

    const attributes = JSON.parse('{"__proto__":"x","constructor":"y","size":"1Gi"}');
    const created = await admin.post(`/api/v1/namespaces/${ns}/pods`, {
      apiVersion: 'v1',
      kind: 'Pod',
      metadata: { name: 'csi-attributes' },
      spec: {
        automountServiceAccountToken: false,
        containers: [{ name: 'app', image: PAUSE_IMAGE, volumeMounts: [{ name: 'data', mountPath: '/data' }] }],
        volumes: [{ name: 'data', csi: { driver: 'csi.example.com', volumeAttributes: attributes } }],
      },
    });
    const stored = await admin.get(`/api/v1/namespaces/${ns}/pods/${created.metadata.name}`);
    const requests = stored.spec.containers[0].resources?.requests ?? {};
    expect(sameQuantity('cpu', requests.cpu, DEFAULT_REQUESTS.cpu), `cpu ${requests.cpu}`).toBe(true);
    expect(sameQuantity('memory', requests.memory, DEFAULT_REQUESTS.memory), `memory ${requests.memory}`).toBe(true);
    expect(Object.entries(stored.spec.volumes[0].csi.volumeAttributes)).toEqual(Object.entries(attributes));
  });
});
