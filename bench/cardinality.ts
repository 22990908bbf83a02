/**
 * What reviews with made-up names do to the scrape and the memory: `npm run bench:cardinality`.
 *
 * Starts ours (`node dist/main.js`, the Deployment's NODE_OPTIONS, in a memory cgroup at its
 * limit like bench:admission), then sends, phase after phase, what a client on the pod network
 * could: reviews with distinct resource/subresource names and operations, node-status reviews
 * for more distinct nodes than OVERCOMMIT_NODE_METRICS_MAX_NODES, and reviews whose resource
 * name is 1 MiB. After each phase: the scrape's size, series and time, and the server's RSS.
 *
 * Flags: --resources n (20000) --nodes n (12000) --huge n (10) --no-build --out file
 */
import 'reflect-metadata';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { httpGet } from '../test/support/webhook.js';
import { kubeadmNode, nodeReview } from '../test/fixtures/nodes.js';
import { freePort } from '../test/support/process.js';
import {
  DEPLOYMENT_MEMORY_LIMIT_MIB,
  RUN_DIR,
  destroyAgent,
  benchMain,
  machineInfo,
  oursEnv,
  post,
  round,
  serverCgroup,
  sleep,
  startProcess,
  statusKiB,
  table,
  waitReady,
  writeTls,
} from './lib.js';

const {
  flags: counts,
  log,
  outFile,
  command,
} = benchMain(
  {
    script: 'bench:cardinality',
    results: 'cardinality.json',
    build: true,
    flags: {
      resources: { type: 'number', default: 20_000, integer: true },
      nodes: { type: 'number', default: 12_000, integer: true },
      huge: { type: 'number', default: 10, integer: true },
    },
  },
  main,
);

interface Phase {
  phase: string;
  reviews: number;
  non200: number;
  scrapeBytes: number;
  scrapeMs: number;
  series: number;
  rssMiB: number;
  alive: boolean;
}

/** Sends every body, 32 in flight; answers the count of replies that were not 200 (errors included). */
async function sendAll(url: string, bodies: () => Iterable<Buffer>): Promise<number> {
  const iterator = bodies()[Symbol.iterator]();
  let non200 = 0;
  const worker = async () => {
    for (let next = iterator.next(); !next.done; next = iterator.next()) {
      const reply = await post(url, next.value, 30_000).catch(() => ({ status: 0 }));
      if (reply.status !== 200) non200 += 1;
    }
  };
  await Promise.all(Array.from({ length: 32 }, worker));
  return non200;
}

function* reviews(n: number, shape: (review: Record<string, any>, i: number) => void): Generator<Buffer> {
  const template = nodeReview(kubeadmNode({ name: 'worker-1' }), { uid: 'b3ac0000-0000-4000-8000-000000000000' });
  for (let i = 0; i < n; i++) {
    const review = structuredClone(template);
    shape(review, i);
    yield Buffer.from(JSON.stringify(review));
  }
}

async function main(): Promise<void> {
  const dir = join(RUN_DIR, 'cardinality');
  mkdirSync(dir, { recursive: true });
  const configFile = join(dir, 'config.yaml');
  writeFileSync(configFile, 'nodes:\n  defaultRatios: { cpu: 1.5, memory: 1 }\n');
  const tls = await writeTls(dir);
  const ports = { https: await freePort(), http: await freePort() };
  const cgroup = serverCgroup('cardinality', DEPLOYMENT_MEMORY_LIMIT_MIB, log);
  const server = startProcess('ours', ['dist/main.js'], oursEnv(ports, configFile, tls), ports.https, dir, cgroup);
  const phases: Phase[] = [];
  try {
    const one = [...reviews(1, () => {})][0];
    await waitReady(server, one);
    const measure = async (phase: string, reviewsSent: number, non200: number) => {
      let alive = server.child.exitCode === null && server.child.signalCode === null;
      let text = '';
      const started = performance.now();
      // A scrape can be what ends a server (heap limit): a failed one counts as a dead server.
      if (alive)
        text = await httpGet(`https://127.0.0.1:${ports.https}/metrics`, 60_000).then(
          (reply) => reply.body,
          () => ((alive = false), ''),
        );
      await sleep(100);
      alive &&= server.child.exitCode === null && server.child.signalCode === null;
      const row: Phase = {
        phase,
        reviews: reviewsSent,
        non200,
        scrapeBytes: Buffer.byteLength(text),
        scrapeMs: round(performance.now() - started, 1),
        series: text.split('\n').filter((line) => line !== '' && !line.startsWith('#')).length,
        rssMiB: alive ? round(statusKiB(server.pid, 'VmRSS') / 1024, 1) : NaN,
        alive,
      };
      phases.push(row);
      log(`${phase}: ${JSON.stringify(row)}`);
    };
    await measure('started, one node review', 1, 0);

    const resources = counts.resources;
    const operations = ['CREATE', 'UPDATE', 'DELETE', 'CONNECT'];
    await measure(
      'distinct resource names',
      resources,
      await sendAll(server.url, () =>
        reviews(resources, (review, i) => {
          review.request.resource.resource = `resource-${i}`;
          review.request.subResource = `sub-${i}`;
          review.request.operation = operations[i % 4];
        }),
      ),
    );
    const nodes = counts.nodes;
    await measure(
      'distinct node names',
      nodes,
      await sendAll(server.url, () =>
        reviews(nodes, (review, i) => {
          review.request.name = review.request.object.metadata.name = review.request.oldObject.metadata.name = `node-${i}`;
        }),
      ),
    );
    const huge = counts.huge;
    await measure(
      '1 MiB resource names',
      huge,
      await sendAll(server.url, () =>
        reviews(huge, (review, i) => {
          review.request.resource.resource = `${i}${'r'.repeat(1 << 20)}`;
        }),
      ),
    );
  } finally {
    await server.stop();
    destroyAgent();
  }

  log('');
  log(
    table(
      ['phase', 'reviews', 'non-200', 'scrape KiB', 'scrape ms', 'series', 'RSS MiB', 'alive'],
      phases.map((p) => [p.phase, p.reviews, p.non200, round(p.scrapeBytes / 1024, 1), p.scrapeMs, p.series, p.rssMiB, p.alive ? 'yes' : 'NO']),
    ),
  );
  writeFileSync(
    outFile,
    `${JSON.stringify({ command, at: new Date().toISOString(), machine: machineInfo(), memoryLimitMiB: DEPLOYMENT_MEMORY_LIMIT_MIB, phases }, null, 2)}\n`,
  );
  log(`wrote ${outFile}`);
}
