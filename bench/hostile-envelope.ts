/**
 * What one hostile body costs: `npm run bench:hostile-envelope`. Bodies of at most 3 MiB (the
 * body limit) built to be expensive: huge, deep or wide envelope fields, and pods carrying them.
 *
 * 1. In this process, on the built app (dist/, pod policies on): per body, the median over the
 *    rounds of `JSON.parse` alone and of everything after it (`pipeline.review` and the reply's
 *    JSON). The second is what a request holds the event loop for beyond parsing its body.
 * 2. Over HTTPS, `node dist/main.js` as bench:admission runs it: while each body is in flight on
 *    one connection, kubeadm node reviews are sent one after another on another; the slowest of
 *    them minus a node review's latency alone is the `stall` the body caused.
 *
 * The baseline of the same run is a valid node review of the same size as the largest hostile
 * body (thousands of images): the parse that any 3 MiB body costs.
 */
import { writeFileSync } from 'node:fs';
import https from 'node:https';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { pathToFileURL } from 'node:url';
import { kubeadmNode, nodeReview } from '../test/fixtures/nodes.js';
import { freePort } from '../test/support/process.js';
import { benchMain, loadAvg, machineInfo, median, oursEnv, round, ROOT, RUN_DIR, startProcess, table, waitReady, writeTls } from './lib.js';
import { deploymentPodReview } from './reviews.js';

const { flags, log, outFile } = benchMain(
  {
    script: 'bench:hostile-envelope',
    results: 'hostile-envelope.json',
    build: true,
    title: 'hostile-envelope bench',
    flags: { rounds: { type: 'number', default: 7, min: 1, integer: true } },
  },
  main,
);
const ROUNDS = flags.rounds;

const LIMIT = 3 * 1024 * 1024 - 4_096;
type Json = Record<string, any>;

/** The review with `"__HOLE__"` at `set`'s place replaced by `fill(room)`, where room keeps the body under LIMIT. */
function withHole(review: Json, set: (review: Json) => void, fill: (room: number) => string): Buffer {
  set(review);
  const text = JSON.stringify(review);
  const room = LIMIT - Buffer.byteLength(text);
  return Buffer.from(text.replace('"__HOLE__"', fill(room)));
}

// `"k00000":value,` per key.
const keys = (room: number, value: string) =>
  `{${Array.from({ length: Math.floor(room / (11 + value.length)) }, (_, i) => `"k${i.toString(36).padStart(5, '0')}":${value}`).join(',')}}`;
const repeatList = (room: number, item: string) =>
  `[${Array(Math.floor(room / (item.length + 1)))
    .fill(item)
    .join(',')}]`;
const nestedArrays = (depth: number) => `${'['.repeat(depth)}1${']'.repeat(depth)}`;
const nestedObjects = (depth: number) => `${'{"a":'.repeat(depth)}1${'}'.repeat(depth)}`;

/** A valid node review as large as the limit allows: a kubeadm node with thousands of images. */
function largestNode(): Buffer {
  const size = (images: number) => Buffer.byteLength(JSON.stringify(nodeReview(kubeadmNode({ images }))));
  const perImage = (size(150) - size(50)) / 100;
  let images = 50 + Math.floor((LIMIT - size(50)) / perImage);
  while (size(images) > LIMIT) images--;
  return Buffer.from(JSON.stringify(nodeReview(kubeadmNode({ images }))));
}

interface Case {
  name: string;
  body: Buffer;
}

function cases(): Case[] {
  const node = () => nodeReview(kubeadmNode({ images: 50 }));
  const pod = () => deploymentPodReview();
  const hole = (at: (r: Json) => Json, key: string) => (r: Json) => void (at(r)[key] = '__HOLE__');
  return [
    { name: 'valid node, 3 MiB of images (baseline)', body: largestNode() },
    {
      name: 'request.kind: 3 MiB of keys',
      body: withHole(
        node(),
        hole((r) => r.request, 'kind'),
        (room) => keys(room, '1'),
      ),
    },
    {
      name: 'request.kind: group, version, kind and 3 MiB more keys',
      body: withHole(
        node(),
        hole((r) => r.request, 'kind'),
        (room) => keys(room - 64, '1').replace('{', '{"group":"","version":"v1","kind":"Node",'),
      ),
    },
    {
      name: 'request.kind: 3 MiB of keys, each an object',
      body: withHole(
        node(),
        hole((r) => r.request, 'kind'),
        (room) => keys(room, '{}'),
      ),
    },
    {
      name: 'request.uid: array of 1.5 M numbers',
      body: withHole(
        node(),
        hole((r) => r.request, 'uid'),
        (room) => repeatList(room, '1'),
      ),
    },
    {
      name: 'request.uid: array of 1 M objects',
      body: withHole(
        node(),
        hole((r) => r.request, 'uid'),
        (room) => repeatList(room, '{}'),
      ),
    },
    {
      name: 'request.uid: arrays 1.5 M deep',
      body: withHole(
        node(),
        hole((r) => r.request, 'uid'),
        (room) => nestedArrays(Math.floor(room / 2) - 1),
      ),
    },
    {
      name: 'request.kind: objects 100,000 deep',
      body: withHole(
        node(),
        hole((r) => r.request, 'kind'),
        () => nestedObjects(100_000),
      ),
    },
    {
      name: 'request: 3 MiB of unknown keys (valid)',
      body: withHole(
        node(),
        (r) => Object.assign(r.request, { extra: '__HOLE__' }),
        (room) => keys(room, '1'),
      ),
    },
    {
      name: 'pod: container requests 100,000 deep',
      body: withHole(
        pod(),
        hole((r) => r.request.object.spec.containers[1], 'resources'),
        () => `{"requests":{"extra":${nestedObjects(100_000)}}}`,
      ),
    },
    {
      name: 'pod: container resources, 3 MiB of keys',
      body: withHole(
        pod(),
        hole((r) => r.request.object.spec.containers[1], 'resources'),
        (room) => keys(room, '"1"'),
      ),
    },
  ];
}

const agent = new https.Agent({ keepAlive: true, maxSockets: 8, rejectUnauthorized: false });

interface Timed {
  status: number;
  ms: number;
  responseBytes: number;
}

/** POSTs body, timing the call. */
function send(url: string, body: Buffer): Promise<Timed> {
  const started = performance.now();
  return new Promise<Timed>((resolveReply, reject) => {
    const req = https.request(url, { method: 'POST', agent, headers: { 'content-type': 'application/json', 'content-length': body.length } }, (res) => {
      let bytes = 0;
      res.on('data', (chunk: Buffer) => (bytes += chunk.length));
      res.on('end', () => resolveReply({ status: res.statusCode ?? 0, ms: performance.now() - started, responseBytes: bytes }));
      res.on('error', reject);
    });
    req.on('error', reject);
    req.end(body);
  });
}

const dist = (path: string) => import(pathToFileURL(join(ROOT, 'dist', path)).href);

/** ms of fn, median of ROUNDS single calls. */
function timeMs(fn: () => unknown): number {
  const samples: number[] = [];
  for (let i = 0; i < ROUNDS; i++) {
    const started = performance.now();
    fn();
    samples.push(performance.now() - started);
  }
  return round(median(samples), 2);
}

/** Part 1: parse and handling, in this process. */
async function inProcess(
  bodies: Case[],
  configFile: string,
  tls: { certFile: string; keyFile: string },
): Promise<Map<string, { parseMs: number; handleMs: number }>> {
  const { createApp } = await dist('server/app.factory.js');
  const { AdmissionPipeline } = await dist('admission/admission.pipeline.js');
  const running = await createApp({
    httpsPort: 0,
    httpPort: 0,
    host: '127.0.0.1',
    env: { LOG_LEVEL: 'fatal', OVERCOMMIT_CONFIG_FILE: configFile, OVERCOMMIT_TLS_CERT_FILE: tls.certFile, OVERCOMMIT_TLS_KEY_FILE: tls.keyFile },
  });
  const pipeline = running.app.get(AdmissionPipeline);
  const handle = (body: unknown) => {
    try {
      return JSON.stringify(pipeline.review(body));
    } catch (error) {
      return JSON.stringify({ message: (error as Error).message, problems: (error as { problems?: string[] }).problems });
    }
  };
  const out = new Map<string, { parseMs: number; handleMs: number }>();
  try {
    for (const { name, body } of bodies) {
      const text = body.toString('utf8');
      const parsed = JSON.parse(text);
      handle(parsed);
      out.set(name, { parseMs: timeMs(() => JSON.parse(text)), handleMs: timeMs(() => handle(parsed)) });
    }
  } finally {
    await running.close();
  }
  return out;
}

async function main(): Promise<void> {
  const dir = join(RUN_DIR, 'hostile-envelope');
  const tls = await writeTls(join(dir, 'tls'));
  const configFile = join(dir, 'config.yaml');
  writeFileSync(
    configFile,
    'nodes:\n  defaultRatios: { cpu: 1.5 }\npods:\n  namespaceSelector: {}\n  defaultRequests: { cpu: 100m, memory: 128Mi }\n  limitToRequest: { memoryRequestPercent: 50 }\n',
  );
  const bodies = cases();
  const local = await inProcess(bodies, configFile, tls);
  const [port, httpPort] = [await freePort(), await freePort()];
  const server = startProcess('ours', [join(ROOT, 'dist', 'main.js')], oursEnv({ https: port, http: httpPort }, configFile, tls), port, dir);
  const probe = Buffer.from(JSON.stringify(nodeReview(kubeadmNode({ images: 50 }))));
  const rows: (string | number)[][] = [];
  const results: Json[] = [];
  try {
    await waitReady(server, probe);
    const alone: number[] = [];
    for (let i = 0; i < 50; i++) alone.push((await send(server.url, probe)).ms);
    const aloneMs = median(alone.slice(10));
    log(`node review alone: ${round(aloneMs, 2)} ms (median of 40)\n`);
    for (const { name, body } of bodies) {
      const own: Timed[] = [];
      const delays: number[] = [];
      for (let r = 0; r < ROUNDS; r++) {
        let done = false;
        const hostile = send(server.url, body).finally(() => (done = true));
        let slowest = 0;
        while (!done) slowest = Math.max(slowest, (await send(server.url, probe)).ms);
        own.push(await hostile);
        delays.push(slowest - aloneMs);
      }
      const row = {
        name,
        bytes: body.length,
        ...local.get(name)!,
        status: [...new Set(own.map((t) => t.status))].join('/'),
        responseBytes: Math.max(...own.map((t) => t.responseBytes)),
        latencyMs: round(median(own.map((t) => t.ms)), 1),
        stallMs: round(median(delays), 1),
        stallMaxMs: round(Math.max(...delays), 1),
      };
      results.push(row);
      rows.push([row.name, row.bytes, row.status, row.responseBytes, row.parseMs, row.handleMs, row.latencyMs, row.stallMs, row.stallMaxMs]);
      log(
        `${name}: parse ${row.parseMs} ms, then ${row.handleMs} ms; over HTTPS ${row.status} in ${row.latencyMs} ms, stalled node reviews ${row.stallMs} ms (max ${row.stallMaxMs})`,
      );
    }
    if (server.child.exitCode !== null) throw new Error(`ours exited (${server.child.exitCode}); log ${server.logFile}`);
  } finally {
    agent.destroy();
    await server.stop();
  }
  log(
    `\nmedians of ${ROUNDS} rounds; parse and after-parse in-process; latency and stall over HTTPS (stall: the slowest node review sent during the body's call, minus a node review alone)\n`,
  );
  log(table(['body', 'bytes', 'status', 'resp bytes', 'parse ms', 'after-parse ms', 'latency ms', 'stall ms', 'max stall ms'], rows));
  const loadAvgAtEnd = loadAvg();
  log(`load at the end: ${loadAvgAtEnd.join(' ')}`);
  writeFileSync(
    outFile,
    `${JSON.stringify({ startedAt: new Date().toISOString(), machine: machineInfo(), loadAvgAtEnd, rounds: ROUNDS, cases: results }, null, 2)}\n`,
  );
  log(`\n${outFile}`);
}
