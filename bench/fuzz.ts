/**
 * The fuzzing campaign (issue 12): `npm run fuzz`.
 *
 * Starts the built server as the image runs it (`node dist/main.js`, the Deployment's
 * NODE_OPTIONS, in a memory cgroup at the Deployment's limit where cgroups are writable) with
 * test/fuzz/cases.ts's FUZZ_CONFIG (node ratios, pod policies, sidecars all on), sends it
 * `--cases` structure-aware cases over HTTPS and checks every answer (test/fuzz/campaign.ts):
 * no 5xx, the process alive, every 200 a well-formed AdmissionReview echoing the uid, every
 * patch applying to `request.object`, mutating twice changing nothing more. The server's RSS is
 * sampled every 10,000 cases.
 *
 * Flags: --seed n (random by default; printed and written) --cases n (100000) --concurrency n (8)
 *   --case i (replay case i of --seed alone: print it, its answer and its findings, and write its
 *   body to bench/.run/fuzz/) --shrink (with --case: let fast-check shrink it to a minimal case with
 *   the same first finding) --memory-limit MiB (the Deployment's by default, 0 for none)
 *   --log-level (the server's LOG_LEVEL, fatal by default: most cases are logged as a strategy
 *   failure, and the campaign is about answers) --no-build --out file
 * Writes bench/results/fuzz.json; the exit status is 1 when anything was found.
 */
import fc from 'fast-check';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import { join, relative } from 'node:path';
import { FINDING_KINDS, httpsPoster, runCampaign, runCase, type Post } from '../test/fuzz/campaign.js';
import { buildCase, caseAt, FUZZ_CONFIG, planArbitrary } from '../test/fuzz/cases.js';
import { kwokNode, nodeReview } from '../test/fixtures/nodes.js';
import { httpText } from '../test/support/webhook.js';
import { freePort } from '../test/support/process.js';
import {
  benchMain,
  cpuSeconds,
  DEPLOYMENT_MEMORY_LIMIT_MIB,
  machineInfo,
  oursEnv,
  ROOT,
  round,
  RUN_DIR,
  serverCgroup,
  startProcess,
  statusKiB,
  table,
  waitReady,
  writeTls,
} from './lib.js';

const bench = benchMain(
  {
    script: 'fuzz',
    results: 'fuzz.json',
    build: true,
    flags: {
      seed: { type: 'number', default: Math.floor(Math.random() * 2 ** 31), min: -(2 ** 31), integer: true },
      cases: { type: 'number', default: 100_000, min: 1, integer: true },
      concurrency: { type: 'number', default: 8, min: 1, integer: true },
      case: { type: 'number', integer: true },
      shrink: { type: 'boolean' },
      'memory-limit': { type: 'number', default: DEPLOYMENT_MEMORY_LIMIT_MIB, integer: true },
      'log-level': { type: 'string', default: 'fatal' },
    },
  },
  main,
);
const { flags, log } = bench;
const options = {
  seed: flags.seed,
  cases: flags.cases,
  concurrency: flags.concurrency,
  replay: flags.case,
  memoryLimitMiB: flags['memory-limit'],
  logLevel: flags['log-level'],
};
const RSS_EVERY = 10_000;
const dir = join(RUN_DIR, 'fuzz');
const cpuTotal = (usage: NodeJS.CpuUsage) => (usage.user + usage.system) / 1e6;
const rssMiB = (pid: number) => round(statusKiB(pid, 'VmRSS') / 1024, 1);

/** One case alone, then (--shrink) the smallest case fast-check finds with the same first finding. */
async function replay(post: Post, index: number): Promise<number> {
  const fuzzCase = caseAt(options.seed, index);
  const outcome = await runCase(post, fuzzCase);
  const file = join(dir, `case-${options.seed}-${index}.json`);
  writeFileSync(file, fuzzCase.body);
  log(`case ${index} of seed ${options.seed}: ${fuzzCase.description}`);
  log(`content-type ${fuzzCase.contentType ?? '(none)'}, ${fuzzCase.body.length} bytes, written to ${relative(process.cwd(), file)}`);
  log(`answer: HTTP ${outcome.status} ${outcome.reply?.text.slice(0, 600) ?? ''}`);
  for (const finding of outcome.findings) log(`FINDING ${finding.kind}: ${finding.signature}\n  ${finding.detail}`);
  if (outcome.findings.length === 0) log('no finding');
  if (!flags.shrink || outcome.findings.length === 0) return outcome.findings.length ? 1 : 0;

  const target = outcome.findings[0].signature;
  const result = await fc.check(
    fc.asyncProperty(planArbitrary, async (plan) => !(await runCase(post, buildCase(plan))).findings.some((f) => f.signature === target)),
    { seed: options.seed, path: String(index), numRuns: 1 },
  );
  if (!result.failed || !result.counterexample) {
    log('shrinking: the case did not fail again');
    return 1;
  }
  const minimal = buildCase(result.counterexample[0]);
  const minimalFile = join(dir, `case-${options.seed}-${index}-shrunk.json`);
  writeFileSync(minimalFile, minimal.body);
  log(`\nshrunk in ${result.numShrinks} steps: ${minimal.description}`);
  log(`content-type ${minimal.contentType ?? '(none)'}, ${minimal.body.length} bytes, written to ${relative(process.cwd(), minimalFile)}`);
  return 1;
}

/**
 * RSS growth over the run's second half, from the least-squares slope of the samples taken in it
 * (steadier than two samples: the heap breathes by tens of MiB between collections).
 */
function secondHalfGrowth(samples: { cases: number; rssMiB: number }[], cases: number): number {
  const half = samples.filter((s) => s.cases >= cases / 2);
  if (new Set(half.map((s) => s.cases)).size < 2) return 0;
  const mean = (values: number[]) => values.reduce((a, b) => a + b, 0) / values.length;
  const x = mean(half.map((s) => s.cases));
  const y = mean(half.map((s) => s.rssMiB));
  const slope = half.reduce((sum, s) => sum + (s.cases - x) * (s.rssMiB - y), 0) / half.reduce((sum, s) => sum + (s.cases - x) ** 2, 0);
  return (slope * cases) / 2;
}

async function main(): Promise<number> {
  const startedAt = new Date();
  mkdirSync(dir, { recursive: true });
  const tls = await writeTls(join(dir, 'tls'));
  const configFile = join(dir, 'config.yaml');
  writeFileSync(configFile, FUZZ_CONFIG);
  const [httpsPort, httpPort] = [await freePort(), await freePort()];
  const cgroup = serverCgroup('fuzz', options.memoryLimitMiB, log);
  const server = startProcess(
    'webhook',
    [join(ROOT, 'dist', 'main.js')],
    { ...oursEnv({ https: httpsPort, http: httpPort }, configFile, tls), LOG_LEVEL: options.logLevel },
    httpsPort,
    dir,
    cgroup,
  );
  const client = httpsPoster(server.url, { sockets: options.concurrency, timeoutMs: 10_000 });
  const alive = () => server.child.exitCode === null && server.child.signalCode === null;
  try {
    const node = Buffer.from(JSON.stringify(nodeReview(kwokNode())));
    await waitReady(server, node);
    // The config is in force: a plain node review is inflated.
    if (!(await client.post(node, 'application/json')).text.includes('"patch":"'))
      throw new Error('a kwok node review got no patch: FUZZ_CONFIG is not in force');
    if (options.replay !== undefined) return await replay(client.post, options.replay);

    log(
      `kube-overcommit fuzz — seed ${options.seed}, ${options.cases} cases, ${options.concurrency} in flight; ${machineInfo().cpus} cpus, load ${os
        .loadavg()
        .map((l) => l.toFixed(2))
        .join(' ')}`,
    );
    log(`server pid ${server.pid}, memory limit ${cgroup ? `${cgroup.limitMiB} MiB` : 'none'}, log ${relative(process.cwd(), server.logFile)}`);
    const rssSamples: { cases: number; rssMiB: number; metricsKiB?: number; scrapeMs?: number }[] = [{ cases: 0, rssMiB: rssMiB(server.pid) }];
    const cpuStart = { server: cpuSeconds(server.pid), fuzzer: process.cpuUsage() };
    const result = await runCampaign({
      post: client.post,
      seed: options.seed,
      cases: options.cases,
      concurrency: options.concurrency,
      every: RSS_EVERY,
      isAlive: alive,
      onMilestone: async (done) => {
        if (!alive()) return;
        // A scrape as Prometheus makes them: what the series the bodies created cost to write.
        const scrapeStart = performance.now();
        const metrics = await httpText(`http://127.0.0.1:${httpPort}/metrics`, 30_000).catch(() => '');
        const sample = {
          cases: done,
          rssMiB: rssMiB(server.pid),
          metricsKiB: round(Buffer.byteLength(metrics) / 1024, 1),
          scrapeMs: Math.round(performance.now() - scrapeStart),
        };
        rssSamples.push(sample);
        log(
          `${done} cases, ${Math.round(done / ((Date.now() - startedAt.getTime()) / 1000))}/s, server RSS ${sample.rssMiB} MiB, /metrics ${sample.metricsKiB} KiB in ${sample.scrapeMs} ms`,
        );
      },
    });
    const cpu = alive()
      ? { serverSeconds: round(cpuSeconds(server.pid) - cpuStart.server, 1), fuzzerSeconds: round(cpuTotal(process.cpuUsage(cpuStart.fuzzer)), 1) }
      : null;
    // A crash caused by an earlier request (a timer, a late callback) shows a moment later.
    await new Promise((resolve) => setTimeout(resolve, 1_000));
    if (alive() && result.counts.crashes === 0) rssSamples.push({ cases: result.cases, rssMiB: rssMiB(server.pid) });
    else if (result.counts.crashes === 0) result.counts.crashes = 1;
    const serverLogTail = alive() ? undefined : readFileSync(server.logFile, 'utf8').split('\n').slice(-25).join('\n');

    const rssStart = rssSamples[0].rssMiB;
    const rssEnd = rssSamples.at(-1)!.rssMiB;
    const rssMax = Math.max(...rssSamples.map((s) => s.rssMiB));
    const rssGrowthSecondHalfMiB = round(secondHalfGrowth(rssSamples, options.cases), 1);
    // Bounded: under the pod's limit with room to spare, and flat over the run's second half
    // (warm-up growth — V8's young generation, JIT code — happens in the first).
    const rssBounded = result.counts.crashes === 0 && rssMax < 0.9 * (options.memoryLimitMiB || DEPLOYMENT_MEMORY_LIMIT_MIB) && rssGrowthSecondHalfMiB <= 32;
    const failures = FINDING_KINDS.reduce((sum, kind) => sum + result.counts[kind], 0) + (rssBounded ? 0 : 1);
    const report = {
      benchmark: 'fuzz',
      command: bench.command,
      replay: `npm run fuzz -- --seed ${options.seed} --case INDEX [--shrink]`,
      startedAt: startedAt.toISOString(),
      finishedAt: new Date().toISOString(),
      machine: { ...machineInfo(), loadAvgAtStart: bench.loadAvgAtStart },
      seed: options.seed,
      cases: result.cases,
      byStatus: result.byStatus,
      serverErrors: result.counts.serverErrors,
      crashes: result.counts.crashes,
      patchesNotApplying: result.counts.patchesNotApplying,
      nonIdempotent: result.counts.nonIdempotent,
      malformed: result.counts.malformed,
      validJsonRefused: result.counts.validJsonRefused,
      noAnswer: result.counts.noAnswer,
      patched: result.patched,
      rssStartMiB: rssStart,
      rssEndMiB: rssEnd,
      rssMaxMiB: rssMax,
      rssGrowthSecondHalfMiB,
      rssBounded,
      rssSamples,
      memoryLimitMiB: cgroup?.limitMiB ?? null,
      latencyMs: result.latencyMs,
      slowest: result.slowest,
      seconds: result.seconds,
      casesPerSecond: Math.round(result.cases / result.seconds),
      concurrency: options.concurrency,
      cpu,
      server: { command: 'node dist/main.js', config: FUZZ_CONFIG.trim(), logLevel: options.logLevel },
      findings: result.findings,
      serverLogTail,
    };
    const { outFile } = bench;
    writeFileSync(outFile, `${JSON.stringify(report, null, 2)}\n`);

    log(
      `\n${result.cases} cases in ${result.seconds} s (${report.casesPerSecond}/s); by status: ${JSON.stringify(result.byStatus)}; ${result.patched} patched`,
    );
    log(
      `time to answer: p50 ${result.latencyMs.p50} ms, p99 ${result.latencyMs.p99} ms, max ${result.latencyMs.max} ms (case ${result.slowest[0]?.index}: ${result.slowest[0]?.description.slice(0, 100)})`,
    );
    if (cpu) log(`CPU: server ${cpu.serverSeconds} s, fuzzer ${cpu.fuzzerSeconds} s`);
    log(`RSS ${rssStart} → ${rssEnd} MiB (max ${rssMax}, ${rssGrowthSecondHalfMiB} MiB over the second half): ${rssBounded ? 'bounded' : 'NOT BOUNDED'}`);
    if (serverLogTail) log(`the server exited; the end of its log:\n${serverLogTail}`);
    log(FINDING_KINDS.map((kind) => `${kind} ${result.counts[kind]}`).join(', '));
    if (result.findings.length) {
      log('\nfindings (replay: npm run fuzz -- --seed SEED --case INDEX --shrink):');
      log(
        table(
          ['kind', 'count', 'first case', 'signature'],
          result.findings.map((f) => [f.kind, f.count, f.examples[0].index, f.signature]),
        ),
      );
    }
    log(`wrote ${relative(process.cwd(), outFile)}`);
    return failures === 0 ? 0 : 1;
  } finally {
    client.close();
    await server.stop();
  }
}
