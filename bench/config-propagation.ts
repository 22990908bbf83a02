/**
 * Config propagation (issue 4, part 3): `npm run bench:config`.
 *
 * The e2e harness's control plane, the webhook as the image runs it (in-cluster mode: it watches
 * its ConfigMap), and `--nodes` simulated kubelets (bench/fleet.ts) that update their status every
 * `--update-seconds` (2 s by default, to keep a round short; a kubelet's default is 10 s). Each
 * round edits the ConfigMap's cpu ratio (always to a value ≠ 1 and ≠ the previous one, so every
 * kubelet update is a PATCH that the webhook inflates) with an API PUT, and measures from the
 * moment the PUT returns:
 *
 *   (i)  serving: until the webhook answers a dry AdmissionReview (a 4-CPU node's nodes/status
 *        UPDATE, `dryRun: true`, sent to /mutate every ~10 ms) with the new ratio's allocatable;
 *        also until /readyz reports the ConfigMap's new resourceVersion (polled every ~10 ms);
 *   (ii) nodes: until the status PATCH answer (the Node as stored) of every node carries the new
 *        allocatable. Bounded by the kubelets' update period: each node picks the new ratio up at
 *        its next status update, 0 to `--update-seconds` × 1.04 later.
 *
 * A ratio raised from exactly 1 is different: a node whose stored allocatable equals its real one
 * sends nothing until its next report (`nodeStatusReportFrequency`, 5 min ± 50 %), and only the
 * reconciler's nudges bring it the new value. The idle phase (bench/config-idle.ts), after the
 * rounds above, measures that: `--idle-nodes` (1,000) idle nodes, `--idle-rounds` (3) raises from
 * ratio 1, timed until every node stores the new value; `allNodesP99Seconds` in the JSON, against
 * the target of 15 s at the default `--max-nodes-per-second` (100).
 *
 * Flags: --nodes 50 --rounds 10 --update-seconds 2 --images 50 --edit put|apply (API PUT, or
 *   `kubectl apply` as the harness's applyConfig does) --read lister|get (bench/fleet.ts) --quiet 70 (one more round after that many
 *   seconds without an edit, longer than client-node's 30 s watch inactivity timeout; 0: none) --pause 1 (s between rounds, plus a random part of one update period) --keep --out FILE
 *   --idle-nodes 1000 (0: no idle phase) --idle-rounds 3 --max-nodes-per-second 100; --rounds 0 runs the idle phase only
 * Writes bench/results/config-propagation.json. Default run: about 2.5 minutes, then the idle phase (about 3 minutes).
 */
import { readFileSync, writeFileSync } from 'node:fs';
import https from 'node:https';
import { join } from 'node:path';
import { applyConfig, configYaml } from '../test/support/config.js';
import type { E2eEnv } from '../test/support/env.js';
import { adminClient } from '../test/support/kube-client.js';
import { claimNodeNames } from '../test/support/nodes.js';
import { baseUnits } from '../test/support/quantity.js';
import { onStage, type Stage } from '../test/support/stage.js';
import { waitUntil } from '../test/support/wait.js';
import { WebhookProcess } from '../test/support/webhook.js';
import { kwokNode, nodeReview } from '../test/fixtures/nodes.js';
import { nodeSizes } from './cluster.js';
import { ALL_NODES_TARGET_SECONDS, runIdlePhase } from './config-idle.js';
import { Fleet } from './fleet.js';
import { benchMain, DEPLOYMENT_MEMORY_LIMIT_MIB, loadAvg, machineInfo, median, percentile, round, sleep, table } from './lib.js';

const bench = benchMain(
  {
    script: 'bench:config',
    results: 'config-propagation.json',
    clock: true,
    flags: {
      nodes: { type: 'number', default: 50, min: 1, integer: true },
      rounds: { type: 'number', default: 10, integer: true },
      'update-seconds': { type: 'number', default: 2, min: 0.1 },
      images: { type: 'number', default: 50, integer: true },
      edit: { type: 'string', default: 'put', choices: ['put', 'apply'] },
      pause: { type: 'number', default: 1 },
      quiet: { type: 'number', default: 70 },
      /** How a kubelet's sync reads its Node: `lister` (its last answer from the API server) or `get` (GET ?resourceVersion=0). */
      read: { type: 'string', default: 'lister', choices: ['lister', 'get'] },
      keep: { type: 'boolean' },
      'idle-nodes': { type: 'number', default: 1000, integer: true },
      'idle-rounds': { type: 'number', default: 3, min: 1, integer: true },
      'max-nodes-per-second': { type: 'number', default: 100, min: 1, integer: true },
    },
  },
  main,
);
const { flags, log, outFile } = bench;

const options = {
  nodes: flags.nodes,
  rounds: flags.rounds,
  updateSeconds: flags['update-seconds'],
  reportSeconds: 300,
  images: flags.images,
  edit: flags.edit,
  pauseSeconds: flags.pause,
  quietSeconds: flags.quiet,
  read: flags.read,
  keep: flags.keep,
  idleNodes: flags['idle-nodes'],
  idleRounds: flags['idle-rounds'],
  maxNodesPerSecond: flags['max-nodes-per-second'],
};

/** The ratios the rounds set, in turn: never 1, never the one before (the run starts at 1.5). */
const RATIOS = [2, 1.25, 2.5, 1.5, 3, 1.75];
const START_RATIO = 1.5;
const CPU = '4';

function expectedMilli(cpu: string, ratio: number): bigint {
  return (baseUnits('cpu', cpu) * BigInt(Math.round(ratio * 1_000_000))) / 1_000_000n;
}

const ms = (from: number, to: number) => round(to - from, 1);

/** What the webhook answers a 4-CPU node's dry-run status update with: its new allocatable cpu in millicores, or null. */
function probe(env: E2eEnv, agent: https.Agent, body: Buffer): Promise<bigint | null> {
  return new Promise((resolve, reject) => {
    const req = https.request(
      {
        hostname: '127.0.0.1',
        port: env.webhook.httpsPort,
        path: '/mutate',
        method: 'POST',
        agent,
        headers: { 'content-type': 'application/json', 'content-length': body.length },
        timeout: 2_000,
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => {
          try {
            const review = JSON.parse(Buffer.concat(chunks).toString('utf8'));
            const patch = review.response?.patch ? JSON.parse(Buffer.from(review.response.patch, 'base64').toString('utf8')) : [];
            const op = patch.find((o: any) => o.path === '/status/allocatable/cpu');
            resolve(op ? baseUnits('cpu', op.value) : null);
          } catch (error) {
            reject(error);
          }
        });
        res.on('error', reject);
      },
    );
    req.on('timeout', () => req.destroy(new Error('probe: timeout')));
    req.on('error', reject);
    req.end(body);
  });
}

/** The config origin /readyz reports (`configmap:ns/name@<resourceVersion>`). */
async function readyOrigin(webhook: WebhookProcess): Promise<string> {
  return String((await webhook.readyz())?.details?.config?.origin ?? '');
}

interface Round {
  round: number;
  ratio: number;
  resourceVersion: string;
  /** The edit's own time: request sent → answer (API PUT) or kubectl started → exited. */
  editMs: number;
  /** (i) edit returned → first dry review answered with the new ratio. Negative: served before the edit's answer arrived. */
  serveMs: number;
  /** (i) edit returned → /readyz reports the new resourceVersion. */
  readyzMs: number;
  /** (ii) edit returned → every node's stored allocatable has the new value (the last node). */
  allNodesMs: number;
  /** Per node (edit returned → its PATCH answer with the new value): median. */
  nodeMedianMs: number;
  nodes: number;
  probes: number;
  /** The extra round, after this long without an edit. */
  afterQuietSeconds?: number;
}

function main(): Promise<number> {
  log(
    `kube-overcommit config-propagation bench — ${options.nodes} kubelets updating every ${options.updateSeconds} s, ${options.rounds} rounds, edit by ${options.edit}; load ${loadAvg().join(' ')}`,
  );
  return onStage('bench-config', log, options.keep, async (stage) => {
    const { env } = stage;
    // As in its pod: the Deployment's NODE_OPTIONS (WebhookProcess) and memory limit.
    const webhook = new WebhookProcess(env, { logLevel: 'info', memoryLimitMiB: DEPLOYMENT_MEMORY_LIMIT_MIB });
    await webhook.start();
    stage.onTearDown(() => webhook.stop());
    const updating = options.rounds > 0 ? await updatingPhase(stage, webhook) : null;
    const idle =
      options.idleNodes > 0
        ? await runIdlePhase(
            stage,
            webhook,
            { nodes: options.idleNodes, rounds: options.idleRounds, images: options.images, maxNodesPerSecond: options.maxNodesPerSecond },
            log,
          )
        : null;
    const report = {
      benchmark: 'config-propagation',
      command: bench.command,
      startedAt: bench.startedAt.toISOString(),
      finishedAt: new Date().toISOString(),
      machine: { ...machineInfo(), loadAvgAtStart: bench.loadAvgAtStart, loadAvgAtEnd: loadAvg() },
      cluster: { kubernetes: env.k8sVersion },
      options,
      ...(updating?.report ?? {}),
      allNodesP99Seconds: idle?.allNodesP99Seconds ?? null,
      idleNodes: idle,
    };
    writeFileSync(outFile, `${JSON.stringify(report, null, 2)}\n`);
    if (idle) {
      console.log(
        `\nidle nodes (${options.idleNodes}, raised from ratio 1, maxNodesPerSecond ${options.maxNodesPerSecond}): every node stored the new value after ${idle.rounds.map((r) => `${r.allNodesSeconds} s`).join(', ')}`,
      );
      console.log(`allNodesP99Seconds ${idle.allNodesP99Seconds} s (target ≤ ${ALL_NODES_TARGET_SECONDS} s: ${idle.target.pass ? 'pass' : 'MISSED'})`);
    }
    console.log(`wrote ${outFile}`);
    return updating?.pass ?? true;
  });
}

/** Updating kubelets: the rounds of the file's header. */
async function updatingPhase(stage: Stage, webhook: WebhookProcess) {
  const { env } = stage;
  const configText = (ratio: number) => configYaml({ nodes: { defaultRatios: { cpu: ratio, memory: 1 } } });
  await webhook.waitForConfig(await applyConfig(env, configText(START_RATIO)));

  // Every node's latest PATCH answer: when a node first stored each allocatable cpu value.
  const firstSeen = new Map<string, Map<bigint, number>>();
  const names = claimNodeNames(env, 'sim-node', options.nodes);
  const fleet = new Fleet(env, {
    names,
    capacity: { cpu: CPU, memory: '16Gi', pods: '110', 'ephemeral-storage': '100Gi' },
    images: options.images,
    read: options.read,
    updateFrequencyMs: options.updateSeconds * 1000,
    reportFrequencyMs: options.reportSeconds * 1000,
    leaseDurationSeconds: 40,
    startSpreadMs: options.updateSeconds * 1000,
    maxSockets: 16,
    onPatched: (name, node, at) => {
      const cpu = baseUnits('cpu', node.status.allocatable.cpu);
      let seen = firstSeen.get(name);
      if (!seen) firstSeen.set(name, (seen = new Map()));
      if (!seen.has(cpu)) seen.set(cpu, at);
    },
  });
  stage.onTearDown(() => fleet.stop());
  await fleet.start();
  if (fleet.counters.registered < options.nodes)
    throw new Error(`only ${fleet.counters.registered} of ${options.nodes} nodes registered:\n  ${fleet.errors.join('\n  ')}`);
  const startCpu = expectedMilli(CPU, START_RATIO);
  const waitNodes = (cpu: bigint, since: number, timeoutMs: number) => {
    const seen = () => names.map((n) => firstSeen.get(n)?.get(cpu)).filter((t): t is number => t !== undefined && t >= since);
    return waitUntil(
      `every node to store cpu ${cpu}m`,
      () => {
        const times = seen();
        return times.length === names.length ? times : undefined;
      },
      {
        timeoutMs,
        intervalMs: 20,
        describe: () => `${seen().length}/${names.length} did; fleet errors: ${fleet.errors.slice(-5).join('; ')}`,
      },
    );
  };
  await waitNodes(startCpu, 0, 30_000);
  log(`${names.length} nodes registered, every one stores cpu ${startCpu}m (ratio ${START_RATIO})`);

  const probeAgent = new https.Agent({ keepAlive: true, maxSockets: 1, ca: readFileSync(join(env.webhook.tlsDir, '..', 'ca.crt')) });
  stage.onTearDown(() => probeAgent.destroy());
  // A dry run, so that the probe does not show up in the per-node gauges.
  const probeReview = nodeReview(
    kwokNode({ name: 'bench-probe', capacity: { cpu: CPU, memory: '16Gi', pods: '110' }, allocatable: { cpu: CPU, memory: '16Gi', pods: '110' } }),
  );
  probeReview.request.dryRun = true;
  const probeBytes = Buffer.from(JSON.stringify(probeReview));
  const served = await probe(env, probeAgent, probeBytes);
  if (served !== startCpu) throw new Error(`the probe review answered cpu ${served}m, expected ${startCpu}m`);

  const admin = adminClient(env);
  stage.onTearDown(() => admin.close());
  const rounds: Round[] = [];
  const perNodeMs: number[] = [];
  let quiet: Round | undefined;
  const quietRound = options.quietSeconds > 0 ? 1 : 0;
  for (let i = 0; i < options.rounds + quietRound; i++) {
    const afterQuiet = i === options.rounds;
    if (afterQuiet) {
      log(`no edit for ${options.quietSeconds} s (the webhook's watch idles and reconnects), then one more round`);
      await sleep(options.quietSeconds * 1000);
    }
    const ratio = RATIOS[i % RATIOS.length]!;
    const want = expectedMilli(CPU, ratio);
    firstSeen.clear(); // a ratio may come back: only this round's answers count
    // Pollers first, so that nothing is missed if the webhook is faster than the edit's answer.
    let servedAt: number | undefined;
    let probes = 0;
    let readyAt: number | undefined;
    let rv: string | undefined;
    let stop = false;
    const probing = (async () => {
      while (!stop && servedAt === undefined) {
        probes++;
        const value = await probe(env, probeAgent, probeBytes).catch(() => null);
        if (value === want) servedAt = performance.now();
        else await sleep(10);
      }
    })();
    const origins: Array<{ origin: string; at: number }> = [];
    const readying = (async () => {
      let last = '';
      while (!stop && readyAt === undefined) {
        const origin = await readyOrigin(webhook).catch(() => '');
        const at = performance.now();
        if (origin !== last) origins.push({ origin, at });
        last = origin;
        if (rv !== undefined) {
          const hit = origins.find((o) => o.origin.endsWith(`@${rv}`));
          if (hit) readyAt = hit.at;
        }
        if (readyAt === undefined) await sleep(10);
      }
    })();
    const sentWall = Date.now();
    const sent = performance.now();
    if (options.edit === 'put') {
      const cm = await admin.put(`/api/v1/namespaces/${env.webhook.namespace}/configmaps/${env.webhook.configMap}`, {
        apiVersion: 'v1',
        kind: 'ConfigMap',
        metadata: { name: env.webhook.configMap, namespace: env.webhook.namespace },
        data: { 'config.yaml': configText(ratio) },
      });
      rv = cm.metadata.resourceVersion;
    } else {
      rv = await applyConfig(env, configText(ratio));
    }
    const returned = performance.now();
    const returnedWall = sentWall + (returned - sent);
    const timeout = setTimeout(() => (stop = true), 15_000);
    await Promise.all([probing, readying]);
    clearTimeout(timeout);
    if (servedAt === undefined || readyAt === undefined)
      throw new Error(`round ${i + 1}: the webhook did not serve ratio ${ratio} within 15 s (readyz: ${JSON.stringify(origins)})`);
    const nodeTimes = await waitNodes(want, sentWall, 30_000 + options.updateSeconds * 3000);
    const fromReturn = nodeTimes.map((t) => t - returnedWall).sort((a, b) => a - b);
    const r: Round = {
      round: i + 1,
      ratio,
      resourceVersion: rv!,
      editMs: ms(sent, returned),
      serveMs: ms(returned, servedAt),
      readyzMs: ms(returned, readyAt),
      allNodesMs: round(fromReturn.at(-1)!, 0),
      nodeMedianMs: round(median(fromReturn), 0),
      nodes: fromReturn.length,
      probes,
      ...(afterQuiet ? { afterQuietSeconds: options.quietSeconds } : {}),
    };
    if (afterQuiet) quiet = r;
    else {
      rounds.push(r);
      perNodeMs.push(...fromReturn);
    }
    log(
      `round ${r.round}: cpu ratio ${ratio}: edit ${r.editMs} ms, served after ${r.serveMs} ms (readyz ${r.readyzMs} ms), every node after ${r.allNodesMs} ms (median node ${r.nodeMedianMs} ms)`,
    );
    // A random phase for the next edit relative to the kubelets' update ticks.
    await sleep((options.pauseSeconds + Math.random() * options.updateSeconds) * 1000);
  }

  const q = (values: number[], p: number) =>
    round(
      percentile(
        [...values].sort((a, b) => a - b),
        p,
      ),
      1,
    );
  const stat = (values: number[]) => ({ p50: q(values, 50), p99: q(values, 99), max: q(values, 100), min: q(values, 0) });
  const metrics = await webhook.metrics();
  const nodeObject = { images: options.images, ...(await nodeSizes(env, names[0]!)) };
  const summary = {
    serveMs: stat(rounds.map((r) => r.serveMs)),
    readyzMs: stat(rounds.map((r) => r.readyzMs)),
    editMs: stat(rounds.map((r) => r.editMs)),
    allNodesMs: stat(rounds.map((r) => r.allNodesMs)),
    perNodeMs: stat(perNodeMs),
  };
  const failures = fleet.counters.patchFailures + fleet.counters.getFailures + fleet.counters.leaseFailures;
  const report = {
    method: {
      edit: options.edit === 'put' ? 'API PUT of the ConfigMap (admin), timed from its answer' : 'kubectl apply of the ConfigMap, timed from the process exit',
      serve: 'dry-run nodes/status AdmissionReview of a 4-CPU node POSTed to /mutate every ~10 ms until the patch carries floor(4 × new ratio)',
      readyz: '/readyz on the plain-HTTP port every ~10 ms until details.config.origin ends with @<new resourceVersion>',
      nodes: `status PATCH answers of ${options.nodes} kubelets updating every ${options.updateSeconds} s (jitter 4 %): first answer carrying the new allocatable, per node`,
      note: 'percentiles over rounds: with 10 rounds, p99 is the worst round',
    },
    rounds,
    summary,
    afterQuiet: quiet ?? null,
    webhook: {
      configGeneration: metrics.value('kube_overcommit_config_generation'),
      reloads: metrics.sum('kube_overcommit_config_reloads_total', { result: 'success' }),
    },
    fleetFailures: failures,
    nodeObject,
    targets: {
      serveP99: { target: '<= 1000 ms', value: summary.serveMs.p99, pass: summary.serveMs.p99 <= 1000 },
      allNodesBound: {
        note: `every node within one update period (${options.updateSeconds} s × 1.04) plus serving and the PATCH itself`,
        value: summary.allNodesMs.max,
        pass: summary.allNodesMs.max <= options.updateSeconds * 1040 + summary.serveMs.max + 1000,
      },
    },
  };
  console.log(
    `\n${table(
      ['from the edit’s answer to …', 'p50 ms', 'p99 ms', 'min ms', 'max ms'],
      [
        ['the webhook serving the new ratio (/mutate)', summary.serveMs.p50, summary.serveMs.p99, summary.serveMs.min, summary.serveMs.max],
        ['/readyz reporting the new resourceVersion', summary.readyzMs.p50, summary.readyzMs.p99, summary.readyzMs.min, summary.readyzMs.max],
        [
          `every node's stored allocatable (update every ${options.updateSeconds} s)`,
          summary.allNodesMs.p50,
          summary.allNodesMs.p99,
          summary.allNodesMs.min,
          summary.allNodesMs.max,
        ],
        ['one node’s stored allocatable (all rounds pooled)', summary.perNodeMs.p50, summary.perNodeMs.p99, summary.perNodeMs.min, summary.perNodeMs.max],
        [`the edit itself (${options.edit})`, summary.editMs.p50, summary.editMs.p99, summary.editMs.min, summary.editMs.max],
      ],
    )}\n`,
  );
  if (quiet)
    console.log(
      `after ${quiet.afterQuietSeconds} s without an edit: served after ${quiet.serveMs} ms (readyz ${quiet.readyzMs} ms), every node after ${quiet.allNodesMs} ms`,
    );
  console.log(
    `target: serving p99 ${summary.serveMs.p99} ms ≤ 1000 ms: ${report.targets.serveP99.pass ? 'pass' : 'FAIL'}; fleet failures ${failures}; config generation ${report.webhook.configGeneration}`,
  );
  await fleet.stop();
  for (const name of names) await admin.delete(`/api/v1/nodes/${name}`).catch(() => undefined);
  return { report, pass: report.targets.serveP99.pass && failures === 0 };
}
