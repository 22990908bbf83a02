/**
 * The node-status policy's publisher at cluster scale, in this process: `npm run bench:publisher`.
 *
 * The leader as it runs in a replica — NodeTargetsPublisher, the pod index (PodsByNode, as the
 * pod cache holds it) read through the commitment floor, the config store — over `--nodes`
 * kubeadm-shaped Nodes with `--pods` bound pods each, publishing to the shard ConfigMaps of a fake
 * API server (test/fixtures/node-targets-api.ts, in a worker thread: the main thread holds only
 * the leader's work). Churn, as a cluster of that size makes it: each node's report-due status
 * write once per `--report-seconds` (a new Node object in the cache: the informer's update
 * event), and `--pod-churn` pods a second created and as many deleted, on random nodes. Every
 * tenth node is committed past floor(raw × ratio), so the floor sets its target and its pods'
 * churn changes its entry (the shard writes); the others' pods fit under their raw value.
 *
 * Two versions of the publisher, alternated phase by phase (`--rounds`, each `--phase-seconds`
 * after a 10-second warm-up), in one process on the same cluster:
 *
 *   incremental  as built (node-targets.rules.ts rule 9: a node planned again only when its
 *                Node, committed requests, config or usage entry changed; its Σ admitted summed
 *                again only when its pods changed)
 *   full         every node planned and summed at every publication (rule 9 and the sums'
 *                memo bypassed): the publisher before them, the baseline
 *
 * Per phase: publications; the CPU of each publication's plan (its synchronous part on the event
 * loop: every node's entry, the shards, the patches), as the main thread's own CPU time
 * (process.threadCpuUsage: what other processes on a busy machine take is not counted) and as
 * wall time; the main thread's CPU per publication over the phase (the writes, the reads, the
 * churn's upkeep of the caches included); the event-loop delay (perf_hooks.monitorEventLoopDelay,
 * p99 and max: wall time, so it grows with the machine's load); shard writes a minute; and at the
 * end the bytes of each shard as stored. Medians over the rounds, full ÷ incremental.
 * Writes bench/results/policy-publisher.json (or --out).
 */
import { monitorEventLoopDelay, performance } from 'node:perf_hooks';
import { Worker } from 'node:worker_threads';
import { writeFileSync } from 'node:fs';
import { Counter, Gauge, Registry } from 'prom-client';
import { BackgroundTasks, BACKGROUND_ERRORS } from '../src/common/background-tasks.js';
import { ConfigStore } from '../src/config/config.store.js';
import { OVERCOMMIT_CONFIG } from '../src/overcommit.config.js';
import { cachedPod, PodsByNode } from '../src/kube/pods-by-node.js';
import type { NodeLike } from '../src/domain/node-like.js';
import type { PodLike } from '../src/domain/pod-resources.js';
import {
  NODE_POLICY_ACTIVE_METRIC,
  NODE_POLICY_LEADER_METRIC,
  NODE_POLICY_PATH_CHECKS_METRIC,
  NODE_TARGET_DRIFT_METRIC,
  NODE_TARGET_PLANS_METRIC,
  NODE_TARGET_WRITES_METRIC,
  NODE_TARGETS_METRIC,
  NodeTargetsPublisher,
} from '../src/node-policy/node-policy.service.js';
import { planTargetEntry, TargetEntryPlans } from '../src/node-policy/node-targets.rules.js';
import { kubeConfigFor } from '../test/fixtures/kube-config.js';
import { KnownNodes } from '../test/fixtures/known-nodes.js';
import { IN_CLUSTER_ENV } from '../test/fixtures/namespaces.js';
import { kubeadmNode } from '../test/fixtures/nodes.js';
import type { ShardsReport } from './fake-targets-worker.js';
import { benchMain, loadAvg, machineInfo, median, percentile, ratioOf, round, sleep, table } from './lib.js';

const bench = benchMain(
  {
    script: 'bench:publisher',
    results: 'policy-publisher.json',
    clock: true,
    flags: {
      nodes: { type: 'number', default: 5000, min: 1, integer: true },
      pods: { type: 'number', default: 30, min: 0, integer: true },
      'pod-churn': { type: 'number', default: 20, min: 0 },
      'report-seconds': { type: 'number', default: 300, min: 1 },
      rounds: { type: 'number', default: 3, min: 1, integer: true },
      'phase-seconds': { type: 'number', default: 60, min: 5 },
    },
  },
  main,
);
const { flags, log, outFile, command } = bench;

const CONFIG = 'nodes:\n  defaultRatios: { cpu: 1.5, memory: 1.2 }\n  statusReportPeriod: 5m\n';
const WARM_UP_MS = 10_000;
const CHURN_TICK_MS = 100;
type Version = 'incremental' | 'full';

const nodeName = (i: number) => `node-${String(i).padStart(5, '0')}`;

/** Node i as its report-due status write at `heartbeat` stores it: a new object, new heartbeat times. */
function shapedNode(i: number, heartbeat: number): NodeLike {
  const shaped = kubeadmNode({ name: nodeName(i), images: 0 });
  const time = new Date(heartbeat).toISOString().replace(/\.\d+Z$/, 'Z');
  return {
    ...shaped,
    metadata: { ...shaped.metadata, uid: `uid-${i}` },
    status: { ...shaped.status, conditions: shaped.status.conditions.map((c: Record<string, unknown>) => ({ ...c, lastHeartbeatTime: time })) },
  } as NodeLike;
}

/** Every tenth node is committed past floor(raw × ratio) (its pods request 250m each: 7.5 of its 6 CPUs), so its target follows its pods; the others' pods fit. */
const committedPast = (i: number) => i % 10 === 0;

let podSerial = 0;
function pod(i: number): PodLike {
  const serial = podSerial++;
  const cpu = committedPast(i) ? '250m' : `${50 + (serial % 8) * 20}m`;
  return cachedPod({
    metadata: { name: `p-${serial}`, namespace: `team-${serial % 40}`, uid: `pod-${serial}` },
    spec: { nodeName: nodeName(i), containers: [{ name: 'app', resources: { requests: { cpu, memory: `${128 + (serial % 4) * 64}Mi` } } }] },
    status: { phase: 'Running' },
  } as PodLike);
}

/** Bypasses rule 9 and the sums' memo (the baseline), or restores them. */
function useVersion(version: Version): void {
  const plans = TargetEntryPlans.prototype as any;
  const index = PodsByNode.prototype as any;
  plans.builtPlan ??= plans.plan;
  index.builtAdmitted ??= index.admitted;
  if (version === 'incremental') {
    plans.plan = plans.builtPlan;
    index.admitted = index.builtAdmitted;
    return;
  }
  plans.plan = function (this: any, node: NodeLike, ...rest: [any, any, any]) {
    this.planned++;
    this.next.set(node.metadata?.name ?? '', {});
    return planTargetEntry(node, ...rest);
  };
  index.admitted = function (this: any, node: string) {
    return this.sum(node, 'admitted');
  };
}

interface Phase {
  version: Version;
  round: number;
  seconds: number;
  publications: number;
  /** The synchronous part of each publication (NodeTargetsPublisher.desired: every node's entry, the shards), the main thread's CPU: median and p99, ms. */
  planCpuMsP50: number;
  planCpuMsP99: number;
  /** The same as wall time, median. */
  planWallMsP50: number;
  /** Nodes planned (not reused) a publication, median. */
  plannedPerPublication: number;
  /** The main thread's CPU over the phase ÷ publications, ms (the writes, the reads and the churn's upkeep of the caches included). */
  threadCpuMsPerPublication: number;
  eventLoopDelayP99Ms: number;
  eventLoopDelayMaxMs: number;
  shardWritesPerMinute: number;
}

async function main(): Promise<void> {
  const { nodes: count, pods: perNode, rounds } = flags;
  const phaseMs = flags['phase-seconds'] * 1000;
  log(`${count} nodes × ${perNode} pods, ${flags['pod-churn']} pods/s created and deleted, each node's report every ${flags['report-seconds']} s`);

  const worker = new Worker(new URL('./fake-targets-worker.js', import.meta.url));
  const server = await new Promise<string>((resolve) => worker.once('message', resolve));
  const shardsReport = () =>
    new Promise<ShardsReport>((resolve) => {
      worker.once('message', resolve);
      worker.postMessage('report');
    });

  const nodes = new KnownNodes();
  for (let i = 0; i < count; i++) nodes.set(shapedNode(i, Date.now()));
  const index = new PodsByNode();
  const podsOf: PodLike[][] = Array.from({ length: count }, () => []);
  for (let i = 0; i < count; i++)
    for (let p = 0; p < perNode; p++) {
      const created = pod(i);
      index.upsert(created);
      podsOf[i]!.push(created);
    }

  const registry = new Registry();
  const gauge = (name: string, labelNames: string[] = []) => new Gauge({ name, help: 'h', labelNames, registers: [registry] });
  const counter = (name: string, labelNames: string[]) => new Counter({ name, help: 'h', labelNames, registers: [registry] });
  const store = new ConfigStore(counter('reloads', ['result']), gauge('generation'), OVERCOMMIT_CONFIG);
  if (!store.apply(CONFIG, 'bench').ok) throw new Error('the bench config does not parse');
  const publisher = new NodeTargetsPublisher(
    kubeConfigFor(server),
    { ...IN_CLUSTER_ENV, POD_NAME: 'bench-leader' },
    store,
    nodes as never,
    { isSynced: () => true, onListed: () => () => {} } as never,
    { committed: (name: string) => index.admitted(name) },
    { published: () => undefined, onRead: () => () => {} },
    new BackgroundTasks(counter(BACKGROUND_ERRORS, ['task'])),
    gauge(NODE_POLICY_ACTIVE_METRIC),
    gauge(NODE_TARGETS_METRIC, ['state']),
    counter(NODE_TARGET_WRITES_METRIC, ['result']),
    counter(NODE_POLICY_PATH_CHECKS_METRIC, ['answer']),
    gauge(NODE_POLICY_LEADER_METRIC),
    counter(NODE_TARGET_DRIFT_METRIC, ['kind']),
    counter(NODE_TARGET_PLANS_METRIC, ['how']),
  );

  // Each publication's synchronous plan, timed where it runs.
  const threadCpuMs = () => {
    const { user, system } = (process as unknown as { threadCpuUsage(): NodeJS.CpuUsage }).threadCpuUsage();
    return (user + system) / 1000;
  };
  const planMs: number[] = [];
  const planCpuMs: number[] = [];
  const planned: number[] = [];
  const proto = NodeTargetsPublisher.prototype as any;
  const desired = proto.desired;
  proto.desired = function (this: any, ...args: unknown[]) {
    const [start, cpu] = [performance.now(), threadCpuMs()];
    const result = desired.apply(this, args);
    planCpuMs.push(threadCpuMs() - cpu);
    planMs.push(performance.now() - start);
    return result;
  };
  const endPublication = TargetEntryPlans.prototype.endPublication;
  TargetEntryPlans.prototype.endPublication = function (this: TargetEntryPlans) {
    const counts = endPublication.call(this);
    planned.push(counts.planned);
    return counts;
  };

  publisher.onModuleInit();
  log('waiting for the first publication of every node …');
  const started = performance.now();
  while ((await shardsReport()).entries.reduce((a, b) => a + b, 0) < count) await sleep(500);
  log(`every node published in ${round((performance.now() - started) / 1000, 1)} s`);

  // The churn: report-due Node writes spread over the report period, pods created and deleted.
  let reportCursor = 0;
  let reportCredit = 0;
  let podCredit = 0;
  const churn = setInterval(() => {
    reportCredit += (count * CHURN_TICK_MS) / (flags['report-seconds'] * 1000);
    for (; reportCredit >= 1; reportCredit--) nodes.set(shapedNode(reportCursor++ % count, Date.now()));
    podCredit += (flags['pod-churn'] * CHURN_TICK_MS) / 1000;
    for (; podCredit >= 1; podCredit--) {
      const i = Math.floor(Math.random() * count);
      const on = podsOf[i]!;
      if (on.length > 0) index.remove(on.splice(Math.floor(Math.random() * on.length), 1)[0]!);
      const j = Math.floor(Math.random() * count);
      const created = pod(j);
      index.upsert(created);
      podsOf[j]!.push(created);
    }
  }, CHURN_TICK_MS);

  const phases: Phase[] = [];
  for (let round_ = 0; round_ < rounds; round_++) {
    const order: Version[] = round_ % 2 === 0 ? ['incremental', 'full'] : ['full', 'incremental'];
    for (const version of order) {
      useVersion(version);
      await sleep(WARM_UP_MS);
      const writesBefore = (await shardsReport()).writes;
      planMs.length = 0;
      planCpuMs.length = 0;
      planned.length = 0;
      const delay = monitorEventLoopDelay({ resolution: 5 });
      delay.enable();
      const [start, cpu] = [performance.now(), threadCpuMs()];
      await sleep(phaseMs);
      const seconds = (performance.now() - start) / 1000;
      const phaseCpuMs = threadCpuMs() - cpu;
      delay.disable();
      const writes = (await shardsReport()).writes - writesBefore;
      const sorted = [...planCpuMs].sort((a, b) => a - b);
      const phase: Phase = {
        version,
        round: round_ + 1,
        seconds: round(seconds, 1),
        publications: planMs.length,
        planCpuMsP50: round(percentile(sorted, 50), 2),
        planCpuMsP99: round(percentile(sorted, 99), 2),
        planWallMsP50: round(median(planMs), 2),
        plannedPerPublication: median(planned),
        threadCpuMsPerPublication: round(phaseCpuMs / Math.max(1, planMs.length), 2),
        eventLoopDelayP99Ms: round(delay.percentile(99) / 1e6, 2),
        eventLoopDelayMaxMs: round(delay.max / 1e6, 2),
        shardWritesPerMinute: round((writes * 60) / seconds, 1),
      };
      phases.push(phase);
      log(
        `round ${phase.round} ${version}: ${phase.publications} publications, plan CPU p50 ${phase.planCpuMsP50} ms p99 ${phase.planCpuMsP99} ms, ${phase.plannedPerPublication} nodes planned each, thread CPU ${phase.threadCpuMsPerPublication} ms a publication, delay p99 ${phase.eventLoopDelayP99Ms} ms, ${phase.shardWritesPerMinute} shard writes/min`,
      );
    }
  }
  clearInterval(churn);
  useVersion('incremental');
  await publisher.onApplicationShutdown();
  const shards = await shardsReport();
  await worker.terminate();

  const FIGURES = [
    'publications',
    'planCpuMsP50',
    'planCpuMsP99',
    'planWallMsP50',
    'plannedPerPublication',
    'threadCpuMsPerPublication',
    'eventLoopDelayP99Ms',
    'eventLoopDelayMaxMs',
    'shardWritesPerMinute',
  ] as const;
  const medians = Object.fromEntries(
    (['incremental', 'full'] as const).map((version) => [
      version,
      Object.fromEntries(FIGURES.map((figure) => [figure, median(phases.filter((p) => p.version === version).map((p) => p[figure]))])),
    ]),
  ) as Record<Version, Record<(typeof FIGURES)[number], number>>;
  const fullOverIncremental = Object.fromEntries(FIGURES.map((figure) => [figure, ratioOf(medians.full[figure], medians.incremental[figure])]));
  const bytes = [...shards.bytes].sort((a, b) => a - b);
  const shardBytes = { median: median(bytes), max: bytes[bytes.length - 1] ?? 0, total: bytes.reduce((a, b) => a + b, 0), entries: shards.entries };

  log(
    '\n' +
      table(
        ['median over rounds', 'incremental', 'full', 'full ÷ incremental'],
        FIGURES.map((figure) => [figure, medians.incremental[figure], medians.full[figure], fullOverIncremental[figure] ?? '-']),
      ),
  );
  log(`shard bytes as stored: median ${shardBytes.median}, max ${shardBytes.max}, all 16 ${shardBytes.total} (${round(shardBytes.total / count, 0)} a node)`);

  writeFileSync(
    outFile,
    JSON.stringify(
      {
        command,
        date: new Date().toISOString(),
        machine: machineInfo(),
        loadAvgAtStart: bench.loadAvgAtStart,
        loadAvgAtEnd: loadAvg(),
        cluster: { nodes: count, podsPerNode: perNode, podChurnPerSecond: flags['pod-churn'], reportSeconds: flags['report-seconds'], config: CONFIG },
        phaseSeconds: flags['phase-seconds'],
        medians,
        fullOverIncremental,
        shardBytes,
        phases,
      },
      null,
      2,
    ) + '\n',
  );
  log(`wrote ${outFile}`);
}
