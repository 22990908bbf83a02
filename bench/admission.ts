/**
 * Admission throughput and latency (issue 4, part 1): `npm run bench:admission`.
 *
 * Two servers, each its own child process so that CPU and RSS are measured separately:
 *   ours      `node dist/main.js` with the Deployment's NODE_OPTIONS, config `nodes.defaultRatios.cpu: 1.5`
 *             (node reviews get a patch), LOG_LEVEL=warn
 *   baseline  bench/baseline-server.ts: bare Fastify 5 HTTPS, same certificate and body limit, parses
 *             the body and answers allowed with no patch — the limit of this stack
 *
 * For each review size, rounds alternate ours/baseline (the order flips every round, so drift on a
 * noisy machine hits both alike): autocannon at full speed over HTTPS, `--connections` connections,
 * pipelining 1. Then the fixed-rate runs on the kubeadm-node review at `--rate` req/s: autocannon's
 * `overallRate` (which sends each connection's share in a burst at the start of every second) and a
 * paced open-loop client (one request every 1/rate s, the way API server traffic arrives).
 *
 * With `--against <commit>`, a third server: that commit of this repository, built as its own
 * `npm ci && npm run build` builds it in a git worktree (bench/.run/against/<commit>, kept for the next
 * run) and run as ours is, with that tree's Deployment NODE_OPTIONS and compile cache; it takes its
 * turn in the start-up spawns and the throughput rounds (order ours, against, baseline, reversed every
 * round), and each size reports its CPU µs/review beside ours' and ours ÷ against, and that commit's own cpu
 * ratio (baseline ÷ against).
 *
 * First, start-up: each server is spawned `--spawns` times (alternating, each in its own memory cgroup)
 * and timed from spawn() to its first 200 answer to the kubeadm-node review, polled every 5 ms on a
 * new connection (the API server's first call after a replica starts); then its RSS 1 s later, idle.
 *
 * Every response is checked (ours on node reviews must carry a patch); errors, timeouts, non-2xx and
 * mismatches are counted and printed, and any makes the exit status 1.
 * Latencies are taken per response from autocannon's own hrtime figure (its histogram rounds to 1 ms).
 *
 * Flags (or env): --duration s (BENCH_DURATION, 10) --rounds n (BENCH_ROUNDS, 3)
 *   --connections n (BENCH_CONNECTIONS, 24) --warmup s (BENCH_WARMUP, 1) --rate req/s (BENCH_RATE, 1000)
 *   --rate-duration s (BENCH_RATE_DURATION, 8) --rate-rounds n (BENCH_RATE_ROUNDS, 2)
 *   --spawns n (BENCH_SPAWNS, 7) --sizes bare-node,kubeadm-node,large-node,pod (BENCH_SIZES) --ours-node-args="--flag ..." (BENCH_OURS_NODE_ARGS: extra
 *   node flags for ours only, for experiments) --ours-config=YAML (BENCH_OURS_CONFIG: the config ours reads, for
 *   experiments; default `nodes: { defaultRatios: { cpu: 1.5, memory: 1 } }`, which --against always reads) --memory-limit MiB (BENCH_MEMORY_LIMIT; each server in a
 *   memory cgroup at the Deployment's limit by default, as in its pod; 0 for none) --against commit (BENCH_AGAINST)
 *   --no-build (bench the dist/ there is) --out file
 * Writes bench/results/admission.json. Default run: about 6 minutes.
 */
import autocannon, { type Result } from 'autocannon';
import { writeFileSync } from 'node:fs';
import os from 'node:os';
import { join, relative } from 'node:path';
import {
  BUILD_DIR,
  buildCommit,
  childEnv,
  compileCache,
  DEPLOYMENT_MEMORY_LIMIT_MIB,
  DEPLOYMENT_NODE_OPTIONS,
  destroyAgent,
  type LatencySummary,
  machineInfo,
  median,
  post,
  type ProcessWindow,
  ROOT,
  round,
  RUN_DIR,
  Samples,
  type ServerProcess,
  sleep,
  oursEnv,
  serverCgroup,
  startProcess,
  statusKiB,
  table,
  waitReady,
  watchProcess,
  WORKING_TREE,
  writeTls,
  benchMain,
} from './lib.js';
import { freePort, type MemoryCgroup } from '../test/support/process.js';
import { pacedLoad } from './paced-client.js';
import { type BenchReview, benchReviews } from './reviews.js';

// ---------------------------------------------------------------------------------------------
// Options

/** The config every server of ours reads unless `--ours-config` says otherwise: cpu inflated, so node reviews get a patch. */
const DEFAULT_CONFIG = 'nodes: { defaultRatios: { cpu: 1.5, memory: 1 } }\n';

const bench = benchMain(
  {
    script: 'bench:admission',
    results: 'admission.json',
    build: true,
    title: 'admission bench',
    flags: {
      duration: { type: 'number', default: 10, min: 1, env: 'BENCH_DURATION' },
      rounds: { type: 'number', default: 3, min: 1, integer: true, env: 'BENCH_ROUNDS' },
      connections: { type: 'number', default: 24, min: 1, integer: true, env: 'BENCH_CONNECTIONS' },
      warmup: { type: 'number', default: 1, env: 'BENCH_WARMUP' },
      rate: { type: 'number', default: 1000, min: 1, integer: true, env: 'BENCH_RATE' },
      'rate-duration': { type: 'number', default: 8, min: 1, env: 'BENCH_RATE_DURATION' },
      'rate-rounds': { type: 'number', default: 2, integer: true, env: 'BENCH_RATE_ROUNDS' },
      sizes: { type: 'list', default: 'bare-node,kubeadm-node,large-node,pod', env: 'BENCH_SIZES', choices: benchReviews().map((r) => r.name) },
      'ours-node-args': { type: 'string', default: '', env: 'BENCH_OURS_NODE_ARGS' },
      'ours-config': { type: 'string', default: DEFAULT_CONFIG, env: 'BENCH_OURS_CONFIG' },
      'memory-limit': { type: 'number', default: DEPLOYMENT_MEMORY_LIMIT_MIB, integer: true, env: 'BENCH_MEMORY_LIMIT' },
      spawns: { type: 'number', default: 7, integer: true, env: 'BENCH_SPAWNS' },
      against: { type: 'string', env: 'BENCH_AGAINST' },
    },
  },
  main,
);
const { flags, log, outFile } = bench;

const options = {
  duration: flags.duration,
  rounds: flags.rounds,
  connections: flags.connections,
  pipelining: 1,
  warmup: flags.warmup,
  rate: flags.rate,
  rateDuration: flags['rate-duration'],
  rateRounds: flags['rate-rounds'],
  rateReview: 'kubeadm-node' as const,
  sizes: flags.sizes,
  /** Extra node flags for ours only (e.g. "--max-semi-space-size=8" to see what a V8 setting does to RSS). */
  oursNodeArgs: flags['ours-node-args'].split(' ').filter(Boolean),
  /** The config file ours reads (YAML; `--against` and the default run read DEFAULT_CONFIG), e.g. with a feature switched off. */
  oursConfig: flags['ours-config'],
  /** Each server in a memory cgroup at this limit (MiB; 0: none): the Deployment's by default. */
  memoryLimitMiB: flags['memory-limit'],
  /** Start-up: each server spawned this many times, timed from spawn to its first answered review. */
  spawns: flags.spawns,
  /** Another commit run beside the working tree (`--against`), or undefined. */
  against: flags.against,
};

// ---------------------------------------------------------------------------------------------
// Checks

/** `against`: the `--against` commit's build, run as ours is. */
type ServerName = 'ours' | 'against' | 'baseline';

const SERVERS: ServerName[] = options.against ? ['ours', 'against', 'baseline'] : ['ours', 'baseline'];

/** The servers in the order round `n` runs them: reversed every round, so drift hits each alike. */
const roundOrder = (n: number): ServerName[] => (n % 2 === 1 ? SERVERS : [...SERVERS].reverse());

/** Whether a response body is the right answer from this server for this review. */
function verifier(server: ServerName, review: BenchReview): (body: string) => boolean {
  if (server !== 'baseline' && review.expectPatch) return (body) => body.includes('"allowed":true') && body.includes('"patch":"');
  return (body) => body.includes('"allowed":true');
}

/** A few requests before any load: the answers must be the right ones, or the figures mean nothing. */
async function checkAnswers(servers: Partial<Record<ServerName, ServerProcess>>, reviews: BenchReview[]) {
  const checks = [];
  for (const review of reviews) {
    const uid = JSON.parse(review.body.toString('utf8')).request.uid;
    for (const name of SERVERS) {
      let responseBytes = 0;
      let patchOps: unknown[] = [];
      for (let i = 0; i < 3; i++) {
        const reply = await post(servers[name]!.url, review.body);
        const fail = (why: string) => new Error(`${name} on ${review.name}: ${why}; HTTP ${reply.status}: ${reply.text.slice(0, 500)}`);
        if (reply.status !== 200) throw fail('not 200');
        const json = JSON.parse(reply.text);
        if (json.apiVersion !== 'admission.k8s.io/v1' || json.kind !== 'AdmissionReview') throw fail('not an AdmissionReview');
        if (json.response?.uid !== uid) throw fail('uid not echoed');
        if (json.response?.allowed !== true) throw fail('not allowed');
        if (!verifier(name, review)(reply.text)) throw fail('the load run would count this answer as a mismatch');
        if (name !== 'baseline' && review.expectPatch) {
          if (json.response.patchType !== 'JSONPatch') throw fail('no JSONPatch');
          patchOps = JSON.parse(Buffer.from(json.response.patch, 'base64').toString('utf8'));
          if (!patchOps.some((op: any) => op.op === 'replace' && op.path === '/status/allocatable/cpu')) throw fail('patch does not inflate cpu');
        } else if (name === 'baseline' && json.response.patch !== undefined) {
          throw fail('baseline answered with a patch');
        } else if (json.response.patch !== undefined) {
          patchOps = JSON.parse(Buffer.from(json.response.patch, 'base64').toString('utf8'));
        }
        responseBytes = Buffer.byteLength(reply.text);
      }
      checks.push({ review: review.name, server: name, responseBytes, patchOps: patchOps.length });
    }
  }
  return checks;
}

// ---------------------------------------------------------------------------------------------
// Load runs

interface Errors {
  errors: number;
  timeouts: number;
  non2xx: number;
  mismatches: number;
  resets: number;
}

interface RunRecord extends Errors, ProcessWindow {
  round: number;
  /** 0 = this server ran first in its round. */
  position: number;
  durationS: number;
  requests: number;
  reqPerSec: number;
  latencyMs: LatencySummary;
  /** Server CPU time per request, µs: the least noise-sensitive figure on a shared machine. */
  cpuUsPerReq: number;
  /** Server CPU utilisation over the run (1 = one core). */
  cpuCores: number;
  /** The load generator's (this process's) CPU utilisation over the run. */
  clientCpuCores: number;
  loadAvg1: number;
}

function errorsOf(result: Result): Errors {
  return { errors: result.errors, timeouts: result.timeouts, non2xx: result.non2xx, mismatches: result.mismatches, resets: result.resets };
}

function finish(
  roundNo: number,
  position: number,
  durationS: number,
  samples: Samples,
  errors: Errors,
  proc: ProcessWindow,
  clientCpu: NodeJS.CpuUsage,
): RunRecord {
  const requests = samples.length;
  return {
    round: roundNo,
    position,
    durationS,
    requests,
    reqPerSec: round(requests / durationS, 1),
    latencyMs: samples.summary(),
    ...errors,
    ...proc,
    cpuUsPerReq: round((proc.cpuSeconds * 1e6) / Math.max(1, requests), 1),
    cpuCores: round(proc.cpuSeconds / durationS, 2),
    clientCpuCores: round((clientCpu.user + clientCpu.system) / 1e6 / durationS, 2),
    loadAvg1: round(os.loadavg()[0], 2),
  };
}

async function autocannonRun(
  server: ServerProcess,
  name: ServerName,
  review: BenchReview,
  run: { duration: number; round: number; position: number; overallRate?: number },
): Promise<RunRecord> {
  const samples = new Samples();
  const proc = watchProcess(server.pid);
  const cpu = process.cpuUsage();
  const instance = autocannon({
    url: server.url,
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: review.body,
    connections: options.connections,
    pipelining: options.pipelining,
    duration: run.duration,
    timeout: 10,
    verifyBody: verifier(name, review),
    ...(run.overallRate ? { overallRate: run.overallRate } : {}),
  });
  instance.on('response', (_client: unknown, statusCode: number, _bytes: number, ms: number) => {
    if (statusCode >= 200 && statusCode < 300) samples.push(ms);
  });
  const result = await instance;
  const window = proc.end();
  return finish(run.round, run.position, result.duration, samples, errorsOf(result), window, process.cpuUsage(cpu));
}

/**
 * Open-loop paced load (bench/paced-client.ts): request i is due at start + i/rate and sent when
 * due over a pool of `--connections` keep-alive connections, whatever the earlier ones are doing.
 * latencyMs from send to the end of the response; fromScheduleMs from when it was due (it counts
 * queueing in the pool and a late client timer too); sendLagMs = send - due.
 */
async function pacedRun(
  server: ServerProcess,
  name: ServerName,
  review: BenchReview,
  run: { duration: number; round: number; position: number; rate: number },
): Promise<RunRecord & { fromScheduleMs: LatencySummary; sendLagMs: LatencySummary; errorCauses?: Record<string, number> }> {
  const verify = verifier(name, review);
  const errors: Errors = { errors: 0, timeouts: 0, non2xx: 0, mismatches: 0, resets: 0 };
  /** How the requests lost were lost, counted by cause. */
  const errorCauses: Record<string, number> = {};
  const samples = new Samples();
  const fromSchedule = new Samples();
  const lag = new Samples();
  const load = (seconds: number, record: boolean) =>
    pacedLoad({
      url: server.url,
      body: review.body,
      rate: run.rate,
      seconds,
      connections: options.connections,
      onResponse: (r) => {
        if (!record) return;
        if (r.status < 200 || r.status >= 300) errors.non2xx++;
        else {
          samples.push(r.done - r.sent);
          fromSchedule.push(r.done - r.due);
          lag.push(r.sent - r.due);
          if (!verify(r.body)) errors.mismatches++;
        }
      },
      onError: (kind, cause) => {
        if (!record) return;
        errors[kind === 'timeout' ? 'timeouts' : 'errors']++;
        errorCauses[cause] = (errorCauses[cause] ?? 0) + 1;
      },
    });

  await load(1, false); // warms the server and the client; not recorded
  const proc = watchProcess(server.pid);
  const cpu = process.cpuUsage();
  const durationS = await load(run.duration, true);
  const window = proc.end();
  const clientCpu = process.cpuUsage(cpu);
  return {
    ...finish(run.round, run.position, round(durationS, 2), samples, errors, window, clientCpu),
    fromScheduleMs: fromSchedule.summary(),
    sendLagMs: lag.summary(),
    ...(Object.keys(errorCauses).length > 0 ? { errorCauses } : {}),
  };
}

// ---------------------------------------------------------------------------------------------
// Summaries

function summarise(runs: RunRecord[]) {
  const m = (pick: (r: RunRecord) => number, digits: number) => round(median(runs.map(pick)), digits);
  return {
    reqPerSec: m((r) => r.reqPerSec, 1),
    p50Ms: m((r) => r.latencyMs.p50, 3),
    p99Ms: m((r) => r.latencyMs.p99, 3),
    maxMs: m((r) => r.latencyMs.max, 3),
    cpuUsPerReq: m((r) => r.cpuUsPerReq, 1),
    cpuCores: m((r) => r.cpuCores, 2),
    peakRssMiB: round(Math.max(...runs.map((r) => r.peakRssMiB)), 1),
    errors: runs.reduce((sum, r) => sum + r.errors + r.timeouts + r.non2xx + r.mismatches, 0),
  };
}

/** bench:admission's cpu ratio (baseline ÷ ours CPU per review) each size should reach (issue 26). */
const CPU_RATIO_TARGETS = { 'bare-node': 0.68, other: 0.85 };
const cpuRatioTarget = (size: string): number => (size === 'bare-node' ? CPU_RATIO_TARGETS['bare-node'] : CPU_RATIO_TARGETS.other);

/**
 * The `--against` build's runs of one size beside ours: its medians, ours ÷ its median CPU per review
 * (≤ 1: ours costs no more), and the same ratio in each round, where the two ran back to back.
 */
function againstSummary(ours: RunRecord[], against: RunRecord[], baseline: RunRecord[]) {
  const againstCpu = median(against.map((r) => r.cpuUsPerReq));
  return {
    median: summarise(against),
    rounds: against,
    // The other commit's own cpu ratio (baseline ÷ against): what the targets' ratio was at that commit, in this run.
    cpuRatio: round(median(baseline.map((r) => r.cpuUsPerReq)) / againstCpu, 3),
    oursCpuOverAgainst: round(median(ours.map((r) => r.cpuUsPerReq)) / median(against.map((r) => r.cpuUsPerReq)), 3),
    roundRatios: ours.map((r, i) => round(r.cpuUsPerReq / against[i].cpuUsPerReq, 3)),
  };
}

function totalErrors(runs: RunRecord[]): number {
  return runs.reduce((sum, r) => sum + r.errors + r.timeouts + r.non2xx + r.mismatches, 0);
}

// ---------------------------------------------------------------------------------------------
// Main

interface SpawnRecord {
  firstReviewMs: number;
  idleRssMiB: number;
}

/**
 * Spawns a server, polls `body` every 5 ms on a new connection until it answers 200, and returns the
 * time from spawn to that answer and the RSS 1 s after it; then stops the server.
 */
async function spawnToFirstReview(name: string, args: string[], env: NodeJS.ProcessEnv, port: number, dir: string, body: Buffer): Promise<SpawnRecord> {
  const cgroup = serverCgroup(name, options.memoryLimitMiB, () => {});
  const started = performance.now();
  const server = startProcess(name, args, env, port, dir, cgroup);
  try {
    const deadline = started + 60_000;
    for (;;) {
      if (server.child.exitCode !== null || performance.now() > deadline) throw new Error(`${name} gave no answer after spawn; log ${server.logFile}`);
      const reply = await post(server.url, body, 2_000, false).catch(() => undefined);
      if (reply?.status === 200) break;
      await sleep(5);
    }
    const firstReviewMs = round(performance.now() - started, 1);
    await sleep(1_000);
    return { firstReviewMs, idleRssMiB: round(statusKiB(server.pid, 'VmRSS') / 1024, 1) };
  } finally {
    await server.stop();
  }
}

async function main(): Promise<number> {
  const reviews = benchReviews().filter((r) => options.sizes.includes(r.name));
  const rateReview = reviews.find((r) => r.name === options.rateReview) ?? benchReviews().find((r) => r.name === options.rateReview)!;

  log(
    `options: ${options.duration} s × ${options.rounds} rounds per size, ${options.connections} connections, pipelining ${options.pipelining}; ` +
      `fixed rate ${options.rate} req/s × ${options.rateDuration} s × ${options.rateRounds} rounds`,
  );

  const dir = join(RUN_DIR, 'admission');
  const tls = await writeTls(join(dir, 'tls'));
  const configFile = join(dir, 'config.yaml');
  writeFileSync(configFile, DEFAULT_CONFIG);
  const oursConfigFile = join(dir, 'ours-config.yaml');
  writeFileSync(oursConfigFile, options.oursConfig);

  const against = options.against ? await buildCommit(options.against, log) : undefined;
  /** How each server is started: node arguments, environment, HTTPS port. */
  const launches: Partial<Record<ServerName, { args: string[]; env: NodeJS.ProcessEnv; port: number }>> = {};
  for (const [name, build] of [
    ['ours', WORKING_TREE],
    ['against', against],
  ] as const) {
    if (!build) continue;
    const port = await freePort();
    const env = oursEnv({ https: port, http: await freePort() }, name === 'ours' ? oursConfigFile : configFile, tls, build);
    launches[name] = { args: [...(name === 'ours' ? options.oursNodeArgs : []), join(build.root, 'dist', 'main.js')], env, port };
  }
  const basePort = await freePort();
  launches.baseline = {
    args: [join(BUILD_DIR, 'bench', 'baseline-server.js')],
    env: childEnv({ BASELINE_PORT: String(basePort), BASELINE_TLS_CERT_FILE: tls.certFile, BASELINE_TLS_KEY_FILE: tls.keyFile }),
    port: basePort,
  };

  const spawns: Partial<Record<ServerName, SpawnRecord[]>> = Object.fromEntries(SERVERS.map((name) => [name, []]));
  if (options.spawns > 0) log(`\nstart-up: ${options.spawns} spawns per server, spawn → first answered ${rateReview.name} review`);
  for (let i = 1; i <= options.spawns; i++) {
    for (const name of roundOrder(i)) {
      const { args, env, port } = launches[name]!;
      const record = await spawnToFirstReview(`${name}-spawn`, args, env, port, dir, rateReview.body);
      spawns[name]!.push(record);
      log(`spawn ${i} ${name.padEnd(8)} first review ${record.firstReviewMs.toFixed(1).padStart(7)} ms  idle rss ${record.idleRssMiB} MiB`);
    }
  }
  const startup = {
    note: 'spawn() → first 200 answer to the review, polled every 5 ms on a new connection; idle RSS 1 s after it; medians',
    review: rateReview.name,
    ...Object.fromEntries(
      SERVERS.map((name) => {
        const records = spawns[name]!;
        return [name, { firstReviewMs: median(records.map((r) => r.firstReviewMs)), idleRssMiB: median(records.map((r) => r.idleRssMiB)), spawns: records }];
      }),
    ),
  } as { note: string; review: string } & Partial<Record<ServerName, { firstReviewMs: number; idleRssMiB: number; spawns: SpawnRecord[] }>>;

  const cgroups: Partial<Record<ServerName, MemoryCgroup | undefined>> = {};
  const servers: Partial<Record<ServerName, ServerProcess>> = {};
  for (const name of SERVERS) {
    const { args, env, port } = launches[name]!;
    cgroups[name] = serverCgroup(name, options.memoryLimitMiB, log);
    servers[name] = startProcess(name, args, env, port, dir, cgroups[name]);
  }

  try {
    await Promise.all(SERVERS.map((name) => waitReady(servers[name]!, reviews[0].body)));
    // Idle as in start-up: 1 s after the first answer (ours gives start-up's memory back once quiet).
    await sleep(1_000);
    const idleRssMiB = Object.fromEntries(SERVERS.map((name) => [name, round(statusKiB(servers[name]!.pid, 'VmRSS') / 1024, 1)])) as Partial<
      Record<ServerName, number>
    >;
    log(
      `servers up: ${SERVERS.map((name) => `${name} pid ${servers[name]!.pid} (${idleRssMiB[name]} MiB)`).join(', ')}; ` +
        `memory limit ${cgroups.ours ? `${cgroups.ours.limitMiB} MiB each` : 'none'}`,
    );

    const checks = await checkAnswers(servers, reviews);
    log('\nreviews (request bytes; response bytes and patch operations of ours):');
    log(
      table(
        ['review', 'bytes', 'ours resp', 'patch ops', 'base resp', 'description'],
        reviews.map((r) => {
          const ours = checks.find((c) => c.review === r.name && c.server === 'ours')!;
          const base = checks.find((c) => c.review === r.name && c.server === 'baseline')!;
          return [r.name, r.body.length, ours.responseBytes, ours.patchOps, base.responseBytes, r.description];
        }),
      ),
    );

    if (options.warmup > 0) {
      log(`\nwarm-up: ${options.warmup} s per server per review`);
      for (const review of reviews) {
        for (const name of SERVERS) await autocannonRun(servers[name]!, name, review, { duration: options.warmup, round: 0, position: 0 });
      }
    }

    // Throughput: alternate, flipping the order each round.
    const throughput: Record<string, Partial<Record<ServerName, RunRecord[]>>> = {};
    for (const review of reviews) {
      throughput[review.name] = Object.fromEntries(SERVERS.map((name) => [name, []]));
      for (let r = 1; r <= options.rounds; r++) {
        for (const [position, name] of roundOrder(r).entries()) {
          const run = await autocannonRun(servers[name]!, name, review, { duration: options.duration, round: r, position });
          throughput[review.name][name]!.push(run);
          const bad = totalErrors([run]);
          log(
            `${review.name.padEnd(12)} round ${r} ${name.padEnd(8)} ${run.reqPerSec.toFixed(0).padStart(6)} req/s  p50 ${run.latencyMs.p50.toFixed(2)} ms  p99 ${run.latencyMs.p99.toFixed(2)} ms  ` +
              `cpu ${run.cpuUsPerReq.toFixed(0)} µs/req  rss ${run.peakRssMiB} MiB  load ${run.loadAvg1}${bad ? `  ERRORS ${bad}` : ''}`,
          );
        }
      }
    }

    // Fixed rate on the kubeadm-node review: ours and the baseline.
    const fixed: Record<'autocannon' | 'paced', Record<'ours' | 'baseline', RunRecord[]>> = {
      autocannon: { ours: [], baseline: [] },
      paced: { ours: [], baseline: [] },
    };
    for (let r = 1; r <= options.rateRounds; r++) {
      const order = r % 2 === 1 ? (['ours', 'baseline'] as const) : (['baseline', 'ours'] as const);
      for (const [position, name] of order.entries()) {
        const spec = { duration: options.rateDuration, round: r, position };
        const ac = await autocannonRun(servers[name]!, name, rateReview, { ...spec, overallRate: options.rate });
        fixed.autocannon[name].push(ac);
        const paced = await pacedRun(servers[name]!, name, rateReview, { ...spec, rate: options.rate });
        fixed.paced[name].push(paced);
        for (const [mode, run] of [
          ['autocannon', ac],
          ['paced', paced],
        ] as const) {
          const bad = totalErrors([run]);
          log(
            `${options.rate} req/s ${mode.padEnd(10)} round ${r} ${name.padEnd(8)} ${run.reqPerSec.toFixed(0).padStart(5)} req/s  p50 ${run.latencyMs.p50.toFixed(2)} ms  ` +
              `p99 ${run.latencyMs.p99.toFixed(2)} ms  max ${run.latencyMs.max.toFixed(1)} ms  cpu ${run.cpuCores} cores${bad ? `  ERRORS ${bad}` : ''}`,
          );
        }
      }
    }

    const hwmMiB = Object.fromEntries(SERVERS.map((name) => [name, round(statusKiB(servers[name]!.pid, 'VmHWM') / 1024, 1)])) as Partial<
      Record<ServerName, number>
    >;

    // Results
    const sizes = reviews.map((review) => {
      const runs = throughput[review.name] as Record<ServerName, RunRecord[]>;
      const ours = summarise(runs.ours);
      const baseline = summarise(runs.baseline);
      const vsAgainst = against && againstSummary(runs.ours, runs.against, runs.baseline);
      return {
        name: review.name,
        description: review.description,
        bytes: review.body.length,
        ratio: round(ours.reqPerSec / baseline.reqPerSec, 3),
        // Server CPU per request, baseline ÷ ours: the throughput ratio to expect when each server has a
        // core to itself; much steadier than `ratio` on a machine where other work takes CPU.
        cpuRatio: round(baseline.cpuUsPerReq / ours.cpuUsPerReq, 3),
        ours: { median: ours, rounds: runs.ours },
        baseline: { median: baseline, rounds: runs.baseline },
        ...(vsAgainst ? { against: vsAgainst } : {}),
      };
    });
    const fixedRate = {
      review: rateReview.name,
      bytes: rateReview.body.length,
      rate: options.rate,
      autocannon: {
        note: 'autocannon overallRate: each connection sends its share of the second in a burst at the start of it',
        ours: { median: summarise(fixed.autocannon.ours), rounds: fixed.autocannon.ours },
        baseline: { median: summarise(fixed.autocannon.baseline), rounds: fixed.autocannon.baseline },
      },
      paced: {
        note: 'open loop, one request every 1/rate s; latencyMs from send, fromScheduleMs from when it was due',
        ours: { median: summarise(fixed.paced.ours), rounds: fixed.paced.ours },
        baseline: { median: summarise(fixed.paced.baseline), rounds: fixed.paced.baseline },
      },
    };
    const allRuns = [
      ...Object.values(throughput).flatMap((t) => SERVERS.flatMap((name) => t[name]!)),
      ...Object.values(fixed).flatMap((t) => [...t.ours, ...t.baseline]),
    ];
    const errors = totalErrors(allRuns);
    const pacedP99 = fixedRate.paced.ours.median.p99Ms;
    const peakRss = Math.max(hwmMiB.ours!, ...sizes.map((s) => s.ours.median.peakRssMiB));
    const cpuRatioShort = sizes.filter((s) => s.cpuRatio < cpuRatioTarget(s.name)).map((s) => `${s.name} ${s.cpuRatio}`);
    const againstOver = sizes.filter((s) => s.against && s.against.oursCpuOverAgainst > 1).map((s) => `${s.name} ${s.against!.oursCpuOverAgainst}`);
    const targets = {
      throughputRatio: { target: '>= 0.85 at every size', value: Math.min(...sizes.map((s) => s.ratio)), pass: sizes.every((s) => s.ratio >= 0.85) },
      cpuRatio: {
        target: `>= ${CPU_RATIO_TARGETS['bare-node']} for bare-node, >= ${CPU_RATIO_TARGETS.other} for the others`,
        value: Object.fromEntries(sizes.map((s) => [s.name, s.cpuRatio])),
        below: cpuRatioShort,
        pass: cpuRatioShort.length === 0,
      },
      ...(against
        ? {
            cpuVsAgainst: {
              target: `ours' CPU µs/review <= ${against.commit!.slice(0, 12)}'s at every size (oursCpuOverAgainst <= 1)`,
              value: Object.fromEntries(sizes.map((s) => [s.name, s.against!.oursCpuOverAgainst])),
              above: againstOver,
              pass: againstOver.length === 0,
            },
          }
        : {}),
      p99AtRate: { target: `<= 2 ms at ${options.rate} req/s, ${rateReview.name} (paced)`, value: pacedP99, pass: options.rateRounds > 0 && pacedP99 <= 2 },
      rss: { target: '<= 150 MiB', value: peakRss, pass: peakRss <= 150 },
      idleRss: { target: '<= 110 MiB', value: idleRssMiB.ours, pass: idleRssMiB.ours! <= 110 },
      firstReview: { target: '<= 400 ms from spawn', value: startup.ours!.firstReviewMs, pass: options.spawns > 0 && startup.ours!.firstReviewMs <= 400 },
    };

    const report = {
      benchmark: 'admission',
      command: bench.command,
      startedAt: bench.startedAt.toISOString(),
      finishedAt: new Date().toISOString(),
      machine: { ...machineInfo(), loadAvgAtStart: bench.loadAvgAtStart },
      options,
      servers: {
        ours: {
          command: ['node', ...options.oursNodeArgs, 'dist/main.js'].join(' '),
          nodeOptions: DEPLOYMENT_NODE_OPTIONS,
          config: options.oursConfig,
          logLevel: 'warn',
          memoryLimitMiB: cgroups.ours?.limitMiB ?? null,
          idleRssMiB: idleRssMiB.ours,
          hwmMiB: hwmMiB.ours,
        },
        ...(against
          ? {
              against: {
                commit: against.commit,
                command: `node ${relative(ROOT, join(against.root, 'dist', 'main.js'))}`,
                nodeOptions: against.nodeOptions,
                compileCache: compileCache(against) !== undefined,
                memoryLimitMiB: cgroups.against?.limitMiB ?? null,
                idleRssMiB: idleRssMiB.against,
                hwmMiB: hwmMiB.against,
              },
            }
          : {}),
        baseline: {
          command: `node ${relative(ROOT, join(BUILD_DIR, 'bench', 'baseline-server.js'))}`,
          memoryLimitMiB: cgroups.baseline?.limitMiB ?? null,
          idleRssMiB: idleRssMiB.baseline,
          hwmMiB: hwmMiB.baseline,
        },
      },
      startup,
      checks,
      sizes,
      fixedRate,
      errors,
      targets,
    };
    writeFileSync(outFile, `${JSON.stringify(report, null, 2)}\n`);

    log('\nthroughput (medians over rounds; latency ms; cpu = µs of server CPU per request; cpu ratio = base cpu / ours cpu; rss = peak MiB)');
    log(
      table(
        [
          'review',
          'bytes',
          'ours req/s',
          'base req/s',
          'ratio',
          'cpu ratio',
          'ours p50',
          'base p50',
          'ours p99',
          'base p99',
          'ours max',
          'base max',
          'ours cpu',
          'base cpu',
          'ours rss',
          'base rss',
          'errors',
        ],
        sizes.map((s) => [
          s.name,
          s.bytes,
          s.ours.median.reqPerSec,
          s.baseline.median.reqPerSec,
          s.ratio.toFixed(3),
          s.cpuRatio.toFixed(3),
          s.ours.median.p50Ms,
          s.baseline.median.p50Ms,
          s.ours.median.p99Ms,
          s.baseline.median.p99Ms,
          s.ours.median.maxMs,
          s.baseline.median.maxMs,
          s.ours.median.cpuUsPerReq,
          s.baseline.median.cpuUsPerReq,
          s.ours.median.peakRssMiB,
          s.baseline.median.peakRssMiB,
          s.ours.median.errors + s.baseline.median.errors,
        ]),
      ),
    );
    if (against) {
      log(
        `\nours against ${against.commit!.slice(0, 12)} (${options.against}): server CPU µs per review, medians over rounds; ours ÷ against, and each round's`,
      );
      log(
        table(
          ['review', 'ours cpu', 'against cpu', 'ours ÷ against', 'per round', 'cpu ratio ours', 'cpu ratio against', 'ours rss', 'against rss'],
          sizes.map((s) => [
            s.name,
            s.ours.median.cpuUsPerReq,
            s.against!.median.cpuUsPerReq,
            s.against!.oursCpuOverAgainst.toFixed(3),
            s.against!.roundRatios.map((r) => r.toFixed(2)).join(' '),
            s.cpuRatio.toFixed(3),
            s.against!.cpuRatio.toFixed(3),
            s.ours.median.peakRssMiB,
            s.against!.median.peakRssMiB,
          ]),
        ),
      );
    }
    if (options.rateRounds > 0) {
      log(`\nfixed rate ${options.rate} req/s, ${rateReview.name} (${rateReview.body.length} bytes), medians over rounds`);
      log(
        table(
          ['client', 'server', 'req/s', 'p50 ms', 'p99 ms', 'max ms', 'cpu cores', 'rss MiB', 'errors'],
          (['paced', 'autocannon'] as const).flatMap((mode) =>
            (['ours', 'baseline'] as const).map((name) => {
              const m = fixedRate[mode][name].median;
              return [mode, name, m.reqPerSec, m.p50Ms, m.p99Ms, m.maxMs, m.cpuCores, m.peakRssMiB, m.errors];
            }),
          ),
        ),
      );
    }
    log(
      `start-up (median of ${options.spawns} spawns): spawn → first review ${SERVERS.map((name) => `${name} ${startup[name]!.firstReviewMs} ms`).join(', ')}; ` +
        `idle RSS ${SERVERS.map((name) => `${name} ${startup[name]!.idleRssMiB} MiB`).join(', ')}`,
    );
    log(`\npeak RSS since start (VmHWM): ${SERVERS.map((name) => `${name} ${hwmMiB[name]} MiB`).join(', ')}`);
    log(
      `targets: throughput ratio ${targets.throughputRatio.value} (${targets.throughputRatio.target}) ${targets.throughputRatio.pass ? 'PASS' : 'FAIL'}; ` +
        `p99 ${targets.p99AtRate.value} ms (${targets.p99AtRate.target}) ${targets.p99AtRate.pass ? 'PASS' : 'FAIL'}; ` +
        `cpu ratio ${targets.cpuRatio.pass ? 'PASS' : `FAIL (${targets.cpuRatio.below.join(', ')})`} (${targets.cpuRatio.target}); ` +
        (targets.cpuVsAgainst
          ? `cpu vs against ${targets.cpuVsAgainst.pass ? 'PASS' : `FAIL (${targets.cpuVsAgainst.above.join(', ')})`} (${targets.cpuVsAgainst.target}); `
          : '') +
        `rss ${targets.rss.value} MiB (${targets.rss.target}) ${targets.rss.pass ? 'PASS' : 'FAIL'}; ` +
        `idle rss ${targets.idleRss.value} MiB (${targets.idleRss.target}) ${targets.idleRss.pass ? 'PASS' : 'FAIL'}; ` +
        `first review ${targets.firstReview.value} ms (${targets.firstReview.target}) ${targets.firstReview.pass ? 'PASS' : 'FAIL'}`,
    );
    log(errors === 0 ? 'errors: none (every response checked)' : `ERRORS: ${errors} failed, non-2xx or wrong responses — these figures are not valid`);
    log(`wrote ${relative(process.cwd(), outFile)}`);
    return errors === 0 ? 0 : 1;
  } finally {
    destroyAgent();
    await Promise.all(SERVERS.map((name) => servers[name]?.stop()));
  }
}
