import { spawn, type ChildProcess } from 'node:child_process';
import { closeSync, existsSync, mkdirSync, openSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { connect } from 'node:net';
import { join } from 'node:path';
import type { E2eEnv } from './env.js';
import { adminClient, deleteNodeAndLease, KubeApiError, nodeToken, writeTokenKubeconfig } from './kube-client.js';
import { alive, freePort } from './process.js';
import type { Taint } from './sim-kubelet.js';
import { waitUntil } from './wait.js';

export interface HollowKubeletOptions {
  /** The node name; needs a token in the cluster: sim-node-0..1099 (see claimNodeNames). */
  name: string;
  /** --node-labels. */
  labels?: Record<string, string>;
  /** --register-with-taints; default none, as kubemark (the harness keeps the Deployment's pods off every node). */
  taints?: Taint[];
}

/** What the fake cAdvisor of kubemark reports (pkg/kubelet/cadvisor/testing.Fake): 1 core, 3840 Mi, --max-pods 110. */
export const HOLLOW_MACHINE = { cpu: '1', memory: '3840Mi', pods: '110' } as const;

let instances = 0;

/**
 * The real kubelet over a fake container runtime and fake cAdvisor: `kubemark --morph=kubelet`
 * (test/e2e/.bin/kubemark, built by control-plane/build.sh from the pinned Kubernetes module; for a
 * release without one, 1.38, from the newest older pinned minor's: env.kubeletVersion).
 * It authenticates as `system:node:<name>` with the node's static token (a kubeconfig written
 * to runDir/hollow/<name>/), registers its Node, renews its Lease, runs the status loop every
 * 10 s (report every 5 min), admits the pods bound to it against the stored allocatable and
 * "runs" them (they go Running). Its User-Agent is `hollow-kubelet`: managedFields name that
 * manager. Its pid file is in env.pidDir, so `cluster.sh down` stops a leftover.
 *
 *   const kubelet = await HollowKubelet.start(env, { name: 'sim-node-7' });   // resolves when the Node is Ready
 *   await kubelet.restart();                                                  // SIGTERM, start again
 *   await kubelet.stop({ deleteNode: true });
 */
export class HollowKubelet {
  readonly name: string;
  readonly kubeconfig: string;
  /** Log files of every start, in order (logDir/hollow-kubelet-<name>-<n>.log). */
  readonly logFiles: string[] = [];
  /** --kubelet-port of the running process (a free port, new at each start). */
  port = 0;
  private child?: ChildProcess;
  private exited?: Promise<void>;

  private constructor(
    readonly env: E2eEnv,
    readonly options: HollowKubeletOptions,
  ) {
    this.name = options.name;
    const dir = join(env.runDir, 'hollow', options.name);
    mkdirSync(dir, { recursive: true });
    this.kubeconfig = join(dir, 'kubeconfig');
    writeTokenKubeconfig(this.kubeconfig, env.apiserverUrl, env.caFile, `system:node:${options.name}`, nodeToken(options.name));
  }

  /** Starts kubemark and resolves once its Node is Ready (about a second). */
  static async start(env: E2eEnv, options: HollowKubeletOptions): Promise<HollowKubelet> {
    const kubelet = new HollowKubelet(env, options);
    await kubelet.start();
    return kubelet;
  }

  get running(): boolean {
    return this.child !== undefined && this.child.exitCode === null && this.child.signalCode === null;
  }

  get pid(): number | undefined {
    return this.child?.pid;
  }

  get logFile(): string | undefined {
    return this.logFiles.at(-1);
  }

  private get pidFile(): string {
    return join(this.env.pidDir, `hollow-kubelet-${this.name}.pid`);
  }

  /**
   * Spawns kubemark (stopped before, or never started) and waits until the Node reports
   * Ready=True since this start; with `waitForReady: false` only until the kubelet serves its
   * port (for a kubelet whose status writes are refused).
   */
  async start(options: { readyTimeoutMs?: number; waitForReady?: boolean } = {}): Promise<void> {
    if (this.running) throw new Error(`${this.name}: the hollow kubelet is already running`);
    this.port = await freePort();
    const logFile = join(this.env.logDir, `hollow-kubelet-${this.name}-${++instances}.log`);
    this.logFiles.push(logFile);
    const fd = openSync(logFile, 'a');
    const taints = (this.options.taints ?? []).map((t) => `${t.key}=${t.value ?? ''}:${t.effect}`).join(',');
    const labels = Object.entries(this.options.labels ?? {})
      .map(([k, v]) => `${k}=${v}`)
      .join(',');
    const args = [
      '--morph=kubelet',
      `--name=${this.name}`,
      `--kubeconfig=${this.kubeconfig}`,
      `--kubelet-port=${this.port}`,
      '--kubelet-read-only-port=0',
      '--use-host-image-service=false',
      ...(taints ? [`--register-with-taints=${taints}`] : []),
      ...(labels ? [`--node-labels=${labels}`] : []),
    ];
    const startedAt = Date.now();
    const child = spawn(join(this.env.binDir, 'kubemark'), args, { stdio: ['ignore', fd, fd] });
    closeSync(fd);
    this.child = child;
    this.exited = new Promise((resolve) => child.once('exit', () => resolve()));
    writeFileSync(this.pidFile, String(child.pid));
    try {
      const timeoutMs = options.readyTimeoutMs ?? 60_000;
      if (options.waitForReady === false) await this.waitForPort(timeoutMs);
      else await this.waitForReady(startedAt, timeoutMs);
    } catch (error) {
      await this.stop().catch(() => undefined);
      throw error;
    }
  }

  private async waitForPort(timeoutMs: number): Promise<void> {
    await waitUntil(
      `${this.name}: the hollow kubelet serving :${this.port}`,
      () => {
        if (!this.running) throw new Error(`kubemark exited; see ${this.logFile}:\n${this.logTail()}`);
        return new Promise<boolean>((resolve) => {
          const socket = connect(this.port, '127.0.0.1', () => resolve(true));
          socket.once('error', () => resolve(false));
          socket.once('connect', () => socket.destroy());
        });
      },
      { timeoutMs, intervalMs: 200, describe: () => this.logTail(15) },
    );
  }

  /** Waits until the Node's Ready condition is True with a heartbeat from `since` on (this kubelet's own report). */
  private async waitForReady(since: number, timeoutMs: number): Promise<void> {
    const admin = adminClient(this.env);
    try {
      await waitUntil(
        `${this.name}: the hollow kubelet's Node Ready`,
        async () => {
          if (!this.running) throw new Error(`kubemark exited (${this.child?.exitCode ?? this.child?.signalCode}); see ${this.logFile}:\n${this.logTail()}`);
          const node = await admin
            .get(`/api/v1/nodes/${this.name}`)
            .catch((e) => (e instanceof KubeApiError && e.status === 404 ? undefined : Promise.reject(e)));
          const ready = node?.status?.conditions?.find((c: any) => c.type === 'Ready');
          // Heartbeats are whole seconds.
          return ready?.status === 'True' && Date.parse(ready.lastHeartbeatTime) >= Math.floor(since / 1000) * 1000;
        },
        { timeoutMs, intervalMs: 200, describe: () => this.logTail(15) },
      );
    } finally {
      admin.close();
    }
  }

  /**
   * SIGTERM (the kubelet has no graceful shutdown here: Go's default, it exits at once), waits
   * for the exit; removes the root folder kubemark made under /tmp. `deleteNode` deletes the
   * Node and its Lease as admin.
   */
  async stop(options: { deleteNode?: boolean } = {}): Promise<void> {
    const child = this.child;
    if (child && this.running) {
      child.kill('SIGTERM');
      const timedOut = await Promise.race([this.exited!.then(() => false), new Promise<boolean>((r) => setTimeout(() => r(true), 10_000).unref())]);
      if (timedOut) {
        child.kill('SIGKILL');
        await this.exited;
      }
      if (child.pid && alive(child.pid)) throw new Error(`${this.name}: kubemark pid ${child.pid} still alive after stop`);
    }
    rmSync(this.pidFile, { force: true });
    this.removeRootDirs();
    if (options.deleteNode) {
      await deleteNodeAndLease(this.env, this.name);
    }
  }

  /** stop(), then start(): the kubelet re-registers and re-admits every pod bound to it. */
  async restart(options: { waitForReady?: boolean } = {}): Promise<void> {
    await this.stop();
    await this.start(options);
  }

  logTail(lines = 40): string {
    const file = this.logFile;
    if (!file || !existsSync(file)) return '(no log)';
    return readFileSync(file, 'utf8').trimEnd().split('\n').slice(-lines).join('\n');
  }

  /** kubemark makes its root folder with os.MkdirTemp under /tmp and logs its path. */
  private removeRootDirs(): void {
    for (const file of this.logFiles) {
      if (!existsSync(file)) continue;
      for (const match of readFileSync(file, 'utf8').matchAll(/Using (\/tmp\/hollow-kubelet\.\d+) as root dir/g)) {
        rmSync(match[1]!, { recursive: true, force: true });
      }
    }
  }
}
