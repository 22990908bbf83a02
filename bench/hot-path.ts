/**
 * The pieces of the admission hot path, timed one by one in this process (no HTTP, no TLS, no
 * load generator competing for the CPU): `npm run bench:hot-path`. It imports the built app
 * (dist/), so run `npm run build` first (the script does when dist/ is stale, unless --no-build).
 *
 * Each figure is µs per call: the median of 7 batches of ~200 ms, after a warm-up. Use it to see
 * what a change to one step saves; the HTTP figures come from bench:admission.
 *
 * The last rows time the app's own per-call work from an app started in this process (createApp,
 * no request sent): the HTTP edge's metrics (AdmissionHttpMetrics.track on a real
 * IncomingMessage/ServerResponse pair, then the response's 'close') and whole pipeline reviews,
 * their metric calls included. They only use what every build exports, so the same script
 * compares two builds: `node bench/.run/build/bench/hot-path.js --no-build` from a checkout with
 * its own dist/.
 */
import 'reflect-metadata';
import { IncomingMessage, ServerResponse } from 'node:http';
import { Socket } from 'node:net';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { pathToFileURL } from 'node:url';
import Fastify from 'fastify';
import { Counter, Gauge, Histogram, Registry } from 'prom-client';
import { benchMain, median, round, ROOT, RUN_DIR, table, writeTls } from './lib.js';
import { benchReviews } from './reviews.js';

const { log } = benchMain({ script: 'bench:hot-path', build: true, flags: {} }, main);

type JsonBodyParser = (request: unknown, text: string, done: (error: Error | null, body?: unknown) => void) => void;
// Fastify's default JSON body parser (secure-json-parse): as Fastify installs it by default, and
// as admission.server.ts configures it (`__proto__`/`constructor` keys kept as data).
const fastifyJsonParser = Fastify().getDefaultJsonParser('error', 'error') as unknown as JsonBodyParser;
const oursParse = Fastify().getDefaultJsonParser('ignore', 'ignore') as unknown as JsonBodyParser;

/** µs per call of fn: median over batches. */
function time(fn: () => unknown, batchMs = 200, batches = 7): number {
  let n = 1;
  // Calibrate (and warm up) until a batch takes batchMs.
  for (;;) {
    const start = performance.now();
    for (let i = 0; i < n; i++) fn();
    const elapsed = performance.now() - start;
    if (elapsed >= batchMs / 4) {
      n = Math.max(1, Math.round((n * batchMs) / elapsed));
      break;
    }
    n *= 4;
  }
  const perCall: number[] = [];
  for (let b = 0; b < batches; b++) {
    const start = performance.now();
    for (let i = 0; i < n; i++) fn();
    perCall.push(((performance.now() - start) * 1000) / n);
  }
  return round(median(perCall), 2);
}

const dist = (path: string) => import(pathToFileURL(join(ROOT, 'dist', path)).href);

async function main(): Promise<void> {
  const { decodeAdmissionReview } = await dist('admission/admission-review.decoder.js');
  const { parseConfig } = await dist('overcommit.config.js');
  const { planNodeStatus, resolveNodePolicy } = await dist('domain/node-rules/node-oversell.rules.js');
  const { nodeStatusPatch } = await dist('node-oversell/node-oversell.strategy.js');
  const { patchError } = await dist('admission/patch-error.js');
  const { default: fastJsonPatch } = await import('fast-json-patch');

  const parsed = parseConfig('nodes:\n  defaultRatios: { cpu: 1.5, memory: 1 }\n');
  if (!parsed.ok) throw new Error(parsed.errors.join('; '));
  const config = parsed.value;

  const ignoreParsed = () => undefined;
  const rows: (string | number)[][] = [];
  for (const review of benchReviews()) {
    const text = review.body.toString('utf8');
    const body = JSON.parse(text);
    const node = body.request.object;
    const step = (name: string, fn: () => unknown) => rows.push([review.name, review.body.length, name, time(fn)]);

    step('JSON.parse (body)', () => JSON.parse(text));
    step("Fastify's default parser, secure-json-parse (proto/constructor: error)", () => fastifyJsonParser(undefined, text, ignoreParsed));
    step("ours: Fastify's default parser (proto/constructor: ignore)", () => oursParse(undefined, text, ignoreParsed));
    step('body Buffer → string (utf8)', () => review.body.toString('utf8'));
    step('decodeAdmissionReview (class-transformer + class-validator)', () => decodeAdmissionReview(body));
    if (review.expectPatch) {
      const policy = () => resolveNodePolicy(node.metadata?.labels, config.nodes);
      step('resolveNodePolicy', policy);
      const p = policy();
      step('planNodeStatus', () => planNodeStatus(node, p, body.request.oldObject));
      const plan = planNodeStatus(node, p, body.request.oldObject);
      step('nodeStatusPatch', () => nodeStatusPatch(node, plan));
      const patch = nodeStatusPatch(node, plan);
      step('patch applies? fast-json-patch validate (clones the object)', () => fastJsonPatch.validate(patch, node));
      step('patch applies? ours: patchError (copies the patched paths)', () => patchError(node, patch));
      step('patch → JSON → base64', () => Buffer.from(JSON.stringify(patch)).toString('base64'));
    }
    step('JSON.stringify (ours’ response body)', () =>
      JSON.stringify({
        apiVersion: 'admission.k8s.io/v1',
        kind: 'AdmissionReview',
        response: { uid: body.request.uid, allowed: true, patchType: 'JSONPatch', patch: 'W3sib3AiOiJyZXBsYWNlIn1d' },
      }),
    );
  }

  // prom-client: what the pipeline and the node strategy do per request.
  const registry = new Registry();
  const counter = new Counter({ name: 'c', help: 'c', labelNames: ['resource', 'operation', 'outcome'], registers: [registry] });
  const histogram = new Histogram({
    name: 'h',
    help: 'h',
    labelNames: ['resource'],
    buckets: [0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25],
    registers: [registry],
  });
  const gauge = new Gauge({ name: 'g', help: 'g', labelNames: ['node', 'resource'], registers: [registry] });
  const child = counter.labels('nodes/status', 'UPDATE', 'patched');
  const histogramChild = histogram.labels('nodes/status');
  const metric = (name: string, fn: () => unknown) => rows.push(['metrics', '', name, time(fn)]);
  const plainCounts = new Map<string, number>();
  metric('Counter.inc({resource, operation, outcome})', () => counter.inc({ resource: 'nodes/status', operation: 'UPDATE', outcome: 'patched' }));
  metric('Counter.labels(...) child, cached: .inc()', () => child.inc());
  metric('Histogram.observe({resource}, s)', () => histogram.observe({ resource: 'nodes/status' }, 0.0003));
  metric('Histogram.labels(...) child, cached: .observe(s)', () => histogramChild.observe(0.0003));
  metric('Gauge.set({node, resource}, v) × 12 (node strategy export, only when a node’s values change)', () => {
    for (let i = 0; i < 12; i++) gauge.set({ node: 'worker-1', resource: 'cpu' }, 4);
  });

  metric('plain count in a Map (counts drained into a Counter by its collect())', () => plainCounts.set('patched', (plainCounts.get('patched') ?? 0) + 1));

  await appRows(rows);

  log(`hot path, µs per call (node ${process.version}; median of 7 batches)\n`);
  log(table(['review', 'bytes', 'step', 'µs'], rows));
}

/** The app's per-call work: the HTTP edge's metrics and whole reviews, from a started app. */
async function appRows(rows: (string | number)[][]): Promise<void> {
  const { createApp } = await dist('server/app.factory.js');
  const { AdmissionPipeline } = await dist('admission/admission.pipeline.js');
  const { AdmissionHttpMetrics } = await dist('admission/admission.metrics.js');
  const dir = join(RUN_DIR, 'hot-path');
  const tls = await writeTls(join(dir, 'tls'));
  const configFile = join(dir, 'config.yaml');
  writeFileSync(configFile, 'nodes:\n  defaultRatios: { cpu: 1.5, memory: 1 }\n');
  const running = await createApp({
    httpsPort: 0,
    httpPort: 0,
    host: '127.0.0.1',
    env: { LOG_LEVEL: 'fatal', OVERCOMMIT_CONFIG_FILE: configFile, OVERCOMMIT_TLS_CERT_FILE: tls.certFile, OVERCOMMIT_TLS_KEY_FILE: tls.keyFile },
  });
  try {
    const edge = running.app.get(AdmissionHttpMetrics);
    // One request/response pair per case, reused: track() adds a once-listener that 'close' removes.
    const pair = (answered: boolean) => {
      const req = new IncomingMessage(new Socket());
      req.url = '/mutate/nodes';
      const res = new ServerResponse(req);
      if (answered) res.writeHead(200);
      return { req, res };
    };
    const answered = pair(true);
    const unanswered = pair(false);
    const step = (name: string, fn: () => unknown) => rows.push(['app', '', name, time(fn)]);
    step('AdmissionHttpMetrics.track + close, answered (counted and timed)', () => {
      edge.track(answered.req, answered.res);
      answered.res.emit('close');
    });
    step('AdmissionHttpMetrics.track + close, closed without an answer', () => {
      edge.track(unanswered.req, unanswered.res);
      unanswered.res.emit('close');
    });
    const pipeline = running.app.get(AdmissionPipeline);
    for (const review of benchReviews()) {
      const body = JSON.parse(review.body.toString('utf8'));
      rows.push([review.name, review.body.length, 'AdmissionPipeline.review (/mutate, its metric calls included)', time(() => pipeline.review(body))]);
    }
  } finally {
    await running.close();
  }
}
