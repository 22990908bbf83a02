/**
 * The caches at cluster scale (`npm run bench:cache-scale`): the webhook as in its pod against a
 * synthetic API server holding `--nodes` Nodes and `--pods` running pods, then the same webhook
 * with no pods (the caches empty), in the same run.
 *
 * The synthetic API server is plain node:http on 127.0.0.1 serving what the webhook's informers
 * ask for, as kube-apiserver answers it: LIST of pods (all namespaces, the non-terminal field
 * selector), nodes, namespaces and LimitRanges, paged when the client sends `limit` (`continue`
 * is the next index, `remainingItemCount` the rest) and whole otherwise, every list at one
 * resourceVersion; WATCH of each, held open with no events (a quiet cluster); POST of Events
 * (201); GET of a Lease, held by another replica (the reconciler stays a follower). Anything else gets 404 and is counted: the run fails if the webhook asked for
 * something the server does not serve. Pods are the Deployment fixture of bench:cache-memory
 * (`runningPod`: 3 containers, probes, managedFields), 30 per node by default, spread over 100
 * namespaces; Nodes are kwok nodes.
 *
 * The webhook: `node dist/main.js` with the Deployment's NODE_OPTIONS in a memory cgroup at the
 * Deployment's limit (k8s/base/deployment.yaml), OVERCOMMIT_KUBECONFIG pointing at the synthetic
 * server, a config with a cpu ratio, the commitment floor on (the default) and the pod policy's
 * node cap in warn mode, so the pod and Node caches run. Synced is when it has opened its pod and
 * Node WATCHes (client-node's informer lists, fills its cache, then watches). Then `--rounds` rounds: `--seconds` s of node reviews (a node that has pods) at
 * `--rate` req/s from the paced open-loop client (bench/paced-client.ts), then 2 s idle and one
 * scrape of its /metrics (`nodejs_heap_size_used_bytes`, `process_resident_memory_bytes`, the new
 * space's committed size). Each
 * figure is the median over rounds; `bytesPerPod` is (heap with pods − heap without) ÷ pods.
 *
 * Flags: --nodes n (5000) --pods n (150000) --rate req/s (500) --seconds s (10) --rounds n (3)
 *   --sync-timeout s (300) --memory-limit MiB (the Deployment's; 0 for none) --no-build --out file
 * Writes bench/results/cache-scale.json.
 */
import { writeFileSync } from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import { join, relative } from 'node:path';
import { type LabelMatch, Metrics } from '../test/support/metrics.js';
import { httpText } from '../test/support/webhook.js';
import { kwokNode, nodeReview } from '../test/fixtures/nodes.js';
import { runningPod } from '../test/fixtures/pods.js';
import { freePort } from '../test/support/process.js';
import {
  DEPLOYMENT_MEMORY_LIMIT_MIB,
  DEPLOYMENT_NODE_OPTIONS,
  benchMain,
  loadAvg,
  machineInfo,
  median,
  oursEnv,
  ROOT,
  round,
  RUN_DIR,
  Samples,
  serverCgroup,
  sleep,
  startProcess,
  statusKiB,
  waitReady,
  writeTls,
  type ServerProcess,
} from './lib.js';
import { pacedLoad } from './paced-client.js';

const bench = benchMain(
  {
    script: 'bench:cache-scale',
    results: 'cache-scale.json',
    build: true,
    title: 'cache-scale bench',
    flags: {
      nodes: { type: 'number', default: 5_000, min: 1, integer: true },
      pods: { type: 'number', default: 150_000, integer: true },
      rate: { type: 'number', default: 500, min: 1, integer: true },
      seconds: { type: 'number', default: 10, min: 1, integer: true },
      rounds: { type: 'number', default: 3, min: 1, integer: true },
      'sync-timeout': { type: 'number', default: 300, min: 1, integer: true },
      'memory-limit': { type: 'number', default: DEPLOYMENT_MEMORY_LIMIT_MIB, integer: true },
    },
  },
  main,
);
const { flags, log, outFile } = bench;
const options = {
  nodes: flags.nodes,
  pods: flags.pods,
  rate: flags.rate,
  seconds: flags.seconds,
  rounds: flags.rounds,
  syncTimeoutS: flags['sync-timeout'],
  memoryLimitMiB: flags['memory-limit'],
  namespaces: 100,
};
const RESOURCE_VERSION = '1000';

// ---------------------------------------------------------------------------------------------
// The synthetic API server

type ItemSource = { kind: string; total: number; item(index: number): string };

/** Pod JSON from one template: only the name, uid, namespace and node differ. */
function podSource(pods: number, nodes: number, namespaces: number): ItemSource {
  const template = JSON.stringify(runningPod('POD_NAME', 'NODE_NAME', { namespace: 'NS_NAME' }));
  const uid = (i: number) => `00000000-0000-4000-8000-${i.toString(16).padStart(12, '0')}`;
  return {
    kind: 'PodList',
    total: pods,
    item: (i) =>
      template
        .replace('"POD_NAME"', `"pod-${i}"`)
        .replace('"NODE_NAME"', `"node-${i % nodes}"`)
        .replace('"NS_NAME"', `"ns-${i % namespaces}"`)
        .replace(/"uid":"[0-9a-f-]{36}"/, `"uid":"${uid(i)}","resourceVersion":"${1 + (i % 999)}"`),
  };
}

function nodeSource(nodes: number): ItemSource {
  return { kind: 'NodeList', total: nodes, item: (i) => JSON.stringify(kwokNode({ name: `node-${i}` })) };
}

function namespaceSource(namespaces: number): ItemSource {
  const names = ['default', 'kube-system', 'kube-overcommit', ...Array.from({ length: namespaces }, (_, i) => `ns-${i}`)];
  return {
    kind: 'NamespaceList',
    total: names.length,
    item: (i) =>
      JSON.stringify({
        apiVersion: 'v1',
        kind: 'Namespace',
        metadata: { name: names[i], uid: `ns-uid-${i}`, resourceVersion: '1' },
        status: { phase: 'Active' },
      }),
  };
}

const LEASE_PATH = /^\/apis\/coordination\.k8s\.io\/v1\/namespaces\/([^/]+)\/leases\/([^/]+)$/;

/**
 * A Lease held by the Deployment's other replica, renewed at every read so it never expires:
 * this replica serves reviews and stays a follower, as one of two does, and nudges no node.
 */
function leaseHeldByPeer(namespace: string, name: string): object {
  const now = new Date().toISOString().replace('Z', '000Z');
  return {
    apiVersion: 'coordination.k8s.io/v1',
    kind: 'Lease',
    metadata: { name, namespace, resourceVersion: String(Date.now()) },
    spec: { holderIdentity: 'kube-overcommit-peer', leaseDurationSeconds: 15, renewTime: now, acquireTime: now },
  };
}

interface SyntheticServer {
  url: string;
  requests: Map<string, number>;
  notFound: string[];
  /** Resolves when a WATCH of `path` opens. */
  watchOpened(path: string): Promise<void>;
  close(): Promise<void>;
}

async function startSyntheticServer(sources: Record<string, ItemSource>): Promise<SyntheticServer> {
  const requests = new Map<string, number>();
  const notFound: string[] = [];
  const watchers = new Map<string, (() => void)[]>();
  const open = new Set<http.ServerResponse>();

  /** Writes the list (or the page from `continue` of `limit` items) in chunks, minding backpressure. */
  async function writeList(res: http.ServerResponse, source: ItemSource, params: URLSearchParams): Promise<void> {
    const limit = Number(params.get('limit') ?? 0);
    const start = Number(params.get('continue') ?? 0);
    const end = limit > 0 ? Math.min(source.total, start + limit) : source.total;
    const metadata: Record<string, unknown> = { resourceVersion: RESOURCE_VERSION };
    if (end < source.total) Object.assign(metadata, { continue: String(end), remainingItemCount: source.total - end });
    res.writeHead(200, { 'content-type': 'application/json' });
    let chunk = `{"kind":"${source.kind}","apiVersion":"v1","metadata":${JSON.stringify(metadata)},"items":[`;
    for (let i = start; i < end; i++) {
      chunk += (i > start ? ',' : '') + source.item(i);
      if (chunk.length > 256 * 1024) {
        if (!res.write(chunk)) await new Promise((resolveDrain) => res.once('drain', resolveDrain));
        chunk = '';
        if (res.destroyed) return;
      }
    }
    res.end(`${chunk}]}`);
  }

  const server = http.createServer((req, res) => {
    const url = new URL(req.url ?? '/', 'http://localhost');
    const watch = url.searchParams.get('watch') === 'true' || url.searchParams.get('watch') === '1';
    const key = `${req.method} ${url.pathname}${watch ? ' (watch)' : ''}`;
    requests.set(key, (requests.get(key) ?? 0) + 1);
    if (req.method === 'POST' && /^\/api\/v1\/namespaces\/[^/]+\/events$/.test(url.pathname)) {
      const body: Buffer[] = [];
      req.on('data', (chunk: Buffer) => body.push(chunk));
      req.on('end', () => {
        res.writeHead(201, { 'content-type': 'application/json' });
        res.end(Buffer.concat(body));
      });
      return;
    }
    const lease = req.method === 'GET' ? LEASE_PATH.exec(url.pathname) : null;
    if (lease) {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify(leaseHeldByPeer(lease[1], lease[2])));
      return;
    }
    const source = req.method === 'GET' ? sources[url.pathname] : undefined;
    if (!source) {
      notFound.push(key);
      res.writeHead(404, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ kind: 'Status', apiVersion: 'v1', status: 'Failure', reason: 'NotFound', code: 404, message: `${key}: not served here` }));
      return;
    }
    if (watch) {
      res.writeHead(200, { 'content-type': 'application/json', 'transfer-encoding': 'chunked' });
      res.flushHeaders();
      open.add(res);
      res.on('close', () => open.delete(res));
      for (const resolveWatch of watchers.get(url.pathname) ?? []) resolveWatch();
      watchers.delete(url.pathname);
      return;
    }
    void writeList(res, source, url.searchParams).catch(() => res.destroy());
  });
  const port = await freePort();
  await new Promise<void>((resolveListen) => server.listen(port, '127.0.0.1', resolveListen));
  return {
    url: `http://127.0.0.1:${port}`,
    requests,
    notFound,
    watchOpened: (path) => new Promise((resolveWatch) => watchers.set(path, [...(watchers.get(path) ?? []), resolveWatch])),
    close: () =>
      new Promise((resolveClose) => {
        for (const res of open) res.destroy();
        server.close(() => resolveClose());
      }),
  };
}

function kubeconfig(server: string): string {
  return [
    'apiVersion: v1',
    'kind: Config',
    'clusters: [{ name: synthetic, cluster: { server: "' + server + '", insecure-skip-tls-verify: true } }]',
    'users: [{ name: bench, user: { token: synthetic } }]',
    'contexts: [{ name: synthetic, context: { cluster: synthetic, user: bench } }]',
    'current-context: synthetic',
    '',
  ].join('\n');
}

// ---------------------------------------------------------------------------------------------
// One webhook, one cluster

interface Round {
  p50Ms: number;
  p99Ms: number;
  maxMs: number;
  answered: number;
  failed: number;
  heapUsedMiB: number;
  rssMiB: number;
  vmRssMiB: number;
  /** V8's young generation as committed (both semi-spaces): how much a scavenge can free. */
  newSpaceMiB: number;
}

async function scrape(httpPort: number): Promise<{ heapUsed: number; rss: number; newSpace: number }> {
  const metrics = Metrics.parse(await httpText(`http://127.0.0.1:${httpPort}/metrics`));
  const value = (name: string, labels: LabelMatch = {}) => {
    const found = metrics.value(name, labels);
    if (found === undefined) throw new Error(`/metrics has no ${name} ${JSON.stringify(labels)}`);
    return found;
  };
  return {
    heapUsed: value('nodejs_heap_size_used_bytes'),
    rss: value('process_resident_memory_bytes'),
    newSpace: value('nodejs_heap_space_size_total_bytes', { space: 'new' }),
  };
}

async function measure(name: string, pods: number) {
  const dir = join(RUN_DIR, 'cache-scale', name);
  const api = await startSyntheticServer({
    '/api/v1/pods': podSource(pods, options.nodes, options.namespaces),
    '/api/v1/nodes': nodeSource(options.nodes),
    '/api/v1/namespaces': namespaceSource(options.namespaces),
    '/api/v1/limitranges': { kind: 'LimitRangeList', total: 0, item: () => '' },
  });
  const kubeconfigFile = join(dir, 'kubeconfig.yaml');
  const configFile = join(dir, 'config.yaml');
  const tls = await writeTls(join(dir, 'tls'));
  writeFileSync(kubeconfigFile, kubeconfig(api.url));
  // The floor reads the pod cache; the pod policy's cap (warn: it never denies) reads it and the Node cache.
  writeFileSync(configFile, 'nodes:\n  defaultRatios: { cpu: 1.5, memory: 1 }\n  commitmentFloor: true\npods:\n  cap: { mode: warn }\n');
  const [httpsPort, httpPort] = [await freePort(), await freePort()];
  const env = { ...oursEnv({ https: httpsPort, http: httpPort }, configFile, tls), OVERCOMMIT_KUBECONFIG: kubeconfigFile };
  const synced = Promise.all([api.watchOpened('/api/v1/pods'), api.watchOpened('/api/v1/nodes')]);
  const spawnedAt = performance.now();
  const server: ServerProcess = startProcess(name, [join(ROOT, 'dist', 'main.js')], env, httpsPort, dir, serverCgroup(name, options.memoryLimitMiB, log));
  const exited = new Promise<string>((resolveExit) => server.child.once('exit', (code, signal) => resolveExit(`exited (code ${code}, signal ${signal})`)));
  try {
    const outcome = await Promise.race([
      synced.then(() => 'synced'),
      exited,
      sleep(options.syncTimeoutS * 1000).then(() => `not synced after ${options.syncTimeoutS} s`),
    ]);
    const syncMs = round(performance.now() - spawnedAt, 0);
    const peakRssAtSyncMiB = outcome === 'synced' ? round(statusKiB(server.pid, 'VmHWM') / 1024, 1) : null;
    log(`${name}: ${pods} pods, ${options.nodes} nodes: ${outcome} ${syncMs} ms after spawn; peak RSS ${peakRssAtSyncMiB} MiB`);
    if (outcome !== 'synced')
      return {
        name,
        pods,
        outcome,
        syncMs,
        rounds: [] as Round[],
        requests: Object.fromEntries(api.requests),
        notFound: api.notFound,
        logFile: relative(ROOT, server.logFile),
      };

    const body = Buffer.from(JSON.stringify(nodeReview(kwokNode({ name: 'node-17' }))));
    await waitReady(server, body);
    await sleep(3_000);
    const rounds: Round[] = [];
    for (let r = 1; r <= options.rounds; r++) {
      const latencies = new Samples();
      let failed = 0;
      const load = (seconds: number, record: boolean) =>
        pacedLoad({
          url: server.url,
          body,
          rate: options.rate,
          seconds,
          connections: 8,
          onResponse: (response) => {
            if (!record) return;
            if (response.status === 200 && response.body.includes('"allowed":true')) latencies.push(response.done - response.due);
            else failed++;
          },
          onError: () => {
            if (record) failed++;
          },
        });
      await load(1, false);
      await load(options.seconds, true);
      await sleep(2_000);
      const metrics = await scrape(httpPort);
      const latency = latencies.summary();
      const record: Round = {
        p50Ms: latency.p50,
        p99Ms: latency.p99,
        maxMs: latency.max,
        answered: latency.count,
        failed,
        heapUsedMiB: round(metrics.heapUsed / 2 ** 20, 1),
        rssMiB: round(metrics.rss / 2 ** 20, 1),
        vmRssMiB: round(statusKiB(server.pid, 'VmRSS') / 1024, 1),
        newSpaceMiB: round(metrics.newSpace / 2 ** 20, 1),
      };
      rounds.push(record);
      log(
        `${name} round ${r}: ${options.rate} req/s × ${options.seconds} s: p50 ${record.p50Ms} ms, p99 ${record.p99Ms} ms, max ${record.maxMs} ms, ` +
          `${record.answered} answered, ${failed} failed; heap used ${record.heapUsedMiB} MiB (new space ${record.newSpaceMiB}), RSS ${record.rssMiB} MiB; load ${os.loadavg()[0].toFixed(2)}`,
      );
    }
    return {
      name,
      pods,
      outcome,
      syncMs,
      peakRssAtSyncMiB,
      median: {
        p99Ms: round(median(rounds.map((x) => x.p99Ms)), 2),
        p50Ms: round(median(rounds.map((x) => x.p50Ms)), 2),
        heapUsedMiB: round(median(rounds.map((x) => x.heapUsedMiB)), 1),
        rssMiB: round(median(rounds.map((x) => x.rssMiB)), 1),
      },
      peakRssMiB: round(statusKiB(server.pid, 'VmHWM') / 1024, 1),
      rounds,
      requests: Object.fromEntries(api.requests),
      notFound: api.notFound,
      logFile: relative(ROOT, server.logFile),
    };
  } finally {
    await server.stop();
    await api.close();
  }
}

// ---------------------------------------------------------------------------------------------

async function main(): Promise<number> {
  log(
    `options: ${options.nodes} nodes, ${options.pods} pods; node reviews at ${options.rate} req/s × ${options.seconds} s × ${options.rounds} rounds; ` +
      `memory limit ${options.memoryLimitMiB || 'none'} MiB, NODE_OPTIONS=${DEPLOYMENT_NODE_OPTIONS}`,
  );

  const empty = await measure('no-pods', 0);
  const full = await measure('pods', options.pods);
  const failures = [empty, full].flatMap((m) => [
    ...(m.outcome === 'synced' ? [] : [`${m.name}: ${m.outcome}`]),
    ...m.notFound.map((key) => `${m.name}: the webhook asked for ${key}, which the synthetic server does not serve`),
    ...m.rounds.filter((r) => r.failed > 0).map((r) => `${m.name}: ${r.failed} reviews failed`),
  ]);
  const withPods = 'median' in full ? full.median : undefined;
  const noPods = 'median' in empty ? empty.median : undefined;
  const bytesPerPod = withPods && noPods && options.pods > 0 ? Math.round(((withPods.heapUsedMiB - noPods.heapUsedMiB) * 2 ** 20) / options.pods) : null;
  const report = {
    benchmark: 'cache-scale',
    command: bench.command,
    startedAt: bench.startedAt.toISOString(),
    finishedAt: new Date().toISOString(),
    machine: { ...machineInfo(), loadAvgAtStart: bench.loadAvgAtStart, loadAvgAtEnd: loadAvg() },
    options: { ...options, nodeOptions: DEPLOYMENT_NODE_OPTIONS },
    bytesPerPod,
    heapMiB: withPods?.heapUsedMiB ?? null,
    rssMiB: withPods?.rssMiB ?? null,
    p99Ms: withPods?.p99Ms ?? null,
    baseline: noPods ? { heapMiB: noPods.heapUsedMiB, rssMiB: noPods.rssMiB, p99Ms: noPods.p99Ms } : null,
    targets: {
      bytesPerPod: { target: '<= 600', pass: bytesPerPod !== null && bytesPerPod <= 600 },
      fitsLimit: { target: `synced and serving under ${options.memoryLimitMiB} MiB`, pass: full.outcome === 'synced' && failures.length === 0 },
      p99Ms: { target: `<= 5 ms at ${options.rate} req/s`, pass: withPods !== undefined && withPods.p99Ms <= 5 },
    },
    runs: { noPods: empty, pods: full },
    failures,
  };
  writeFileSync(outFile, `${JSON.stringify(report, null, 2)}\n`);
  log(
    `\nmedians over ${options.rounds} rounds — with ${options.pods} pods: heap ${report.heapMiB} MiB, RSS ${report.rssMiB} MiB, p99 ${report.p99Ms} ms; ` +
      `no pods: heap ${report.baseline?.heapMiB} MiB, RSS ${report.baseline?.rssMiB} MiB, p99 ${report.baseline?.p99Ms} ms; heap per pod ${bytesPerPod} B`,
  );
  log(failures.length ? `FAILURES:\n  ${failures.join('\n  ')}` : 'failures: none');
  log(`wrote ${relative(process.cwd(), outFile)}`);
  return failures.length ? 1 : 0;
}
