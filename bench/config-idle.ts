/**
 * The idle-nodes phase of `npm run bench:config`: a ratio raised from 1 on nodes whose kubelets
 * have nothing to write, brought to every node by the reconciler's nudges alone.
 *
 * `--idle-nodes` (1,000) simulated kubelets (bench/fleet.ts) with a real kubelet's timing: a
 * status sync every 10 s, a report every 5 min, Leases renewed every 10 s. At ratio 1 the stored
 * allocatable is what each kubelet computes, so none writes. Each round PUTs the ConfigMap with
 * cpu ratio `IDLE_RATIOS[i]` (raised from 1) and times, from the PUT's answer, until every node's
 * stored allocatable carries floor(4 × ratio), seen on a watch of the Nodes (the first event
 * carrying it, per node); then it puts the ratio back to 1 and waits until every node is raw
 * again (not timed) before the next round. The fleet's kubelets read their Node from their last
 * answer (`read: lister`), so they do not write during a round either: the figure is the
 * reconciler's (pacing, the API server, the webhook), not the kubelets'.
 */
import https from 'node:https';
import { readFileSync } from 'node:fs';
import { configYaml } from '../test/support/config.js';
import type { E2eEnv } from '../test/support/env.js';
import { adminClient } from '../test/support/kube-client.js';
import { claimNodeNames } from '../test/support/nodes.js';
import { baseUnits } from '../test/support/quantity.js';
import type { Stage } from '../test/support/stage.js';
import { waitUntil } from '../test/support/wait.js';
import type { WebhookProcess } from '../test/support/webhook.js';
import { Fleet } from './fleet.js';
import { percentile, round, sleep } from './lib.js';

/** The ratios the rounds raise cpu to from 1, in turn. */
const IDLE_RATIOS = [1.5, 2, 1.25];
const CPU = '4';
/** The target: every one of 1,000 idle nodes within 15 s at the default rate (100 nodes/s). */
export const ALL_NODES_TARGET_SECONDS = 15;

export interface IdleOptions {
  nodes: number;
  rounds: number;
  images: number;
  /** nodes.reconcile.maxNodesPerSecond for the rounds (the default: 100). */
  maxNodesPerSecond: number;
}

export interface IdleRound {
  round: number;
  ratio: number;
  /** Edit answered → every node stores the new value (the last node), s. */
  allNodesSeconds: number;
  /** Per node: median and p99, s. */
  nodeMedianSeconds: number;
  nodeP99Seconds: number;
  nudges: { applied: number; unchanged: number; failed: number };
  /** Status PATCHes the kubelets sent during the round (0: nothing but the nudges wrote). */
  kubeletPatches: number;
}

const milli = (ratio: number) => (baseUnits('cpu', CPU) * BigInt(Math.round(ratio * 1_000_000))) / 1_000_000n;

/** A watch of every Node from `resourceVersion`, calling `onNode` with each added or modified one, re-opened when it ends. */
function watchNodes(env: E2eEnv, resourceVersion: string, onNode: (node: any, at: number) => void): { stop: () => void } {
  let request: ReturnType<typeof https.request> | undefined;
  let stopped = false;
  let rv = resourceVersion;
  const open = () => {
    if (stopped) return;
    const url = new URL(`/api/v1/nodes?watch=1&allowWatchBookmarks=true&resourceVersion=${rv}`, env.apiserverUrl);
    request = https.request(url, { headers: { authorization: `Bearer ${env.adminToken}` }, ca: readFileSync(env.caFile) }, (res) => {
      let buffered = '';
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => {
        const at = Date.now();
        buffered += chunk;
        let newline: number;
        while ((newline = buffered.indexOf('\n')) >= 0) {
          const line = buffered.slice(0, newline);
          buffered = buffered.slice(newline + 1);
          if (!line) continue;
          const event = JSON.parse(line);
          if (event.object?.metadata?.resourceVersion) rv = event.object.metadata.resourceVersion;
          if (event.type === 'ADDED' || event.type === 'MODIFIED') onNode(event.object, at);
        }
      });
      res.on('end', () => setTimeout(open, 100));
      res.on('error', () => setTimeout(open, 100));
    });
    request.on('error', () => setTimeout(open, 500));
    request.end();
  };
  open();
  return {
    stop: () => {
      stopped = true;
      request?.destroy();
    },
  };
}

export async function runIdlePhase(stage: Stage, webhook: WebhookProcess, options: IdleOptions, log: (line: string) => void) {
  const { env } = stage;
  const admin = adminClient(env);
  stage.onTearDown(() => admin.close());
  const configText = (ratio: number) =>
    configYaml({ nodes: { defaultRatios: { cpu: ratio, memory: 1 }, reconcile: { maxNodesPerSecond: options.maxNodesPerSecond } } });
  const put = async (ratio: number) =>
    admin.put(`/api/v1/namespaces/${env.webhook.namespace}/configmaps/${env.webhook.configMap}`, {
      apiVersion: 'v1',
      kind: 'ConfigMap',
      metadata: { name: env.webhook.configMap, namespace: env.webhook.namespace },
      data: { 'config.yaml': configText(ratio) },
    });
  await webhook.waitForConfig((await put(1)).metadata.resourceVersion);

  const names = claimNodeNames(env, 'sim-node', options.nodes);
  const wanted = new Set(names);
  /** Per node, the cpu (millicores) stored and when the watch first showed it. */
  const stored = new Map<string, { cpu: bigint; since: number }>();
  const list = await admin.get('/api/v1/nodes', { limit: 1 });
  const watch = watchNodes(env, list.metadata.resourceVersion, (node, at) => {
    const name = node.metadata?.name;
    if (!wanted.has(name)) return;
    const cpu = baseUnits('cpu', node.status?.allocatable?.cpu ?? '0');
    if (stored.get(name)?.cpu !== cpu) stored.set(name, { cpu, since: at });
  });
  stage.onTearDown(() => watch.stop());
  const fleet = new Fleet(env, {
    names,
    capacity: { cpu: CPU, memory: '16Gi', pods: '110', 'ephemeral-storage': '100Gi' },
    images: options.images,
    read: 'lister',
    updateFrequencyMs: 10_000,
    reportFrequencyMs: 300_000,
    leaseDurationSeconds: 40,
    startSpreadMs: 20_000,
    maxSockets: 32,
  });
  stage.onTearDown(() => fleet.stop());
  log(`idle phase: registering ${names.length} kubelets (10 s status sync, 5 min report) over 20 s`);
  await fleet.start();
  if (fleet.counters.registered < names.length)
    throw new Error(`only ${fleet.counters.registered} of ${names.length} idle nodes registered: ${fleet.errors.slice(-5).join('; ')}`);

  const everyNode = (cpu: bigint, timeoutMs: number) =>
    waitUntil(
      `every idle node to store cpu ${cpu}m`,
      () => {
        const at = names.map((name) => stored.get(name)).filter((s) => s?.cpu === cpu);
        return at.length === names.length ? at.map((s) => s!.since) : undefined;
      },
      { timeoutMs, intervalMs: 50, describe: () => `${names.filter((name) => stored.get(name)?.cpu === cpu).length}/${names.length} do` },
    );
  await everyNode(milli(1), 60_000);
  await sleep(15_000); // every kubelet's first syncs: nothing to write
  log(`idle phase: ${names.length} nodes store cpu ${milli(1)}m; kubelet status PATCHes so far ${fleet.counters.patchAttempts}`);

  const rounds: IdleRound[] = [];
  for (let i = 0; i < options.rounds; i++) {
    const ratio = IDLE_RATIOS[i % IDLE_RATIOS.length]!;
    const before = await webhook.metrics();
    const patches0 = fleet.counters.patchAttempts;
    const sent = Date.now();
    await put(ratio);
    const returned = Date.now();
    const times = await everyNode(milli(ratio), 120_000);
    const fromReturn = times.map((t) => Math.max(0, t - returned) / 1000).sort((a, b) => a - b);
    const after = await webhook.metrics();
    const delta = (outcome: string) =>
      after.sum('kube_overcommit_reconcile_nudges_total', { outcome }) - before.sum('kube_overcommit_reconcile_nudges_total', { outcome });
    const r: IdleRound = {
      round: i + 1,
      ratio,
      allNodesSeconds: round(fromReturn.at(-1)!, 2),
      nodeMedianSeconds: round(percentile(fromReturn, 50), 2),
      nodeP99Seconds: round(percentile(fromReturn, 99), 2),
      nudges: { applied: delta('applied'), unchanged: delta('unchanged'), failed: delta('failed') },
      kubeletPatches: fleet.counters.patchAttempts - patches0,
    };
    rounds.push(r);
    log(
      `idle round ${r.round}: cpu ratio 1 → ${ratio} (PUT ${returned - sent} ms): every node after ${r.allNodesSeconds} s (median node ${r.nodeMedianSeconds} s); nudges ${JSON.stringify(r.nudges)}; kubelet PATCHes ${r.kubeletPatches}`,
    );
    // Back to 1 (the reconciler brings every node back to raw), untimed.
    await put(1);
    await everyNode(milli(1), 120_000);
    await sleep(5_000);
  }
  watch.stop();
  await fleet.stop();
  for (const name of names) await admin.delete(`/api/v1/nodes/${name}`).catch(() => undefined);

  const worst = rounds.map((r) => r.allNodesSeconds).sort((a, b) => a - b);
  const allNodesP99Seconds = round(percentile(worst, 99), 2);
  return {
    method: `${names.length} idle kubelets (status sync every 10 s reading their last answer, report every 5 min, Leases every 10 s); each round PUTs cpu ratio 1 → new, timed from the PUT's answer until a watch of the Nodes has shown every node with floor(4 × ratio); maxNodesPerSecond ${options.maxNodesPerSecond}`,
    options,
    rounds,
    allNodesP99Seconds,
    target: { allNodesP99Seconds: `<= ${ALL_NODES_TARGET_SECONDS}`, pass: allNodesP99Seconds <= ALL_NODES_TARGET_SECONDS },
  };
}
