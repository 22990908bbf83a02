/**
 * nodes.coalesceStatusWrites against a real control plane (docs/status-coalescing.md):
 * simulated kubelets that register and patch like a kubelet (user `system:node:<name>`,
 * User-Agent `kubelet/…`, so managedFields carry the manager `kubelet`), inflated nodes whose
 * kubelets therefore PATCH at every update, kube-controller-manager's node lifecycle
 * controller watching them.
 *
 * Kubelets here update every UPDATE_MS (a real one: 10 s); the report period is WINDOW, so each
 * node's window (90–100 % of it) is longer than kube-controller-manager's
 * node-monitor-grace-period (50 s): the stored heartbeats get older than the grace period and
 * only the Lease keeps the nodes Ready.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  claimNodeNames,
  tearDown,
  SimKubelet,
  waitUntil,
  WebhookProcess,
  type E2eEnv,
  type KubeClient,
  type StatusUpdate,
  webhookFixture,
} from './harness/index.js';
import { deepEqual } from '../support/strategic-merge.js';

const UPDATE_MS = 1_000;
const WINDOW = '62s';
const WINDOW_MS = 62_000;
const RUN_MS = 125_000;
const RATIOS = { cpu: 1.5, memory: 1.2 };
const MACHINE = { cpu: '4', memory: '16393232Ki', pods: '110', 'ephemeral-storage': '101430960Ki' };

let env: E2eEnv;
let admin: KubeClient;
let webhook: WebhookProcess;
let kubelets: SimKubelet[] = [];

function readyOf(node: any): any {
  return node?.status?.conditions?.find((c: any) => c.type === 'Ready');
}

beforeAll(async () => {
  ({ env, admin, webhook } = webhookFixture());
  await webhook.start();
  await webhook.useConfig({ nodes: { defaultRatios: RATIOS, coalesceStatusWrites: true, statusReportPeriod: WINDOW } });
});

afterAll(() => tearDown({ env, admin, webhook, kubelets }));

describe('status-write coalescing against a real control plane', () => {
  it(
    'heartbeat-only writes leave the stored Node (resourceVersion) unchanged; heartbeats advance every window; Ready=False is stored at the next update; the lifecycle controller never marks a node NotReady',
    async () => {
      const names = claimNodeNames(env, 'sim-node', 3);
      kubelets = await Promise.all(
        names.map((name) => SimKubelet.start(env, { name, capacity: MACHINE, updateFrequencyMs: UPDATE_MS, reportFrequencyMs: 10 * 60_000 })),
      );
      const [flapping] = kubelets;

      // Registered the way a kubelet registers: managedFields under the manager `kubelet`.
      for (const kubelet of kubelets) {
        expect(kubelet.registered.metadata.managedFields.map((f: any) => f.manager)).toContain('kubelet');
      }

      // What the node lifecycle controller made of the nodes: the Ready status and its taints, polled.
      const seen = new Map<string, { readyStatuses: Set<string>; unreachableTaint: boolean }>();
      for (const name of names) seen.set(name, { readyStatuses: new Set(), unreachableTaint: false });
      let watching = true;
      const watcher = (async () => {
        while (watching) {
          const list = await admin.get('/api/v1/nodes');
          for (const node of list.items) {
            const entry = seen.get(node.metadata.name);
            if (entry === undefined) continue;
            entry.readyStatuses.add(readyOf(node)?.status);
            if ((node.spec.taints ?? []).some((t: any) => t.key.startsWith('node.kubernetes.io/unreachable') || t.key === 'node.kubernetes.io/not-ready')) {
              entry.unreachableTaint = true;
            }
          }
          await new Promise((r) => setTimeout(r, 250));
        }
      })();

      const startedAt = Date.now();
      // A soak: what is asserted is what the cluster stored over RUN_MS, so the test waits out the time.
      // Half-way: the kubelet reports Ready=False; the very next PATCH stores it.
      await new Promise((r) => setTimeout(r, RUN_MS / 2));
      const notReadyAt = Date.now();
      flapping!.setReady(false);
      const notReadyUpdate = await waitUntil('the first status PATCH after Ready=False', () => flapping!.updates.find((u) => u.at >= notReadyAt && u.ok), {
        timeoutMs: 3 * UPDATE_MS + 5_000,
      });
      expect(readyOf(notReadyUpdate.stored)).toMatchObject({ status: 'False', reason: 'KubeletNotReady' });
      // The very next PATCH, whenever the loaded machine lets the kubelet send it: none went before it.
      expect(flapping!.updates.find((u) => u.at >= notReadyAt)).toBe(notReadyUpdate);
      const storedNotReady = await admin.get(`/api/v1/nodes/${flapping!.name}`);
      expect(readyOf(storedNotReady).status).toBe('False');
      await flapping!.waitForPatches(2);
      flapping!.setReady(true);

      await new Promise((r) => setTimeout(r, startedAt + RUN_MS - Date.now()));
      watching = false;
      await watcher;

      for (const kubelet of kubelets) {
        kubelet.assertHealthy();
        const updates = kubelet.updates.filter((u) => u.ok && u.at >= startedAt) as Array<Required<StatusUpdate>>;
        // Inflation makes the kubelet PATCH at every update…
        expect(updates.length, kubelet.name).toBeGreaterThan((RUN_MS / UPDATE_MS) * 0.8);
        // …and the API server stored only heartbeats once per window and the Ready transitions. Every other
        // change of resourceVersion between two answers is another writer's (the lifecycle controller's taints).
        let statusWrites = 0;
        for (let i = 1; i < updates.length; i++) {
          const [before, after] = [updates[i - 1]!.stored, updates[i]!.stored];
          if (!deepEqual(before.status.conditions, after.status.conditions)) statusWrites++;
          else if (before.metadata.resourceVersion !== after.metadata.resourceVersion) {
            expect(
              deepEqual(before.spec, after.spec),
              `${kubelet.name}: a write at ${new Date(updates[i]!.at).toISOString()} that changed neither the conditions nor the spec`,
            ).toBe(false);
          } else {
            // Coalesced: the answer is the stored Node itself, managedFields times included.
            expect(after.metadata.managedFields).toEqual(before.metadata.managedFields);
          }
        }
        const transitions = kubelet === flapping ? 2 : 0;
        expect(statusWrites, `${kubelet.name}: status writes`).toBeLessThanOrEqual(Math.ceil(RUN_MS / (WINDOW_MS * 0.9)) + transitions);
        const unchanged = updates.filter((u, i) => i > 0 && u.stored.metadata.resourceVersion === updates[i - 1]!.stored.metadata.resourceVersion).length;
        expect(unchanged, `${kubelet.name}: PATCHes answered with the stored resourceVersion`).toBeGreaterThan(updates.length - statusWrites - 8);
        // Heartbeats in the stored Node advance at least once per window (plus one update and slack).
        const heartbeats = [...new Set(updates.map((u) => Date.parse(readyOf(u.stored).lastHeartbeatTime)))].sort();
        expect(heartbeats.length, kubelet.name).toBeGreaterThanOrEqual(2);
        for (let i = 1; i < heartbeats.length; i++) expect(heartbeats[i]! - heartbeats[i - 1]!).toBeLessThanOrEqual(WINDOW_MS + UPDATE_MS + 3_000);
        const lastHeartbeat = heartbeats.at(-1)!;
        expect(Date.now() - lastHeartbeat).toBeLessThanOrEqual(WINDOW_MS + UPDATE_MS + 3_000);

        const entry = seen.get(kubelet.name)!;
        // The node lifecycle controller never saw a silent node: no Unknown, no unreachable/not-ready taint on the steady nodes.
        expect(
          [...entry.readyStatuses].filter((s) => s !== 'True' && s !== 'False'),
          kubelet.name,
        ).toEqual([]);
        if (kubelet !== flapping) expect(entry.unreachableTaint, kubelet.name).toBe(false);
      }

      const metrics = await webhook.metrics();
      expect(metrics.sum('kube_overcommit_status_writes_total', { decision: 'coalesced', reason: 'heartbeat' })).toBeGreaterThan(100);
      expect(metrics.sum('kube_overcommit_status_writes_total', { decision: 'passed', reason: 'report-due' })).toBeGreaterThanOrEqual(3);
      expect(metrics.sum('kube_overcommit_status_writes_total', { decision: 'passed', reason: 'condition-changed' })).toBeGreaterThanOrEqual(2);
    },
    RUN_MS + 60_000,
  );
});
