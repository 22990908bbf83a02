/**
 * CPU profile of ours under load: `npm run bench:profile -- --sizes kubeadm-node,large-node`.
 *
 * For each review: `node --cpu-prof dist/main.js` (same config and TLS as bench:admission), a
 * short warm-up, then autocannon at full speed for --duration s; the server is stopped and its
 * .cpuprofile (bench/.run/profiles/<review>.cpuprofile, open it in Chrome DevTools) is summarised
 * over the load window only: self time by area (JSON parse, validation, rules, logging, metrics,
 * Fastify, Nest, TLS, GC...), the top functions by self time, and inclusive time of the
 * functions on the request path. The summary is also written next to the profile (.txt, .json).
 *
 * Each server runs as bench:admission runs it: ours with the Deployment's NODE_OPTIONS, both in a
 * memory cgroup at the Deployment's limit (--memory-limit MiB; 0 for none).
 *
 * Flags: --sizes (kubeadm-node,large-node) --duration s (15) --connections n (24) --top n (30)
 *   --servers ours|baseline|ours,baseline (ours; the baseline for comparison) --memory-limit MiB
 *   (the Deployment's) --no-build
 */
import autocannon from 'autocannon';
import { readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { freePort } from '../test/support/process.js';
import {
  BUILD_DIR,
  childEnv,
  DEPLOYMENT_MEMORY_LIMIT_MIB,
  destroyAgent,
  benchMain,
  oursEnv,
  round,
  ROOT,
  RUN_DIR,
  serverCgroup,
  sleep,
  startProcess,
  table,
  waitReady,
  writeTls,
} from './lib.js';
import { type BenchReview, benchReviews } from './reviews.js';

const { flags, log } = benchMain(
  {
    script: 'bench:profile',
    build: true,
    flags: {
      sizes: { type: 'list', default: 'kubeadm-node,large-node', choices: benchReviews().map((r) => r.name) },
      duration: { type: 'number', default: 15, min: 1 },
      connections: { type: 'number', default: 24, min: 1, integer: true },
      top: { type: 'number', default: 30, min: 1, integer: true },
      servers: { type: 'list', default: 'ours', choices: ['ours', 'baseline'] },
      'memory-limit': { type: 'number', default: DEPLOYMENT_MEMORY_LIMIT_MIB },
    },
  },
  main,
);
const { sizes, duration, connections, top, servers: serverNames } = flags;
const memoryLimitMiB = flags['memory-limit'];

// ---------------------------------------------------------------------------------------------
// .cpuprofile analysis

interface CallFrame {
  functionName: string;
  url: string;
  lineNumber: number;
  columnNumber: number;
}
interface ProfileNode {
  id: number;
  callFrame: CallFrame;
  children?: number[];
}
interface CpuProfile {
  nodes: ProfileNode[];
  startTime: number;
  endTime: number;
  samples: number[];
  timeDeltas: number[];
}

const PROJECT_URL = `file://${ROOT}/`;

/** The area a frame belongs to, from its script URL; null for V8 builtins and pseudo-frames. */
function areaOf(frame: CallFrame): string | null {
  const { url, functionName } = frame;
  if (url === '') {
    if (functionName === '(garbage collector)') return 'gc';
    if (functionName === '(program)') return 'program (native, outside JS: TLS, HTTP parser, syscalls)';
    if (functionName === '(idle)') return 'idle';
    if (functionName === '(root)') return 'root';
    return null;
  }
  const modules = url.lastIndexOf('/node_modules/');
  if (modules >= 0) {
    const parts = url.slice(modules + '/node_modules/'.length).split('/');
    return `npm ${parts[0].startsWith('@') ? `${parts[0]}/${parts[1]}` : parts[0]}`;
  }
  if (url.startsWith(PROJECT_URL)) {
    const path = url.slice(PROJECT_URL.length);
    return path.startsWith('dist/') ? `ours ${path.slice(5).replace(/\.js$/, '')}` : path;
  }
  if (url.startsWith('node:')) {
    const name = url.slice(5).replace(/^internal\//, '');
    if (/^(_tls|tls|crypto)/.test(name)) return 'node tls';
    if (/^(_http|http)/.test(name)) return 'node http';
    if (/^(streams|stream|_stream)/.test(name)) return 'node streams';
    if (/^(net|stream_base_commons)/.test(name)) return 'node net';
    if (/^(process\/task_queues|timers|async_hooks|process\/)/.test(name)) return 'node event loop';
    return 'node other';
  }
  return url;
}

const clip = (text: string, max = 48) => (text.length > max ? `${text.slice(0, max - 1)}…` : text);

const frameKey = (f: CallFrame) => `${clip(f.functionName || '(anonymous)')} ${f.url ? `${shortUrl(f.url)}:${f.lineNumber + 1}` : '(builtin)'}`;

function shortUrl(url: string): string {
  if (url.startsWith(PROJECT_URL)) return url.slice(PROJECT_URL.length);
  const modules = url.lastIndexOf('/node_modules/');
  return modules >= 0 ? url.slice(modules + '/node_modules/'.length) : url;
}

export interface ProfileSummary {
  windowMs: number;
  sampledMs: number;
  areas: { area: string; ms: number; pct: number }[];
  selfTop: { fn: string; area: string; ms: number; pct: number }[];
  inclusiveTop: { fn: string; ms: number; pct: number }[];
}

/** Summarises the samples taken between fromUs and toUs (profile clock, µs). */
function summariseProfile(profile: CpuProfile, fromUs: number, toUs: number, topN: number): ProfileSummary {
  const byId = new Map<number, ProfileNode>();
  const parent = new Map<number, number>();
  for (const node of profile.nodes) {
    byId.set(node.id, node);
    for (const child of node.children ?? []) parent.set(child, node.id);
  }
  // Area of a node: its own, or for a builtin (JSON.parse, RegExp...) "<builtin> ← caller's area".
  const areaCache = new Map<number, string>();
  const nodeArea = (id: number): string => {
    const cached = areaCache.get(id);
    if (cached) return cached;
    const node = byId.get(id)!;
    let area = areaOf(node.callFrame);
    if (area === null) {
      let up = parent.get(id);
      let callerArea: string | null = null;
      while (up !== undefined && callerArea === null) {
        callerArea = areaOf(byId.get(up)!.callFrame);
        up = parent.get(up);
      }
      area = `builtin ${clip(node.callFrame.functionName || '(anonymous)')} ← ${callerArea ?? '?'}`;
    }
    areaCache.set(id, area);
    return area;
  };

  // Each sample counts as one sampling interval (the median gap between samples), not as the wall
  // time until the next sample: on a busy machine the thread is often descheduled (typically inside
  // a socket write that wakes the client), and wall-time weights would charge that wait to
  // whatever frame it happened in. Equal weights approximate CPU time.
  const gaps = profile.timeDeltas.slice(1).sort((a, b) => a - b);
  const interval = gaps[gaps.length >> 1] ?? 1000;
  const self = new Map<number, number>(); // node id → µs
  let t = profile.startTime;
  let total = 0;
  for (let i = 0; i < profile.samples.length; i++) {
    t += profile.timeDeltas[i];
    if (t < fromUs || t > toUs) continue;
    self.set(profile.samples[i], (self.get(profile.samples[i]) ?? 0) + interval);
    total += interval;
  }
  const busy = total - [...self].filter(([id]) => byId.get(id)!.callFrame.functionName === '(idle)').reduce((s, [, us]) => s + us, 0);

  const areas = new Map<string, number>();
  const selfFns = new Map<string, { area: string; us: number }>();
  const inclusive = new Map<string, number>();
  for (const [id, us] of self) {
    const area = nodeArea(id);
    areas.set(area, (areas.get(area) ?? 0) + us);
    const key = frameKey(byId.get(id)!.callFrame);
    const entry = selfFns.get(key) ?? { area, us: 0 };
    entry.us += us;
    selfFns.set(key, entry);
    // Inclusive: every distinct function on the stack once.
    const seen = new Set<string>();
    for (let up: number | undefined = id; up !== undefined; up = parent.get(up)) {
      const k = frameKey(byId.get(up)!.callFrame);
      if (seen.has(k)) continue;
      seen.add(k);
      inclusive.set(k, (inclusive.get(k) ?? 0) + us);
    }
  }
  const pct = (us: number) => round((100 * us) / busy, 1);
  const ms = (us: number) => round(us / 1000, 1);
  return {
    windowMs: round((toUs - fromUs) / 1000, 0),
    sampledMs: ms(busy),
    areas: [...areas]
      .filter(([area]) => area !== 'idle')
      .sort((a, b) => b[1] - a[1])
      .map(([area, us]) => ({ area, ms: ms(us), pct: pct(us) })),
    selfTop: [...selfFns]
      .filter(([key]) => !key.startsWith('(idle)'))
      .sort((a, b) => b[1].us - a[1].us)
      .slice(0, topN)
      .map(([fn, { area, us }]) => ({ fn, area, ms: ms(us), pct: pct(us) })),
    inclusiveTop: [...inclusive]
      .filter(([key]) => !/^\((root|idle|program|garbage collector)\)/.test(key))
      .sort((a, b) => b[1] - a[1])
      .slice(0, topN * 2)
      .map(([fn, us]) => ({ fn, ms: ms(us), pct: pct(us) })),
  };
}

function formatSummary(title: string, s: ProfileSummary): string {
  return [
    `${title}: ${s.sampledMs} ms sampled on the JS thread in a ${s.windowMs} ms load window (% of non-idle samples)`,
    '',
    'self time by area',
    table(
      ['area', 'ms', '%'],
      s.areas.map((a) => [a.area, a.ms, a.pct]),
    ),
    '',
    'top functions by self time',
    table(
      ['function', 'area', 'ms', '%'],
      s.selfTop.map((f) => [f.fn, f.area, f.ms, f.pct]),
    ),
    '',
    'top functions by inclusive time',
    table(
      ['function', 'ms', '%'],
      s.inclusiveTop.map((f) => [f.fn, f.ms, f.pct]),
    ),
  ].join('\n');
}

// ---------------------------------------------------------------------------------------------
// Main

type ServerName = 'ours' | 'baseline';

interface Setup {
  dir: string;
  configFile: string;
  tls: { certFile: string; keyFile: string };
}

/** Starts one server under --cpu-prof, loads it, stops it and summarises its profile. */
async function profileOne(serverName: ServerName, review: BenchReview, setup: Setup): Promise<void> {
  const { dir, configFile, tls } = setup;
  const label = `${serverName}-${review.name}`;
  const profileDir = join(dir, `${label}.d`);
  rmSync(profileDir, { recursive: true, force: true });
  const [port, httpPort] = [await freePort(), await freePort()];
  const prof = ['--cpu-prof', `--cpu-prof-dir=${profileDir}`];
  const server =
    serverName === 'ours'
      ? startProcess(
          label,
          [...prof, join(ROOT, 'dist', 'main.js')],
          oursEnv({ https: port, http: httpPort }, configFile, tls),
          port,
          dir,
          serverCgroup(label, memoryLimitMiB, log),
        )
      : startProcess(
          label,
          [...prof, join(BUILD_DIR, 'bench', 'baseline-server.js')],
          childEnv({ BASELINE_PORT: String(port), BASELINE_TLS_CERT_FILE: tls.certFile, BASELINE_TLS_KEY_FILE: tls.keyFile }),
          port,
          dir,
          serverCgroup(label, memoryLimitMiB, log),
        );
  try {
    await waitReady(server, review.body);
    const load = (seconds: number) =>
      autocannon({
        url: server.url,
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: review.body,
        connections,
        pipelining: 1,
        duration: seconds,
      });
    await load(2); // warm-up, outside the window
    await sleep(200);
    const fromUs = Number(process.hrtime.bigint() / 1000n);
    const result = await load(duration);
    const toUs = Number(process.hrtime.bigint() / 1000n);
    const reqPerSec = round(result.requests.total / result.duration, 0);
    const bad = result.errors + result.timeouts + result.non2xx;
    log(`${label} (${review.body.length} bytes): ${reqPerSec} req/s under the profiler${bad ? `, ERRORS ${bad}` : ''}`);
    await server.stop();
    const file = readdirSync(profileDir).find((name) => name.endsWith('.cpuprofile'));
    if (!file) throw new Error(`no .cpuprofile in ${profileDir}`);
    const profile = JSON.parse(readFileSync(join(profileDir, file), 'utf8')) as CpuProfile;
    // V8's profile clock and process.hrtime are both CLOCK_MONOTONIC (µs); fall back to the whole profile if not.
    const inWindow = fromUs > profile.startTime && toUs < profile.endTime;
    const summary = summariseProfile(profile, inWindow ? fromUs : profile.startTime, inWindow ? toUs : profile.endTime, top);
    const text = formatSummary(`${label} (${review.body.length} bytes, ${reqPerSec} req/s, ${connections} connections)`, summary);
    const base = join(dir, label);
    writeFileSync(`${base}.txt`, `${text}\n`);
    writeFileSync(
      `${base}.json`,
      `${JSON.stringify({ server: serverName, review: review.name, bytes: review.body.length, reqPerSec, requests: result.requests.total, ...summary }, null, 2)}\n`,
    );
    writeFileSync(`${base}.cpuprofile`, readFileSync(join(profileDir, file)));
    rmSync(profileDir, { recursive: true, force: true });
    log(`\n${text}\n`);
    log(
      `profile: ${relative(process.cwd(), `${base}.cpuprofile`)}, summary ${relative(process.cwd(), `${base}.txt`)}${inWindow ? '' : ' (whole profile: clocks did not line up)'}\n`,
    );
  } finally {
    await server.stop();
  }
}

async function main(): Promise<void> {
  const reviews = benchReviews().filter((r) => sizes.includes(r.name));
  const dir = join(RUN_DIR, 'profiles');
  const tls = await writeTls(join(dir, 'tls'));
  const configFile = join(dir, 'config.yaml');
  writeFileSync(configFile, 'nodes:\n  defaultRatios: { cpu: 1.5, memory: 1 }\n');
  for (const review of reviews) {
    for (const serverName of serverNames) await profileOne(serverName, review, { dir, configFile, tls });
  }
  destroyAgent();
}
