/** Helpers shared by the benchmarks: server processes, /proc sampling, HTTPS calls, statistics. */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { createWriteStream, existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import https from 'node:https';
import os from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { parseArgs } from 'node:util';
import { generateSelfSigned } from '../src/tls/tls-material.js';
import { createMemoryCgroup, inCgroup, run, type Log, type MemoryCgroup } from '../test/support/process.js';
import { baseUnits } from '../test/support/quantity.js';
import { buildDist, repoRoot } from '../test/support/setup.js';
import { compileCacheDir, deploymentNodeOptions, deploymentWebhookContainer } from '../test/support/webhook.js';

/** The project root (this file runs from bench/.run/build/bench/). */
export const ROOT = repoRoot();
export const RUN_DIR = join(ROOT, 'bench', '.run');
export const BUILD_DIR = join(RUN_DIR, 'build');

// ---------------------------------------------------------------------------------------------
// Main: flags, header, build, exit status

export interface NumberOptionRule {
  /** The smallest value accepted (default 0). */
  min?: number;
  /** Only whole numbers. */
  integer?: boolean;
  /** The environment variable read when the flag is absent. */
  env?: string;
}

/**
 * A numeric option: the flag's text, else the variable `env` (when named), else `fallback`; a
 * text that is not a number ≥ `min` (a whole one with `integer`) stops the run with an error
 * naming the flag.
 */
function numberOption(name: string, text: string | undefined, fallback: number, rule: NumberOptionRule = {}): number {
  const given = text ?? (rule.env === undefined ? undefined : process.env[rule.env]);
  if (given === undefined || given === '') return fallback;
  const value = Number(given);
  const min = rule.min ?? 0;
  if (!(rule.integer ? Number.isSafeInteger(value) : Number.isFinite(value)) || value < min) {
    const what = rule.integer ? 'a whole number' : 'a number';
    throw new Error(`--${name}${rule.env ? ` (or ${rule.env})` : ''}: expected ${what} ≥ ${min}, got ${given}`);
  }
  return value;
}

/**
 * One flag of a bench. `number`: read by numberOption (no `default`: undefined when absent);
 * `string`: its text (or `env`'s, or `default`), one of `choices` when given; `list`: a
 * comma-separated `string`, trimmed, empty items dropped, each one of `choices` when given;
 * `boolean`: present or not.
 */
export type FlagSpec =
  | ({ type: 'number'; default?: number } & NumberOptionRule)
  | { type: 'string' | 'list'; default?: string; env?: string; choices?: readonly string[] }
  | { type: 'boolean' };

type FlagValue<S> = S extends { type: 'boolean' }
  ? boolean
  : S extends { type: 'number' }
    ? S extends { default: number }
      ? number
      : number | undefined
    : S extends { type: 'list' }
      ? S extends { choices: readonly (infer C)[] }
        ? C[]
        : string[]
      : S extends { choices: readonly (infer C)[] }
        ? S extends { default: string }
          ? C
          : C | undefined
        : S extends { default: string }
          ? string
          : string | undefined;

/** The parsed flags of a spec, by flag name. */
export type FlagValues<F> = { [K in keyof F]: FlagValue<F[K]> };

export interface BenchSpec<F extends Record<string, FlagSpec>> {
  /** Its npm script ('bench:admission', 'fuzz'): `command` in its JSON. */
  script: string;
  /** Its own flags (--out and --no-build are added by `results` and `build`). */
  flags: F;
  /** Its results file in bench/results/ (a name, or one made from the flags), which `--out FILE` replaces. */
  results?: string | ((flags: FlagValues<F>) => string);
  /** Builds dist/ first (ensureBuilt) unless `--no-build`, or when this answers false. */
  build?: boolean | ((flags: FlagValues<F>) => boolean);
  /** Printed first: `kube-overcommit <title> — <cpus> cpus, node <version>, load <load average>`. */
  title?: string;
  /** Log lines start with the seconds since the run started (the cluster benches). */
  clock?: boolean;
}

export interface Bench<F> {
  flags: FlagValues<F>;
  /** `--out FILE`, else bench/results/<spec.results>; '' for a bench that writes none. */
  outFile: string;
  /** How it was run: `npm run <script> -- <arguments>`. */
  command: string;
  startedAt: Date;
  /** The load average when it started, to two digits. */
  loadAvgAtStart: number[];
  log: Log;
}

/** The load average now, to two digits. */
export const loadAvg = (): number[] => os.loadavg().map((l) => round(l, 2));

/** `flags` of a spec read from the command line and the environment; throws naming the flag. */
export function parseFlags<const F extends Record<string, FlagSpec>>(
  spec: BenchSpec<F>,
  args: string[],
): FlagValues<F> & { out?: string; 'no-build'?: boolean } {
  const options: Record<string, { type: 'string' | 'boolean' }> = {};
  for (const [name, flag] of Object.entries(spec.flags)) options[name] = { type: flag.type === 'boolean' ? 'boolean' : 'string' };
  if (spec.results) options.out = { type: 'string' };
  if (spec.build) options['no-build'] = { type: 'boolean' };
  const { values } = parseArgs({ args, options });
  const parsed: Record<string, unknown> = { ...values };
  for (const [name, flag] of Object.entries(spec.flags)) {
    const text = values[name] as string | boolean | undefined;
    if (flag.type === 'boolean') parsed[name] = text === true;
    else if (flag.type === 'number') {
      const value = numberOption(name, text as string | undefined, flag.default ?? NaN, flag);
      parsed[name] = Number.isNaN(value) ? undefined : value;
    } else {
      const given = (text as string | undefined) ?? (flag.env ? process.env[flag.env] || undefined : undefined) ?? flag.default;
      const items =
        flag.type === 'list'
          ? (given ?? '')
              .split(',')
              .map((item) => item.trim())
              .filter(Boolean)
          : given === undefined
            ? []
            : [given];
      const unknown = flag.choices ? items.filter((item) => !flag.choices!.includes(item)) : [];
      if (unknown.length) throw new Error(`--${name}${flag.env ? ` (or ${flag.env})` : ''}: unknown ${unknown.join(', ')}; known: ${flag.choices!.join(', ')}`);
      parsed[name] = flag.type === 'list' ? items : given;
    }
  }
  return parsed as FlagValues<F>;
}

/**
 * A bench's main: reads its flags now (a bad one stops the run with an error naming it) and
 * answers them; once the module has loaded (so that what its top level computes from the answer
 * exists), prints the title, builds dist/ unless --no-build, runs `run` and exits with the code
 * it answers (0 for none), or 1 with the error's stack when it throws.
 */
export function benchMain<const F extends Record<string, FlagSpec>>(spec: BenchSpec<F>, run: (bench: Bench<F>) => Promise<number | void>): Bench<F> {
  const startedAt = new Date();
  const log: Log = spec.clock
    ? (line) => process.stdout.write(`[${((Date.now() - startedAt.getTime()) / 1000).toFixed(0).padStart(4)}s] ${line}\n`)
    : (line) => process.stdout.write(`${line}\n`);
  const args = process.argv.slice(2);
  let flags: FlagValues<F> & { out?: string; 'no-build'?: boolean };
  try {
    flags = parseFlags(spec, args);
  } catch (error) {
    console.error(`npm run ${spec.script}: ${(error as Error).message}`);
    process.exit(1);
  }
  const results = typeof spec.results === 'function' ? spec.results(flags) : spec.results;
  const bench: Bench<F> = {
    flags,
    outFile: flags.out ?? (results ? resultsPath(results) : ''),
    command: `npm run ${spec.script} -- ${args.join(' ')}`.trim().replace(/ --$/, ''),
    startedAt,
    loadAvgAtStart: loadAvg(),
    log,
  };
  const build = typeof spec.build === 'function' ? spec.build(flags) : (spec.build ?? false);
  const main = async () => {
    if (spec.title)
      log(
        `kube-overcommit ${spec.title} — ${machineInfo().cpus} cpus, node ${process.version}, load ${os
          .loadavg()
          .map((l) => l.toFixed(2))
          .join(' ')}`,
      );
    if (build && !flags['no-build']) await ensureBuilt(log);
    return run(bench);
  };
  // Once the module has loaded: what its top level computes from `bench` exists by then.
  setImmediate(() => {
    main().then(
      (code) => process.exit(code ?? 0),
      (error: unknown) => {
        console.error(error instanceof Error ? error.stack : error);
        process.exit(1);
      },
    );
  });
  return bench;
}

// ---------------------------------------------------------------------------------------------
// Build

/** `npm run build` when dist/ is missing or older than src/, under the e2e runs' build lock (--no-build skips it). */
const ensureBuilt = (log: Log): Promise<void> => buildDist('if-needed', log);

/** A build of this repository at some commit: the working tree's, or another's (bench:admission --against). */
export interface AppBuild {
  /** The folder holding its package.json, dist/ and k8s/. */
  root: string;
  /** The commit it was built from; undefined for the working tree. */
  commit?: string;
  /** NODE_OPTIONS of the webhook container in that tree's k8s/base/deployment.yaml. */
  nodeOptions: string;
}

/** The working tree's build (`ensureBuilt`). */
export const WORKING_TREE: AppBuild = { root: ROOT, nodeOptions: deploymentNodeOptions(ROOT) };

/**
 * Another commit built as its own `npm ci && npm run build` builds it, in a detached git worktree at
 * bench/.run/against/<commit> (git-ignored), made once and reused while its `.bench-built` stamp is
 * there; a half-made one is removed and made again.
 */
export async function buildCommit(revision: string, log: Log): Promise<AppBuild> {
  const resolved = spawnSync('git', ['rev-parse', '--verify', '--quiet', `${revision}^{commit}`], { cwd: ROOT, encoding: 'utf8' });
  const commit = resolved.stdout?.trim();
  if (resolved.status !== 0 || !commit) throw new Error(`--against ${revision}: not a commit of this repository`);
  const root = join(RUN_DIR, 'against', commit);
  const stamp = join(root, '.bench-built');
  if (!existsSync(stamp)) {
    const started = Date.now();
    log(`--against ${revision}: building ${commit.slice(0, 12)} in ${root} (npm ci, npm run build)`);
    if (existsSync(root)) await run('git', ['worktree', 'remove', '--force', root], { cwd: ROOT }).catch(() => rmSync(root, { recursive: true, force: true }));
    await run('git', ['worktree', 'prune'], { cwd: ROOT });
    await run('git', ['worktree', 'add', '--detach', root, commit], { cwd: ROOT });
    const env = { ...process.env, PATH: `${dirname(process.execPath)}:${process.env.PATH ?? ''}`, NODE_OPTIONS: '' };
    await run('npm', ['ci', '--no-audit', '--no-fund', '--prefer-offline'], { cwd: root, env });
    await run('npm', ['run', 'build'], { cwd: root, env });
    writeFileSync(stamp, `${new Date().toISOString()}\n`);
    log(`--against ${revision}: built in ${round((Date.now() - started) / 1000, 1)} s`);
  }
  return { root, commit, nodeOptions: deploymentNodeOptions(root) };
}

// ---------------------------------------------------------------------------------------------
// TLS

export interface TlsFiles {
  certFile: string;
  keyFile: string;
}

/** The app's own self-signed localhost certificate (EC P-256), one shared by every server of a run. */
export async function writeTls(dir: string): Promise<TlsFiles> {
  mkdirSync(dir, { recursive: true });
  const { cert, key } = await generateSelfSigned();
  const certFile = join(dir, 'tls.crt');
  const keyFile = join(dir, 'tls.key');
  writeFileSync(certFile, cert);
  writeFileSync(keyFile, key, { mode: 0o600 });
  return { certFile, keyFile };
}

// ---------------------------------------------------------------------------------------------
// Server processes

export interface ServerProcess {
  name: string;
  child: ChildProcess;
  pid: number;
  url: string;
  logFile: string;
  stop(): Promise<number | null>;
}

/** Environment for a child server: ours must not think it runs in a cluster; no NODE_OPTIONS of the bench's own. */
export function childEnv(extra: Record<string, string>): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = { ...process.env, NODE_ENV: 'production', NODE_OPTIONS: '', ...extra };
  delete env.KUBERNETES_SERVICE_HOST;
  delete env.KUBERNETES_SERVICE_PORT;
  return env;
}

/** NODE_OPTIONS as k8s/base/deployment.yaml sets it for the webhook container. */
export const DEPLOYMENT_NODE_OPTIONS = WORKING_TREE.nodeOptions;

/** The webhook container's memory limit in k8s/base/deployment.yaml, MiB. */
export const DEPLOYMENT_MEMORY_LIMIT_MIB = (() => {
  const limit = deploymentWebhookContainer(ROOT).resources?.limits?.memory;
  if (limit === undefined) throw new Error('k8s/base/deployment.yaml: the webhook container has no memory limit');
  return Number(baseUnits('memory', limit) / 2n ** 20n);
})();

const warmedCompileCaches = new Map<string, string | undefined>();

/**
 * Node's compile cache for a build's dist/main.js, filled once per bench process by the script its
 * Dockerfile runs (scripts/warm-compile-cache.js), so that it starts as its image does: the working
 * tree's in bench/.run/compile-cache, another commit's in its own folder; none (undefined) for a
 * commit whose image had no cache.
 */
export function compileCache(build: AppBuild = WORKING_TREE): string | undefined {
  if (warmedCompileCaches.has(build.root)) return warmedCompileCaches.get(build.root);
  const script = join(build.root, 'scripts', 'warm-compile-cache.js');
  let dir: string | undefined;
  if (existsSync(script)) {
    dir = build.root === ROOT ? join(RUN_DIR, 'compile-cache') : compileCacheDir(build.root);
    rmSync(dir, { recursive: true, force: true });
    const result = spawnSync(process.execPath, [script, build.root], { cwd: build.root, stdio: 'inherit', env: childEnv({ NODE_COMPILE_CACHE: dir }) });
    if (result.status !== 0) throw new Error(`${script} failed`);
  }
  warmedCompileCaches.set(build.root, dir);
  return dir;
}

/**
 * The environment of ours (`node dist/main.js`) as bench:admission and bench:profile run it:
 * the Deployment's NODE_OPTIONS, the image's compile cache, the run's config file and
 * certificate, no drain delay, warn logs.
 */
export function oursEnv(ports: { https: number; http: number }, configFile: string, tls: TlsFiles, build: AppBuild = WORKING_TREE): NodeJS.ProcessEnv {
  const cache = compileCache(build);
  return childEnv({
    NODE_OPTIONS: build.nodeOptions,
    ...(cache ? { NODE_COMPILE_CACHE: cache } : {}),
    OVERCOMMIT_HTTPS_PORT: String(ports.https),
    OVERCOMMIT_HTTP_PORT: String(ports.http),
    OVERCOMMIT_CONFIG_FILE: configFile,
    OVERCOMMIT_TLS_CERT_FILE: tls.certFile,
    OVERCOMMIT_TLS_KEY_FILE: tls.keyFile,
    OVERCOMMIT_SHUTDOWN_DELAY_MS: '0',
    LOG_LEVEL: 'warn',
  });
}

/**
 * The memory cgroup a benchmarked server runs in: `limitMiB` (0: none), or none with a line
 * saying so where cgroups are not writable.
 */
export function serverCgroup(server: string, limitMiB: number, log: (line: string) => void): MemoryCgroup | undefined {
  const cgroup = createMemoryCgroup(`kube-overcommit-bench-${server}-${process.pid}`, limitMiB);
  if (limitMiB > 0 && !cgroup) log(`${server}: no writable memory cgroup here (root and a memory controller are needed): running without a memory limit`);
  return cgroup;
}

/** Starts `node args…`, inside `cgroup` when given (inCgroup: the pid stays node's). */
export function startProcess(name: string, args: string[], env: NodeJS.ProcessEnv, port: number, logDir: string, cgroup?: MemoryCgroup): ServerProcess {
  mkdirSync(logDir, { recursive: true });
  const logFile = join(logDir, `${name}.log`);
  const log = createWriteStream(logFile);
  const [command, argv] = inCgroup(cgroup, process.execPath, args);
  const child = spawn(command, argv, { cwd: ROOT, env, stdio: ['ignore', 'pipe', 'pipe'] });
  child.stdout!.pipe(log);
  child.stderr!.pipe(log);
  if (child.pid === undefined) throw new Error(`${name}: spawn failed`);
  const exited = new Promise<number | null>((resolveExit) =>
    child.once('exit', (code) => {
      cgroup?.remove();
      resolveExit(code);
    }),
  );
  return {
    name,
    child,
    pid: child.pid,
    url: `https://127.0.0.1:${port}/mutate`,
    logFile,
    async stop() {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM');
      const timer = setTimeout(() => child.kill('SIGKILL'), 15_000);
      const code = await exited;
      clearTimeout(timer);
      return code;
    },
  };
}

// ---------------------------------------------------------------------------------------------
// HTTPS

export interface Reply {
  status: number;
  text: string;
}

const agent = new https.Agent({ keepAlive: true, maxSockets: 64, rejectUnauthorized: false });

/** POSTs a JSON body; `via` false opens a connection of its own (a handshake per call). */
export function post(url: string, body: Buffer, timeoutMs = 5_000, via: https.Agent | false = agent): Promise<Reply> {
  return new Promise((resolveReply, reject) => {
    const req = https.request(
      url,
      {
        method: 'POST',
        agent: via,
        rejectUnauthorized: false,
        headers: { 'content-type': 'application/json', 'content-length': body.length },
        timeout: timeoutMs,
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (chunk: Buffer) => chunks.push(chunk));
        res.on('end', () => resolveReply({ status: res.statusCode ?? 0, text: Buffer.concat(chunks).toString('utf8') }));
        res.on('error', reject);
      },
    );
    req.on('timeout', () => req.destroy(new Error(`timeout after ${timeoutMs} ms`)));
    req.on('error', reject);
    req.end(body);
  });
}

export async function waitReady(server: ServerProcess, body: Buffer, timeoutMs = 60_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  let last: unknown;
  while (Date.now() < deadline) {
    if (server.child.exitCode !== null) break;
    try {
      const reply = await post(server.url, body, 2_000);
      if (reply.status === 200) return;
      last = `HTTP ${reply.status}: ${reply.text.slice(0, 200)}`;
    } catch (error) {
      last = error;
    }
    await sleep(200);
  }
  const tail = existsSync(server.logFile) ? readFileSync(server.logFile, 'utf8').split('\n').slice(-20).join('\n') : '';
  throw new Error(`${server.name} did not answer within ${timeoutMs} ms (last: ${String(last)}); log ${server.logFile}:\n${tail}`);
}

export function destroyAgent(): void {
  agent.destroy();
}

export { sleep };

// ---------------------------------------------------------------------------------------------
// /proc sampling

const CLK_TCK = (() => {
  const out = spawnSync('getconf', ['CLK_TCK'], { encoding: 'utf8' });
  const value = Number(out.stdout?.trim());
  return Number.isInteger(value) && value > 0 ? value : 100;
})();

/** utime + stime of a process, in seconds. */
export function cpuSeconds(pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  // Fields after "(comm)": state is field 3; utime and stime are fields 14 and 15.
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return (Number(fields[11]) + Number(fields[12])) / CLK_TCK;
}

/** A field of /proc/<pid>/status in KiB (VmRSS, VmHWM). */
export function statusKiB(pid: number, field: 'VmRSS' | 'VmHWM'): number {
  const match = new RegExp(`^${field}:\\s+(\\d+) kB`, 'm').exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  return match ? Number(match[1]) : NaN;
}

export interface ProcessWindow {
  cpuSeconds: number;
  /** Highest VmRSS sampled during the window (every 100 ms), MiB. */
  peakRssMiB: number;
  /** VmHWM at the end of the window: the process's peak RSS since it started, MiB. */
  hwmMiB: number;
}

/** Measures a process's CPU time and RSS over a window; `end()` returns the figures. */
export function watchProcess(pid: number, intervalMs = 100): { end(): ProcessWindow } {
  const cpuStart = cpuSeconds(pid);
  let peak = statusKiB(pid, 'VmRSS');
  const timer = setInterval(() => {
    try {
      peak = Math.max(peak, statusKiB(pid, 'VmRSS'));
    } catch {
      // the process went away; end() reports what was seen
    }
  }, intervalMs);
  return {
    end() {
      clearInterval(timer);
      peak = Math.max(peak, statusKiB(pid, 'VmRSS'));
      return { cpuSeconds: round(cpuSeconds(pid) - cpuStart, 2), peakRssMiB: round(peak / 1024, 1), hwmMiB: round(statusKiB(pid, 'VmHWM') / 1024, 1) };
    },
  };
}

// ---------------------------------------------------------------------------------------------
// Statistics and output

export function round(value: number, digits: number): number {
  if (!Number.isFinite(value)) return value;
  const f = 10 ** digits;
  return Math.round(value * f) / f;
}

/** x ÷ y to two digits; null when either is missing or y is 0 (a result file's ratios). */
export function ratioOf(x: number | undefined, y: number | undefined): number | null {
  return x === undefined || y === undefined || y === 0 ? null : round(x / y, 2);
}

export function median(values: number[]): number {
  const sorted = values.filter((v) => Number.isFinite(v)).sort((a, b) => a - b);
  if (sorted.length === 0) return NaN;
  const mid = sorted.length >> 1;
  return sorted.length % 2 ? sorted[mid] : (sorted[mid - 1] + sorted[mid]) / 2;
}

/** Nearest-rank percentile of an ascending array. */
export function percentile(sorted: Float64Array | number[], p: number): number {
  if (sorted.length === 0) return NaN;
  const rank = Math.ceil((p / 100) * sorted.length);
  return sorted[Math.min(sorted.length - 1, Math.max(0, rank - 1))];
}

/** A growable array of latencies in ms. */
export class Samples {
  private data = new Float64Array(1 << 16);
  length = 0;
  push(value: number): void {
    if (this.length === this.data.length) {
      const grown = new Float64Array(this.data.length * 2);
      grown.set(this.data);
      this.data = grown;
    }
    this.data[this.length++] = value;
  }
  countAbove(threshold: number): number {
    let count = 0;
    for (let i = 0; i < this.length; i++) if (this.data[i] > threshold) count++;
    return count;
  }
  summary(): LatencySummary {
    const sorted = this.data.slice(0, this.length).sort();
    let sum = 0;
    for (const v of sorted) sum += v;
    return {
      count: this.length,
      mean: round(sum / this.length, 3),
      p50: round(percentile(sorted, 50), 3),
      p90: round(percentile(sorted, 90), 3),
      p99: round(percentile(sorted, 99), 3),
      p999: round(percentile(sorted, 99.9), 3),
      max: round(sorted[sorted.length - 1], 3),
    };
  }
}

export interface LatencySummary {
  count: number;
  mean: number;
  p50: number;
  p90: number;
  p99: number;
  p999: number;
  max: number;
}

export function table(headers: string[], rows: (string | number)[][]): string {
  const cells = [headers, ...rows.map((row) => row.map((cell) => (typeof cell === 'number' ? formatNumber(cell) : cell)))];
  const widths = headers.map((_, i) => Math.max(...cells.map((row) => String(row[i]).length)));
  const line = (row: (string | number)[]) => row.map((cell, i) => (i === 0 ? String(cell).padEnd(widths[i]) : String(cell).padStart(widths[i]))).join('  ');
  return [line(cells[0]), widths.map((w) => '-'.repeat(w)).join('  '), ...cells.slice(1).map(line)].join('\n');
}

function formatNumber(value: number): string {
  if (!Number.isFinite(value)) return '-';
  if (Number.isInteger(value)) return String(value);
  return Math.abs(value) >= 100 ? value.toFixed(0) : Math.abs(value) >= 10 ? value.toFixed(1) : value.toFixed(2);
}

export function machineInfo() {
  const cpus = os.cpus();
  return {
    cpus: cpus.length,
    cpuModel: cpus[0]?.model ?? 'unknown',
    totalMemMiB: Math.round(os.totalmem() / 1024 / 1024),
    node: process.version,
    v8: process.versions.v8,
    openssl: process.versions.openssl,
    platform: `${os.platform()} ${os.release()} ${os.arch()}`,
  };
}

export function resultsPath(name: string): string {
  const dir = resolve(ROOT, 'bench', 'results');
  mkdirSync(dir, { recursive: true });
  return join(dir, name);
}
