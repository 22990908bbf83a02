/**
 * `npm run bench:cluster -- --kubelet hollow --nodes N`: the cluster benchmark with the real
 * kubelet's code — `--nodes` kubemark hollow kubelets (test/support/hollow-kubelet.ts: the
 * kubelet's status loop at its own frequencies, update every 10 s, report every 5 min, over a
 * fake runtime and fake cAdvisor, 1 CPU each) — instead of bench/fleet.ts's simulated ones.
 *
 * Four phases of one run:
 *
 *   inflation   cpu ratio `--ratio` (1.5), nodes.coalesceStatusWrites false; `--minutes` (3)
 *               after `--settle` s (20)
 *   coalescing  the same with coalesceStatusWrites true (the default) and the default
 *               statusReportPeriod (5m, the kubelet's nodeStatusReportFrequency); `--baseline-minutes`
 *               (5: one whole report period, so every node's heartbeats pass once) after `--settle` s
 *   policy      the same with the node-status policy installed (k8s/node-policy, from its files:
 *               test/support/node-policy.ts; docs/adr/0006-node-policy.md), on an API server that
 *               serves it; `--baseline-minutes` after `--settle` s. `--no-policy` skips it
 *   no-webhook  the MutatingWebhookConfiguration deleted: what the kubelets write without us
 *               (their raw value once, then a report every 5 min, the first one delayed by a
 *               random ±50 %); `--baseline-minutes` after `--baseline-settle` s (180: the window
 *               then holds exactly one report of every node)
 *
 * Per phase: the kubelets' node-status PATCHes (the API server's apiserver_request_total), the
 * etcd writes for Node keys the API server made (etcd_requests_total{resource="nodes",
 * operation="update"}), the Node watch events one watcher received, the webhook calls and
 * decisions, the nodes Ready at the end, CPU of the control plane, the webhook and all kubelets.
 * Writes bench/results/cluster-hollow-<N>.json (or --out).
 */
import { writeFileSync } from 'node:fs';
import os from 'node:os';
import { join } from 'node:path';
import { nodesWebhookName } from '../test/support/apiserver.js';
import type { E2eEnv } from '../test/support/env.js';
import { HollowKubelet } from '../test/support/hollow-kubelet.js';
import { installNodePolicy, NODE_POLICY } from '../test/support/node-policy.js';
import { adminClient, KubeApiError } from '../test/support/kube-client.js';
import type { LabelMatch } from '../test/support/metrics.js';
import { claimNodeNames } from '../test/support/nodes.js';
import { onStage } from '../test/support/stage.js';
import { WebhookProcess } from '../test/support/webhook.js';
import {
  apiserverProfile,
  type ApiserverProfile,
  clusterProcesses,
  counterDelta,
  histogramDelta,
  machineBusy,
  machineCpu,
  nodeWatcher,
  ProcessWatch,
  scrape,
} from './cluster.js';
import { type Bench, machineInfo, ratioOf, round, RUN_DIR, sleep, statusKiB, table } from './lib.js';

export interface HollowOptions {
  nodes: number;
  minutes: number;
  baselineMinutes: number;
  settleSeconds: number;
  baselineSettleSeconds: number;
  ratio: number;
  keep: boolean;
  /** Measure the node-status policy phase. */
  policy: boolean;
  /** A CPU profile of kube-apiserver in each phase (bench:cluster's `--pprof`). */
  pprof: boolean;
}

const FLEET_LABEL = 'bench.kube-overcommit.io/fleet';

interface Phase {
  name: string;
  description: string;
  seconds: number;
  statusPatchesPerMin: number;
  nodeEtcdWritesPerMin: number;
  nodeWatchEventsPerMin: number;
  webhookCallsPerMin: number;
  /** Webhook calls of the nodes entry per node-status PATCH. */
  webhookCallsPerPatch: number;
  /** The API server's latency of node-status PATCHes (apiserver_request_duration_seconds), ms. */
  statusPatchP99Ms: number | null;
  /** Time the API server spent a node-status PATCH in the nodes entry's calls (apiserver_admission_webhook_admission_duration_seconds), ms. */
  webhookMsPerPatch: number;
  /**
   * Time it spent a PATCH in the node-status policy: its mutations
   * (apiserver_mutating_admission_policy_check_duration_seconds) and its match conditions, one per
   * shard (apiserver_admission_match_condition_evaluation_seconds), ms.
   */
  policyMsPerPatch: number;
  /** kube_overcommit_status_writes_total deltas by decision/reason (coalescing on only). */
  decisions: Record<string, number>;
  failedPatches: number;
  readyNodesAtEnd: number;
  cores: Record<string, number>;
  /** kube-apiserver's CPU over the window per node-status PATCH, ms: its fixed work (Leases, watches) included. */
  apiserverCpuMsPerPatch: number;
  machineBusyCores: number;
  /** `--pprof`: kube-apiserver's CPU profile over part of the window, and the admission plugins' CPU per PATCH in it. */
  profile?: ApiserverProfile & { statusPatchesInProfile: number; admissionCpuMsPerPatch: number };
}

/**
 * The policy phase against the webhook path's (coalescing) and the kubelets alone (no-webhook), in
 * one run. `apiserverCpuPerPatchIfAdmissionFree`: the policy ÷ webhook ratio of kube-apiserver CPU
 * per PATCH that an admission path costing nothing would reach — the webhook path's less its
 * admission CPU (the profile's), the rest being the kubelet's PATCH itself.
 */
function policyVsWebhook(policy: Phase, webhook: Phase, kubeletsAlone: Phase) {
  return {
    webhookCallsPerPatch: policy.webhookCallsPerPatch,
    nodeEtcdWritesVsNoWebhook: ratioOf(policy.nodeEtcdWritesPerMin, kubeletsAlone.nodeEtcdWritesPerMin),
    webhookPathNodeEtcdWritesVsNoWebhook: ratioOf(webhook.nodeEtcdWritesPerMin, kubeletsAlone.nodeEtcdWritesPerMin),
    apiserverCpuPerPatch: ratioOf(policy.apiserverCpuMsPerPatch, webhook.apiserverCpuMsPerPatch),
    admissionCpuPerPatch: ratioOf(policy.profile?.admissionCpuMsPerPatch, webhook.profile?.admissionCpuMsPerPatch),
    apiserverCpuPerPatchIfAdmissionFree: webhook.profile
      ? ratioOf(webhook.apiserverCpuMsPerPatch - webhook.profile.admissionCpuMsPerPatch, webhook.apiserverCpuMsPerPatch)
      : null,
    statusPatchP99Ms: { webhook: webhook.statusPatchP99Ms, policy: policy.statusPatchP99Ms },
  };
}

async function readyNodes(env: E2eEnv, names: readonly string[]): Promise<number> {
  const admin = adminClient(env);
  try {
    const list = await admin.get('/api/v1/nodes', { labelSelector: `${FLEET_LABEL}=true` });
    const mine = new Set(names);
    return list.items.filter((n: any) => mine.has(n.metadata.name) && n.status?.conditions?.some((c: any) => c.type === 'Ready' && c.status === 'True')).length;
  } finally {
    admin.close();
  }
}

/** The hollow kubelets' run, with bench:cluster's log, results file and command line; answers the exit status. */
export function hollowMain(
  options: HollowOptions,
  { log, outFile, command, startedAt }: Pick<Bench<unknown>, 'log' | 'outFile' | 'command' | 'startedAt'>,
): Promise<number> {
  log(`kube-overcommit cluster bench with ${options.nodes} hollow kubelets (kubemark), ${options.minutes} min per phase; ${os.cpus().length} cpus`);
  return onStage('bench-cluster', log, options.keep, async (stage) => {
    const { env } = stage;
    const processes = clusterProcesses(env);
    const webhook = new WebhookProcess(env, { logLevel: 'info' });
    await webhook.start();
    stage.onTearDown(() => webhook.stop());
    await webhook.useConfig({ nodes: { defaultRatios: { cpu: options.ratio, memory: 1 }, coalesceStatusWrites: false } });

    const names = claimNodeNames(env, 'sim-node', options.nodes);
    const kubelets: HollowKubelet[] = [];
    stage.onTearDown(async () => {
      await Promise.all(kubelets.map((k) => k.stop()));
    });
    // A few at a time: each start is a burst of registration work for the API server.
    for (let i = 0; i < names.length; i += 5) {
      kubelets.push(...(await Promise.all(names.slice(i, i + 5).map((name) => HollowKubelet.start(env, { name, labels: { [FLEET_LABEL]: 'true' } })))));
      log(`${kubelets.length} hollow kubelets Ready`);
    }
    const rssMiB = round(kubelets.reduce((sum, k) => sum + statusKiB(k.pid!, 'VmRSS'), 0) / 1024, 0);
    log(`${kubelets.length} hollow kubelets: ${rssMiB} MiB RSS in all`);
    await nodeWatcher.start(env);
    stage.onTearDown(() => nodeWatcher.stop());

    const nodesEntry = nodesWebhookName(env);
    const measure = async (name: string, description: string, settleSeconds: number, minutes: number): Promise<Phase> => {
      log(`phase ${name}: settling ${settleSeconds} s`);
      await sleep(settleSeconds * 1000);
      log(`phase ${name}: measuring ${minutes} min`);
      const pids: Record<string, number> = {
        apiserver: processes.pids.apiserver,
        etcd: processes.pids.etcd,
        controllerManager: processes.pids.controllerManager,
        webhook: webhook.pid!,
        ...Object.fromEntries(kubelets.map((k) => [k.name, k.pid!])),
      };
      const before = await scrape(env, processes, webhook);
      const watch = new ProcessWatch(pids);
      const cpuBefore = machineCpu();
      const eventsBefore = nodeWatcher.events;
      const start = Date.now();
      const profileSeconds = Math.min(60, Math.max(5, minutes * 60 - 10));
      const profiling = options.pprof ? apiserverProfile(env, profileSeconds, join(RUN_DIR, 'pprof', `apiserver-hollow-${name}.pb.gz`)) : undefined;
      await sleep(minutes * 60_000);
      const profile = await profiling;
      const seconds = (Date.now() - start) / 1000;
      const cpu = watch.end();
      const machine = machineBusy(cpuBefore, machineCpu());
      const events = nodeWatcher.events - eventsBefore;
      const after = await scrape(env, processes, webhook);
      const perMin = (n: number) => round((n * 60) / seconds, 2);
      const patches = counterDelta(before.apiserver, after.apiserver, 'apiserver_request_total', { resource: 'nodes', subresource: 'status', verb: 'PATCH' });
      /** Seconds summed over histograms between the scrapes, per node-status PATCH, in ms. */
      const msPerPatch = (...sums: Array<[string, LabelMatch]>) =>
        round((sums.reduce((total, [name, labels]) => total + counterDelta(before.apiserver, after.apiserver, name, labels), 0) * 1000) / patches, 3);
      const statusPatch = { resource: 'nodes', subresource: 'status', verb: 'PATCH' };
      const decisions: Record<string, number> = {};
      for (const sample of after.webhook?.find('kube_overcommit_status_writes_total') ?? []) {
        const key = `${sample.labels.decision}/${sample.labels.reason}`;
        const delta = sample.value - (before.webhook?.value('kube_overcommit_status_writes_total', sample.labels) ?? 0);
        if (delta > 0) decisions[key] = delta;
      }
      const kubeletCores = kubelets.reduce((sum, k) => sum + ((cpu[k.name] as { cores: number } | undefined)?.cores ?? 0), 0);
      const phase: Phase = {
        name,
        description,
        seconds: round(seconds, 1),
        statusPatchesPerMin: perMin(counterDelta(before.apiserver, after.apiserver, 'apiserver_request_total', statusPatch)),
        nodeEtcdWritesPerMin: perMin(counterDelta(before.apiserver, after.apiserver, 'etcd_requests_total', { resource: 'nodes', operation: 'update' })),
        nodeWatchEventsPerMin: perMin(events),
        webhookCallsPerMin: perMin(
          counterDelta(before.apiserver, after.apiserver, 'apiserver_admission_webhook_request_total', { name: nodesEntry, type: 'admit' }),
        ),
        webhookCallsPerPatch: round(
          counterDelta(before.apiserver, after.apiserver, 'apiserver_admission_webhook_request_total', { name: nodesEntry, type: 'admit' }) /
            counterDelta(before.apiserver, after.apiserver, 'apiserver_request_total', statusPatch),
          3,
        ),
        statusPatchP99Ms: histogramDelta(before.apiserver, after.apiserver, 'apiserver_request_duration_seconds', statusPatch, 1000)?.p99 ?? null,
        webhookMsPerPatch: msPerPatch(['apiserver_admission_webhook_admission_duration_seconds_sum', { name: nodesEntry, type: 'admit' }]),
        policyMsPerPatch: msPerPatch(
          ['apiserver_mutating_admission_policy_check_duration_seconds_sum', { policy: NODE_POLICY }],
          ['apiserver_admission_match_condition_evaluation_seconds_sum', { kind: 'policy', name: NODE_POLICY }],
        ),
        decisions,
        failedPatches: counterDelta(before.apiserver, after.apiserver, 'apiserver_request_total', {
          ...statusPatch,
          code: (c) => c !== undefined && !c.startsWith('2'),
        }),
        readyNodesAtEnd: await readyNodes(env, names),
        cores: {
          apiserver: (cpu.apiserver as { cores: number }).cores,
          etcd: (cpu.etcd as { cores: number }).cores,
          controllerManager: (cpu.controllerManager as { cores: number }).cores,
          webhook: (cpu.webhook as { cores: number }).cores,
          hollowKubelets: round(kubeletCores, 3),
        },
        apiserverCpuMsPerPatch: round(((cpu.apiserver as { cpuSeconds: number }).cpuSeconds * 1000) / patches, 3),
        machineBusyCores: machine.busyCores,
      };
      if (profile) {
        // The PATCHes in the profile's seconds, at the window's rate.
        const inProfile = (patches / seconds) * profileSeconds;
        phase.profile = {
          ...profile,
          statusPatchesInProfile: Math.round(inProfile),
          admissionCpuMsPerPatch: round(((profile.cumSeconds.webhookPlugin! + profile.cumSeconds.policyPlugin!) * 1000) / inProfile, 3),
        };
      }
      log(`  ${JSON.stringify(phase)}`);
      return phase;
    };

    const inflation = await measure('inflation', `cpu ratio ${options.ratio}, coalesceStatusWrites false`, options.settleSeconds, options.minutes);
    await webhook.useConfig({ nodes: { defaultRatios: { cpu: options.ratio, memory: 1 } } });
    const coalescing = await measure(
      'coalescing',
      `cpu ratio ${options.ratio}, coalesceStatusWrites true (default), statusReportPeriod 5m`,
      options.settleSeconds,
      options.baselineMinutes,
    );
    const admin = adminClient(env);
    let policy: Phase | undefined;
    if (options.policy) {
      const installed = await installNodePolicy(env, admin);
      stage.onTearDown(() => installed.uninstall());
      policy = await measure(
        'policy',
        `cpu ratio ${options.ratio}, coalescing on, the node-status policy installed (k8s/node-policy)`,
        // The running webhook looks the path up every minute, then publishes.
        Math.max(options.settleSeconds, 90),
        options.baselineMinutes,
      );
      await webhook.stop();
      await installed.uninstall();
      await webhook.start();
    }
    try {
      await admin.delete(`/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations/${env.webhook.configurationName}`).catch((e) => {
        if (!(e instanceof KubeApiError && e.status === 404)) throw e;
      });
    } finally {
      admin.close();
    }
    const baseline = await measure('no-webhook', 'MutatingWebhookConfiguration deleted', options.baselineSettleSeconds, options.baselineMinutes);

    const phases = [inflation, coalescing, ...(policy ? [policy] : []), baseline];
    const report = {
      benchmark: 'cluster-hollow',
      command,
      startedAt: startedAt.toISOString(),
      finishedAt: new Date().toISOString(),
      machine: machineInfo(),
      cluster: { kubernetes: env.k8sVersion, kubelets: `${options.nodes} × kubemark --morph=kubelet (${env.kubeletVersion}), ${rssMiB} MiB RSS in all` },
      options,
      sources: {
        statusPatchesPerMin: 'apiserver_request_total{resource="nodes",subresource="status",verb="PATCH"}',
        nodeEtcdWritesPerMin: 'the API server\'s etcd_requests_total{resource="nodes",operation="update"}',
        nodeWatchEventsPerMin: "MODIFIED events of one watch on the kubelets' Nodes",
        webhookCallsPerMin: 'apiserver_admission_webhook_request_total{name="nodes.kube-overcommit.io"}',
      },
      ratiosToNoWebhook: {
        etcdWritesInflation: ratioOf(inflation.nodeEtcdWritesPerMin, baseline.nodeEtcdWritesPerMin),
        etcdWritesCoalesced: ratioOf(coalescing.nodeEtcdWritesPerMin, baseline.nodeEtcdWritesPerMin),
        watchEventsInflation: ratioOf(inflation.nodeWatchEventsPerMin, baseline.nodeWatchEventsPerMin),
        watchEventsCoalesced: ratioOf(coalescing.nodeWatchEventsPerMin, baseline.nodeWatchEventsPerMin),
        statusPatchesCoalesced: ratioOf(coalescing.statusPatchesPerMin, baseline.statusPatchesPerMin),
        ...(policy
          ? {
              etcdWritesPolicy: ratioOf(policy.nodeEtcdWritesPerMin, baseline.nodeEtcdWritesPerMin),
              apiserverCoresPolicy: ratioOf(policy.cores.apiserver!, baseline.cores.apiserver!),
              apiserverCoresCoalesced: ratioOf(coalescing.cores.apiserver!, baseline.cores.apiserver!),
            }
          : {}),
      },
      ...(policy ? { policyVsWebhook: policyVsWebhook(policy, coalescing, baseline) } : {}),
      phases,
    };
    writeFileSync(outFile, `${JSON.stringify(report, null, 2)}\n`);
    const keys = Object.keys(inflation).filter((k) => !['name', 'description', 'decisions', 'cores'].includes(k)) as Array<keyof Phase>;
    console.log(
      `\n${table(
        ['', ...phases.map((p) => p.name)],
        [
          ...keys.map((k) => [k, ...phases.map((p) => String(p[k]))]),
          [
            'cores: apiserver / etcd / webhook / kubelets',
            ...phases.map((p) => `${p.cores.apiserver} / ${p.cores.etcd} / ${p.cores.webhook} / ${p.cores.hollowKubelets}`),
          ],
          ['decisions', ...phases.map((p) => JSON.stringify(p.decisions))],
        ],
      )}\n`,
    );
    console.log(`÷ no webhook: ${JSON.stringify(report.ratiosToNoWebhook)}; wrote ${outFile}`);
    return phases.every((p) => p.failedPatches === 0 && p.readyNodesAtEnd === options.nodes);
  });
}
