/**
 * Cluster scale (issue 4, part 2): `npm run bench:cluster`.
 *
 * One real control plane of the e2e harness (etcd, kube-apiserver, kube-controller-manager,
 * kube-scheduler v1.34 built from their Go modules; k8s/base applied through the harness's
 * overlay; the webhook as the image runs it, `node dist/main.js`, with a ServiceAccount token and
 * the Deployment's NODE_OPTIONS, in a memory cgroup at the Deployment's limit),
 * and `--nodes` simulated kubelets (bench/fleet.ts: the kubelet's status algorithm at its real
 * frequencies — update every 10 s, report every 5 min with the kubelet's ±50 % one-time delay,
 * Lease renewed every 10 s — registration spread over 10 s) in two phases of the same run:
 *
 *   inflation  the ConfigMap gives cpu a ratio of `--ratio` (1.5) and turns coalescing off: every
 *              kubelet sync sees a stored allocatable that differs from its own, so it PATCHes
 *              every update period, and each PATCH is stored
 *   coalescing with `--coalesce` only, between the two: inflation with nodes.coalesceStatusWrites on
 *              and statusReportPeriod = `--report-seconds` (docs/status-coalescing.md), measured
 *              after `--settle` s; the run then also writes bench/results/cluster-coalesce.json
 *   baseline   `--baseline ratio-1` (default): the ConfigMap's ratios set to 1, the webhook stays
 *              registered and called — what an operator does to switch inflation off, and it
 *              checks that ratio 1 costs nothing; `--baseline no-webhook`: the
 *              MutatingWebhookConfiguration deleted (no admission call at all)
 *
 * Each phase is measured over `--minutes` after a settling time (inflation: `--warmup` s after the
 * last registration; baseline: `--settle` s, 180 by default, after the switch — the kubelet's
 * one-time report delay spreads the first reports over 150–450 s after the last changed PATCH, so
 * a window that starts 150 s + one update period later sees steady-state reports). Per phase:
 * node-status PATCHes the kubelets sent and the API server counted
 * (`apiserver_request_total{resource="nodes",subresource="status",verb="PATCH"}`), the API server's
 * webhook latency (`apiserver_admission_webhook_admission_duration_seconds`, name
 * nodes.kube-overcommit.io, from bucket deltas), failed and rejected updates, CPU seconds and RSS
 * of the webhook, the API server, etcd, the controller manager, the scheduler and the load
 * generator itself (this process: how late its timers fire says whether one process kept up),
 * etcd puts and bytes received, the etcd writes for Node keys the API server made
 * (`etcd_requests_total{resource="nodes",operation="update"}`: a no-op update skipped by the
 * storage layer is not counted), the Node watch events one watcher of the fleet's nodes received,
 * the Node object's size, and the write amplification.
 *
 * Flags: --nodes 1000 --minutes 10 --ratio 1.5 --baseline ratio-1|no-webhook --warmup 30
 *   --settle 180 --images 0 (status.images entries per node: 0 is the e2e SimKubelet's lean node,
 *   which this 2-core machine can serve for 1,000 nodes; 50 is a kubelet's default maximum)
 *   --update-seconds 10 --report-seconds 300 --start-spread 10 --max-sockets <nodes>
 *   --read lister|get (bench/fleet.ts: how a kubelet's sync reads its Node) --memory-limit MiB (the webhook's memory
 *   cgroup; the Deployment's limit by default, 0 for none) --keep (leave the run folder's data) --out FILE
 * `--policy` (with `--coalesce`) adds a phase after coalescing's: the node-status policy installed
 * (k8s/node-policy, docs/adr/0006-node-policy.md), measured side by side with the webhook's
 * coalescing phase (report.policyVsWebhook: webhook calls per PATCH, etcd Node writes ÷ baseline,
 * kube-apiserver CPU per PATCH policy ÷ webhook, p99 of the PATCH). `--pprof` starts kube-apiserver
 * with --profiling=true and takes a 60 s CPU profile in every phase (bench/.run/pprof/), read with
 * `go tool pprof`: the CPU under the PATCH handler, the mutating webhook plugin and the policy
 * plugin, and the admission CPU per PATCH.
 * Writes bench/results/cluster-scale.json. Default run: about 25 minutes.
 *
 * `--kubelet hollow` runs kubemark's hollow kubelets instead of the simulated fleet
 * (bench/cluster-hollow.ts: --nodes, --minutes (3), --ratio, --settle (20), --baseline-minutes (5),
 * --baseline-settle (180), --no-policy (no phase with the node-status policy), --pprof, --keep, --out).
 */
import { writeFileSync } from 'node:fs';
import os from 'node:os';
import { join } from 'node:path';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { nodesWebhookName } from '../test/support/apiserver.js';
import type { E2eEnv } from '../test/support/env.js';
import { adminClient, KubeApiError } from '../test/support/kube-client.js';
import { type LabelMatch, not } from '../test/support/metrics.js';
import { installNodePolicy, NODE_POLICY } from '../test/support/node-policy.js';
import { claimNodeNames } from '../test/support/nodes.js';
import { baseUnits } from '../test/support/quantity.js';
import { onStage } from '../test/support/stage.js';
import { WebhookProcess } from '../test/support/webhook.js';
import {
  apiserverProfile,
  type ApiserverProfile,
  type ClusterProcesses,
  clusterProcesses,
  counterDelta,
  histogramDelta,
  machineBusy,
  machineCpu,
  nodeSizes,
  nodeWatcher,
  ProcessWatch,
  scrape,
  type Scrape,
} from './cluster.js';
import { hollowMain } from './cluster-hollow.js';
import { Fleet, type FleetCounters, subtractCounters } from './fleet.js';
import { benchMain, DEPLOYMENT_MEMORY_LIMIT_MIB, DEPLOYMENT_NODE_OPTIONS, loadAvg, machineInfo, resultsPath, round, RUN_DIR, sleep, table } from './lib.js';

const bench = benchMain(
  {
    script: 'bench:cluster',
    results: (flags) => (flags.kubelet === 'hollow' ? `cluster-hollow-${flags.nodes}.json` : 'cluster-scale.json'),
    clock: true,
    flags: {
      /** sim: bench/fleet.ts's simulated kubelets; hollow: kubemark's (bench/cluster-hollow.ts). */
      kubelet: { type: 'string', default: 'sim', choices: ['sim', 'hollow'] },
      nodes: { type: 'number', default: 1000, min: 1, integer: true },
      /** Default: 10, hollow 3. */
      minutes: { type: 'number', min: 0.1 },
      ratio: { type: 'number', default: 1.5, min: 1 },
      baseline: { type: 'string', default: 'ratio-1', choices: ['ratio-1', 'no-webhook'] },
      warmup: { type: 'number', default: 30 },
      /** Default: 180, hollow 20. */
      settle: { type: 'number' },
      images: { type: 'number', default: 0, integer: true },
      'update-seconds': { type: 'number', default: 10, min: 0.1 },
      'report-seconds': { type: 'number', default: 300, min: 1 },
      'start-spread': { type: 'number', default: 10 },
      /** Default: one per kubelet, as each real kubelet holds its own connection (only as many open as requests are concurrent). */
      'max-sockets': { type: 'number', min: 1, integer: true },
      /** How a kubelet's sync reads its Node: `lister` (its last answer from the API server) or `get` (GET ?resourceVersion=0). */
      read: { type: 'string', default: 'lister', choices: ['lister', 'get'] },
      /** MiB; the webhook container's limit in k8s/base/deployment.yaml unless given (0: none). */
      'memory-limit': { type: 'number', default: DEPLOYMENT_MEMORY_LIMIT_MIB, integer: true },
      keep: { type: 'boolean' },
      coalesce: { type: 'boolean' },
      'baseline-minutes': { type: 'number', default: 5, min: 0.1 },
      'baseline-settle': { type: 'number', default: 180 },
      /** `--kubelet hollow`: skip the node-status policy phase (it needs an API server ≥ 1.36). */
      'no-policy': { type: 'boolean' },
      /** The simulated fleet: a phase with the node-status policy installed, after --coalesce's (needs it). */
      policy: { type: 'boolean' },
      /** A CPU profile of kube-apiserver in each phase (its /debug/pprof, read with `go tool pprof`). */
      pprof: { type: 'boolean' },
    },
  },
  (started): Promise<number> => {
    // cluster.sh appends APISERVER_EXTRA_ARGS to kube-apiserver's flags (the last one wins).
    if (started.flags.pprof) process.env.APISERVER_EXTRA_ARGS = `${process.env.APISERVER_EXTRA_ARGS ?? ''} --profiling=true`.trim();
    return started.flags.kubelet === 'hollow'
      ? hollowMain(
          {
            nodes: started.flags.nodes,
            minutes: started.flags.minutes ?? 3,
            baselineMinutes: started.flags['baseline-minutes'],
            settleSeconds: started.flags.settle ?? 20,
            baselineSettleSeconds: started.flags['baseline-settle'],
            ratio: started.flags.ratio,
            keep: started.flags.keep,
            policy: !started.flags['no-policy'],
            pprof: started.flags.pprof ?? false,
          },
          started,
        )
      : main();
  },
);
const { flags, log, outFile } = bench;

const options = {
  nodes: flags.nodes,
  minutes: flags.minutes ?? 10,
  ratio: flags.ratio,
  baseline: flags.baseline,
  warmupSeconds: flags.warmup,
  settleSeconds: flags.settle ?? 180,
  images: flags.images,
  updateSeconds: flags['update-seconds'],
  reportSeconds: flags['report-seconds'],
  startSpreadSeconds: flags['start-spread'],
  maxSockets: flags['max-sockets'] ?? flags.nodes,
  read: flags.read,
  memoryLimitMiB: flags['memory-limit'],
  keep: flags.keep,
  coalesce: flags.coalesce,
  policy: flags.policy ?? false,
  pprof: flags.pprof ?? false,
};

// ---------------------------------------------------------------------------------------------

interface PhaseFigures {
  name: string;
  description: string;
  window: { startedAt: string; seconds: number; loadAvgStart: number[]; loadAvgEnd: number[] };
  transition?: { seconds: number; sims: FleetCounters };
  sims: FleetCounters & {
    writesPerSec: number;
    /** nodes ÷ mean seconds between two PATCHes of a node: the steady-state rate. */
    steadyWritesPerSec: number;
    patchMs: object;
    patchIntervalS: object;
    syncMs: object;
    leaseMs: object;
  };
  apiserver: {
    statusPatches: number;
    statusPatchesPerSec: number;
    statusPatchErrors: number;
    statusPatchMs: object | null;
    leaseWrites: number;
    nodeGets: number;
    allRequests: number;
    allRequestsPerSec: number;
    webhook: {
      calls200: number;
      callsNot200: number;
      failOpen: number;
      rejections: number;
      admissionMs: object | null;
    };
  };
  webhookSelf: { requests: Record<string, number>; durationMs: object | null } | null;
  etcd: { puts: number; putsPerSec: number; receivedBytes: number; receivedBytesPerSec: number; dbSizeMiB: number };
  /** etcd writes for Node keys, as the API server counts them (etcd_requests_total{resource="nodes",operation="update"}). */
  nodeEtcdWrites: number;
  nodeEtcdWritesPerSec: number;
  /** MODIFIED events one watcher of the fleet's Nodes received (a watch with the fleet's label selector). */
  nodeWatchEvents: number;
  nodeWatchEventsPerSec: number;
  cpu: Record<string, object>;
  machine: { busyShare: number; busyCores: number; stealShare: number };
  loadGenerator: { tickLateMs: object; eventLoopDelayMs: { p50: number; p99: number; max: number }; keptUp: boolean };
  /** null when the phase made no webhook call (`--baseline no-webhook`). */
  webhookCpuMsPerCall: number | null;
  nodeObject: { json: number; protobuf: number; patchBodyMeanBytes: number };
  /** Coalescing phase: the webhook's kube_overcommit_status_writes_total at its end, by `decision/reason`. */
  decisions?: Record<string, number>;
  /** At the end of the window: how many nodes store the phase's allocatable cpu (others: by value). */
  check: { nodes: number; expectedCpu: string; matching: number; others: Record<string, number> };
  /** Webhook calls (nodes entry) ÷ status PATCHes. */
  webhookCallsPerPatch: number;
  /** Time a PATCH spent in the node-status policy: its mutations and its match conditions (one per param), ms. */
  policyMsPerPatch: number;
  /** kube-apiserver's CPU (all its work) ÷ status PATCHes, ms. */
  apiserverCpuMsPerPatch: number;
  /** `--pprof`: kube-apiserver's CPU profile over part of the window, and the admission plugins' CPU per PATCH in it. */
  profile?: ApiserverProfile & { statusPatchesInProfile: number; admissionCpuMsPerPatch: number; patchHandlerCpuMsPerPatch: number };
}

/** Every fleet node's stored allocatable cpu against the expected value (one LIST). */
async function checkNodes(
  env: E2eEnv,
  names: string[],
  expectedCpu: string,
): Promise<{ nodes: number; expectedCpu: string; matching: number; others: Record<string, number> }> {
  const admin = adminClient(env);
  try {
    const list = await admin.get('/api/v1/nodes', { labelSelector: 'bench.kube-overcommit.io/fleet=true' });
    const want = baseUnits('cpu', expectedCpu);
    const mine = new Set(names);
    let matching = 0;
    const others: Record<string, number> = {};
    for (const node of list.items ?? []) {
      if (!mine.has(node.metadata.name)) continue;
      const cpu = node.status?.allocatable?.cpu;
      if (cpu !== undefined && baseUnits('cpu', cpu) === want) matching++;
      else others[String(cpu)] = (others[String(cpu)] ?? 0) + 1;
    }
    return { nodes: mine.size, expectedCpu, matching, others };
  } finally {
    admin.close();
  }
}

function inflate(cpu: string, ratio: number): string {
  const milli = (baseUnits('cpu', cpu) * BigInt(Math.round(ratio * 1_000_000))) / 1_000_000n;
  return milli % 1000n === 0n ? String(milli / 1000n) : `${milli}m`;
}

async function measure(
  name: string,
  description: string,
  env: E2eEnv,
  processes: ClusterProcesses,
  webhook: WebhookProcess,
  fleet: Fleet,
  names: string[],
  seconds: number,
  expectedCpu: string,
  transition?: { seconds: number; sims: FleetCounters },
): Promise<PhaseFigures> {
  const nodesEntry = nodesWebhookName(env);
  const loadStart = loadAvg();
  const pids: Record<string, number> = {
    webhook: webhook.pid!,
    apiserver: processes.pids.apiserver,
    etcd: processes.pids.etcd,
    controllerManager: processes.pids.controllerManager,
    scheduler: processes.pids.scheduler,
    loadGenerator: process.pid,
  };
  const startedAt = new Date().toISOString();
  const before: Scrape = await scrape(env, processes, webhook);
  const watch = new ProcessWatch(pids);
  const cpuBefore = machineCpu();
  const simsBefore = fleet.snapshot();
  const watchEventsBefore = nodeWatcher.events;
  fleet.newWindow();
  const loop = monitorEventLoopDelay({ resolution: 10 });
  loop.enable();
  const profileSeconds = Math.min(60, Math.max(5, seconds - 10));
  const profiling = options.pprof ? apiserverProfile(env, profileSeconds, join(RUN_DIR, 'pprof', `apiserver-${name}.pb.gz`)) : undefined;
  const windowStart = Date.now();
  const end = windowStart + seconds * 1000;
  while (Date.now() < end) {
    await sleep(Math.min(60_000, end - Date.now()));
    const so = subtractCounters(fleet.snapshot(), simsBefore);
    const elapsed = (Date.now() - windowStart) / 1000;
    log(
      `  ${name}: ${elapsed.toFixed(0)} s, ${so.patchOk} PATCHes (${(so.patchOk / elapsed).toFixed(2)}/s), ${so.patchFailures} failed, ` +
        `${so.skipped} syncs skipped, timers late p99 ${fleet.window.tickLateMs.summary().p99} ms, load ${loadAvg().join(' ')}`,
    );
  }
  loop.disable();
  const profile = await profiling;
  const cpu = watch.end();
  const machine = machineBusy(cpuBefore, machineCpu());
  const windowSeconds = (Date.now() - windowStart) / 1000;
  const sims = subtractCounters(fleet.snapshot(), simsBefore);
  const nodeWatchEvents = nodeWatcher.events - watchEventsBefore;
  const samples = fleet.newWindow();
  const after = await scrape(env, processes, webhook);
  const sizes = await nodeSizes(env, names[0]!);
  const check = await checkNodes(env, names, expectedCpu);

  const statusPatch = { resource: 'nodes', subresource: 'status', verb: 'PATCH' };
  const statusPatches = counterDelta(before.apiserver, after.apiserver, 'apiserver_request_total', statusPatch);
  const statusPatchErrors = counterDelta(before.apiserver, after.apiserver, 'apiserver_request_total', {
    ...statusPatch,
    code: (c) => c !== undefined && !c.startsWith('2'),
  });
  const calls200 = counterDelta(before.apiserver, after.apiserver, 'apiserver_admission_webhook_request_total', {
    name: nodesEntry,
    type: 'admit',
    code: '200',
  });
  const callsNot200 = counterDelta(before.apiserver, after.apiserver, 'apiserver_admission_webhook_request_total', {
    name: nodesEntry,
    type: 'admit',
    code: not('200'),
  });
  const summary = (s: { summary(): object }) => s.summary();
  const patchInterval = samples.patchIntervalS.summary();
  const tickLate = samples.tickLateMs.summary();
  const webhookRequests: Record<string, number> = {};
  for (const outcome of ['patched', 'unchanged', 'denied', 'error']) {
    webhookRequests[outcome] = counterDelta(before.webhook, after.webhook, 'kube_overcommit_admission_requests_total', { resource: 'nodes/status', outcome });
  }
  const updatePeriodS = options.updateSeconds * 1.02;
  const calls = calls200 + callsNot200;
  const msPerPatch = (...sums: Array<[string, LabelMatch]>) =>
    round((sums.reduce((total, [metric, labels]) => total + counterDelta(before.apiserver, after.apiserver, metric, labels), 0) * 1000) / statusPatches, 3);
  // The PATCHes in the profile's seconds, at the window's rate.
  const patchesInProfile = (statusPatches / windowSeconds) * profileSeconds;
  return {
    name,
    description,
    window: { startedAt, seconds: round(windowSeconds, 1), loadAvgStart: loadStart, loadAvgEnd: loadAvg() },
    ...(transition ? { transition } : {}),
    sims: {
      ...sims,
      writesPerSec: round(sims.patchOk / windowSeconds, 3),
      steadyWritesPerSec: round(names.length / patchInterval.mean, 3),
      patchMs: samples.patchMs.summary(),
      patchIntervalS: patchInterval,
      syncMs: summary(samples.syncMs),
      leaseMs: summary(samples.leaseMs),
    },
    apiserver: {
      statusPatches,
      statusPatchesPerSec: round(statusPatches / windowSeconds, 3),
      statusPatchErrors,
      statusPatchMs: histogramDelta(before.apiserver, after.apiserver, 'apiserver_request_duration_seconds', statusPatch, 1000),
      leaseWrites: counterDelta(before.apiserver, after.apiserver, 'apiserver_request_total', { resource: 'leases', verb: 'PUT' }),
      nodeGets: counterDelta(before.apiserver, after.apiserver, 'apiserver_request_total', { resource: 'nodes', verb: 'GET' }),
      allRequests: counterDelta(before.apiserver, after.apiserver, 'apiserver_request_total'),
      allRequestsPerSec: round(counterDelta(before.apiserver, after.apiserver, 'apiserver_request_total') / windowSeconds, 1),
      webhook: {
        calls200,
        callsNot200,
        failOpen: counterDelta(before.apiserver, after.apiserver, 'apiserver_admission_webhook_fail_open_count', { name: nodesEntry, type: 'admit' }),
        rejections: counterDelta(before.apiserver, after.apiserver, 'apiserver_admission_webhook_rejection_count', { name: nodesEntry, type: 'admit' }),
        admissionMs: histogramDelta(
          before.apiserver,
          after.apiserver,
          'apiserver_admission_webhook_admission_duration_seconds',
          { name: nodesEntry, type: 'admit', operation: 'UPDATE' },
          1000,
        ),
      },
    },
    webhookSelf: before.webhook
      ? {
          requests: webhookRequests,
          durationMs: histogramDelta(before.webhook, after.webhook, 'kube_overcommit_admission_duration_seconds', { resource: 'nodes/status' }, 1000),
        }
      : null,
    etcd: {
      puts: counterDelta(before.etcd, after.etcd, 'etcd_mvcc_put_total'),
      putsPerSec: round(counterDelta(before.etcd, after.etcd, 'etcd_mvcc_put_total') / windowSeconds, 2),
      receivedBytes: counterDelta(before.etcd, after.etcd, 'etcd_network_client_grpc_received_bytes_total'),
      receivedBytesPerSec: round(counterDelta(before.etcd, after.etcd, 'etcd_network_client_grpc_received_bytes_total') / windowSeconds, 0),
      dbSizeMiB: round(after.etcd.sum('etcd_mvcc_db_total_size_in_bytes') / 1024 / 1024, 1),
    },
    nodeEtcdWrites: counterDelta(before.apiserver, after.apiserver, 'etcd_requests_total', { resource: 'nodes', operation: 'update' }),
    nodeEtcdWritesPerSec: round(
      counterDelta(before.apiserver, after.apiserver, 'etcd_requests_total', { resource: 'nodes', operation: 'update' }) / windowSeconds,
      3,
    ),
    nodeWatchEvents,
    nodeWatchEventsPerSec: round(nodeWatchEvents / windowSeconds, 3),
    cpu,
    machine,
    loadGenerator: {
      tickLateMs: tickLate,
      eventLoopDelayMs: { p50: round(loop.percentile(50) / 1e6, 2), p99: round(loop.percentile(99) / 1e6, 2), max: round(loop.max / 1e6, 2) },
      // Kept up: timers fire < 1 s late at p99 and the inflation phase's PATCH interval is within 10 % of the update period.
      keptUp: tickLate.p99 < 1000 && (name !== 'inflation' || patchInterval.mean < updatePeriodS * 1.1),
    },
    webhookCallsPerPatch: round(calls / statusPatches, 3),
    policyMsPerPatch: msPerPatch(
      ['apiserver_mutating_admission_policy_check_duration_seconds_sum', { policy: NODE_POLICY }],
      ['apiserver_admission_match_condition_evaluation_seconds_sum', { kind: 'policy', name: NODE_POLICY }],
    ),
    apiserverCpuMsPerPatch: round(((cpu.apiserver as { cpuSeconds: number }).cpuSeconds * 1000) / statusPatches, 3),
    ...(profile
      ? {
          profile: {
            ...profile,
            statusPatchesInProfile: Math.round(patchesInProfile),
            admissionCpuMsPerPatch: round(((profile.cumSeconds.webhookPlugin! + profile.cumSeconds.policyPlugin!) * 1000) / patchesInProfile, 3),
            patchHandlerCpuMsPerPatch: round((profile.cumSeconds.patchHandler! * 1000) / patchesInProfile, 3),
          },
        }
      : {}),
    webhookCpuMsPerCall: calls200 + callsNot200 > 0 ? round(((cpu.webhook as { cpuSeconds: number }).cpuSeconds * 1000) / (calls200 + callsNot200), 3) : null,
    nodeObject: { ...sizes, patchBodyMeanBytes: round(sims.patchBodyBytes / Math.max(1, sims.patchAttempts), 0) },
    check,
  };
}

function main(): Promise<number> {
  log(
    `kube-overcommit cluster-scale bench — ${options.nodes} kubelets, ${options.minutes} min per phase, cpu ratio ${options.ratio}, ` +
      `baseline ${options.baseline}; ${os.cpus().length} cpus, load ${loadAvg().join(' ')}`,
  );
  return onStage('bench-cluster', log, options.keep, async (stage) => {
    const { env } = stage;
    const processes = clusterProcesses(env);
    // As in its pod: the Deployment's NODE_OPTIONS (WebhookProcess) and memory limit.
    const webhook = new WebhookProcess(env, { logLevel: 'info', memoryLimitMiB: options.memoryLimitMiB });
    await webhook.start();
    stage.onTearDown(() => webhook.stop());
    log(
      `webhook pid ${webhook.pid} on ${env.webhook.url} (memory limit ${webhook.memoryLimitMiB ?? 'none'} MiB); ` +
        `API server pid ${processes.pids.apiserver}, etcd pid ${processes.pids.etcd}`,
    );
    // Inflation alone: coalescing (on by default) is the --coalesce phase's.
    await webhook.useConfig({ nodes: { defaultRatios: { cpu: options.ratio, memory: 1 }, coalesceStatusWrites: false } });
    log(`ConfigMap: cpu ratio ${options.ratio}, coalesceStatusWrites false`);

    const names = claimNodeNames(env, 'sim-node', options.nodes);
    const fleet = new Fleet(env, {
      names,
      images: options.images,
      read: options.read,
      updateFrequencyMs: options.updateSeconds * 1000,
      reportFrequencyMs: options.reportSeconds * 1000,
      leaseDurationSeconds: 40,
      startSpreadMs: options.startSpreadSeconds * 1000,
      maxSockets: options.maxSockets,
    });
    stage.onTearDown(() => fleet.stop());
    const registering = Date.now();
    await fleet.start();
    await nodeWatcher.start(env);
    stage.onTearDown(() => nodeWatcher.stop());
    log(`${fleet.counters.registered} nodes registered in ${((Date.now() - registering) / 1000).toFixed(1)} s (${fleet.counters.registerFailures} failures)`);
    if (fleet.counters.registered < options.nodes)
      throw new Error(`only ${fleet.counters.registered} of ${options.nodes} nodes registered:\n  ${fleet.errors.slice(0, 10).join('\n  ')}`);
    await sleep(options.warmupSeconds * 1000);
    const capacityCpu = fleet.rawAllocatable.cpu!;

    /** One phase of `--minutes` on this cluster, fleet and webhook. */
    const measurePhase = (name: string, description: string, expectedCpu: string, transition?: { seconds: number; sims: FleetCounters }) =>
      measure(name, description, env, processes, webhook, fleet, names, options.minutes * 60, expectedCpu, transition);
    const phases: PhaseFigures[] = [];
    log(`phase inflation: measuring ${options.minutes} min`);
    phases.push(await measurePhase('inflation', `cpu ratio ${options.ratio} in the ConfigMap`, inflate(capacityCpu, options.ratio)));

    if (options.coalesce) {
      await webhook.useConfig({
        nodes: { defaultRatios: { cpu: options.ratio, memory: 1 }, coalesceStatusWrites: true, statusReportPeriod: `${options.reportSeconds}s` },
      });
      log(`phase coalescing (statusReportPeriod ${options.reportSeconds}s): settling ${options.settleSeconds} s`);
      await sleep(options.settleSeconds * 1000);
      log(`phase coalescing: measuring ${options.minutes} min`);
      const coalescing = await measurePhase('coalescing', `cpu ratio ${options.ratio}, nodes.coalesceStatusWrites`, inflate(capacityCpu, options.ratio));
      const counts = await webhook.metrics();
      coalescing.decisions = Object.fromEntries(
        counts.find('kube_overcommit_status_writes_total').map((s) => [`${s.labels.decision}/${s.labels.reason}`, s.value]),
      );
      phases.push(coalescing);
    }

    if (options.policy) {
      if (!options.coalesce) throw new Error('--policy compares with the --coalesce phase: give both');
      const admin = adminClient(env);
      const installed = await installNodePolicy(env, admin);
      stage.onTearDown(() => installed.uninstall());
      // The running webhook looks the path up every minute, then publishes every node's target.
      const settle = Math.max(options.settleSeconds, 120);
      log(`phase policy (k8s/node-policy installed): settling ${settle} s`);
      await sleep(settle * 1000);
      log(`phase policy: measuring ${options.minutes} min`);
      phases.push(
        await measurePhase(
          'policy',
          `cpu ratio ${options.ratio}, coalescing on, the node-status policy installed (k8s/node-policy)`,
          inflate(capacityCpu, options.ratio),
        ),
      );
      // Removed with the webhook stopped, so that it does not publish into a component being deleted.
      await webhook.stop();
      await installed.uninstall();
      await webhook.start();
      admin.close();
    }

    // Switch inflation off.
    const switchedAt = Date.now();
    const beforeSwitch = fleet.snapshot();
    let baselineDescription: string;
    if (options.baseline === 'ratio-1') {
      await webhook.useConfig({ nodes: { defaultRatios: { cpu: 1, memory: 1 }, coalesceStatusWrites: false } });
      baselineDescription = 'every ratio 1 in the ConfigMap; the webhook stays registered';
    } else {
      const admin = adminClient(env);
      try {
        await admin.delete(`/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations/${env.webhook.configurationName}`).catch((e) => {
          if (!(e instanceof KubeApiError && e.status === 404)) throw e;
        });
      } finally {
        admin.close();
      }
      baselineDescription = 'MutatingWebhookConfiguration deleted (no admission call)';
    }
    log(`phase baseline (${baselineDescription}): settling ${options.settleSeconds} s`);
    await sleep(options.settleSeconds * 1000);
    const transition = { seconds: round((Date.now() - switchedAt) / 1000, 1), sims: subtractCounters(fleet.snapshot(), beforeSwitch) };
    log(`  transition: ${transition.sims.patchChanged} changed PATCHes, ${transition.sims.patchReport} reports, ${transition.sims.patchFailures} failed`);
    log(`phase baseline: measuring ${options.minutes} min`);
    phases.push(await measurePhase('baseline', baselineDescription, capacityCpu, transition));

    const a = phases[0]!;
    const b = phases.at(-1)!;
    const coalescing = options.coalesce ? phases[1]! : undefined;
    const policy = phases.find((p) => p.name === 'policy');
    const ratio = (x: number, y: number) => round(x / y, 1);
    const failuresOf = (p: PhaseFigures) =>
      p.sims.patchFailures + p.apiserver.statusPatchErrors + p.apiserver.webhook.rejections + p.apiserver.webhook.failOpen;
    const failures = phases.reduce((total, p) => total + failuresOf(p), 0);
    // The webhook's CPU per call: the inflation phase's CPU over its calls (which also carries the
    // idle cost: informers, metrics, GC), and the marginal cost between the two phases (with
    // --baseline no-webhook the baseline has no calls: its CPU is the idle cost).
    const callsOf = (p: PhaseFigures) => p.apiserver.webhook.calls200 + p.apiserver.webhook.callsNot200;
    const cpuOf = (p: PhaseFigures) => (p.cpu.webhook as { cpuSeconds: number }).cpuSeconds;
    const webhookCpu = {
      perCallMs: a.webhookCpuMsPerCall,
      marginalPerCallMs: round(
        ((cpuOf(a) - (cpuOf(b) * a.window.seconds) / b.window.seconds) * 1000) / Math.max(1, callsOf(a) - (callsOf(b) * a.window.seconds) / b.window.seconds),
        3,
      ),
      baselineCores: (b.cpu.webhook as { cores: number }).cores,
    };
    const webhookCpuMsPerCall = webhookCpu.perCallMs;
    const perNode = {
      statusWritesPerNodePerSec: {
        inflation: round(a.sims.steadyWritesPerSec / options.nodes, 5),
        baseline: round(b.sims.steadyWritesPerSec / options.nodes, 5),
      },
      protobufBytesPerWrite: a.nodeObject.protobuf,
    };
    const extrapolate = (n: number) => {
      const writes = n * perNode.statusWritesPerNodePerSec.inflation;
      const writesBase = n * perNode.statusWritesPerNodePerSec.baseline;
      return {
        nodes: n,
        statusWritesPerSec: { inflation: round(writes, 1), baseline: round(writesBase, 1) },
        webhookCallsPerSec: round(writes, 1),
        webhookCores: round((writes * (webhookCpuMsPerCall ?? 0)) / 1000, 3),
        etcdWriteBytesPerSec: { inflation: round(writes * perNode.protobufBytesPerWrite, 0), baseline: round(writesBase * perNode.protobufBytesPerWrite, 0) },
      };
    };
    const report = {
      benchmark: 'cluster-scale',
      command: bench.command,
      startedAt: bench.startedAt.toISOString(),
      finishedAt: new Date().toISOString(),
      machine: { ...machineInfo(), loadAvgAtStart: phases[0]!.window.loadAvgStart },
      cluster: {
        kubernetes: env.k8sVersion,
        processes: 'etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kwok (idle), webhook, load generator — all on this machine',
      },
      webhookProcess: { nodeOptions: DEPLOYMENT_NODE_OPTIONS, memoryLimitMiB: webhook.memoryLimitMiB },
      options,
      fleet: {
        model: `bench/fleet.ts: kubelet v1.34 status loop (lister read: ${options.read === 'lister' ? 'the last Node the API server answered' : 'GET ?resourceVersion=0'}; strategic merge PATCH of what differs; report with the ±50 % one-time delay), Lease PUT every 10 s; one shared keep-alive agent`,
        registerBodyBytes: fleet.sizes.registerBodyBytes,
        errors: fleet.errors,
      },
      phases,
      amplification: {
        measured: ratio(a.sims.writesPerSec, b.sims.writesPerSec),
        apiserver: ratio(a.apiserver.statusPatchesPerSec, b.apiserver.statusPatchesPerSec),
        steadyState: ratio(a.sims.steadyWritesPerSec, b.sims.steadyWritesPerSec),
        expected: ratio(options.reportSeconds, options.updateSeconds),
      },
      failures: { total: failures, target: 0, pass: failures === 0 },
      webhookCpu,
      perNode,
      extrapolation: [extrapolate(options.nodes), extrapolate(5000)],
      // The policy path against the webhook's (coalescing), measured side by side in this run.
      ...(policy && coalescing
        ? {
            policyVsWebhook: {
              webhookCallsPerPatch: policy.webhookCallsPerPatch,
              nodeEtcdWritesVsBaseline: round(policy.nodeEtcdWritesPerSec / b.nodeEtcdWritesPerSec, 2),
              apiserverCpuPerPatch: round(policy.apiserverCpuMsPerPatch / coalescing.apiserverCpuMsPerPatch, 3),
              admissionCpuPerPatch:
                policy.profile && coalescing.profile ? round(policy.profile.admissionCpuMsPerPatch / coalescing.profile.admissionCpuMsPerPatch, 3) : null,
              statusPatchP99Ms: { webhook: coalescing.apiserver.statusPatchMs, policy: policy.apiserver.statusPatchMs },
            },
          }
        : {}),
    };
    writeFileSync(outFile, `${JSON.stringify(report, null, 2)}\n`);
    if (coalescing !== undefined) {
      const perPhase = (p: PhaseFigures) => ({
        phase: p.name,
        description: p.description,
        windowSeconds: p.window.seconds,
        statusPatchesPerSec: p.apiserver.statusPatchesPerSec,
        nodeEtcdWritesPerSec: p.nodeEtcdWritesPerSec,
        etcdPutsPerSec: p.etcd.putsPerSec,
        nodeWatchEventsPerSec: p.nodeWatchEventsPerSec,
        apiserverCores: (p.cpu.apiserver as { cores: number }).cores,
        etcdCores: (p.cpu.etcd as { cores: number }).cores,
        webhookCpuMsPerCall: p.webhookCpuMsPerCall,
        webhookCalls: p.apiserver.webhook.calls200 + p.apiserver.webhook.callsNot200,
        failedUpdates: failuresOf(p),
        ...(p.decisions ? { decisions: p.decisions } : {}),
      });
      const coalesceReport = {
        benchmark: 'cluster-coalesce',
        command: report.command,
        startedAt: report.startedAt,
        finishedAt: report.finishedAt,
        machine: report.machine,
        options,
        sources: {
          statusPatchesPerSec: 'apiserver_request_total{resource="nodes",subresource="status",verb="PATCH"}',
          nodeEtcdWritesPerSec: 'the API server\'s etcd_requests_total{resource="nodes",operation="update"}',
          etcdPutsPerSec: "etcd's etcd_mvcc_put_total (every key: Leases, Events too)",
          nodeWatchEventsPerSec: "events of one watch on the fleet's Nodes (label selector), client-node Watch",
        },
        etcdWritesRatioInflation: round(a.nodeEtcdWritesPerSec / b.nodeEtcdWritesPerSec, 2),
        etcdWritesRatioCoalesced: round(coalescing.nodeEtcdWritesPerSec / b.nodeEtcdWritesPerSec, 2),
        watchEventsRatioInflation: round(a.nodeWatchEventsPerSec / b.nodeWatchEventsPerSec, 2),
        watchEventsRatioCoalesced: round(coalescing.nodeWatchEventsPerSec / b.nodeWatchEventsPerSec, 2),
        patchRatioCoalesced: round(coalescing.apiserver.statusPatchesPerSec / b.apiserver.statusPatchesPerSec, 2),
        failures: { total: failures, target: 0, pass: failures === 0 },
        phases: phases.map(perPhase),
      };
      const coalesceFile = resultsPath('cluster-coalesce.json');
      writeFileSync(coalesceFile, `${JSON.stringify(coalesceReport, null, 2)}\n`);
      console.log(
        `\n${table(
          ['', ...phases.map((p) => p.name)],
          Object.keys(perPhase(a))
            .filter((k) => k !== 'description' && k !== 'decisions' && k !== 'phase')
            .map((k) => [k, ...phases.map((p) => String((perPhase(p) as Record<string, unknown>)[k]))]),
        )}`,
      );
      console.log(
        `etcd Node writes ÷ baseline: inflation ${coalesceReport.etcdWritesRatioInflation}, coalescing ${coalesceReport.etcdWritesRatioCoalesced}; watch events ÷ baseline: coalescing ${coalesceReport.watchEventsRatioCoalesced}; wrote ${coalesceFile}`,
      );
    }

    const row = (label: string, f: (p: PhaseFigures) => string | number, r?: (x: PhaseFigures, y: PhaseFigures) => string | number) => [
      label,
      f(a),
      f(b),
      r ? r(a, b) : '',
    ];
    const num2 = (v: number) => round(v, 2);
    const ms = (h: any) => (h ? `${h.p50} / ${h.p99}` : '-');
    const cores = (p: PhaseFigures, k: string) => (p.cpu[k] as any).cores;
    console.log(
      `\n${table(
        ['', 'inflation', 'baseline', 'inflation ÷ baseline'],
        [
          row('window s', (p) => p.window.seconds),
          row('status PATCHes sent (ok)', (p) => p.sims.patchOk),
          row(
            'status writes/s (sims)',
            (p) => num2(p.sims.writesPerSec),
            (x, y) => ratio(x.sims.writesPerSec, y.sims.writesPerSec),
          ),
          row(
            'status writes/s (API server)',
            (p) => num2(p.apiserver.statusPatchesPerSec),
            (x, y) => ratio(x.apiserver.statusPatchesPerSec, y.apiserver.statusPatchesPerSec),
          ),
          row(
            'steady writes/s (nodes ÷ mean interval)',
            (p) => num2(p.sims.steadyWritesPerSec),
            (x, y) => ratio(x.sims.steadyWritesPerSec, y.sims.steadyWritesPerSec),
          ),
          row('mean s between a node’s PATCHes', (p) => (p.sims.patchIntervalS as any).mean),
          row('failed PATCHes (sims / API non-2xx)', (p) => `${p.sims.patchFailures} / ${p.apiserver.statusPatchErrors}`),
          row(
            'webhook calls 200 / other / fail-open / rejected',
            (p) => `${p.apiserver.webhook.calls200} / ${p.apiserver.webhook.callsNot200} / ${p.apiserver.webhook.failOpen} / ${p.apiserver.webhook.rejections}`,
          ),
          row('API server webhook latency p50 / p99 ms', (p) => ms(p.apiserver.webhook.admissionMs)),
          row('webhook’s own time p50 / p99 ms', (p) => ms(p.webhookSelf?.durationMs)),
          row('PATCH round trip p50 / p99 ms (sims)', (p) => ms(p.sims.patchMs)),
          row('PATCH in API server p50 / p99 ms', (p) => ms(p.apiserver.statusPatchMs)),
          row('webhook CPU s (cores)', (p) => `${(p.cpu.webhook as any).cpuSeconds} (${cores(p, 'webhook')})`),
          row(
            'webhook CPU ms per call',
            (p) => p.webhookCpuMsPerCall ?? 'no calls',
            () => `marginal ${webhookCpu.marginalPerCallMs}`,
          ),
          row('webhook peak RSS MiB', (p) => (p.cpu.webhook as any).peakRssMiB),
          row(
            'API server cores',
            (p) => cores(p, 'apiserver'),
            (x, y) => ratio(cores(x, 'apiserver'), cores(y, 'apiserver')),
          ),
          row('etcd cores', (p) => cores(p, 'etcd')),
          row('controller-manager + scheduler cores', (p) => num2(cores(p, 'controllerManager') + cores(p, 'scheduler'))),
          row('load generator cores', (p) => cores(p, 'loadGenerator')),
          row('machine busy cores (of 2) / CPU stolen by the host', (p) => `${p.machine.busyCores} / ${round(p.machine.stealShare * 100, 1)} %`),
          row('etcd puts/s', (p) => p.etcd.putsPerSec),
          row('etcd Node writes/s (API server)', (p) => p.nodeEtcdWritesPerSec),
          row('Node watch events/s (one watcher)', (p) => p.nodeWatchEventsPerSec),
          row('etcd KiB/s received', (p) => round(p.etcd.receivedBytesPerSec / 1024, 1)),
          row('Node JSON / protobuf bytes', (p) => `${p.nodeObject.json} / ${p.nodeObject.protobuf}`),
          row('timers late p50 / p99 ms (load gen)', (p) => `${(p.loadGenerator.tickLateMs as any).p50} / ${(p.loadGenerator.tickLateMs as any).p99}`),
          row('load generator kept up', (p) => String(p.loadGenerator.keptUp)),
          row('nodes storing the expected allocatable cpu at the end', (p) => `${p.check.matching}/${p.check.nodes} = ${p.check.expectedCpu}`),
          row('load average (start → end)', (p) => `${p.window.loadAvgStart[0]} → ${p.window.loadAvgEnd[0]}`),
        ],
      )}\n`,
    );
    console.log(
      `write amplification: ${report.amplification.measured} (API server count ${report.amplification.apiserver}, steady state ${report.amplification.steadyState}, expected ≈ ${report.amplification.expected})`,
    );
    if (report.policyVsWebhook) {
      const perPatch = (p: PhaseFigures) =>
        `${p.name}: webhook calls/PATCH ${p.webhookCallsPerPatch}, policy ${p.policyMsPerPatch} ms/PATCH, API server CPU ${p.apiserverCpuMsPerPatch} ms/PATCH` +
        (p.profile ? `, admission CPU ${p.profile.admissionCpuMsPerPatch} ms/PATCH (profile: ${JSON.stringify(p.profile.cumSeconds)})` : '');
      console.log(`${phases.map(perPatch).join('\n')}\npolicy ÷ webhook: ${JSON.stringify(report.policyVsWebhook)}`);
    }
    console.log(`failed or rejected status updates: ${failures} (target 0)`);
    console.log(`wrote ${outFile}`);
    return failures === 0;
  });
}
