/**
 * What hostile or broken clients do to a normal admission call (`npm run bench:transport`).
 *
 * One server at a time, `node dist/main.js` in a memory cgroup at the Deployment's limit, under
 * each load below for `--duration` seconds, on loopback only, while two probes send the kubeadm
 * node review the way an API server does: one on a kept-alive connection every 50 ms, one on a
 * new connection (handshake included) every 250 ms. Every load is a bounded loop that stops by
 * itself at the end of its window; an attacker cut off by the server reconnects after a pause,
 * as a persistent one would. Probe latencies are reported over the whole window and, as
 * "steady", over the calls sent after its first 5 s (the attack's burst of TLS handshakes).
 *
 *   quiet              no load: the baseline of the same run
 *   slow-headers       500 connections sending one header line per second, never finishing
 *   connections-2000   2,000 connections, each sends one review and then stays open, idle
 *   oversized-headers  20 loops sending requests with a 64 KiB header
 *   stalled-bodies     200 connections declaring a 3 MiB body and sending all but its last byte
 *
 * Two server settings: `node-defaults` (the limits set to what Node gives a server that sets
 * none: headers 60 s, request 300 s, handshake 120 s, no connection or body-bytes cap, as the
 * webhook ran before) and `ours` (the webhook's defaults, src/server/server-limits.ts).
 *
 * Output: a table and bench/results/transport.json (`--out`).
 */
import { writeFileSync } from 'node:fs';
import os from 'node:os';
import { join } from 'node:path';
import tls from 'node:tls';
import { Worker, isMainThread, parentPort, workerData } from 'node:worker_threads';
import { freePort } from '../test/support/process.js';
import {
  DEPLOYMENT_MEMORY_LIMIT_MIB,
  RUN_DIR,
  ROOT,
  Samples,
  type ServerProcess,
  destroyAgent,
  type Bench,
  benchMain,
  type FlagSpec,
  machineInfo,
  oursEnv,
  post,
  round,
  serverCgroup,
  sleep,
  startProcess,
  table,
  waitReady,
  watchProcess,
  writeTls,
} from './lib.js';
import { benchReviews } from './reviews.js';

const log = (line: string) => process.stdout.write(`${line}\n`);

const SETTINGS: Record<string, Record<string, string>> = {
  'node-defaults': {
    OVERCOMMIT_TLS_HANDSHAKE_TIMEOUT_MS: '120000',
    OVERCOMMIT_HEADERS_TIMEOUT_MS: '60000',
    OVERCOMMIT_REQUEST_TIMEOUT_MS: '300000',
    OVERCOMMIT_MAX_CONNECTIONS: '0',
    OVERCOMMIT_MAX_BODY_BYTES_IN_FLIGHT: '0',
  },
  ours: {},
};

const review = benchReviews().find((r) => r.name === 'kubeadm-node')!.body;

// ---------------------------------------------------------------------------------------------
// Attackers: raw TLS connections that reconnect after `pause` ms when the server cuts them off.

interface AttackStats {
  connected: number;
  /** Connections that failed before the TLS handshake finished (refused, reset, closed on accept). */
  failedToConnect: number;
  /** Connections the server closed while the attacker still held them. */
  cutOff: number;
  /** First status line of each answer, counted. */
  statuses: Record<string, number>;
}

function attack(port: number, count: number, pause: number, onOpen: (socket: tls.TLSSocket) => void): { stop(): AttackStats } {
  const stats: AttackStats = { connected: 0, failedToConnect: 0, cutOff: 0, statuses: {} };
  const sockets = new Set<tls.TLSSocket>();
  let running = true;
  const open = () => {
    if (!running) return;
    let secured = false;
    const socket = tls.connect({ host: '127.0.0.1', port, rejectUnauthorized: false }, () => {
      secured = true;
      stats.connected++;
      onOpen(socket);
    });
    sockets.add(socket);
    let head = '';
    socket.on('data', (chunk: Buffer) => {
      if (head.includes('\r\n')) return;
      head += chunk.toString('latin1', 0, 64);
      const status = /^HTTP\/1\.1 (\d{3})/.exec(head)?.[1];
      if (status) stats.statuses[status] = (stats.statuses[status] ?? 0) + 1;
    });
    socket.on('error', () => undefined);
    socket.once('close', () => {
      sockets.delete(socket);
      if (!running) return;
      if (secured) stats.cutOff++;
      else stats.failedToConnect++;
      setTimeout(open, pause).unref();
    });
  };
  for (let i = 0; i < count; i++) open();
  return {
    stop() {
      running = false;
      for (const socket of sockets) socket.destroy();
      return stats;
    },
  };
}

const postHead = (length: number, extra = '') =>
  `POST /mutate HTTP/1.1\r\nhost: localhost\r\ncontent-type: application/json\r\ncontent-length: ${length}\r\n${extra}\r\n`;

const STALLED_BODY = Buffer.alloc(3 * 1024 * 1024 - 1, 'x');
const PAD = 'x'.repeat(64 * 1024);

const SCENARIOS: Record<string, (port: number) => { stop(): AttackStats }> = {
  quiet: () => ({ stop: () => ({ connected: 0, failedToConnect: 0, cutOff: 0, statuses: {} }) }),
  'slow-headers': (port) =>
    attack(port, 500, 1_000, (socket) => {
      socket.write('POST /mutate HTTP/1.1\r\nhost: localhost\r\n');
      let line = 0;
      const timer = setInterval(() => socket.writable && socket.write(`x-slow-${line++}: y\r\n`), 1_000);
      socket.once('close', () => clearInterval(timer));
    }),
  'connections-2000': (port) => attack(port, 2_000, 2_000, (socket) => socket.write(postHead(review.length) + review.toString('latin1'))),
  'oversized-headers': (port) => attack(port, 20, 0, (socket) => socket.write(postHead(review.length, `x-pad: ${PAD}\r\n`))),
  'stalled-bodies': (port) =>
    attack(port, 200, 1_000, (socket) => {
      socket.write(postHead(STALLED_BODY.length + 1));
      socket.write(STALLED_BODY);
    }),
};

// ---------------------------------------------------------------------------------------------
// Probes: the normal call, timed.

interface ProbeResult {
  calls: number;
  failures: number;
  p50: number;
  p99: number;
  max: number;
  /** Calls over 100 ms, failures included. */
  over100ms: number;
  /** p99 and max of the calls sent after the load's first STEADY_AFTER_MS (its connection burst). */
  steadyP99: number;
  steadyMax: number;
}

const STEADY_AFTER_MS = 5_000;

/** Sends the review every `intervalMs` for `durationMs` (sequentially: a slow answer delays the next call). */
async function probe(url: string, intervalMs: number, fresh: boolean, durationMs: number): Promise<ProbeResult> {
  const all = new Samples();
  const steady = new Samples();
  const begin = performance.now();
  let failures = 0;
  while (performance.now() - begin < durationMs) {
    const started = performance.now();
    try {
      const reply = await post(url, review, 5_000, fresh ? false : undefined);
      if (reply.status !== 200) throw new Error(`HTTP ${reply.status}`);
      const ms = performance.now() - started;
      all.push(ms);
      if (started - begin >= STEADY_AFTER_MS) steady.push(ms);
    } catch {
      failures++;
    }
    await sleep(Math.max(0, intervalMs - (performance.now() - started)));
  }
  const summary = all.summary();
  const steadySummary = steady.summary();
  return {
    calls: summary.count + failures,
    failures,
    p50: summary.p50,
    p99: summary.p99,
    max: summary.max,
    over100ms: failures + all.countAbove(100),
    steadyP99: steadySummary.p99,
    steadyMax: steadySummary.max,
  };
}

/**
 * Both probes in a worker thread: the attackers' TLS work (hundreds of handshakes, megabytes to
 * encrypt) on the main thread must not delay the probes' own event loop and pass for the
 * server's latency.
 */
function runProbes(url: string, durationMs: number): Promise<{ keepAlive: ProbeResult; newConnection: ProbeResult }> {
  return new Promise((resolve, reject) => {
    const worker = new Worker(new URL(import.meta.url), { workerData: { url, durationMs } });
    worker.once('message', resolve);
    worker.once('error', reject);
  });
}

if (!isMainThread) {
  const { url, durationMs } = workerData as { url: string; durationMs: number };
  void Promise.all([probe(url, 50, false, durationMs), probe(url, 250, true, durationMs)]).then(([keepAlive, newConnection]) => {
    destroyAgent();
    parentPort!.postMessage({ keepAlive, newConnection });
  });
}

// ---------------------------------------------------------------------------------------------

interface Row {
  setting: string;
  scenario: string;
  keepAlive: ProbeResult;
  newConnection: ProbeResult;
  attack: AttackStats;
  peakRssMiB: number;
  serverCpuSeconds: number;
  /** How the server ended the window: 'alive', or the signal or exit code that ended it. */
  server: string;
}

const FLAGS = {
  duration: { type: 'number', default: 15, min: 1 },
  'memory-limit': { type: 'number', default: DEPLOYMENT_MEMORY_LIMIT_MIB },
  scenarios: { type: 'list', default: Object.keys(SCENARIOS).join(','), choices: Object.keys(SCENARIOS) },
} satisfies Record<string, FlagSpec>;

async function main({ flags, outFile, startedAt }: Bench<typeof FLAGS>): Promise<number> {
  const durationS = flags.duration;
  const memoryLimitMiB = flags['memory-limit'];
  const scenarios = flags.scenarios;
  log(`${durationS} s per scenario, memory limit ${memoryLimitMiB || 'none'} MiB, scenarios ${scenarios.join(', ')}`);
  const dir = join(RUN_DIR, 'transport');
  const tlsFiles = await writeTls(join(dir, 'tls'));
  const configFile = join(dir, 'config.yaml');
  writeFileSync(configFile, 'nodes:\n  defaultRatios: { cpu: 1.5, memory: 1 }\n');

  const rows: Row[] = [];
  for (const [setting, extraEnv] of Object.entries(SETTINGS)) {
    let server: ServerProcess | undefined;
    let port = 0;
    const start = async () => {
      port = await freePort();
      const env = { ...oursEnv({ https: port, http: await freePort() }, configFile, tlsFiles), ...extraEnv };
      server = startProcess(`${setting}`, [join(ROOT, 'dist', 'main.js')], env, port, dir, serverCgroup(setting, memoryLimitMiB, log));
      await waitReady(server, review);
    };
    for (const scenario of scenarios) {
      if (!server || server.child.exitCode !== null || server.child.signalCode !== null) await start();
      const url = `https://127.0.0.1:${port}/mutate`;
      const window = watchProcess(server!.pid);
      const probes = runProbes(url, durationS * 1_000);
      const load = SCENARIOS[scenario]!(port);
      const { keepAlive, newConnection } = await probes;
      const attackStats = load.stop();
      const child = server!.child;
      const ended = child.signalCode ?? (child.exitCode !== null ? `exit ${child.exitCode}` : 'alive');
      const processWindow = ended === 'alive' ? window.end() : { peakRssMiB: NaN, cpuSeconds: NaN };
      rows.push({
        setting,
        scenario,
        keepAlive,
        newConnection,
        attack: attackStats,
        peakRssMiB: processWindow.peakRssMiB,
        serverCpuSeconds: processWindow.cpuSeconds,
        server: ended,
      });
      log(
        `${setting} ${scenario}: keep-alive p99 ${keepAlive.p99} ms, new connection p99 ${newConnection.p99} ms, server ${ended}, RSS ${processWindow.peakRssMiB} MiB`,
      );
      // Let the server shed what the load left (cut-off connections, garbage) before the next one.
      await sleep(2_000);
    }
    await server?.stop();
  }
  destroyAgent();

  log(
    '\n' +
      table(
        [
          'setting',
          'scenario',
          'keep-alive p50/p99/max ms',
          'steady p99/max',
          'fails',
          'new conn p50/p99/max ms',
          'steady p99/max',
          'fails',
          '>100 ms',
          'RSS MiB',
          'server',
          'attacker: connected / refused / cut off; answers',
        ],
        rows.map((r) => [
          r.setting,
          r.scenario,
          `${r.keepAlive.p50} / ${r.keepAlive.p99} / ${r.keepAlive.max}`,
          `${r.keepAlive.steadyP99} / ${r.keepAlive.steadyMax}`,
          r.keepAlive.failures,
          `${r.newConnection.p50} / ${r.newConnection.p99} / ${r.newConnection.max}`,
          `${r.newConnection.steadyP99} / ${r.newConnection.steadyMax}`,
          r.newConnection.failures,
          r.keepAlive.over100ms + r.newConnection.over100ms,
          r.peakRssMiB,
          r.server,
          `${r.attack.connected} / ${r.attack.failedToConnect} / ${r.attack.cutOff}; ${
            Object.entries(r.attack.statuses)
              .map(([code, n]) => `${code}×${n}`)
              .join(' ') || '-'
          }`,
        ]),
      ),
  );
  writeFileSync(
    outFile,
    JSON.stringify(
      {
        startedAt: startedAt.toISOString(),
        finishedAt: new Date().toISOString(),
        machine: machineInfo(),
        loadAverage: os.loadavg().map((l) => round(l, 2)),
        options: { durationS, memoryLimitMiB, settings: SETTINGS, probeIntervalsMs: { keepAlive: 50, newConnection: 250 } },
        rows,
      },
      null,
      2,
    ) + '\n',
  );
  log(`\nwritten ${outFile}`);
  return 0;
}

if (isMainThread) benchMain({ script: 'bench:transport', results: 'transport.json', build: true, title: 'transport bench', flags: FLAGS }, main);
