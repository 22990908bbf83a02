/**
 * An upgrade of the control plane under a running webhook and kubelet: a cluster of its own at
 * minor `from` (`cluster.sh up`, kube-apiserver storing JSON so that etcd's history of the Node can
 * be read), the product as the e2e runs it, a hollow kubelet (kubemark: the kubelet's own code) at
 * cpu ratio 3 running 2.5 CPUs of pods on its 1 raw CPU; then `cluster.sh restart` swaps
 * kube-apiserver, kube-controller-manager and kube-scheduler for minor `to`'s binaries, one at a
 * time, on the same etcd data, flags, ports and certificates, while the kubelet and the webhook
 * keep running.
 *
 * What must hold: no inflation lost (every version of the Node etcd stored from before the swap to
 * a kubelet write stored through the new control plane has the inflated allocatable, and so has
 * every read of it during the swap), no pod lost (the same pods, bound where they were, Running,
 * never restarted), and a pod the new kube-scheduler places in the inflated room. Then the
 * node-status policy: from 1.35 to 1.36 it appears (the API server now serves
 * MutatingAdmissionPolicy v1; the component is installed, as an operator does after the upgrade,
 * and the webhook's periodic look-up finds it and publishes), from 1.37 to 1.38 it holds (never
 * withdrawn across the swap).
 *
 * A pair runs when the run's minor is its `from` (KUBE=1.35 for 1.35 → 1.36) and `to`'s binaries
 * are built (`KUBE=1.36 test/e2e/control-plane/build.sh`); otherwise its test says why it did not.
 * 1.38.0-beta.0 has no kubemark: the kubelet of 1.37 → 1.38 is 1.37's, as in a real upgrade.
 */
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  apiserverMetrics,
  claimNodeNames,
  e2eEnv,
  type E2eEnv,
  HollowKubelet,
  installNodePolicy,
  type KubeClient,
  adminClient,
  createNamespace,
  kubeMinor,
  NODE_POLICY,
  pinnedPod,
  podsByName,
  waitUntil,
  WebhookProcess,
} from './harness/index.js';
import { EtcdKeyHistory } from '../support/etcd.js';
import { clusterRestart, readClusterEnv, releaseBinDir, setUpE2e, tearDownE2e } from '../support/setup.js';

const NAMESPACE = 'e2e-upgrade';
const ROLE_LABEL = 'e2e.kube-overcommit.io/upgrade';
const SHARD_LABEL = 'kube-overcommit.io/node-targets';
const UPDATE_MS = 10_000;
const PODS = [
  { name: 'two-cpu', cpu: '2' },
  { name: 'half-cpu', cpu: '500m' },
];
const CONFIG = {
  nodes: {
    defaultRatios: { cpu: 1, memory: 1 },
    pools: [{ name: 'upgrade', nodeSelector: { matchLabels: { [ROLE_LABEL]: 'yes' } }, ratios: { cpu: 3 } }],
  },
};
/** What kube-apiserver's mutating admission chain needs before MutatingAdmissionPolicy v1: 1.36. */
const POLICY_MINOR = 36;

interface Pair {
  from: string;
  to: string;
}
const PAIRS: Pair[] = [
  { from: '1.35', to: '1.36' },
  { from: '1.37', to: '1.38' },
];

const log = (message: string) => process.stderr.write(`upgrade: ${message}\n`);
const minorOf = (release: string) => Number(release.split('.')[1]);
const runMinor = `1.${kubeMinor(e2eEnv())}`;

/** Why a pair does not run here (undefined: it runs). */
async function notRun({ from, to }: Pair): Promise<string | undefined> {
  if (from !== runMinor) return `runs when the run's minor is ${from} (KUBE=${from}), this run's is ${runMinor}`;
  const toDir = await releaseBinDir(to).catch(() => undefined);
  if (!toDir) return `${to} is not pinned (test/e2e/control-plane/versions/${to}.mod)`;
  const missing = ['kube-apiserver', 'kube-controller-manager', 'kube-scheduler'].filter((b) => !existsSync(join(toDir, b)));
  if (missing.length > 0) return `${to}'s ${missing.join(', ')} not built in ${toDir} (KUBE=${to} test/e2e/control-plane/build.sh)`;
  return undefined;
}

for (const pair of PAIRS) {
  const reason = await notRun(pair);
  const { from, to } = pair;
  describe.runIf(reason === undefined)(`upgrade ${from} → ${to} under a running webhook and kubelet${reason ? ` (not run: ${reason})` : ''}`, () => {
    let cluster: E2eEnv;
    let admin: KubeClient;
    let webhook: WebhookProcess;
    let kubelet: HollowKubelet | undefined;
    let node: string;
    let toBinDir: string;
    const policyBefore = minorOf(from) >= POLICY_MINOR;

    const pods = () => podsByName(admin, NAMESPACE);
    const statusReviews = async () => (await webhook.metrics()).sum('kube_overcommit_admission_requests_total', { resource: 'nodes/status' });
    const statusPatches = async () =>
      (await apiserverMetrics(cluster)).sum('apiserver_request_total', { resource: 'nodes', subresource: 'status', verb: 'PATCH' });
    const pathChecks = async (answer: string) => (await webhook.metrics()).sum('kube_overcommit_node_policy_path_checks_total', { answer });
    const policyActive = async () => (await webhook.metrics()).sum('kube_overcommit_node_policy_active');
    const publishedEntry = async () => {
      const list = await admin.get(`/api/v1/namespaces/${cluster.webhook.namespace}/configmaps`, { labelSelector: `${SHARD_LABEL}=v1` });
      return list.items.map((cm: any) => cm.data?.[node]).find((entry: string | undefined) => entry !== undefined) as string | undefined;
    };

    beforeAll(async () => {
      toBinDir = await releaseBinDir(to);
      cluster = await setUpE2e({
        name: 'upgrade',
        build: 'if-needed',
        log,
        controlPlane: { kube: from, binDir: e2eEnv().binDir, apiserverArgs: '--storage-media-type=application/json' },
      });
      admin = adminClient(cluster);
      webhook = new WebhookProcess(cluster);
      if (policyBefore) await installNodePolicy(cluster, admin);
      await webhook.start();
      await webhook.useConfig(CONFIG);
      await createNamespace(cluster, NAMESPACE);
      [node] = claimNodeNames(cluster, 'sim-node', 1) as [string];
      kubelet = await HollowKubelet.start(cluster, { name: node, labels: { [ROLE_LABEL]: 'yes' } });
      await waitUntil('the node at cpu 3', async () => (await admin.get(`/api/v1/nodes/${node}`)).status.allocatable.cpu === '3');
      for (const { name, cpu } of PODS) await admin.post(`/api/v1/namespaces/${NAMESPACE}/pods`, pinnedPod(NAMESPACE, name, node, cpu));
      await waitUntil('both pods Running', async () => {
        const all = await pods();
        return PODS.every(({ name }) => all.get(name)?.status?.phase === 'Running');
      });
    }, 600_000);

    afterAll(async () => {
      await kubelet?.stop();
      await webhook?.stop();
      admin?.close();
      if (cluster) await tearDownE2e(cluster, { log });
    }, 120_000);

    it(`the control plane swapped to ${to} on the same etcd: every stored Node and every read of it inflated, the same pods Running, a new pod placed in the inflated room`, async () => {
      const nodeBefore = await admin.get(`/api/v1/nodes/${node}`);
      const podsBefore = await pods();
      const history = await EtcdKeyHistory.start(readClusterEnv(cluster.runDir).ETCD_URL!, `/registry/minions/${node}`);
      const reviewsBefore = await statusReviews();
      const kubeletErrors = () => readFileSync(kubelet!.logFile!, 'utf8').match(/Error updating node status/g)?.length ?? 0;
      const errorsBefore = kubeletErrors();

      // Reads of the Node every 250 ms, through the swap: what any client saw.
      const samples: Array<{ at: number; cpu?: string }> = [];
      let sampling = true;
      const sampler = (async () => {
        while (sampling) {
          const cpu = await admin
            .request('GET', `/api/v1/nodes/${node}`, { timeoutMs: 2_000 })
            .then((n: any) => String(n.status.allocatable.cpu))
            .catch(() => undefined);
          samples.push({ at: Date.now(), cpu });
          await new Promise((r) => setTimeout(r, 250));
        }
      })();

      const swapStart = Date.now();
      await clusterRestart(cluster.runDir, { kube: to, binDir: toBinDir }, log);
      const swapMs = Date.now() - swapStart;
      const patchesThroughNew = await statusPatches();
      const reviewsInSwap = (await statusReviews()) - reviewsBefore;
      const failedDuringSwap = kubeletErrors() - errorsBefore;

      // A kubelet write stored through the new control plane: the new pod's image is a real change of the Node's status.
      const image = 'registry.k8s.io/pause:3.9';
      const placed = pinnedPod(NAMESPACE, 'after-upgrade', node, '400m');
      placed.spec.containers[0].image = image;
      await admin.post(`/api/v1/namespaces/${NAMESPACE}/pods`, placed);
      const running = await waitUntil('the new pod Running', async () => {
        const p = (await pods()).get('after-upgrade');
        return p?.status?.phase === 'Running' ? p : undefined;
      });
      const stored = await waitUntil('the kubelet’s report of the new image stored', () =>
        history.versions.find((v) => (v.object.status.images ?? []).some((i: any) => i.names?.includes(image))),
      );
      sampling = false;
      await sampler;
      history.stop();

      const version = (await admin.get('/version')).gitVersion;
      const down = samples.filter((s) => s.cpu === undefined);
      const read = samples.filter((s) => s.cpu !== undefined);
      const after = history.versions.filter((v) => v.revision > history.versions[0]!.revision);
      console.log(
        `upgrade ${from} → ${to} (${version}): swap ${(swapMs / 1000).toFixed(1)} s; Node reads ${read.length} answered, ${down.length} failed ` +
          `(for ${down.length ? ((down.at(-1)!.at - down[0]!.at) / 1000).toFixed(1) : 0} s); kubelet status updates failed during the swap ${failedDuringSwap}, ` +
          `status PATCHes answered by the new API server by the swap's end ${patchesThroughNew}, webhook nodes/status reviews during the swap ${reviewsInSwap}; ` +
          `Node versions stored ${history.versions.length} (${after.length} after the watch started), cpu ${[...new Set(history.versions.map((v) => v.object.status.allocatable.cpu))].join(', ')}`,
      );
      expect(version).toBe(readClusterEnv(cluster.runDir).K8S_VERSION);
      expect(version).toMatch(new RegExp(`^v${to.replace('.', '\\.')}\\.`));
      // The sampler spanned the swap: answered reads before and after reads that failed.
      expect(down.length).toBeGreaterThan(0);
      expect(read.filter((s) => s.at < down[0]!.at).length).toBeGreaterThan(0);
      expect(read.filter((s) => s.at > down.at(-1)!.at).length).toBeGreaterThan(0);
      expect([...new Set(read.map((s) => s.cpu))]).toEqual(['3']);
      // Every version etcd stored, the kubelet's write through the new control plane among them.
      expect(history.deletions).toEqual([]);
      expect(stored.revision).toBeGreaterThan(history.versions[0]!.revision);
      expect(history.versions.map((v) => v.object.status.allocatable.cpu)).toEqual(history.versions.map(() => '3'));
      expect(history.versions.map((v) => v.object.metadata.uid)).toEqual(history.versions.map(() => nodeBefore.metadata.uid));
      // No pod lost: the same uids, bound where they were, Running, never restarted.
      const podsAfter = await pods();
      for (const { name } of PODS) {
        const [was, is] = [podsBefore.get(name), podsAfter.get(name)];
        expect([is?.metadata.uid, is?.spec.nodeName, is?.status.phase]).toEqual([was.metadata.uid, node, 'Running']);
        expect(is.status.containerStatuses[0].restartCount).toBe(0);
        expect(is.status.containerStatuses[0].state.running.startedAt).toBe(was.status.containerStatuses[0].state.running.startedAt);
      }
      // The new kube-scheduler placed 400m in the room inflation made (2.5 of the raw 1 CPU already requested).
      expect(running.spec.nodeName).toBe(node);
    }, 300_000);

    if (!policyBefore) {
      it(`the node-status policy appears: ${to}'s API server serves MutatingAdmissionPolicy v1, the component installed after the upgrade is found by the webhook's periodic look-up, the node's target published, and the kubelet's writes served without the webhook`, async () => {
        expect(readFileSync(webhook.logFile!, 'utf8')).toMatch(/node status path: the webhook alone \(the API server, v1\.\d+\.\d+, does not serve/);
        expect(await pathChecks('policy')).toBe(0);
        const installedAt = Date.now();
        await installNodePolicy(cluster, admin);
        const activeAt = await waitUntil('the webhook on the policy path', async () => ((await policyActive()) === 1 ? Date.now() : undefined), {
          timeoutMs: 150_000,
          intervalMs: 500,
        });
        const entry = await waitUntil('the node’s entry published with target cpu 3', async () => {
          const text = await publishedEntry();
          return text?.split('\n')[1]?.startsWith('cpu 1 1 3 ') ? text : undefined;
        });
        const publishedAt = Date.now();
        console.log(
          `upgrade ${from} → ${to}: the policy path ${((activeAt - installedAt) / 1000).toFixed(1)} s after the component was installed, the entry published ${((publishedAt - installedAt) / 1000).toFixed(1)} s after`,
        );
        expect(readFileSync(webhook.logFile!, 'utf8')).toContain(`node status path: the MutatingAdmissionPolicy ${NODE_POLICY}`);
        expect(await pathChecks('policy')).toBeGreaterThan(0);
        expect(entry.split('\n')[0]).toBe('v3');
        await expectServedByThePolicy();
      }, 300_000);
    } else {
      it(`the node-status policy holds: the path never withdrawn across the swap, the node's target still published, the kubelet's writes served without the webhook`, async () => {
        expect(await policyActive()).toBe(1);
        expect(await pathChecks('webhook-only')).toBe(0);
        const entry = await publishedEntry();
        // raw, capacity and target (the lapsed value follows the pods the node runs).
        expect(entry?.split('\n')[1]?.split(' ').slice(0, 4)).toEqual(['cpu', '1', '1', '3']);
        await expectServedByThePolicy();
      }, 300_000);
    }

    /** Settled (the Node unchanged for more than a kubelet period), then 30 s of the kubelet's PATCHes: none reaches the webhook, the Node stays at cpu 3. */
    async function expectServedByThePolicy(): Promise<void> {
      let last = { rv: '', since: Date.now() };
      await waitUntil(
        'the Node unchanged for more than a kubelet period',
        async () => {
          const n = await admin.get(`/api/v1/nodes/${node}`);
          if (n.metadata.resourceVersion !== last.rv) last = { rv: n.metadata.resourceVersion, since: Date.now() };
          return Date.now() - last.since > UPDATE_MS * 1.2;
        },
        { timeoutMs: 9 * UPDATE_MS, intervalMs: 500 },
      );
      const [reviews0, patches0] = [await statusReviews(), await statusPatches()];
      await new Promise((r) => setTimeout(r, 3 * UPDATE_MS));
      const [reviews, patches] = [(await statusReviews()) - reviews0, (await statusPatches()) - patches0];
      console.log(`upgrade ${from} → ${to}, on ${to} with the policy: 30 s, ${patches} status PATCHes, ${reviews} webhook nodes/status reviews`);
      expect(patches).toBeGreaterThanOrEqual(2);
      expect(reviews).toBe(0);
      expect((await admin.get(`/api/v1/nodes/${node}`)).status.allocatable.cpu).toBe('3');
    }
  });
}
