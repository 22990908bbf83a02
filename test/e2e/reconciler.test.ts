/**
 * The reconciler against a real control plane: idle nodes (simulated kubelets that write their
 * status only when what they compute differs from the stored Node, with a report period far
 * beyond the test) get a ratio raised from 1 through the ConfigMap. With the reconciler off they
 * keep their raw value (the kubelets have nothing to write); on, the leader's empty PATCH of
 * nodes/status makes the API server call the webhook, which stores the new value, before any
 * kubelet writes. With two replicas only one holds the Lease, and the other takes over when it
 * stops. The webhook runs with the shipped RBAC (the ServiceAccount's token).
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { claimNodeNames, getNode, resetConfig, SimKubelet, waitUntil, WebhookProcess, type E2eEnv, type KubeClient, webhookFixture } from './harness/index.js';
import { freePort } from '../support/process.js';

const CAPACITY = { cpu: '4', memory: '16Gi', pods: '110', 'ephemeral-storage': '100Gi' };
const NODES = 6;
const LEASE = '/apis/coordination.k8s.io/v1/namespaces/kube-overcommit/leases/kube-overcommit-reconciler';
const config = (cpu: number, enabled: boolean) => ({ nodes: { defaultRatios: { cpu }, reconcile: { enabled, maxNodesPerSecond: 20 } } });

let env: E2eEnv;
let admin: KubeClient;
let webhook: WebhookProcess;
let replica: WebhookProcess | undefined;
let kubelets: SimKubelet[] = [];

beforeAll(async () => {
  ({ env, admin, webhook } = webhookFixture());
  await webhook.start();
});

afterAll(async () => {
  await Promise.all(kubelets.map((k) => k.stop({ deleteNode: true })));
  await replica?.stop();
  await webhook?.stop();
  if (env) await resetConfig(env).catch(() => undefined);
  admin?.close();
});

const cpuOf = async (name: string) => (await getNode(admin, name)).allocatable.cpu;
const nudges = async (outcome: string) => (await webhook.metrics()).sum('kube_overcommit_reconcile_nudges_total', { outcome });
const leader = async (process: WebhookProcess) => (await process.metrics()).value('kube_overcommit_reconciler_leader');
/** What KubeOvercommitReconcilerLeaderMissing reads beside the leader gauge. */
const enabled = async (process: WebhookProcess) => (await process.metrics()).value('kube_overcommit_reconciler_enabled');

describe('the reconciler against a real control plane', () => {
  it('off, idle nodes keep their value; on, a ratio raised from 1 reaches every one without a kubelet write', async () => {
    await webhook.useConfig(config(1, false));
    kubelets = await Promise.all(
      claimNodeNames(env, 'sim-node', NODES).map((name) =>
        SimKubelet.start(env, { name, capacity: CAPACITY, updateFrequencyMs: 1_000, reportFrequencyMs: 600_000 }),
      ),
    );
    await Promise.all(kubelets.map((k) => k.waitForSyncs(2)));
    const applied0 = await nudges('applied');

    // Off: nothing writes, nothing changes.
    await webhook.useConfig(config(2, false));
    const offAt = Date.now();
    await Promise.all(kubelets.map((k) => k.waitForSyncs(5)));
    for (const k of kubelets) {
      expect(await cpuOf(k.name), k.name).toBe('4');
      expect(
        k.updates.filter((u) => u.at > offAt),
        `${k.name} had nothing to write`,
      ).toEqual([]);
    }
    expect(await nudges('applied')).toBe(applied0);
    expect(await leader(webhook)).toBe(0);
    expect(await enabled(webhook)).toBe(0);

    // On: every node stores floor(4 × 2), by a nudge before its kubelet's next write (below).
    await webhook.useConfig(config(2, true));
    const onAt = Date.now();
    await waitUntil(`every node to store cpu 8`, async () => (await Promise.all(kubelets.map((k) => cpuOf(k.name)))).every((cpu) => cpu === '8'), {
      timeoutMs: 20_000,
      intervalMs: 200,
      describe: () => Promise.all(kubelets.map(async (k) => `${k.name}: ${await cpuOf(k.name)}`)),
    });
    expect(await leader(webhook)).toBe(1);
    expect(await enabled(webhook)).toBe(1);
    expect(await nudges('applied')).toBeGreaterThanOrEqual(applied0 + NODES);
    for (const k of kubelets) {
      // A kubelet writes only once the stored value differs from what it computes: the node was
      // already inflated (by the nudge) before its first write.
      expect(
        k.updates.filter((u) => u.at > onAt).every((u) => u.reason === 'changed'),
        `${k.name}: ${JSON.stringify(k.updates.filter((u) => u.at > onAt).map((u) => u.reason))}`,
      ).toBe(true);
      k.assertHealthy();
    }
    expect((await getNode(admin, kubelets[0]!.name)).recordedRatios).toEqual({ cpu: 2 });
  });

  it('with two replicas only one holds the Lease; the other takes over when it stops', async () => {
    const [httpPort, httpsPort] = [await freePort(), await freePort()];
    const identity = `kube-overcommit-e2e-replica-${process.pid}`;
    replica = new WebhookProcess({ ...env, webhook: { ...env.webhook, httpPort, httpsPort } }, { env: { POD_NAME: identity } });
    await replica.start();
    await sleep(5_000); // a few of the Lease's retry periods (2 s)
    expect([await leader(webhook), await leader(replica)]).toEqual([1, 0]);
    expect((await admin.get(LEASE)).spec.holderIdentity).toBe(`kube-overcommit-e2e-${process.pid}`);

    await webhook.stop(); // releases the Lease
    await waitUntil('the second replica to lead', async () => (await leader(replica!)) === 1, { timeoutMs: 10_000, intervalMs: 200 });
    expect((await admin.get(LEASE)).spec.holderIdentity).toBe(identity);
    await webhook.start();
    await sleep(5_000);
    expect([await leader(webhook), await leader(replica)]).toEqual([0, 1]);
    await replica.stop();
    replica = undefined;
    await waitUntil('the first replica to lead again', async () => (await leader(webhook)) === 1, { timeoutMs: 10_000, intervalMs: 200 });
  });
});
