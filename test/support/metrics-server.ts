/**
 * metrics.k8s.io for the e2e tests and benches, from real parts: metrics-server (built from its Go
 * module by control-plane/build-metrics-server.sh) served through kube-apiserver's aggregation
 * layer (the front-proxy certificates and requestheader flags of cluster.sh; an APIService whose
 * Service is an ExternalName `localhost`, so the API server reaches it on this machine without a
 * Service network), scraping simulated kubelets' `/metrics/resource` (ResourceMetricsEndpoint)
 * whose usage the test sets.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { closeSync, mkdirSync, openSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:https';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import type { E2eEnv } from './env.js';
import { adminClient, type KubeClient } from './kube-client.js';
import { freePort, run, type Log } from './process.js';
import { createCa, issueServingCertificate } from './tls.js';
import { waitUntil } from './wait.js';

const APISERVICE = 'v1beta1.metrics.k8s.io';
const SERVICE = { namespace: 'kube-system', name: 'metrics-server' };
/** metrics-server's smallest --metric-resolution. */
export const METRIC_RESOLUTION_S = 10;

/** Runs build-metrics-server.sh (a no-op when its stamp matches). */
export async function buildMetricsServer(env: E2eEnv, log?: Log): Promise<void> {
  await run(join(env.repoRoot, 'test', 'e2e', 'control-plane', 'build-metrics-server.sh'), [], { ...(log ? { log, prefix: '  ' } : {}) });
}

/** The usage one simulated kubelet reports: its node's, and each pod's (one container `app` each). */
export interface NodeUsage {
  /** Cores. */
  cpu: number;
  /** Bytes. */
  memory: number;
  pods: Array<{ namespace: string; name: string; cpu: number; memory: number }>;
}

/**
 * A kubelet's `/metrics/resource` (Prometheus text, with timestamps) over HTTPS for one node,
 * with the usage `set` says: CPU as cumulative seconds that advance at the set rate between
 * scrapes, as the kubelet's counters do; memory as working-set bytes.
 */
export class ResourceMetricsEndpoint {
  private usage: NodeUsage = { cpu: 0.05, memory: 64 * 1024 ** 2, pods: [] };
  private nodeSeconds = 0;
  private readonly podSeconds = new Map<string, number>();
  private last = Date.now();
  private readonly started = Math.floor(Date.now() / 1000) - 60;
  private server?: Server;
  scrapes = 0;

  constructor(readonly node: string) {}

  static async start(node: string, tls: { cert: string; key: string }): Promise<ResourceMetricsEndpoint> {
    const endpoint = new ResourceMetricsEndpoint(node);
    endpoint.server = createServer({ cert: tls.cert, key: tls.key }, (req, res) => {
      if (req.url?.split('?')[0] !== '/metrics/resource') {
        res.writeHead(404).end();
        return;
      }
      endpoint.scrapes += 1;
      res.writeHead(200, { 'content-type': 'text/plain; version=0.0.4' }).end(endpoint.render());
    });
    await new Promise<void>((resolve) => endpoint.server!.listen(0, '127.0.0.1', resolve));
    return endpoint;
  }

  get port(): number {
    return (this.server!.address() as AddressInfo).port;
  }

  set(usage: NodeUsage): void {
    this.advance();
    this.usage = structuredClone(usage);
  }

  private advance(): void {
    const now = Date.now();
    const dt = (now - this.last) / 1000;
    this.last = now;
    this.nodeSeconds += this.usage.cpu * dt;
    for (const pod of this.usage.pods) {
      const key = `${pod.namespace}/${pod.name}`;
      this.podSeconds.set(key, (this.podSeconds.get(key) ?? 0) + pod.cpu * dt);
    }
  }

  private render(): string {
    this.advance();
    const ts = this.last;
    // metrics-server drops a series whose cumulative CPU or memory is 0.
    const lines = [
      '# TYPE node_cpu_usage_seconds_total counter',
      `node_cpu_usage_seconds_total ${this.nodeSeconds + 1} ${ts}`,
      '# TYPE node_memory_working_set_bytes gauge',
      `node_memory_working_set_bytes ${Math.max(1, Math.round(this.usage.memory))} ${ts}`,
      '# TYPE container_cpu_usage_seconds_total counter',
    ];
    const label = (pod: { namespace: string; name: string }) => `{container="app",namespace="${pod.namespace}",pod="${pod.name}"}`;
    for (const pod of this.usage.pods)
      lines.push(`container_cpu_usage_seconds_total${label(pod)} ${(this.podSeconds.get(`${pod.namespace}/${pod.name}`) ?? 0) + 1} ${ts}`);
    lines.push('# TYPE container_memory_working_set_bytes gauge');
    for (const pod of this.usage.pods) lines.push(`container_memory_working_set_bytes${label(pod)} ${Math.max(1, Math.round(pod.memory))} ${ts}`);
    lines.push('# TYPE container_start_time_seconds gauge');
    for (const pod of this.usage.pods) lines.push(`container_start_time_seconds${label(pod)} ${this.started} ${ts}`);
    lines.push('# TYPE scrape_error gauge', 'scrape_error 0', '');
    return lines.join('\n');
  }

  async stop(): Promise<void> {
    const server = this.server;
    if (!server) return;
    this.server = undefined;
    server.closeAllConnections();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  }
}

/**
 * Marks a bound pod Running, as its kubelet would once its containers started: metrics-server
 * serves PodMetrics only for Running pods (its pod informer selects status.phase=Running), and
 * no simulated kubelet runs containers.
 */
export async function markRunning(client: KubeClient, namespace: string, name: string): Promise<void> {
  const now = new Date().toISOString().replace(/\.\d{3}Z$/, 'Z');
  await client.patch(
    `/api/v1/namespaces/${namespace}/pods/${name}/status`,
    { status: { phase: 'Running', startTime: now, conditions: [{ type: 'Ready', status: 'True', lastTransitionTime: now }] } },
    'merge',
  );
}

/** One serving certificate for every ResourceMetricsEndpoint of a run (metrics-server runs with --kubelet-insecure-tls). */
export async function kubeletServingCertificate(env: E2eEnv): Promise<{ cert: string; key: string }> {
  const dir = join(env.runDir, 'kubelet-pki', String(process.pid));
  const ca = await createCa(dir, 'kube-overcommit-e2e-kubelet-ca');
  const { cert, key } = await issueServingCertificate(ca, join(dir, 'work'), { ips: ['127.0.0.1'], commonName: 'sim-kubelet' });
  return { cert, key };
}

/**
 * metrics-server as a process of the run (its pid file in env.pidDir, so `cluster.sh down` stops
 * a leftover), registered as the APIService v1beta1.metrics.k8s.io. `stop` and `start` again
 * leave the APIService in place: the API server then answers 503 for metrics.k8s.io.
 */
export class MetricsServer {
  private child?: ChildProcess;
  private port?: number;
  private instances = 0;

  constructor(readonly env: E2eEnv) {}

  get running(): boolean {
    return this.child !== undefined && this.child.exitCode === null && this.child.signalCode === null;
  }

  /** Starts it (the same port again after a stop) and waits until metrics.k8s.io answers through the API server. */
  async start(log?: Log): Promise<void> {
    if (this.running) throw new Error('metrics-server is already running');
    await buildMetricsServer(this.env, log);
    this.port ??= await freePort();
    const dir = join(this.env.runDir, 'metrics-server');
    mkdirSync(dir, { recursive: true });
    const fd = openSync(join(this.env.logDir, `metrics-server-${process.pid}-${++this.instances}.log`), 'a');
    const kubeconfig = this.env.adminKubeconfig;
    const child = spawn(
      join(this.env.binDir, 'metrics-server'),
      [
        `--kubeconfig=${kubeconfig}`,
        `--authentication-kubeconfig=${kubeconfig}`,
        `--authorization-kubeconfig=${kubeconfig}`,
        '--bind-address=127.0.0.1',
        `--secure-port=${this.port}`,
        `--cert-dir=${join(dir, 'certs')}`,
        '--kubelet-insecure-tls',
        '--kubelet-preferred-address-types=InternalIP',
        '--kubelet-use-node-status-port',
        `--metric-resolution=${METRIC_RESOLUTION_S}s`,
        '--kubelet-request-timeout=5s',
        '--v=1',
      ],
      { stdio: ['ignore', fd, fd] },
    );
    closeSync(fd);
    this.child = child;
    writeFileSync(join(this.env.pidDir, `metrics-server-${process.pid}.pid`), String(child.pid));
    const admin = adminClient(this.env);
    try {
      await this.register(admin);
      await waitUntil(
        'metrics.k8s.io served through the aggregation layer',
        async () => {
          if (!this.running) throw new Error(`metrics-server exited (${child.exitCode ?? child.signalCode}); see ${this.env.logDir}`);
          return (await admin.get('/apis/metrics.k8s.io/v1beta1/nodes').catch(() => undefined)) !== undefined;
        },
        { timeoutMs: 60_000, intervalMs: 500 },
      );
    } finally {
      admin.close();
    }
  }

  /** The Service (ExternalName localhost) and the APIService pointing at this process's port. */
  private async register(admin: KubeClient): Promise<void> {
    const service = {
      apiVersion: 'v1',
      kind: 'Service',
      metadata: { name: SERVICE.name, namespace: SERVICE.namespace },
      spec: { type: 'ExternalName', externalName: 'localhost', ports: [{ name: 'https', port: this.port }] },
    };
    const apiService = {
      apiVersion: 'apiregistration.k8s.io/v1',
      kind: 'APIService',
      metadata: { name: APISERVICE },
      spec: {
        group: 'metrics.k8s.io',
        version: 'v1beta1',
        service: { ...SERVICE, port: this.port },
        insecureSkipTLSVerify: true,
        groupPriorityMinimum: 100,
        versionPriority: 100,
      },
    };
    await admin.post(`/api/v1/namespaces/${SERVICE.namespace}/services`, service).catch((error) => {
      if (error?.status !== 409) throw error;
    });
    await admin.post('/apis/apiregistration.k8s.io/v1/apiservices', apiService).catch(async (error) => {
      if (error?.status !== 409) throw error;
      const current = await admin.get(`/apis/apiregistration.k8s.io/v1/apiservices/${APISERVICE}`);
      await admin.put(`/apis/apiregistration.k8s.io/v1/apiservices/${APISERVICE}`, { ...apiService, metadata: current.metadata });
    });
  }

  /** Stops the process (SIGTERM); the APIService stays, unavailable. */
  async stop(): Promise<void> {
    const child = this.child;
    if (!child || !this.running) return;
    const exited = new Promise((resolve) => child.once('exit', resolve));
    child.kill('SIGTERM');
    await exited;
    this.child = undefined;
  }

  /** Stops it and removes the APIService and the Service. */
  async remove(): Promise<void> {
    await this.stop();
    const admin = adminClient(this.env);
    try {
      await admin.delete(`/apis/apiregistration.k8s.io/v1/apiservices/${APISERVICE}`).catch(() => undefined);
      await admin.delete(`/api/v1/namespaces/${SERVICE.namespace}/services/${SERVICE.name}`).catch(() => undefined);
    } finally {
      admin.close();
    }
    rmSync(join(this.env.pidDir, `metrics-server-${process.pid}.pid`), { force: true });
  }
}
