/**
 * Many simulated kubelets in one Node process, cheap enough for 1,000 of them (issue 4, parts 2
 * and 3). The e2e harness's SimKubelet is made for a handful of nodes per test: one https.Agent
 * (and so one TLS connection pool) per kubelet, a quorum GET of its Node at every sync, a GET +
 * PUT per Lease renewal, and 500 recorded updates each. This fleet follows the same status
 * algorithm — the harness's registration Node (`kubeletNode`), Lease bodies (`nodeLease`,
 * `renewedLease`), `kubeletStatus`, `nodeStatusHasChanged` and two-way strategic merge
 * `diffObject` are reused as they are — but shares one keep-alive agent between all kubelets
 * (each request still carries its own node's token, so the API server sees
 * `system:node:<name>`), keeps only counters and latency samples, and reads and renews the way
 * a v1.34 kubelet does
 * (pkg/kubelet/kubelet_node_status.go, component-helpers/apimachinery/lease):
 *
 * - every `updateFrequencyMs` (wait.JitterUntil, jitter 0.04, sliding): read the Node — the
 *   kubelet's first try reads its informer's lister (a watch on its own Node). `read: 'lister'`
 *   (default) stands in for it with the last Node the API server answered this kubelet
 *   (registration, then each PATCH answer): what the watch delivers when the kubelet is the only
 *   writer of its Node's status, as here, at no request cost; `read: 'get'` GETs
 *   `?resourceVersion=0` instead (served from the API server's watch cache: one more request per
 *   sync). Retries (up to 5 tries) GET from etcd, as the kubelet's do —, compute the status, and
 *   PATCH `nodes/<name>/status` with the strategic merge patch of
 *   what differs, if anything but heartbeat times changed, or if `reportFrequencyMs +
 *   delayAfterNodeStatusChange` passed since the last PATCH. The delay is the kubelet's one-time
 *   random delay, uniform in ±50 % of the report frequency, drawn at every PATCH caused by a change
 *   (0 after a PATCH caused by the report period);
 * - a Lease in kube-node-lease renewed every 25 % of its duration (jitter 0.04) by a PUT of the
 *   lease last written (GET only after a failure), as the kubelet's lease controller does.
 *
 * What the kubelet does that this does not: one watch per node (the API server sends each write of
 * a Node to its kubelet's watch; writes by others — the TTL controller's annotation, taints —
 * reach the kubelet's lister but never change its status diff), HTTP/2 (one connection per kubelet), volumes, pod CIDR, the fast status updates
 * before the node is Ready.
 */
import https from 'node:https';
import { readFileSync } from 'node:fs';
import type { E2eEnv } from '../test/support/env.js';
import { kubeletNode, kubeletStatus, NO_KUBELET_TAINT, nodeLease, nodeStatusHasChanged, renewedLease } from '../test/support/sim-kubelet.js';
import { diffObject } from '../test/support/strategic-merge.js';
import { kubeadmNode } from '../test/fixtures/nodes.js';
import { Samples, type LatencySummary } from './lib.js';

export interface FleetOptions {
  names: string[];
  /** Real capacity and allocatable of every node (default: the kubeadm fixture's 4-CPU, 16 GiB worker). */
  capacity?: Record<string, string>;
  allocatable?: Record<string, string>;
  /** status.images entries (the kubelet reports up to nodeStatusMaxImages, default 50). */
  images: number;
  /** nodeStatusUpdateFrequency (kubelet default 10 s). */
  updateFrequencyMs: number;
  /** nodeStatusReportFrequency (kubelet default 5 min). */
  reportFrequencyMs: number;
  /** Lease duration (kubelet default 40 s; renewed every quarter of it). */
  leaseDurationSeconds: number;
  /** Each kubelet starts (registers) at a uniformly random offset in [0, startSpreadMs). */
  startSpreadMs: number;
  /** How the first try of a sync reads the Node (see above; default `lister`). */
  read?: 'lister' | 'get';
  /** Sockets of the shared keep-alive agent. */
  maxSockets: number;
  /** Called with every successful status PATCH's answer (the Node as stored, after admission). */
  onPatched?: (name: string, node: any, at: number) => void;
}

/** Cumulative counters (snapshot + subtract for a window). */
export interface FleetCounters {
  registered: number;
  registerFailures: number;
  syncs: number;
  skipped: number;
  patchAttempts: number;
  patchOk: number;
  patchFailures: number;
  patchChanged: number;
  patchReport: number;
  cacheGets: number;
  quorumGets: number;
  getFailures: number;
  leaseRenewals: number;
  leaseFailures: number;
  patchBodyBytes: number;
  patchResponseBytes: number;
  getResponseBytes: number;
}

const ZERO: FleetCounters = {
  registered: 0,
  registerFailures: 0,
  syncs: 0,
  skipped: 0,
  patchAttempts: 0,
  patchOk: 0,
  patchFailures: 0,
  patchChanged: 0,
  patchReport: 0,
  cacheGets: 0,
  quorumGets: 0,
  getFailures: 0,
  leaseRenewals: 0,
  leaseFailures: 0,
  patchBodyBytes: 0,
  patchResponseBytes: 0,
  getResponseBytes: 0,
};

export function subtractCounters(after: FleetCounters, before: FleetCounters): FleetCounters {
  const out = { ...ZERO };
  for (const key of Object.keys(ZERO) as (keyof FleetCounters)[]) out[key] = after[key] - before[key];
  return out;
}

/** Latency samples of one measurement window. */
export interface FleetWindow {
  /** PATCH nodes/status round trip, ms. */
  patchMs: Samples;
  /** Whole sync (GET + compute + PATCH if any), ms. */
  syncMs: Samples;
  /** How late the status-loop timers fired (actual − intended), ms: the load generator's own lag. */
  tickLateMs: Samples;
  /** Lease PUT round trip, ms. */
  leaseMs: Samples;
  /** Seconds between two consecutive status PATCHes of the same node. */
  patchIntervalS: Samples;
}

export interface FleetWindowSummary {
  patchMs: LatencySummary;
  syncMs: LatencySummary;
  tickLateMs: LatencySummary;
  leaseMs: LatencySummary;
  patchIntervalS: LatencySummary;
}

function newWindow(): FleetWindow {
  return { patchMs: new Samples(), syncMs: new Samples(), tickLateMs: new Samples(), leaseMs: new Samples(), patchIntervalS: new Samples() };
}

interface Reply {
  status: number;
  text: string;
  bytes: number;
}

class Sim {
  readonly auth: string;
  readonly nodePath: string;
  readonly leasePath: string;
  lastReport = 0;
  delayAfterChange = 0;
  lastPatchAt = 0;
  uid?: string;
  /** The last Node the API server answered (the lister stand-in). */
  stored?: any;
  lease?: any;
  timer?: NodeJS.Timeout;
  leaseTimer?: NodeJS.Timeout;
  /** When the status timer was meant to fire. */
  dueAt = 0;
  busy?: Promise<void>;

  constructor(readonly name: string) {
    this.auth = `Bearer node-${name}`;
    this.nodePath = `/api/v1/nodes/${name}`;
    this.leasePath = `/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/${name}`;
  }
}

export class Fleet {
  readonly counters: FleetCounters = { ...ZERO };
  /** The first failures' messages (at most 50). */
  readonly errors: string[] = [];
  window: FleetWindow = newWindow();
  /** Bytes of one registration (POST body) and of the last stored Node (JSON), for the size figures. */
  sizes = { registerBodyBytes: 0, storedNodeJsonBytes: 0 };

  private readonly agent: https.Agent;
  private readonly url: URL;
  private readonly sims: Sim[];
  private readonly capacity: Record<string, string>;
  private readonly allocatable: Record<string, string>;
  private readonly images: any[];
  private readonly nodeInfo: Record<string, string>;
  private stopped = false;
  private inFlight = new Set<Promise<unknown>>();

  constructor(
    readonly env: E2eEnv,
    readonly options: FleetOptions,
  ) {
    this.url = new URL(env.apiserverUrl);
    this.agent = new https.Agent({ ca: readFileSync(env.caFile), keepAlive: true, maxSockets: options.maxSockets });
    this.sims = options.names.map((name) => new Sim(name));
    const fixture = kubeadmNode({ images: options.images });
    this.capacity = { ...(options.capacity ?? fixture.status.capacity) };
    this.allocatable = { ...(options.allocatable ?? options.capacity ?? fixture.status.allocatable) };
    this.images = options.images > 0 ? fixture.status.images : [];
    this.nodeInfo = { ...fixture.status.nodeInfo, kubeletVersion: env.k8sVersion, kernelVersion: '6.1.0-bench' };
  }

  get size(): number {
    return this.sims.length;
  }

  get rawCapacity(): Record<string, string> {
    return { ...this.capacity };
  }

  get rawAllocatable(): Record<string, string> {
    return { ...this.allocatable };
  }

  /** Starts a new measurement window (latency samples); returns the previous one. */
  newWindow(): FleetWindow {
    const previous = this.window;
    this.window = newWindow();
    return previous;
  }

  static summarize(window: FleetWindow): FleetWindowSummary {
    return {
      patchMs: window.patchMs.summary(),
      syncMs: window.syncMs.summary(),
      tickLateMs: window.tickLateMs.summary(),
      leaseMs: window.leaseMs.summary(),
      patchIntervalS: window.patchIntervalS.summary(),
    };
  }

  snapshot(): FleetCounters {
    return { ...this.counters };
  }

  /**
   * Registers every node (POST, then its Lease) at a random offset within startSpreadMs and
   * starts its loops: the first status sync at a random time within one update period after
   * registration, then every updateFrequencyMs. Resolves when every node has registered (or
   * failed to).
   */
  async start(): Promise<void> {
    await Promise.all(
      this.sims.map(
        (sim) =>
          new Promise<void>((resolve) => {
            const offset = Math.random() * this.options.startSpreadMs;
            setTimeout(() => {
              void this.track(this.register(sim))
                .then((ok) => {
                  if (!ok || this.stopped) return;
                  // Status loops at uniformly random phases, as in a cluster whose kubelets started
                  // at different times (registrations can bunch up behind a slow API server).
                  this.scheduleSync(sim, Math.random() * this.options.updateFrequencyMs);
                  this.scheduleLease(sim, this.renewIntervalMs());
                })
                .finally(resolve);
            }, offset);
          }),
      ),
    );
  }

  /** Stops every loop and waits (at most 5 s) for the requests in flight. */
  async stop(): Promise<void> {
    this.stopped = true;
    for (const sim of this.sims) {
      clearTimeout(sim.timer);
      clearTimeout(sim.leaseTimer);
    }
    await Promise.race([Promise.allSettled([...this.inFlight]), new Promise((r) => setTimeout(r, 5_000).unref())]);
    this.agent.destroy();
  }

  /** Runs one status sync of every node now (after any in flight); for tests of the fleet. */
  async syncAll(): Promise<void> {
    await Promise.all(this.sims.map((sim) => this.sync(sim)));
  }

  // --- internals -------------------------------------------------------------------------

  private renewIntervalMs(): number {
    return (this.options.leaseDurationSeconds * 1000) / 4;
  }

  private track<T>(promise: Promise<T>): Promise<T> {
    this.inFlight.add(promise);
    void promise.finally(() => this.inFlight.delete(promise)).catch(() => undefined);
    return promise;
  }

  private failure(kind: string, sim: Sim, message: string): void {
    if (this.errors.length < 50) this.errors.push(`${new Date().toISOString()} ${sim.name} ${kind}: ${message.slice(0, 300)}`);
  }

  private request(method: string, path: string, auth: string, body?: string, contentType = 'application/json', accept = 'application/json'): Promise<Reply> {
    return new Promise((resolve, reject) => {
      const headers: Record<string, string | number> = { authorization: auth, accept };
      if (body !== undefined) {
        headers['content-type'] = contentType;
        headers['content-length'] = Buffer.byteLength(body);
      }
      const req = https.request(
        { protocol: 'https:', hostname: this.url.hostname, port: this.url.port, path, method, agent: this.agent, headers, timeout: 30_000 },
        (res) => {
          const chunks: Buffer[] = [];
          res.on('data', (c: Buffer) => chunks.push(c));
          res.on('end', () => {
            const buffer = Buffer.concat(chunks);
            resolve({ status: res.statusCode ?? 0, text: accept === 'application/json' ? buffer.toString('utf8') : '', bytes: buffer.length });
          });
          res.on('error', reject);
        },
      );
      req.on('timeout', () => req.destroy(new Error(`${method} ${path}: no answer within 30 s`)));
      req.on('error', reject);
      req.end(body);
    });
  }

  private desiredStatus(original: any, name: string): any {
    return kubeletStatus(original, { name, capacity: this.capacity, allocatable: this.allocatable, nodeInfo: this.nodeInfo, images: this.images });
  }

  private async register(sim: Sim): Promise<boolean> {
    // Nothing runs pods here: the Deployment of k8s/base stays Pending, as in the e2e tests.
    const node = kubeletNode(sim.name, {
      labels: { 'bench.kube-overcommit.io/fleet': 'true' },
      taints: [NO_KUBELET_TAINT],
      status: this.desiredStatus({}, sim.name),
    });
    const body = JSON.stringify(node);
    this.sizes.registerBodyBytes = Buffer.byteLength(body);
    try {
      let reply = await this.request('POST', '/api/v1/nodes', sim.auth, body);
      if (reply.status === 409) reply = await this.request('GET', sim.nodePath, sim.auth);
      if (reply.status < 200 || reply.status >= 300) throw new Error(`HTTP ${reply.status}: ${reply.text.slice(0, 300)}`);
      sim.stored = JSON.parse(reply.text);
      sim.uid = sim.stored.metadata?.uid;
      await this.ensureLease(sim);
      this.counters.registered++;
      return true;
    } catch (error) {
      this.counters.registerFailures++;
      this.failure('register', sim, (error as Error).message);
      return false;
    }
  }

  private scheduleSync(sim: Sim, delayMs: number): void {
    if (this.stopped) return;
    sim.dueAt = performance.now() + delayMs;
    sim.timer = setTimeout(() => {
      this.window.tickLateMs.push(performance.now() - sim.dueAt);
      const t0 = performance.now();
      sim.busy = this.track(this.sync(sim)).then(() => {
        this.window.syncMs.push(performance.now() - t0);
        // wait.JitterUntil(syncNodeStatus, nodeStatusUpdateFrequency, 0.04, sliding=true)
        this.scheduleSync(sim, this.options.updateFrequencyMs * (1 + Math.random() * 0.04));
      });
    }, delayMs);
  }

  private scheduleLease(sim: Sim, delayMs: number): void {
    if (this.stopped) return;
    sim.leaseTimer = setTimeout(() => {
      void this.track(this.renewLease(sim)).then(() => this.scheduleLease(sim, this.renewIntervalMs() * (1 + Math.random() * 0.04)));
    }, delayMs);
  }

  /** tryUpdateNodeStatus with nodeStatusUpdateRetry = 5. */
  private async sync(sim: Sim): Promise<void> {
    if (this.stopped) return;
    this.counters.syncs++;
    for (let attempt = 0; attempt < 5 && !this.stopped; attempt++) {
      let original: any;
      if (attempt === 0 && (this.options.read ?? 'lister') === 'lister' && sim.stored) {
        original = sim.stored;
      } else {
        try {
          const reply = await this.request('GET', attempt === 0 ? `${sim.nodePath}?resourceVersion=0` : sim.nodePath, sim.auth);
          if (attempt === 0) this.counters.cacheGets++;
          else this.counters.quorumGets++;
          this.counters.getResponseBytes += reply.bytes;
          if (reply.status !== 200) throw new Error(`HTTP ${reply.status}: ${reply.text.slice(0, 300)}`);
          original = JSON.parse(reply.text);
          sim.stored = original;
        } catch (error) {
          this.counters.getFailures++;
          this.failure('get', sim, (error as Error).message);
          continue;
        }
      }
      const desired = this.desiredStatus(original.status, sim.name);
      const changed = nodeStatusHasChanged(original.status, desired);
      const now = Date.now();
      const expired = sim.lastReport === 0 || now - sim.lastReport >= this.options.reportFrequencyMs + sim.delayAfterChange;
      if (!changed && !expired) {
        this.counters.skipped++;
        return;
      }
      // A new one-time random delay after a change (or the first report); none after a periodic report.
      sim.delayAfterChange = changed || sim.lastReport === 0 ? this.options.reportFrequencyMs * (Math.random() - 0.5) : 0;
      const patch = diffObject({ status: original.status ?? {} }, { status: desired }) ?? {};
      const body = JSON.stringify(patch);
      this.counters.patchAttempts++;
      if (changed) this.counters.patchChanged++;
      else this.counters.patchReport++;
      this.counters.patchBodyBytes += Buffer.byteLength(body);
      const t0 = performance.now();
      try {
        const reply = await this.request('PATCH', `${sim.nodePath}/status`, sim.auth, body, 'application/strategic-merge-patch+json');
        if (reply.status !== 200) throw new Error(`HTTP ${reply.status}: ${reply.text.slice(0, 300)}`);
        const at = Date.now();
        this.window.patchMs.push(performance.now() - t0);
        this.counters.patchOk++;
        this.counters.patchResponseBytes += reply.bytes;
        this.sizes.storedNodeJsonBytes = reply.bytes;
        if (sim.lastPatchAt > 0) this.window.patchIntervalS.push((at - sim.lastPatchAt) / 1000);
        sim.lastPatchAt = at;
        sim.lastReport = at;
        sim.stored = JSON.parse(reply.text);
        if (this.options.onPatched) this.options.onPatched(sim.name, sim.stored, at);
        return;
      } catch (error) {
        this.counters.patchFailures++;
        this.failure('patch', sim, (error as Error).message);
      }
    }
  }

  /** GET the Lease, or create it. */
  private async ensureLease(sim: Sim): Promise<void> {
    const got = await this.request('GET', sim.leasePath, sim.auth);
    if (got.status === 200) {
      sim.lease = JSON.parse(got.text);
      return;
    }
    if (got.status !== 404) throw new Error(`GET lease: HTTP ${got.status}: ${got.text.slice(0, 300)}`);
    const created = await this.request(
      'POST',
      '/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases',
      sim.auth,
      JSON.stringify(nodeLease(sim.name, this.options.leaseDurationSeconds, sim.uid)),
    );
    if (created.status !== 201 && created.status !== 200) throw new Error(`POST lease: HTTP ${created.status}: ${created.text.slice(0, 300)}`);
    sim.lease = JSON.parse(created.text);
  }

  private async renewLease(sim: Sim): Promise<void> {
    if (this.stopped) return;
    try {
      if (!sim.lease) await this.ensureLease(sim);
      const t0 = performance.now();
      const reply = await this.request('PUT', sim.leasePath, sim.auth, JSON.stringify(renewedLease(sim.lease, sim.name, this.options.leaseDurationSeconds)));
      if (reply.status !== 200) {
        sim.lease = undefined; // GET it again next time (conflict, deleted, ...)
        throw new Error(`PUT lease: HTTP ${reply.status}: ${reply.text.slice(0, 300)}`);
      }
      this.window.leaseMs.push(performance.now() - t0);
      sim.lease = JSON.parse(reply.text);
      this.counters.leaseRenewals++;
    } catch (error) {
      this.counters.leaseFailures++;
      this.failure('lease', sim, (error as Error).message);
    }
  }
}
