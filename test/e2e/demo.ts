/**
 * `npm run demo`: a real control plane (etcd, kube-apiserver, kube-controller-manager,
 * kube-scheduler, kwok — built from their Go modules), kube-overcommit from `dist/` with the
 * shipped manifests, and four simulated kubelets on kwok nodes. Shows each node's allocatable
 * and how many 1-CPU pods kube-scheduler places with cpu ratio 1, then with cpu ratio 1.5.
 * Stops everything it started, also on failure or Ctrl-C.
 */
import type { E2eEnv } from '../support/env.js';
import { adminClient, type KubeClient } from '../support/kube-client.js';
import { claimNodeNames, getNode } from '../support/nodes.js';
import { countPods, createNamespace, deleteAllPods, listPods } from '../support/pods.js';
import { baseUnits, formatBaseUnits } from '../support/quantity.js';
import { SimKubelet } from '../support/sim-kubelet.js';
import { runOnStage } from '../support/stage.js';
import { waitUntil } from '../support/wait.js';
import { WebhookProcess } from '../support/webhook.js';

const NODES = 4;
const CAPACITY = { cpu: '4', memory: '16Gi', pods: '110' };
const PODS = 32;
/** The demo's kubelets report every 3 s even without a change (a real one: every 5 min). */
const REPORT_MS = 3_000;

const t0 = Date.now();
const say = (message: string) => console.log(`[${((Date.now() - t0) / 1000).toFixed(0).padStart(3)}s] ${message}`);

let webhook: WebhookProcess | undefined;
let admin: KubeClient | undefined;
const kubelets: SimKubelet[] = [];

interface Phase {
  ratio: number;
  allocatable: Record<string, bigint>;
  placed: Record<string, number>;
  running: number;
  pending: number;
}

async function phase(env: E2eEnv, namespace: string, ratio: number): Promise<Phase> {
  await webhook!.useConfig({ nodes: { defaultRatios: { cpu: ratio, memory: 1 } } });
  say(`kubectl apply: ConfigMap ${env.webhook.namespace}/${env.webhook.configMap} with cpu ratio ${ratio}`);
  const expected = (baseUnits('cpu', CAPACITY.cpu) * BigInt(Math.round(ratio * 1000))) / 1000n;
  const allocatable: Record<string, bigint> = {};
  for (const k of kubelets) {
    // The next status write from the kubelet picks up the ratio.
    const node = await waitUntil(`${k.name} allocatable cpu = ${formatBaseUnits('cpu', expected)}`, async () => {
      const n = await getNode(admin!, k.name);
      return baseUnits('cpu', n.allocatable.cpu!) === expected ? n : undefined;
    });
    allocatable[k.name] = baseUnits('cpu', node.allocatable.cpu!);
  }
  say(`every node now reports allocatable cpu ${formatBaseUnits('cpu', expected)} (capacity ${CAPACITY.cpu})`);
  for (let i = 0; i < PODS; i++) {
    await admin!.post(`/api/v1/namespaces/${namespace}/pods`, {
      apiVersion: 'v1',
      kind: 'Pod',
      metadata: { name: `one-cpu-${i}` },
      spec: {
        tolerations: [{ key: env.kwok.taint.key, operator: 'Exists', effect: 'NoSchedule' }],
        automountServiceAccountToken: false,
        terminationGracePeriodSeconds: 1,
        containers: [{ name: 'pause', image: 'registry.k8s.io/pause:3.10', resources: { requests: { cpu: '1', memory: '64Mi' } } }],
      },
    });
  }
  const fits = Number(expected / 1000n) * NODES;
  const counts = await waitUntil(
    `${fits} pods Running, ${PODS - fits} unschedulable`,
    async () => {
      const c = countPods(await listPods(admin!, namespace));
      return c.running === fits && c.unschedulable === PODS - fits ? c : undefined;
    },
    { timeoutMs: 120_000, intervalMs: 500 },
  );
  say(
    `${PODS} pods requesting 1 CPU each: kube-scheduler placed ${counts.bound}, kwok runs ${counts.running}, ${counts.unschedulable} Pending (Unschedulable)`,
  );
  await deleteAllPods(admin!, namespace);
  return { ratio, allocatable, placed: counts.byNode, running: counts.running, pending: counts.unschedulable };
}

function table(phases: Phase[]): string {
  const header = ['node', 'capacity cpu', ...phases.flatMap((p) => [`allocatable (ratio ${p.ratio})`, `pods placed (ratio ${p.ratio})`])];
  const rows = kubelets.map((k) => [
    k.name,
    CAPACITY.cpu,
    ...phases.flatMap((p) => [formatBaseUnits('cpu', p.allocatable[k.name]!), String(p.placed[k.name] ?? 0)]),
  ]);
  rows.push([
    'total',
    String(Number(CAPACITY.cpu) * NODES),
    ...phases.flatMap((p) => [
      formatBaseUnits(
        'cpu',
        Object.values(p.allocatable).reduce((a, b) => a + b, 0n),
      ),
      `${p.running} of ${PODS} submitted (${p.pending} Pending)`,
    ]),
  ]);
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i]!.length)));
  const line = (cells: string[]) => cells.map((c, i) => (i === 0 ? c.padEnd(widths[i]!) : c.padStart(widths[i]!))).join('  ');
  return [line(header), widths.map((w) => '-'.repeat(w)).join('  '), ...rows.map(line)].join('\n');
}

say('setting up: control plane (test/e2e/control-plane/build.sh, cluster.sh), kube-overcommit (dist/), k8s/base');
runOnStage('demo', say, false, async ({ env, onTearDown }) => {
  admin = adminClient(env);
  onTearDown(() => admin!.close());
  webhook = new WebhookProcess(env);
  onTearDown(async () => {
    const stopping = Date.now();
    await webhook!.stop().catch((error) => say(`stopping the webhook: ${error}`));
    say(`webhook stopped in ${((Date.now() - stopping) / 1000).toFixed(1)}s`);
  });
  await webhook.start();
  say(`kube-overcommit running (node dist/main.js, pid ${webhook.pid}) on ${env.webhook.url}, Kubernetes ${env.k8sVersion}`);

  // Start on ratio 1: nothing inflated.
  await webhook.useConfig({ nodes: { defaultRatios: { cpu: 1, memory: 1 } } });
  onTearDown(() => Promise.all(kubelets.map((k) => k.stop().catch(() => undefined))).then(() => undefined));
  for (const name of claimNodeNames(env, 'kwok-node', NODES)) {
    kubelets.push(await SimKubelet.start(env, { name, kwok: true, capacity: CAPACITY, updateFrequencyMs: 2_000, reportFrequencyMs: REPORT_MS }));
  }
  say(`${NODES} nodes registered by simulated kubelets (system:node:<name>), run by kwok: ${kubelets.map((k) => k.name).join(', ')}`);
  const namespace = 'demo';
  await createNamespace(env, namespace);

  const phases = [await phase(env, namespace, 1), await phase(env, namespace, 1.5)];
  for (const k of kubelets) k.assertHealthy();
  console.log('\n' + table(phases) + '\n');
  const [before, after] = phases as [Phase, Phase];
  say(
    `cpu ratio 1.5: ${after.running} pods instead of ${before.running} on the same ${NODES} nodes (×${(after.running / before.running).toFixed(2)}); capacity unchanged`,
  );
  return true;
});
