/**
 * The plan and shadow mode against a real control plane: a pool in shadow is planned (GET /plan,
 * and the built `kube-overcommit plan` CLI with the admin kubeconfig) and left raw; switched to
 * enforce through the ConfigMap, the next kubelet write stores exactly what /plan said, node
 * for node.
 */
import { execFile } from 'node:child_process';
import { chmodSync, mkdtempSync, readFileSync, symlinkSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  claimNodeNames,
  createNamespace,
  deleteNamespace,
  expectedAllocatable,
  getNode,
  inBaseUnits,
  MANAGED_RESOURCES,
  resetConfig,
  SimKubelet,
  waitUntil,
  WebhookProcess,
  type E2eEnv,
  type KubeClient,
  webhookFixture,
} from './harness/index.js';
import { suffix } from './harness/workloads.js';

const POOL_LABEL = 'e2e.kube-overcommit.io/pool';
const DEFAULT_RATIOS = { cpu: 1.5 };
const POOL_RATIOS = { cpu: 2, memory: 1.5, pods: 2 };
const config = (mode: 'shadow' | 'enforce') => ({
  nodes: {
    defaultRatios: DEFAULT_RATIOS,
    pools: [{ name: 'shadowed', nodeSelector: { matchLabels: { [POOL_LABEL]: 'shadowed' } }, ratios: POOL_RATIOS, mode }],
  },
});
const CAPACITY = { cpu: '4', memory: '16Gi', pods: '110', 'ephemeral-storage': '100Gi' };

let env: E2eEnv;
let admin: KubeClient;
let webhook: WebhookProcess;
let kubelets: SimKubelet[] = [];
let namespace: string | undefined;

beforeAll(async () => {
  ({ env, admin, webhook } = webhookFixture());
  await webhook.start();
});

afterAll(async () => {
  await Promise.all(kubelets.map((k) => k.stop({ deleteNode: true })));
  if (namespace) await deleteNamespace(env, namespace);
  await webhook?.stop();
  if (env) await resetConfig(env).catch(() => undefined);
  admin?.close();
});

/** GET /plan once the caches have listed. */
async function plan(podSize?: string): Promise<any> {
  return waitUntil('GET /plan answers 200', async () => {
    const { status, body } = await webhook.get(`/plan${podSize ? `?podSize=${podSize}` : ''}`);
    return status === 200 ? JSON.parse(body) : undefined;
  });
}

const rowOf = (answer: any, node: string) => answer.nodes.find((row: any) => row.node === node);
const managed = (list: Record<string, string>) => inBaseUnits(list, MANAGED_RESOURCES);

describe('plan and shadow mode against a real control plane', () => {
  it('plans a shadow pool, leaves it raw, and enforce then stores exactly the plan', async () => {
    await webhook.useConfig(config('shadow'));
    const [a, b] = claimNodeNames(env, 'sim-node', 2);
    const start = (name: string, labels: Record<string, string>) =>
      SimKubelet.start(env, { name, capacity: CAPACITY, labels, updateFrequencyMs: 1_000, reportFrequencyMs: 60_000 });
    const shadowed = await start(a!, { [POOL_LABEL]: 'shadowed' });
    const plain = await start(b!, {});
    kubelets = [shadowed, plain];

    // One bound pod on the shadowed node: its requests count in the plan.
    namespace = `plan-${suffix()}`;
    await createNamespace(env, namespace);
    await admin.post(`/api/v1/namespaces/${namespace}/pods`, {
      apiVersion: 'v1',
      kind: 'Pod',
      metadata: { name: 'bound' },
      spec: {
        nodeName: shadowed.name,
        tolerations: [{ operator: 'Exists' }],
        containers: [{ name: 'c', image: 'registry.k8s.io/pause:3.10', resources: { requests: { cpu: '500m', memory: '1Gi' } } }],
      },
    });
    // In shadow the stored value is what the kubelet computes: it has nothing to write.
    await Promise.all(kubelets.map((k) => k.waitForSyncs(2)));
    expect(shadowed.stats.patchAttempts).toBe(0);

    // Shadow: stored raw; the default node enforced.
    expect(managed((await getNode(admin, shadowed.name)).allocatable)).toEqual(managed(shadowed.rawAllocatable));
    const before = await waitUntil('the plan to count the bound pod', async () => {
      const answer = await plan('cpu=500m,memory=1Gi');
      return rowOf(answer, shadowed.name)?.requests.cpu === '500m' ? answer : undefined;
    });
    const row = rowOf(before, shadowed.name);
    expect(row).toMatchObject({
      pool: 'shadowed',
      reason: 'pool',
      mode: 'shadow',
      ratios: POOL_RATIOS,
      matches: false,
      requests: { cpu: '500m', memory: '1Gi', pods: '1' },
    });
    const rawManaged = Object.fromEntries(Object.entries(shadowed.rawAllocatable).filter(([r]) => (MANAGED_RESOURCES as readonly string[]).includes(r)));
    expect(managed(row.planned)).toEqual(expectedAllocatable(rawManaged, POOL_RATIOS));
    expect(managed(row.stored)).toEqual(managed(shadowed.rawAllocatable));
    expect(row.fits).toBe(15); // cpu: 8 − 0.5 = 7.5 → 15 pods of 500m
    expect(rowOf(before, plain.name)).toMatchObject({ reason: 'defaultRatios', mode: 'enforce', matches: true });

    // The CLI (the package's bin, built) with the user's kubeconfig: the same rows from one LIST.
    const cli = await promisify(execFile)(
      process.execPath,
      [
        join(env.webhook.appDir, 'dist/cli.js'),
        'plan',
        '-o',
        'json',
        '--pod-size',
        'cpu=500m,memory=1Gi',
        '--configmap',
        `${env.webhook.namespace}/${env.webhook.configMap}`,
      ],
      {
        env: { ...process.env, KUBECONFIG: env.adminKubeconfig },
      },
    );
    const fromCli = JSON.parse(cli.stdout);
    for (const name of [shadowed.name, plain.name]) expect(rowOf(fromCli, name)).toEqual(rowOf(before, name));

    // As a kubectl plugin: the package's bin `kubectl-overcommit` on PATH (as `npm link` or
    // `npm install -g` put it, executable), run by the built kubectl as `kubectl overcommit plan`.
    const bin = JSON.parse(readFileSync(join(env.webhook.appDir, 'package.json'), 'utf8')).bin['kubectl-overcommit'];
    const pathDir = mkdtempSync(join(env.runDir, 'kubectl-plugin-'));
    chmodSync(join(env.webhook.appDir, bin), 0o755);
    symlinkSync(join(env.webhook.appDir, bin), join(pathDir, 'kubectl-overcommit'));
    const plugin = await promisify(execFile)(
      join(env.binDir, 'kubectl'),
      ['overcommit', 'plan', '-o', 'json', '--pod-size', 'cpu=500m,memory=1Gi', '--configmap', `${env.webhook.namespace}/${env.webhook.configMap}`],
      { env: { ...process.env, KUBECONFIG: env.adminKubeconfig, PATH: [pathDir, dirname(process.execPath), process.env.PATH].join(':') } },
    );
    const fromPlugin = JSON.parse(plugin.stdout);
    for (const name of [shadowed.name, plain.name]) expect(rowOf(fromPlugin, name)).toEqual(rowOf(before, name));

    // Enforce through the ConfigMap; the kubelets' next writes store the plan, node for node.
    await webhook.useConfig(config('enforce'));
    await Promise.all(kubelets.map((k) => k.syncNow({ force: true })));
    for (const kubelet of kubelets) {
      const stored = await getNode(admin, kubelet.name);
      expect(managed(stored.allocatable), kubelet.name).toEqual(managed(rowOf(before, kubelet.name).planned));
    }
    expect(rowOf(await plan(), shadowed.name)).toMatchObject({ mode: 'enforce', matches: true });
    for (const kubelet of kubelets) kubelet.assertHealthy();
  });
});
