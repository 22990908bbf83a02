/**
 * The commitment floor (rule 6 of src/domain/node-rules/node-oversell.rules.ts) against a real control
 * plane: a simulated kubelet that re-admits its pods on restart as the kubelet does
 * (test/support/kubelet-admission.ts: creation order, against the allocatable the API server stores).
 *
 * Two nodes, 4 CPUs each, cpu ratio 2 (8 CPUs stored); 9 pods of 800m bound to each: 7.2 CPUs,
 * 1.8 × raw. Then the ratio goes to 1 and each kubelet writes its status and restarts. With the
 * floor the stored allocatable stays at 7.2 CPUs and every pod is re-admitted; with the floor
 * turned off (`nodes.commitmentFloor: false`) the same steps store 4 CPUs and the kubelet
 * rejects 4 of the 9 running pods (OutOfcpu): the scenario fails without the rule.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  baseUnits,
  claimNodeNames,
  createNamespace,
  deleteAllPods,
  deleteNamespace,
  getNode,
  resetConfig,
  SimKubelet,
  waitUntil,
  WebhookProcess,
  type E2eEnv,
  type KubeClient,
  webhookFixture,
} from './harness/index.js';

const FLOOR_ANNOTATION = 'kube-overcommit.io/floor';
const NAMESPACE = 'e2e-commitment-floor';
const MACHINE = { cpu: '4', memory: '16Gi', pods: '110', 'ephemeral-storage': '100Gi' };
const PODS_PER_NODE = 9;
const POD_CPU = '800m';

let env: E2eEnv;
let admin: KubeClient;
let webhook: WebhookProcess;
const kubelets: SimKubelet[] = [];

beforeAll(async () => {
  ({ env, admin, webhook } = webhookFixture());
  await webhook.start();
  await createNamespace(env, NAMESPACE);
});

afterAll(async () => {
  await Promise.all(kubelets.map((k) => k.stop({ deleteNode: true })));
  await webhook?.stop();
  if (env) {
    // No kubelet confirms these pods' deletion: forced, then the namespace.
    await deleteAllPods(admin, NAMESPACE, { force: true }).catch(() => undefined);
    await deleteNamespace(env, NAMESPACE).catch(() => undefined);
    await resetConfig(env).catch(() => undefined);
  }
  admin?.close();
});

/** Binds PODS_PER_NODE pods of POD_CPU to `node` (spec.nodeName, as a binding leaves them), one after the other. */
async function bindPods(node: string): Promise<void> {
  for (let i = 0; i < PODS_PER_NODE; i++) {
    await admin.post(`/api/v1/namespaces/${NAMESPACE}/pods`, {
      apiVersion: 'v1',
      kind: 'Pod',
      metadata: { name: `${node}-${i}` },
      spec: {
        nodeName: node,
        tolerations: [{ operator: 'Exists' }],
        containers: [{ name: 'app', image: 'registry.k8s.io/pause:3.10', resources: { requests: { cpu: POD_CPU, memory: '64Mi' } } }],
      },
    });
  }
}

/** Status writes by the kubelet until the stored cpu allocatable is `cpu` (the webhook's pod cache may need a moment to see new pods). */
async function syncUntilCpu(kubelet: SimKubelet, cpu: string): Promise<Record<string, string>> {
  return waitUntil(
    `${kubelet.name}: stored cpu allocatable ${cpu}`,
    async () => {
      await kubelet.syncNow();
      const node = await getNode(admin, kubelet.name);
      return baseUnits('cpu', node.allocatable.cpu!) === baseUnits('cpu', cpu) ? node.annotations : undefined;
    },
    { timeoutMs: 20_000, intervalMs: 250, describe: async () => (await getNode(admin, kubelet.name)).allocatable },
  );
}

describe('the commitment floor against a real control plane', () => {
  it('bound to 1.8 × raw at ratio 2, ratio set to 1, kubelet restarted: 0 pods rejected with the floor, 4 without', async () => {
    const [withFloor, withoutFloor] = await Promise.all(
      claimNodeNames(env, 'sim-node', 2).map((name) => SimKubelet.start(env, { name, capacity: MACHINE, updateFrequencyMs: 1_000, reportFrequencyMs: 4_000 })),
    );
    kubelets.push(withFloor!, withoutFloor!);
    await webhook.useConfig({ nodes: { defaultRatios: { cpu: 2 } } });
    for (const kubelet of kubelets) await syncUntilCpu(kubelet, '8');

    for (const kubelet of kubelets) {
      await bindPods(kubelet.name);
      // Admitted as they arrive: 7.2 of the 8 CPUs stored.
      expect((await kubelet.readmitPods()).rejected).toEqual([]);
    }

    // The ratio goes back to 1: with the floor, the stored value stays what is bound.
    await webhook.useConfig({ nodes: { defaultRatios: { cpu: 1 } } });
    const annotations = await syncUntilCpu(withFloor!, '7200m');
    expect(JSON.parse(annotations[FLOOR_ANNOTATION]!)).toEqual({ cpu: '7200m' });
    const restarted = await withFloor!.readmitPods();
    expect(restarted.rejected).toEqual([]);
    expect(restarted.admitted).toHaveLength(PODS_PER_NODE);

    // Said on the Node: a Normal Event, and the reason gauge.
    const events = await waitUntil('a CommitmentFloorApplied Event on the node', async () => {
      const selector = encodeURIComponent(`involvedObject.kind=Node,involvedObject.name=${withFloor!.name},reason=CommitmentFloorApplied`);
      const list = (await admin.get(`/api/v1/namespaces/default/events?fieldSelector=${selector}`)).items;
      return list.length > 0 ? list : undefined;
    });
    expect(events).toHaveLength(1);
    expect(events[0]).toMatchObject({ type: 'Normal', involvedObject: { uid: (await admin.get(`/api/v1/nodes/${withFloor!.name}`)).metadata.uid } });
    expect(events[0].message).toContain('cpu 7200m (raw 4 × ratio 1 = 4)');
    const reasons = (await webhook.metrics()).find('kube_overcommit_node_allocatable_reason', { node: withFloor!.name, resource: 'cpu' });
    expect(reasons.map((s) => [s.labels.reason, s.value])).toEqual([['floor', 1]]);

    // The same steps without the floor: the stored value drops to raw, and the restarted kubelet rejects running pods.
    await webhook.useConfig({ nodes: { defaultRatios: { cpu: 1 }, commitmentFloor: false } });
    await syncUntilCpu(withoutFloor!, '4');
    const stranded = await withoutFloor!.readmitPods();
    expect(stranded.admitted).toHaveLength(5);
    expect(stranded.rejected).toEqual(Array.from({ length: 4 }, (_, i) => ({ pod: `${NAMESPACE}/${withoutFloor!.name}-${i + 5}`, reason: 'OutOfcpu' })));
  }, 120_000);
});
