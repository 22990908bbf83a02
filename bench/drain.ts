/**
 * A rollout's SIGTERM under load (`npm run bench:drain`): does any review get lost?
 *
 * Per run, `node dist/main.js` with the drain delay a cluster gets (`OVERCOMMIT_SHUTDOWN_DELAY_MS`,
 * `--drain-ms`, default 5,000), loaded by autocannon (`--connections` kept-alive connections)
 * while recorded closed-loop clients send the kubeadm node review the way an API server does:
 * `--clients` on a kept-alive connection each (an `https.Agent` with one pooled socket, which
 * leaves a connection whose answer said `Connection: close`) and `--clients` on a new connection
 * per call (handshake included). After `--warmup-ms` the process gets SIGTERM; `/readyz` is
 * polled every 5 ms until it fails; every client keeps sending until the process has exited.
 *
 * Every recorded call is classified by when it was sent (before the signal, during the drain,
 * after the listener closed: the first refused connection) and how it ended: answered (status,
 * `Connection` header), reset (ECONNRESET, EPIPE: the review lost), refused (ECONNREFUSED: the
 * listener is closed; in a cluster the endpoint is gone by then and no new connection comes here),
 * other errors. autocannon is load only: it writes its next request on a connection as soon as
 * an answer arrives, `Connection: close` or not, so its errors say nothing about an API server.
 *
 * Output: a table per run and bench/results/drain.json (`--out`).
 */
import autocannon from 'autocannon';
import { writeFileSync } from 'node:fs';
import http from 'node:http';
import https from 'node:https';
import os from 'node:os';
import { join, resolve } from 'node:path';
import { Worker, isMainThread, parentPort, workerData } from 'node:worker_threads';
import { freePort } from '../test/support/process.js';
import {
  RUN_DIR,
  ROOT,
  type ServerProcess,
  type Bench,
  benchMain,
  type FlagSpec,
  machineInfo,
  oursEnv,
  round,
  sleep,
  startProcess,
  table,
  waitReady,
  writeTls,
  destroyAgent,
} from './lib.js';
import { benchReviews } from './reviews.js';

const review = benchReviews().find((r) => r.name === 'kubeadm-node')!.body;

/** How a kind of recorded client holds its connections. */
type Kind = 'keep-alive' | 'fresh';
type Outcome = 'answered' | 'reset' | 'refused' | 'other';
type Phase = 'serving' | 'draining' | 'closed';

interface Call {
  kind: Kind;
  /** When the request was sent, ms since the epoch (performance.timeOrigin-based, the same in both threads). */
  sentAt: number;
  /** Whether it went out on a connection that had carried an earlier call. */
  reused: boolean;
  /** Whether its connection's TLS handshake had finished (false: the server never accepted it). */
  accepted: boolean;
  status?: number;
  connection?: string;
  error?: string;
}

const now = () => performance.timeOrigin + performance.now();
const RESET_CODES = new Set(['ECONNRESET', 'EPIPE']);
const outcome = (call: Call): Outcome =>
  call.status !== undefined ? 'answered' : RESET_CODES.has(call.error!) ? 'reset' : call.error === 'ECONNREFUSED' ? 'refused' : 'other';

// ---------------------------------------------------------------------------------------------
// The recorded clients, in a worker thread so that autocannon's work does not delay them.

interface WorkerInput {
  url: string;
  readyzUrl: string;
  clients: number;
  /** When, after SIGTERM, no new connection comes here any more (the endpoint is gone); null: never. */
  endpointRemovedMs: number | null;
}
type ToWorker = { signalledAt: number } | { stop: true };
interface FromWorker {
  calls: Call[];
  readyzFailedAt?: number;
}

function send(url: string, agent: https.Agent | false, kind: Kind): Promise<Call> {
  return new Promise((resolve) => {
    const call: Call = { kind, sentAt: now(), reused: false, accepted: false };
    const req = https.request(url, {
      method: 'POST',
      agent,
      rejectUnauthorized: false,
      headers: { 'content-type': 'application/json', 'content-length': review.length },
    });
    req.on('socket', (socket) => {
      call.reused = req.reusedSocket;
      if (req.reusedSocket) call.accepted = true;
      else socket.once('secureConnect', () => (call.accepted = true));
    });
    req.on('response', (res) => {
      res.resume();
      res.on('end', () => resolve({ ...call, status: res.statusCode, connection: res.headers.connection }));
      res.on('error', (error: NodeJS.ErrnoException) => resolve({ ...call, error: error.code ?? error.message }));
    });
    req.on('error', (error: NodeJS.ErrnoException) => resolve({ ...call, error: error.code ?? error.message }));
    req.setTimeout(10_000, () => req.destroy(Object.assign(new Error('timeout'), { code: 'TIMEOUT' })));
    req.end(review);
  });
}

function readyz(url: string): Promise<number> {
  return new Promise((resolve) => {
    const req = http.get(url, { agent: false }, (res) => (res.resume(), resolve(res.statusCode ?? 0)));
    req.on('error', () => resolve(0));
  });
}

if (!isMainThread) {
  const input = workerData as WorkerInput;
  const calls: Call[] = [];
  let running = true;
  let readyzFailedAt: number | undefined;
  let signalledAt: number | undefined;
  const endpointRemoved = () => input.endpointRemovedMs !== null && signalledAt !== undefined && now() >= signalledAt + input.endpointRemovedMs;
  const loop = async (kind: Kind) => {
    const agent = kind === 'keep-alive' ? new https.Agent({ keepAlive: true, maxSockets: 1 }) : false;
    // Whether the next call needs a new connection: once the endpoint is gone, those go to another replica.
    let needsConnection = true;
    while (running && !(needsConnection && endpointRemoved())) {
      const call = await send(input.url, agent, kind);
      calls.push(call);
      needsConnection = kind === 'fresh' || call.error !== undefined || call.connection === 'close';
      // A refused connection fails at once: no busy loop against a closed port.
      if (call.error !== undefined) await sleep(10);
    }
    if (agent) agent.destroy();
  };
  const loops = [...Array.from({ length: input.clients }, () => loop('keep-alive')), ...Array.from({ length: input.clients }, () => loop('fresh'))];
  parentPort!.on('message', (message: ToWorker) => {
    if ('signalledAt' in message) {
      signalledAt = message.signalledAt;
      void (async () => {
        // The time the 503 arrived: every call sent after it was received while draining.
        while (running && readyzFailedAt === undefined) {
          if ((await readyz(input.readyzUrl)) === 503) readyzFailedAt = now();
          else await sleep(5);
        }
      })();
    } else {
      running = false;
      void Promise.all(loops).then(() => parentPort!.postMessage({ calls, readyzFailedAt } satisfies FromWorker));
    }
  });
}

// ---------------------------------------------------------------------------------------------

const FLAGS = {
  runs: { type: 'number', default: 2, min: 1, integer: true },
  'drain-ms': { type: 'number', default: 5_000, integer: true },
  'warmup-ms': { type: 'number', default: 2_000, integer: true },
  connections: { type: 'number', default: 8, min: 1, integer: true },
  clients: { type: 'number', default: 8, min: 1, integer: true },
  'endpoint-removed-ms': { type: 'number', default: 1_000, integer: true },
  /** Another build's dist/ (no build of this one). */
  dist: { type: 'string' },
} satisfies Record<string, FlagSpec>;
const log = (line: string) => process.stdout.write(`${line}\n`);

type Counts = Record<Outcome, number>;
const zero = (): Counts => ({ answered: 0, reset: 0, refused: 0, other: 0 });

interface KindSummary {
  calls: number;
  byPhase: Record<Phase, Counts>;
  /** Answers to calls sent once /readyz had failed, and how many of them said `Connection: close`. */
  drainAnswers: number;
  drainAnswersConnectionClose: number;
  /** Answers that were not 200 (any phase). */
  non200: number;
  /**
   * Every reset: ms from its call to the listener's close (negative: after), whether the
   * connection was reused, and whether the server had accepted it (its TLS handshake finished).
   */
  resets: { msBeforeListenerClosed: number; reused: boolean; accepted: boolean }[];
  others: string[];
}

/** `dial-until-close`: the clients dial this process until its listener closes; `endpoint-removed`: not after `--endpoint-removed-ms`. */
type Mode = 'dial-until-close' | 'endpoint-removed';

interface Run {
  run: number;
  mode: Mode;
  readyzFailedMsAfterSignal: number | null;
  listenerClosedMsAfterSignal: number | null;
  exitMsAfterSignal: number;
  exitCode: number | null;
  autocannon: { requests: number; errors: number; non2xx: number };
  kinds: Record<Kind, KindSummary>;
}

interface RunOptions {
  /** The build run: this checkout's dist/, or `--dist` (another checkout's, to compare). */
  dist: string;
  drainMs: number;
  warmupMs: number;
  connections: number;
  clients: number;
  endpointRemovedMs: number;
}

function summarise(calls: Call[], kind: Kind, times: { signalledAt: number; readyzFailedAt: number; listenerClosedAt: number }): KindSummary {
  const summary: KindSummary = {
    calls: 0,
    byPhase: { serving: zero(), draining: zero(), closed: zero() },
    drainAnswers: 0,
    drainAnswersConnectionClose: 0,
    non200: 0,
    resets: [],
    others: [],
  };
  for (const call of calls.filter((c) => c.kind === kind)) {
    const phase: Phase = call.sentAt < times.signalledAt ? 'serving' : call.sentAt < times.listenerClosedAt ? 'draining' : 'closed';
    const result = outcome(call);
    summary.calls++;
    summary.byPhase[phase][result]++;
    if (result === 'answered' && call.status !== 200) summary.non200++;
    // Between the signal and /readyz failing the process may not have seen the signal yet.
    if (result === 'answered' && phase === 'draining' && call.sentAt >= times.readyzFailedAt) {
      summary.drainAnswers++;
      if (call.connection === 'close') summary.drainAnswersConnectionClose++;
    }
    if (result === 'reset')
      summary.resets.push({ msBeforeListenerClosed: round(times.listenerClosedAt - call.sentAt, 1), reused: call.reused, accepted: call.accepted });
    if (result === 'other') summary.others.push(call.error!);
  }
  return summary;
}

async function runOnce(index: number, mode: Mode, options: RunOptions): Promise<Run> {
  const dir = join(RUN_DIR, 'drain');
  const tlsFiles = await writeTls(join(dir, 'tls'));
  const configFile = join(dir, 'config.yaml');
  writeFileSync(configFile, 'nodes:\n  defaultRatios: { cpu: 1.5, memory: 1 }\n');
  const ports = { https: await freePort(), http: await freePort() };
  const env = { ...oursEnv(ports, configFile, tlsFiles), OVERCOMMIT_SHUTDOWN_DELAY_MS: String(options.drainMs) };
  const server: ServerProcess = startProcess(`drain-${index}-${mode}`, [join(options.dist, 'main.js')], env, ports.https, dir);
  await waitReady(server, review);
  const exited = new Promise<number | null>((resolve) => server.child.once('exit', (code) => resolve(code)));

  const input: WorkerInput = {
    url: server.url,
    readyzUrl: `http://127.0.0.1:${ports.http}/readyz`,
    clients: options.clients,
    endpointRemovedMs: mode === 'endpoint-removed' ? options.endpointRemovedMs : null,
  };
  const worker = new Worker(new URL(import.meta.url), { workerData: input });
  const load = autocannon({
    url: server.url,
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: review,
    connections: options.connections,
    duration: 3_600,
    timeout: 10,
  });
  await sleep(options.warmupMs);
  const signalledAt = now();
  server.child.kill('SIGTERM');
  worker.postMessage({ signalledAt } satisfies ToWorker);
  const exitCode = await exited;
  const exitedAt = now();
  load.stop();
  const result = await load;
  const recorded = new Promise<FromWorker>((resolve) => worker.once('message', resolve));
  worker.postMessage({ stop: true } satisfies ToWorker);
  const { calls, readyzFailedAt } = await recorded;
  await worker.terminate();

  // The listener's close: the first refused connection (none when no client dialled by then).
  const refusedAt = calls.filter((c) => c.error === 'ECONNREFUSED').map((c) => c.sentAt);
  const listenerClosedAt = refusedAt.length > 0 ? Math.min(...refusedAt) : exitedAt;
  const since = (at: number | undefined) => (at === undefined ? null : round(at - signalledAt, 1));
  const times = { signalledAt, readyzFailedAt: readyzFailedAt ?? signalledAt, listenerClosedAt };
  return {
    run: index,
    mode,
    readyzFailedMsAfterSignal: since(readyzFailedAt),
    listenerClosedMsAfterSignal: refusedAt.length > 0 ? since(listenerClosedAt) : null,
    exitMsAfterSignal: round(exitedAt - signalledAt, 1),
    exitCode,
    autocannon: { requests: result.requests.total, errors: result.errors, non2xx: result.non2xx },
    kinds: { 'keep-alive': summarise(calls, 'keep-alive', times), fresh: summarise(calls, 'fresh', times) },
  };
}

const total = (counts: Record<Phase, Counts>, outcomeName: Outcome) => counts.serving[outcomeName] + counts.draining[outcomeName] + counts.closed[outcomeName];

function report(run: Run): void {
  log(
    `\nrun ${run.run}, ${run.mode}: /readyz failed ${run.readyzFailedMsAfterSignal} ms after SIGTERM, listener closed ${run.listenerClosedMsAfterSignal ?? '(no client dialled by then)'} ms, ` +
      `exit ${run.exitCode} at ${run.exitMsAfterSignal} ms; autocannon ${run.autocannon.requests} requests (load only)`,
  );
  log(
    table(
      [
        'clients',
        'calls',
        'answered before SIGTERM',
        'answered in drain',
        '… Connection: close',
        'not 200',
        'resets: accepted',
        'never accepted',
        'refused after close',
        'other',
        'resets: ms before close (r: reused, n: never accepted)',
      ],
      (['keep-alive', 'fresh'] as const).map((kind) => {
        const k = run.kinds[kind];
        return [
          kind,
          k.calls,
          k.byPhase.serving.answered,
          k.drainAnswers,
          k.drainAnswersConnectionClose,
          k.non200,
          k.resets.filter((r) => r.accepted).length,
          k.resets.filter((r) => !r.accepted).length,
          k.byPhase.closed.refused,
          total(k.byPhase, 'other') + k.byPhase.serving.refused + k.byPhase.draining.refused,
          k.resets.map((r) => `${r.msBeforeListenerClosed}${r.reused ? 'r' : ''}${r.accepted ? '' : 'n'}`).join(' ') || '-',
        ];
      }),
    ),
  );
}

async function main({ flags, outFile, startedAt }: Bench<typeof FLAGS>): Promise<number> {
  const runs = flags.runs;
  const options: RunOptions = {
    dist: flags.dist ? resolve(flags.dist) : join(ROOT, 'dist'),
    drainMs: flags['drain-ms'],
    warmupMs: flags['warmup-ms'],
    connections: flags.connections,
    clients: flags.clients,
    endpointRemovedMs: flags['endpoint-removed-ms'],
  };
  log(
    `${runs} run(s) of each mode: drain ${options.drainMs} ms, SIGTERM after ${options.warmupMs} ms of load; autocannon ${options.connections} connections, ` +
      `${options.clients} recorded keep-alive clients, ${options.clients} recorded fresh-connection clients; endpoint removed ${options.endpointRemovedMs} ms after SIGTERM`,
  );

  const results: Run[] = [];
  for (let index = 1; index <= runs; index++) {
    for (const mode of ['dial-until-close', 'endpoint-removed'] as const) {
      const run = await runOnce(index, mode, options);
      results.push(run);
      report(run);
    }
  }
  destroyAgent();
  const totals = (mode: Mode) => {
    const runsOfMode = results.filter((r) => r.mode === mode);
    const resets = runsOfMode.flatMap((r) => [...r.kinds['keep-alive'].resets, ...r.kinds.fresh.resets]);
    const kinds = runsOfMode.flatMap((r) => [r.kinds['keep-alive'], r.kinds.fresh]);
    return {
      recordedCalls: kinds.reduce((sum, k) => sum + k.calls, 0),
      answered: kinds.reduce((sum, k) => sum + total(k.byPhase, 'answered'), 0),
      resetsAccepted: resets.filter((r) => r.accepted).length,
      resetsNeverAccepted: resets.filter((r) => !r.accepted).length,
      refused: kinds.reduce((sum, k) => sum + total(k.byPhase, 'refused'), 0),
      other: kinds.reduce((sum, k) => sum + total(k.byPhase, 'other'), 0),
    };
  };
  const summary = { 'dial-until-close': totals('dial-until-close'), 'endpoint-removed': totals('endpoint-removed') };
  log('');
  for (const [mode, t] of Object.entries(summary)) {
    log(
      `${mode}: ${t.recordedCalls} recorded calls over ${runs} run(s): ${t.answered} answered; resets ${t.resetsAccepted} on accepted connections, ` +
        `${t.resetsNeverAccepted} on connections never accepted; ${t.refused} refused; ${t.other} other errors`,
    );
  }
  writeFileSync(
    outFile,
    `${JSON.stringify({ startedAt: startedAt.toISOString(), machine: machineInfo(), loadAverage: os.loadavg(), options, summary, runs: results }, null, 2)}\n`,
  );
  log(`results: ${outFile}`);
  return 0;
}

if (isMainThread) benchMain({ script: 'bench:drain', results: 'drain.json', build: (flags) => !flags.dist, title: 'drain bench', flags: FLAGS }, main);
