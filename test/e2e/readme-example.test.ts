/**
 * The README's first example, run as written: its `kubectl get nodes -o custom-columns=...`
 * command, on a node shaped like its worker-1 (4 CPUs, 16290832Ki allocatable memory), before and
 * after a pool at `cpu: 1.5`, reached by the reconciler without a kubelet write.
 */
import { readFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { adminClient, claimNodeNames, e2eEnv, getNode, kubectl, resetConfig, SimKubelet, waitUntil, WebhookProcess } from './harness/index.js';

const env = e2eEnv();

/** The README's console blocks: the command after `$ `, and the output lines split into columns. */
function readmeExamples(): Array<{ command: string[]; rows: string[][] }> {
  const readme = readFileSync('README.md', 'utf8');
  return [...readme.matchAll(/```console\n\$ (kubectl get nodes [^\n]+)\n([\s\S]*?)```/g)].map((m) => ({
    command: m[1]!.split(' ').slice(1),
    rows: m[2]!
      .trim()
      .split('\n')
      .map((line) => line.trim().split(/\s+/)),
  }));
}

describe("README's kubectl get nodes, before and after", () => {
  const admin = adminClient(env);
  const webhook = new WebhookProcess(env);
  let kubelet: SimKubelet | undefined;
  beforeAll(async () => {
    await webhook.start();
    await webhook.useConfig({ nodes: { defaultRatios: { cpu: 1, memory: 1 }, pools: [] } });
  });
  afterAll(async () => {
    await kubelet?.stop({ deleteNode: true });
    await webhook.stop();
    await resetConfig(env);
    admin.close();
  });

  it('shows allocatable cpu 4 with every ratio 1, then 6 within seconds of the pool at cpu: 1.5', async () => {
    const [before, after] = readmeExamples();
    expect(before!.command).toEqual(after!.command);
    const [name] = claimNodeNames(env, 'sim-node', 1);
    kubelet = await SimKubelet.start(env, {
      name: name!,
      capacity: { cpu: '4', memory: '16393232Ki', pods: '110' },
      allocatable: { cpu: '4', memory: '16290832Ki', pods: '110' },
      labels: { pool: 'workers' },
      // No status tick during the test: whatever moves the node is not its kubelet.
      updateFrequencyMs: 60_000,
    });
    // The command as written, for this node (its name in place of worker-1).
    const run = async () =>
      (await kubectl(env, [...before!.command.slice(0, 2), name!, ...before!.command.slice(2)]))
        .trim()
        .split('\n')
        .map((l) => l.trim().split(/\s+/));
    const asWorker = (rows: string[][]) => rows.map((row, i) => (i === 0 ? row : ['worker-1', ...row.slice(1)]));
    expect(asWorker(await run())).toEqual(before!.rows);

    await webhook.useConfig({
      nodes: { defaultRatios: { cpu: 1, memory: 1 }, pools: [{ name: 'workers', nodeSelector: { matchLabels: { pool: 'workers' } }, ratios: { cpu: 1.5 } }] },
    });
    const writes = kubelet.updates.length;
    await waitUntil('allocatable cpu 6', async () => (await getNode(admin, name!)).allocatable.cpu === '6', { timeoutMs: 10_000, intervalMs: 200 });
    expect(asWorker(await run())).toEqual(after!.rows);
    // The reconciler moved it: the kubelet had nothing to write.
    expect(kubelet.updates.length).toBe(writes);
    kubelet.assertHealthy();
  });
});
