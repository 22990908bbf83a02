import { spawn, type ChildProcess } from 'node:child_process';
import { closeSync, existsSync, openSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import https from 'node:https';
import { join } from 'node:path';
import { parse } from 'yaml';
import { applyConfig, configYaml } from './config.js';
import type { E2eEnv } from './env.js';
import { Metrics } from './metrics.js';
import { alive, createMemoryCgroup, inCgroup } from './process.js';
import { issueServingCertificate, servedCertificate, writeSecretVolume } from './tls.js';
import { waitUntil } from './wait.js';

export interface WebhookOptions {
  /** LOG_LEVEL (default `info`; `debug` logs one line per admission decision). */
  logLevel?: string;
  /** OVERCOMMIT_SHUTDOWN_DELAY_MS: how long SIGTERM drains before closing (default 200 here; 5000 in the product). */
  shutdownDelayMs?: number;
  /** More environment for the process. */
  env?: Record<string, string>;
  /**
   * Run in a memory cgroup at this limit (MiB), as in the pod (benchmarks). Where cgroups are
   * not writable it runs without one: `memoryLimitMiB` then reads null.
   */
  memoryLimitMiB?: number;
}

/** The webhook container of k8s/base/deployment.yaml, as shipped. */
export function deploymentWebhookContainer(repoRoot: string): {
  env?: { name: string; value?: string }[];
  resources?: { limits?: Record<string, string> };
} {
  const deployment = parse(readFileSync(join(repoRoot, 'k8s', 'base', 'deployment.yaml'), 'utf8'));
  const container = deployment.spec.template.spec.containers.find((c: { name: string }) => c.name === 'webhook');
  if (!container) throw new Error('k8s/base/deployment.yaml has no container named webhook');
  return container;
}

/**
 * NODE_OPTIONS of the webhook container ('' when it sets none): the V8 settings the pod runs
 * with, which every webhook the tests and benchmarks start runs with too.
 */
export function deploymentNodeOptions(repoRoot: string): string {
  return deploymentWebhookContainer(repoRoot).env?.find((e) => e.name === 'NODE_OPTIONS')?.value ?? '';
}

/**
 * GET on a local server: http, or https without checking the certificate (a server of this run,
 * e.g. the webhook's /metrics or etcd's); any status.
 */
export function httpGet(url: string, timeoutMs = 5_000): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const options = { timeout: timeoutMs, rejectUnauthorized: false };
    const req = (url.startsWith('https:') ? https : http).get(url, options, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body: Buffer.concat(chunks).toString('utf8') }));
      res.on('error', reject);
    });
    req.on('timeout', () => req.destroy(new Error(`GET ${url}: timeout`)));
    req.on('error', reject);
  });
}

/** httpGet's body; any status but 200 is an error. */
export async function httpText(url: string, timeoutMs = 10_000): Promise<string> {
  const { status, body } = await httpGet(url, timeoutMs);
  if (status !== 200) throw new Error(`GET ${url}: HTTP ${status}`);
  return body;
}

let instances = 0;

/** Node's compile cache in the app folder, as NODE_COMPILE_CACHE is /app/.compile-cache in the image. */
export function compileCacheDir(appDir: string): string {
  return join(appDir, '.compile-cache');
}

/**
 * The product as the image runs it: `node dist/main.js` (from env.webhook.appDir: the build
 * output and production dependencies only), in "in cluster" mode through a kubeconfig holding
 * the kube-overcommit ServiceAccount's token, serving the certificate in the Secret-like
 * env.webhook.tlsDir on the port the MutatingWebhookConfiguration points at.
 *
 * One per test file at a time (they share the port):
 *   const webhook = new WebhookProcess(env);
 *   await webhook.start();            // resolves when /readyz is 200
 *   ...
 *   await webhook.stop();             // SIGTERM, waits for the exit
 */
export class WebhookProcess {
  private child?: ChildProcess;
  private exited?: Promise<number | null>;
  /** Log files of every start, in order (logDir/webhook-<pid>-<n>.log). */
  readonly logFiles: string[] = [];
  /** The memory limit the running process has (options.memoryLimitMiB), null for none. */
  memoryLimitMiB: number | null = null;

  constructor(
    readonly env: E2eEnv,
    private readonly options: WebhookOptions = {},
  ) {}

  get running(): boolean {
    return this.child !== undefined && this.child.exitCode === null && this.child.signalCode === null;
  }

  get pid(): number | undefined {
    return this.child?.pid;
  }

  get logFile(): string | undefined {
    return this.logFiles.at(-1);
  }

  /** Starts the process and waits until /readyz answers 200 (certificate, config and caches loaded). */
  async start(options: { readyTimeoutMs?: number } = {}): Promise<void> {
    if (this.running) throw new Error('the webhook is already running');
    const { webhook } = this.env;
    const logFile = join(this.env.logDir, `webhook-${process.pid}-${++instances}.log`);
    this.logFiles.push(logFile);
    const fd = openSync(logFile, 'a');
    const main = join(webhook.appDir, 'dist', 'main.js');
    // Only what the Deployment sets (plus the local ports, the kubeconfig standing in for the
    // mounted service account, and the certificate paths standing in for the Secret volume).
    const childEnv: NodeJS.ProcessEnv = {
      PATH: process.env.PATH,
      HOME: process.env.HOME,
      NODE_ENV: 'production',
      NODE_OPTIONS: deploymentNodeOptions(this.env.repoRoot),
      // The image's NODE_COMPILE_CACHE, warmed by the set-up as the Dockerfile warms it.
      NODE_COMPILE_CACHE: compileCacheDir(webhook.appDir),
      OVERCOMMIT_KUBECONFIG: webhook.kubeconfig,
      POD_NAMESPACE: webhook.namespace,
      POD_NAME: `kube-overcommit-e2e-${process.pid}`,
      OVERCOMMIT_CONFIGMAP: `${webhook.namespace}/${webhook.configMap}`,
      OVERCOMMIT_HTTPS_PORT: String(webhook.httpsPort),
      OVERCOMMIT_HTTP_PORT: String(webhook.httpPort),
      OVERCOMMIT_TLS_CERT_FILE: join(webhook.tlsDir, 'tls.crt'),
      OVERCOMMIT_TLS_KEY_FILE: join(webhook.tlsDir, 'tls.key'),
      OVERCOMMIT_SHUTDOWN_DELAY_MS: String(this.options.shutdownDelayMs ?? 200),
      LOG_LEVEL: this.options.logLevel ?? 'info',
      ...this.options.env,
    };
    // The absolute path of main.js under runDir puts runDir in the command line, so that
    // `cluster.sh down` (which only stops processes mentioning its folder) stops a leftover.
    const cgroup = createMemoryCgroup(`kube-overcommit-e2e-webhook-${process.pid}-${instances}`, this.options.memoryLimitMiB ?? 0);
    this.memoryLimitMiB = cgroup?.limitMiB ?? null;
    const child = spawn(...inCgroup(cgroup, process.execPath, [main]), { cwd: webhook.appDir, env: childEnv, stdio: ['ignore', fd, fd] });
    closeSync(fd);
    this.child = child;
    this.exited = new Promise((resolve) =>
      child.once('exit', (code, signal) => {
        cgroup?.remove();
        resolve(code ?? (signal ? -1 : null));
      }),
    );
    writeFileSync(join(this.env.pidDir, `webhook-${process.pid}.pid`), String(child.pid));
    try {
      await waitUntil(
        `the webhook (pid ${child.pid}) to be ready on :${webhook.httpPort}/readyz`,
        async () => {
          if (!this.running) throw new Error(`the webhook exited (${child.exitCode ?? child.signalCode}); see ${logFile}:\n${this.logTail()}`);
          const { status } = await this.get('/readyz');
          return status === 200;
        },
        { timeoutMs: options.readyTimeoutMs ?? 30_000, intervalMs: 100, describe: () => this.logTail(15) },
      );
    } catch (error) {
      await this.stop().catch(() => undefined);
      throw error;
    }
  }

  /** SIGTERM (the kubelet's stop), then waits for the exit; SIGKILL after `timeoutMs`. */
  async stop(options: { signal?: NodeJS.Signals; timeoutMs?: number } = {}): Promise<void> {
    const child = this.child;
    if (!child || !this.running) return;
    child.kill(options.signal ?? 'SIGTERM');
    const timeoutMs = options.timeoutMs ?? 15_000;
    const code = await Promise.race([this.exited!, new Promise<'timeout'>((r) => setTimeout(() => r('timeout'), timeoutMs).unref())]);
    if (code === 'timeout') {
      child.kill('SIGKILL');
      await this.exited;
    }
    rmSync(join(this.env.pidDir, `webhook-${process.pid}.pid`), { force: true });
    if (child.pid && alive(child.pid)) throw new Error(`webhook pid ${child.pid} still alive after stop`);
  }

  async restart(): Promise<void> {
    await this.stop();
    await this.start();
  }

  /** GET on the ops port (plain HTTP). */
  get(path: string): Promise<{ status: number; body: string }> {
    return httpGet(`http://127.0.0.1:${this.env.webhook.httpPort}${path}`);
  }

  /** /readyz's JSON (terminus): `details.config.origin` is `configmap:ns/name@<resourceVersion>`. */
  async readyz(): Promise<any> {
    const { body } = await this.get('/readyz');
    return JSON.parse(body);
  }

  async metrics(): Promise<Metrics> {
    const { status, body } = await this.get('/metrics');
    if (status !== 200) throw new Error(`webhook /metrics: HTTP ${status}`);
    return Metrics.parse(body);
  }

  /** Applies `config` (an object, as config.yaml) to the ConfigMap and waits until it is in force; its resourceVersion. */
  async useConfig(config: unknown): Promise<string> {
    const rv = await applyConfig(this.env, configYaml(config));
    await this.waitForConfig(rv);
    return rv;
  }

  /**
   * Waits until the config in force came from the ConfigMap at this resourceVersion, and the
   * pod-policy caches it started have listed (they start and stop with the config).
   */
  async waitForConfig(resourceVersion: string, timeoutMs = 15_000): Promise<void> {
    await waitUntil(
      `the webhook to load ConfigMap resourceVersion ${resourceVersion}`,
      async () => {
        const ready = await this.readyz();
        return String(ready?.details?.config?.origin ?? '').endsWith(`@${resourceVersion}`);
      },
      { timeoutMs, intervalMs: 100, describe: async () => (await this.readyz())?.details?.config },
    );
    await waitUntil(
      'the pod-policy caches the config needs to list',
      async () => (await this.metrics()).find('kube_overcommit_pod_policy_cache_synced').every((sample) => sample.value === 1),
      { timeoutMs, intervalMs: 100, describe: async () => (await this.metrics()).find('kube_overcommit_pod_policy_cache_synced') },
    );
  }

  /** The certificate served on the HTTPS port now. */
  servedCertificate() {
    return servedCertificate('127.0.0.1', this.env.webhook.httpsPort, join(this.env.webhook.tlsDir, '..', 'ca.crt'));
  }

  /**
   * A new leaf (new key, new serial) from the same CA, swapped into the Secret-like folder in
   * one atomic `..data` rename, the way the kubelet updates a mounted Secret.
   */
  async rotateCertificate(): Promise<{ serialNumber: string }> {
    return rotateWebhookCertificate(this.env);
  }

  logTail(lines = 40): string {
    const file = this.logFile;
    if (!file || !existsSync(file)) return '(no log)';
    return readFileSync(file, 'utf8').trimEnd().split('\n').slice(-lines).join('\n');
  }
}

/** See WebhookProcess.rotateCertificate(); the CA is env.webhook.tlsDir/../ca.{crt,key}. */
export async function rotateWebhookCertificate(env: E2eEnv): Promise<{ serialNumber: string }> {
  const caDir = join(env.webhook.tlsDir, '..');
  const leaf = await issueServingCertificate({ certFile: join(caDir, 'ca.crt'), keyFile: join(caDir, 'ca.key') }, join(caDir, 'work'), {
    ips: ['127.0.0.1'],
    commonName: 'kube-overcommit.kube-overcommit.svc',
  });
  writeSecretVolume(env.webhook.tlsDir, { 'tls.crt': leaf.cert, 'tls.key': leaf.key });
  return { serialNumber: leaf.serialNumber };
}
