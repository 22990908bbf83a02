/**
 * Helpers of the benchmarks that run on the e2e harness's control plane (bench:cluster,
 * bench:config, bench:usage; the stage itself is the harness's stage.ts): the control plane's
 * processes and their CPU and RSS, and Prometheus histograms read as deltas between two scrapes.
 */
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import https from 'node:https';
import os from 'node:os';
import { dirname } from 'node:path';
import type { E2eEnv } from '../test/support/env.js';
import { adminClient, adminKubeConfig } from '../test/support/kube-client.js';
import { Metrics, type LabelMatch } from '../test/support/metrics.js';
import { readClusterEnv } from '../test/support/setup.js';
import { httpText, type WebhookProcess } from '../test/support/webhook.js';
import { cpuSeconds, round, statusKiB } from './lib.js';

/** What cluster.sh wrote to runDir/env.json that E2eEnv does not carry (pids, etcd). */
export interface ClusterProcesses {
  etcdUrl: string;
  pids: { etcd: number; apiserver: number; controllerManager: number; scheduler: number };
}

export function clusterProcesses(env: E2eEnv): ClusterProcesses {
  const c = readClusterEnv(env.runDir);
  return {
    etcdUrl: c.ETCD_URL,
    pids: { etcd: Number(c.ETCD_PID), apiserver: Number(c.APISERVER_PID), controllerManager: Number(c.KCM_PID), scheduler: Number(c.SCHEDULER_PID) },
  };
}

// ---------------------------------------------------------------------------------------------
// Processes

export interface ProcessFigures {
  cpuSeconds: number;
  /** CPU seconds ÷ wall seconds. */
  cores: number;
  /** Highest VmRSS sampled (every second) during the window, MiB. */
  peakRssMiB: number;
  /** VmHWM at the end: peak RSS since the process started, MiB. */
  hwmMiB: number;
}

/** CPU and RSS of several processes over a window; RSS sampled every second. */
export class ProcessWatch {
  private readonly start = new Map<string, number>();
  private readonly peak = new Map<string, number>();
  private readonly t0 = performance.now();
  private readonly timer: NodeJS.Timeout;

  constructor(private readonly pids: Record<string, number>) {
    for (const [name, pid] of Object.entries(pids)) {
      this.start.set(
        name,
        safe(() => cpuSeconds(pid)),
      );
      this.peak.set(
        name,
        safe(() => statusKiB(pid, 'VmRSS')),
      );
    }
    this.timer = setInterval(() => this.sample(), 1_000);
  }

  private sample(): void {
    for (const [name, pid] of Object.entries(this.pids))
      this.peak.set(
        name,
        Math.max(
          this.peak.get(name) ?? 0,
          safe(() => statusKiB(pid, 'VmRSS')),
        ),
      );
  }

  end(): Record<string, ProcessFigures> {
    clearInterval(this.timer);
    this.sample();
    const wall = (performance.now() - this.t0) / 1000;
    const out: Record<string, ProcessFigures> = {};
    for (const [name, pid] of Object.entries(this.pids)) {
      const cpu = safe(() => cpuSeconds(pid)) - (this.start.get(name) ?? NaN);
      out[name] = {
        cpuSeconds: round(cpu, 2),
        cores: round(cpu / wall, 3),
        peakRssMiB: round((this.peak.get(name) ?? NaN) / 1024, 1),
        hwmMiB: round(safe(() => statusKiB(pid, 'VmHWM')) / 1024, 1),
      };
    }
    return out;
  }
}

function safe(f: () => number): number {
  try {
    return f();
  } catch {
    return NaN;
  }
}

export interface CpuReading {
  busy: number;
  steal: number;
  total: number;
}

/** Machine-wide CPU from /proc/stat: busy (without steal), stolen (by the hypervisor) and total jiffies. */
export function machineCpu(): CpuReading {
  const line = readFileSync('/proc/stat', 'utf8').split('\n')[0]!;
  const v = line.trim().split(/\s+/).slice(1).map(Number);
  const idle = (v[3] ?? 0) + (v[4] ?? 0);
  const steal = v[7] ?? 0;
  const total = v.slice(0, 8).reduce((a, b) => a + b, 0);
  return { busy: total - idle - steal, steal, total };
}

/** Shares of the machine's CPU time that were busy and stolen between two readings, and busy cores. */
export function machineBusy(before: CpuReading, after: CpuReading) {
  const total = Math.max(1, after.total - before.total);
  const share = (after.busy - before.busy) / total;
  return { busyShare: round(share, 3), busyCores: round(share * os.cpus().length, 2), stealShare: round((after.steal - before.steal) / total, 3) };
}

// ---------------------------------------------------------------------------------------------
// Metrics

export interface Scrape {
  at: number;
  apiserver: Metrics;
  etcd: Metrics;
  webhook?: Metrics;
}

/** The API server's, etcd's and (when running) the webhook's /metrics, at one moment. */
export async function scrape(env: E2eEnv, processes: ClusterProcesses, webhook?: WebhookProcess): Promise<Scrape> {
  const admin = adminClient(env);
  try {
    const [apiserverText, etcdText, webhookMetrics] = await Promise.all([
      admin.text('/metrics'),
      httpText(`${processes.etcdUrl}/metrics`),
      webhook?.running ? webhook.metrics() : Promise.resolve(undefined),
    ]);
    return { at: Date.now(), apiserver: Metrics.parse(apiserverText), etcd: Metrics.parse(etcdText), webhook: webhookMetrics };
  } finally {
    admin.close();
  }
}

export function counterDelta(before: Metrics | undefined, after: Metrics | undefined, name: string, labels: LabelMatch = {}): number {
  if (!before || !after) return NaN;
  return after.sum(name, labels) - before.sum(name, labels);
}

/** Cumulative bucket counts by upper bound, summed over every series matching `labels`. */
function buckets(metrics: Metrics, name: string, labels: LabelMatch): Map<number, number> {
  const out = new Map<number, number>();
  for (const s of metrics.find(`${name}_bucket`, labels)) {
    const le = s.labels.le === '+Inf' ? Infinity : Number(s.labels.le);
    out.set(le, (out.get(le) ?? 0) + s.value);
  }
  return out;
}

export interface HistogramSummary {
  count: number;
  /** Mean from _sum/_count, in the metric's unit × `scale`. */
  mean: number;
  /** Quantiles interpolated linearly inside their bucket, as Prometheus' histogram_quantile does. */
  p50: number;
  p90: number;
  p99: number;
  /** The bucket each quantile fell in: [lower, upper]. */
  p50Bucket: [number, number];
  p99Bucket: [number, number];
  /** Share of observations at or under each bound. */
  cumulative: Record<string, number>;
}

/** A histogram's observations between two scrapes (`scale` 1000 turns seconds into ms). */
export function histogramDelta(
  before: Metrics | undefined,
  after: Metrics | undefined,
  name: string,
  labels: LabelMatch = {},
  scale = 1,
): HistogramSummary | null {
  if (!before || !after) return null;
  const b = buckets(before, name, labels);
  const a = buckets(after, name, labels);
  const bounds = [...a.keys()].sort((x, y) => x - y);
  const cum = bounds.map((le) => (a.get(le) ?? 0) - (b.get(le) ?? 0));
  const count = cum.at(-1) ?? 0;
  const sum = after.sum(`${name}_sum`, labels) - before.sum(`${name}_sum`, labels);
  const quantile = (q: number): { value: number; bucket: [number, number] } => {
    if (count === 0) return { value: NaN, bucket: [NaN, NaN] };
    const rank = q * count;
    for (let i = 0; i < bounds.length; i++) {
      if (cum[i]! >= rank) {
        const lower = i === 0 ? 0 : bounds[i - 1]!;
        const upper = bounds[i]!;
        if (upper === Infinity) return { value: lower * scale, bucket: [lower * scale, Infinity] };
        const below = i === 0 ? 0 : cum[i - 1]!;
        const inBucket = cum[i]! - below;
        const value = lower + (upper - lower) * (inBucket === 0 ? 0 : (rank - below) / inBucket);
        return { value: value * scale, bucket: [lower * scale, upper * scale] };
      }
    }
    return { value: NaN, bucket: [NaN, NaN] };
  };
  const p50 = quantile(0.5);
  const p99 = quantile(0.99);
  const cumulative: Record<string, number> = {};
  bounds.forEach((le, i) => {
    if (le !== Infinity) cumulative[`<=${round(le * scale, 4)}`] = count === 0 ? NaN : round(cum[i]! / count, 4);
  });
  return {
    count,
    mean: count === 0 ? NaN : round((sum / count) * scale, 3),
    p50: round(p50.value, 3),
    p90: round(quantile(0.9).value, 3),
    p99: round(p99.value, 3),
    p50Bucket: p50.bucket,
    p99Bucket: p99.bucket,
    cumulative,
  };
}

/** A Node's size as JSON and as protobuf, as the admin reads it. */
export async function nodeSizes(env: E2eEnv, name: string): Promise<{ json: number; protobuf: number }> {
  // The API server stores objects in etcd as protobuf (after a 4-byte "k8s\0" magic): the
  // protobuf answer is about the size of each write.
  const get = (accept: string) =>
    new Promise<number>((resolve, reject) => {
      const agent = new https.Agent({ ca: readFileSync(env.caFile) });
      const req = https.get(
        new URL(`/api/v1/nodes/${name}`, env.apiserverUrl),
        { agent, headers: { authorization: `Bearer ${env.adminToken}`, accept } },
        (res) => {
          let bytes = 0;
          res.on('data', (c: Buffer) => (bytes += c.length));
          res.on('end', () => {
            agent.destroy();
            if (res.statusCode === 200) resolve(bytes);
            else reject(new Error(`GET node ${name} (${accept}): HTTP ${res.statusCode}`));
          });
          res.on('error', reject);
        },
      );
      req.on('error', reject);
    });
  return { json: await get('application/json'), protobuf: await get('application/vnd.kubernetes.protobuf') };
}

/**
 * One watch of the benchmark's Nodes (label bench.kube-overcommit.io/fleet=true), as any Node
 * watcher (a controller, a monitoring agent) holds; counts its MODIFIED events.
 */
export const nodeWatcher = {
  events: 0,
  request: undefined as { abort(): void } | undefined,
  async start(env: E2eEnv): Promise<void> {
    const { Watch } = await import('@kubernetes/client-node');
    const watch = new Watch(await adminKubeConfig(env));
    const run = async (): Promise<void> => {
      this.request = await watch.watch(
        '/api/v1/nodes',
        { labelSelector: 'bench.kube-overcommit.io/fleet=true', allowWatchBookmarks: false },
        // Only changes: a re-opened watch (client-node's inactivity timeout) lists every Node as ADDED again.
        (type: string) => {
          if (type === 'MODIFIED') this.events++;
        },
        (error) => {
          if (this.request !== undefined && error?.name !== 'AbortError') void run(); // the API server ends watches after a while: watch again
        },
      );
    };
    await run();
  },
  stop(): void {
    const request = this.request;
    this.request = undefined;
    request?.abort();
  },
};

/** Where a CPU profile of kube-apiserver spent its samples (bench:cluster's `--pprof`). */
export interface ApiserverProfile {
  /** Seconds the profile ran and CPU seconds it sampled. */
  seconds: number;
  sampledCpuSeconds: number;
  /** CPU seconds under each named path (the largest `cum` of the functions matching it). */
  cumSeconds: Record<string, number>;
  /** The functions with the most cumulative time under a node-status PATCH, `cum s  name`. */
  topUnderPatch: string[];
}

/**
 * The paths a node-status PATCH's CPU is counted under (function names of kube-apiserver v1.37):
 * the whole PATCH handler, the mutating webhook plugin (its dispatcher: matchConditions, the
 * AdmissionReview, TLS, the answer's patch), the mutating admission policy plugin (match
 * conditions per param, the mutations: CEL, then the Node encoded, patched and decoded), and the
 * JSON (de)serialisation inside them.
 */
const PROFILE_PATHS: Record<string, RegExp> = {
  patchHandler: /^k8s\.io\/apiserver\/pkg\/endpoints\/handlers\.\(\*patcher\)\.patchResource(\.func\d+)?$/,
  webhookPlugin: /^k8s\.io\/apiserver\/pkg\/admission\/plugin\/webhook\/mutating\.\(\*Plugin\)\.Admit$/,
  policyPlugin: /^k8s\.io\/apiserver\/pkg\/admission\/plugin\/policy\/mutating\.\(\*Plugin\)\.Admit$/,
  policyMutations: /^k8s\.io\/apiserver\/pkg\/admission\/plugin\/policy\/mutating\.\(\*dispatcher\)\.dispatchOne$/,
  webhookCall: /^k8s\.io\/apiserver\/pkg\/admission\/plugin\/webhook\/mutating\.\(\*mutatingDispatcher\)\.callAttrMutatingHook$/,
};

/** A pprof duration (`10ms`, `1.25s`, `2.5mins`) in seconds. */
function pprofSeconds(text: string): number {
  const match = /^([\d.]+)(ns|us|µs|ms|s|mins|hrs)$/.exec(text);
  if (!match) return NaN;
  const scale: Record<string, number> = { ns: 1e-9, us: 1e-6, µs: 1e-6, ms: 1e-3, s: 1, mins: 60, hrs: 3600 };
  return Number(match[1]) * scale[match[2]!]!;
}

/** The Go toolchain's `go` (on PATH, or where the machine's Go is installed). */
function goBinary(): string {
  return process.env.GO ?? (existsSync('/usr/local/go/bin/go') ? '/usr/local/go/bin/go' : 'go');
}

/** `go tool pprof -top -cum` of `file`: its text and one row per function (cumulative time, name). */
function pprofTop(file: string, args: string[]): { text: string; rows: Array<{ cumText: string; cum: number; name: string }> } {
  const text = execFileSync(goBinary(), ['tool', 'pprof', '-top', '-cum', ...args, file], { encoding: 'utf8', maxBuffer: 64 * 1024 * 1024 });
  const rows = text
    .split('\n')
    .map((line) => /^\s*\S+\s+\S+%\s+\S+%\s+(\S+)\s+\S+%\s+(.+)$/.exec(line))
    .filter((m): m is RegExpExecArray => m !== null)
    .map((m) => ({ cumText: m[1]!, cum: pprofSeconds(m[1]!), name: m[2]!.trim() }));
  return { text, rows };
}

/**
 * kube-apiserver's CPU profile over `seconds` (GET /debug/pprof/profile: the API server started
 * with --profiling=true, as bench:cluster's `--pprof` asks cluster.sh through APISERVER_EXTRA_ARGS),
 * saved to `file` and read with `go tool pprof -top -cum` (no hand-written parser of the profile's
 * protobuf: pprof is the tool made for it).
 */
export async function apiserverProfile(env: E2eEnv, seconds: number, file: string): Promise<ApiserverProfile> {
  const body = await new Promise<Buffer>((resolve, reject) => {
    const url = new URL(`/debug/pprof/profile?seconds=${Math.round(seconds)}`, env.apiserverUrl);
    const req = https.get(
      url,
      { ca: readFileSync(env.caFile), headers: { authorization: `Bearer ${env.adminToken}` }, timeout: (seconds + 60) * 1000 },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (chunk: Buffer) => chunks.push(chunk));
        res.on('end', () =>
          res.statusCode === 200
            ? resolve(Buffer.concat(chunks))
            : reject(new Error(`/debug/pprof/profile: HTTP ${res.statusCode}: ${Buffer.concat(chunks).toString().slice(0, 200)}`)),
        );
        res.on('error', reject);
      },
    );
    req.on('timeout', () => req.destroy(new Error('/debug/pprof/profile: no answer in time')));
    req.on('error', reject);
  });
  mkdirSync(dirname(file), { recursive: true });
  writeFileSync(file, body);
  const all = pprofTop(file, ['-nodecount=3000']);
  const total = /Total samples = (\S+)/.exec(all.text);
  const cumSeconds = Object.fromEntries(
    Object.entries(PROFILE_PATHS).map(([path, pattern]) => [
      path,
      round(Math.max(0, ...all.rows.filter((r) => Number.isFinite(r.cum) && pattern.test(r.name.replace(/ \(inline\)$/, ''))).map((r) => r.cum)), 3),
    ]),
  );
  const topUnderPatch = pprofTop(file, ['-nodecount=40', '-focus=handlers\\.\\(\\*patcher\\)\\.patchResource']).rows.map((r) => `${r.cumText}  ${r.name}`);
  return { seconds, sampledCpuSeconds: total ? round(pprofSeconds(total[1]!), 3) : NaN, cumSeconds, topUnderPatch };
}
