import type { E2eEnv } from './env.js';
import { adminClient, deleteNodeAndLease, KubeApiError, nodeClient, type KubeClient } from './kube-client.js';
import { admitPods, type KubeletAdmission } from './kubelet-admission.js';
import { sameQuantity } from './quantity.js';
import { deepEqual, diffObject } from './strategic-merge.js';
import { waitUntil } from './wait.js';

export interface Taint {
  key: string;
  value?: string;
  effect: 'NoSchedule' | 'PreferNoSchedule' | 'NoExecute';
}

export interface SimKubeletOptions {
  /** The node name; needs a token in the cluster: sim-node-0..1099 or kwok-node-0..19 (see claimNodeNames). */
  name: string;
  /** The machine's capacity, e.g. `{ cpu: '4', memory: '16393232Ki', pods: '110', 'ephemeral-storage': '100Gi' }`. */
  capacity: Record<string, string>;
  /** The real allocatable (capacity minus reservations); default = capacity. */
  allocatable?: Record<string, string>;
  /** More labels (kubernetes.io/hostname, os and arch are always set, as the kubelet does). */
  labels?: Record<string, string>;
  annotations?: Record<string, string>;
  /**
   * --register-with-taints. Default: kwok nodes `kwok.x-k8s.io/node=fake:NoSchedule`, other nodes
   * `e2e.kube-overcommit.io/no-kubelet=true:NoSchedule` (nothing would run their pods): so the
   * Deployment's pods of k8s/base stay Pending, and only pods that tolerate the taint land here.
   */
  taints?: Taint[];
  /** Managed by kwok (annotation kwok.x-k8s.io/node=fake): kwok runs its pods and holds its Lease. */
  kwok?: boolean;
  /** nodeStatusUpdateFrequency: how often the status is computed (default 10 s). */
  updateFrequencyMs?: number;
  /** nodeStatusReportFrequency: PATCH even when nothing changed after this long (default 5 min). */
  reportFrequencyMs?: number;
  /** Keep a Lease in kube-node-lease like the kubelet (default: yes, unless kwok holds it). */
  lease?: boolean;
  leaseDurationSeconds?: number;
  /** The port reported in status.daemonEndpoints (default 10250), e.g. a ResourceMetricsEndpoint's. */
  kubeletPort?: number;
}

/** One status PATCH (or attempt). */
export interface StatusUpdate {
  at: number;
  /** `changed`: the status differed (ignoring heartbeats); `report`: reportFrequency elapsed; `forced`: syncNow({ force: true }). */
  reason: 'changed' | 'report' | 'forced';
  /** The strategic merge patch sent. */
  patch: any;
  ok: boolean;
  httpStatus?: number;
  error?: string;
  /** The Node the API server answered with (after admission), when ok. */
  stored?: any;
}

export interface SimKubeletStats {
  /** Status loop iterations (each GETs the Node and computes the status). */
  syncs: number;
  /** Iterations that sent nothing (no change, report not due). */
  skipped: number;
  patchAttempts: number;
  patchSuccesses: number;
  patchFailures: number;
  /** GETs of its own Node that failed. */
  getFailures: number;
  leaseRenewals: number;
  leaseFailures: number;
  /** Messages of every failure, oldest first (at most 50). */
  errors: string[];
}

const STANDARD_CONDITIONS = [
  { type: 'MemoryPressure', status: 'False', reason: 'KubeletHasSufficientMemory', message: 'kubelet has sufficient memory available' },
  { type: 'DiskPressure', status: 'False', reason: 'KubeletHasNoDiskPressure', message: 'kubelet has no disk pressure' },
  { type: 'PIDPressure', status: 'False', reason: 'KubeletHasSufficientPID', message: 'kubelet has sufficient PID available' },
  { type: 'Ready', status: 'True', reason: 'KubeletReady', message: 'kubelet is posting ready status' },
];

/** Resource lists compared by value ("4" = "4000m"), as the kubelet's Semantic.DeepEqual does. */
function sameResources(a: Record<string, string> | undefined, b: Record<string, string> | undefined): boolean {
  const ka = Object.keys(a ?? {});
  const kb = Object.keys(b ?? {});
  if (ka.length !== kb.length) return false;
  return ka.every((k) => b?.[k] !== undefined && sameQuantity(k, a![k], b[k]));
}

/** pkg/kubelet/kubelet_node_status.go nodeStatusHasChanged: anything but the conditions' heartbeat times. */
export function nodeStatusHasChanged(original: any, desired: any): boolean {
  const strip = (status: any) => {
    const { conditions, allocatable, capacity, ...rest } = status ?? {};
    return {
      rest,
      conditions: (conditions ?? []).map(({ lastHeartbeatTime: _h, ...c }: any) => c),
      allocatable,
      capacity,
    };
  };
  const a = strip(original);
  const b = strip(desired);
  return (
    !deepEqual(a.rest, b.rest) ||
    !deepEqual(a.conditions, b.conditions) ||
    !sameResources(a.allocatable, b.allocatable) ||
    !sameResources(a.capacity, b.capacity)
  );
}

/** RFC 3339 with microseconds (metav1.MicroTime), for Lease renewTime. */
function microTime(date = new Date()): string {
  return date.toISOString().replace(/\.(\d{3})Z$/, '.$1000Z');
}

/** The taint of nodes nothing runs pods on (see SimKubeletOptions.taints). */
export const NO_KUBELET_TAINT: Taint = { key: 'e2e.kube-overcommit.io/no-kubelet', value: 'true', effect: 'NoSchedule' };

/**
 * The Node a kubelet registers (POST /api/v1/nodes): the labels (hostname, os, arch) and
 * annotations every kubelet sets, then `node`'s own, its taints and its first status.
 */
export function kubeletNode(name: string, node: { labels?: Record<string, string>; annotations?: Record<string, string>; taints: Taint[]; status: any }): any {
  return {
    apiVersion: 'v1',
    kind: 'Node',
    metadata: {
      name,
      labels: {
        'beta.kubernetes.io/arch': 'amd64',
        'beta.kubernetes.io/os': 'linux',
        'kubernetes.io/arch': 'amd64',
        'kubernetes.io/hostname': name,
        'kubernetes.io/os': 'linux',
        ...node.labels,
      },
      annotations: { 'node.alpha.kubernetes.io/ttl': '0', 'volumes.kubernetes.io/controller-managed-attach-detach': 'true', ...node.annotations },
    },
    spec: { taints: node.taints },
    status: node.status,
  };
}

/** A node's Lease in kube-node-lease as the kubelet creates it, owned by the Node when its uid is known. */
export function nodeLease(name: string, leaseDurationSeconds: number, nodeUid?: string): any {
  return {
    apiVersion: 'coordination.k8s.io/v1',
    kind: 'Lease',
    metadata: {
      name,
      namespace: 'kube-node-lease',
      ...(nodeUid ? { ownerReferences: [{ apiVersion: 'v1', kind: 'Node', name, uid: nodeUid }] } : {}),
    },
    spec: { holderIdentity: name, leaseDurationSeconds, renewTime: microTime() },
  };
}

/** `lease` as the kubelet renews it (PUT): held by `name`, renewed now. */
export function renewedLease(lease: any, name: string, leaseDurationSeconds: number): any {
  return { ...lease, spec: { ...lease.spec, holderIdentity: name, leaseDurationSeconds, renewTime: microTime() } };
}

/** RFC 3339 without fractions (metav1.Time). */
function time(date = new Date()): string {
  return date.toISOString().replace(/\.\d{3}Z$/, 'Z');
}

/** What a kubelet reports of its node (kubeletStatus). */
export interface KubeletNodeFacts {
  name: string;
  capacity: Record<string, string>;
  allocatable: Record<string, string>;
  nodeInfo: Record<string, string>;
  images?: unknown[];
  /** False: Ready=False with reason KubeletNotReady, as a kubelet whose runtime is down reports. */
  ready?: boolean;
  /** The kubelet's port in status.daemonEndpoints (default 10250): where metrics-server scrapes /metrics/resource. */
  kubeletPort?: number;
}

const NOT_READY = { type: 'Ready', status: 'False', reason: 'KubeletNotReady', message: 'container runtime is down' };

/**
 * The kubelet's setters applied to a copy of the stored status (fields it does not own are
 * kept): capacity, allocatable, the four standard conditions (heartbeat now, transition time
 * kept while the status is unchanged), addresses, daemon endpoints, nodeInfo and images.
 */
export function kubeletStatus(original: any, node: KubeletNodeFacts): any {
  const now = time();
  const status = structuredClone(original ?? {});
  // Keep the stored spelling of equal quantities (the API server canonicalises), as a Go
  // resource.Quantity would serialise the same value the same way.
  const merge = (stored: Record<string, string> | undefined, real: Record<string, string>) => {
    const out: Record<string, string> = { ...(stored ?? {}) };
    for (const [k, v] of Object.entries(real)) out[k] = stored?.[k] !== undefined && sameQuantity(k, stored[k], v) ? stored[k] : v;
    return out;
  };
  status.capacity = merge(original?.capacity, node.capacity);
  status.allocatable = merge(original?.allocatable, node.allocatable);
  const conditions: any[] = [...(original?.conditions ?? [])];
  for (const standard of STANDARD_CONDITIONS) {
    const want = standard.type === 'Ready' && node.ready === false ? NOT_READY : standard;
    const i = conditions.findIndex((c) => c.type === want.type);
    const before = i >= 0 ? conditions[i] : undefined;
    const transition = before && before.status === want.status ? before.lastTransitionTime : now;
    const next = { ...want, lastHeartbeatTime: now, lastTransitionTime: transition };
    if (i >= 0) conditions[i] = { ...before, ...next };
    else conditions.push(next);
  }
  status.conditions = conditions;
  status.addresses = [
    { type: 'InternalIP', address: '127.0.0.1' },
    { type: 'Hostname', address: node.name },
  ];
  status.daemonEndpoints = { kubeletEndpoint: { Port: node.kubeletPort ?? 10250 } };
  status.nodeInfo = { ...node.nodeInfo, ...(original?.nodeInfo?.swap ? { swap: original.nodeInfo.swap } : {}) };
  if (node.images?.length) status.images = node.images;
  return status;
}

/**
 * A simulated kubelet: authenticates as `system:node:<name>` (group system:nodes) with its
 * static token, registers its Node (POST /api/v1/nodes), then runs the kubelet's status loop
 * (pkg/kubelet/kubelet_node_status.go): every updateFrequencyMs it GETs its Node, computes the
 * status it would report — its real capacity and allocatable (changeable at runtime with
 * setResources: a CPU hot-add), the standard conditions with fresh heartbeat times, Ready=True —
 * and PATCHes `nodes/<name>/status` with the two-way strategic merge patch of what differs, or
 * unconditionally once reportFrequencyMs has passed since the last report. It keeps a Lease in
 * kube-node-lease (unless kwok does). Every PATCH attempt, success and failure is counted:
 * a failure is a test failure signal (assertHealthy).
 *
 *   const kubelet = await SimKubelet.start(env, { name: 'sim-node-3', capacity: { cpu: '4', memory: '8Gi', pods: '110' },
 *                                                 updateFrequencyMs: 1000 });
 *   await kubelet.waitForPatches(2);
 *   kubelet.setResources({ capacity: { cpu: '8' }, allocatable: { cpu: '8' } });   // hot-add
 *   await kubelet.stop({ deleteNode: true });
 */
export class SimKubelet {
  readonly name: string;
  readonly client: KubeClient;
  readonly stats: SimKubeletStats = {
    syncs: 0,
    skipped: 0,
    patchAttempts: 0,
    patchSuccesses: 0,
    patchFailures: 0,
    getFailures: 0,
    leaseRenewals: 0,
    leaseFailures: 0,
    errors: [],
  };
  /** The last 500 status PATCHes (attempts), oldest first. */
  readonly updates: StatusUpdate[] = [];
  /** The Node as the API server stored it at registration (after admission). */
  registered: any;

  private capacity: Record<string, string>;
  private allocatable: Record<string, string>;
  private ready = true;
  private images: unknown[] = [];
  private readonly updateFrequencyMs: number;
  private readonly reportFrequencyMs: number;
  private readonly useLease: boolean;
  private readonly leaseDurationSeconds: number;
  private lastReport = 0;
  private queue: Promise<unknown> = Promise.resolve();
  private timer?: NodeJS.Timeout;
  private leaseTimer?: NodeJS.Timeout;
  private stopped = false;
  private listeners: Array<() => void> = [];

  private constructor(
    readonly env: E2eEnv,
    readonly options: SimKubeletOptions,
  ) {
    this.name = options.name;
    this.client = nodeClient(env, options.name);
    this.capacity = { ...options.capacity };
    this.allocatable = { ...(options.allocatable ?? options.capacity) };
    this.updateFrequencyMs = options.updateFrequencyMs ?? 10_000;
    this.reportFrequencyMs = options.reportFrequencyMs ?? 300_000;
    this.useLease = options.lease ?? !options.kwok;
    this.leaseDurationSeconds = options.leaseDurationSeconds ?? 40;
  }

  /** Registers the Node and starts the status loop (and the Lease). Resolves once registered. */
  static async start(env: E2eEnv, options: SimKubeletOptions): Promise<SimKubelet> {
    const kubelet = new SimKubelet(env, options);
    await kubelet.register();
    if (kubelet.useLease) await kubelet.renewLease();
    kubelet.schedule(kubelet.updateFrequencyMs);
    return kubelet;
  }

  /** The resources the machine has now: the next status update reports them (CPU hot-add, reservation change). */
  setResources(resources: { capacity?: Record<string, string>; allocatable?: Record<string, string> }): void {
    if (resources.capacity) this.capacity = { ...this.capacity, ...resources.capacity };
    if (resources.allocatable) this.allocatable = { ...this.allocatable, ...resources.allocatable };
  }

  /** Whether the next status updates report Ready=True or Ready=False (KubeletNotReady). */
  setReady(ready: boolean): void {
    this.ready = ready;
  }

  /** The images the next status updates report in status.images (a real change, as a pull is). */
  setImages(images: unknown[]): void {
    this.images = [...images];
  }

  /** What this kubelet reports as allocatable (the raw value). */
  get rawAllocatable(): Record<string, string> {
    return { ...this.allocatable };
  }

  get rawCapacity(): Record<string, string> {
    return { ...this.capacity };
  }

  /** Runs one status update now (after any in flight); `force` PATCHes even if nothing changed. */
  syncNow(options: { force?: boolean } = {}): Promise<StatusUpdate | null> {
    return this.enqueue(() => this.sync(options.force ?? false));
  }

  /** Resolves after `count` more successful status PATCHes. */
  waitForPatches(count = 1, timeoutMs = Math.max(15_000, this.updateFrequencyMs * (count + 3))): Promise<void> {
    const target = this.stats.patchSuccesses + count;
    return waitUntil(`${this.name}: ${count} more successful status PATCH(es)`, () => this.stats.patchSuccesses >= target, {
      timeoutMs,
      intervalMs: 50,
      describe: () => ({ stats: this.stats, last: this.updates.at(-1) }),
    }).then(() => undefined);
  }

  /** Resolves after `count` more status loop iterations (whether or not they PATCHed). */
  waitForSyncs(count = 1, timeoutMs = Math.max(15_000, this.updateFrequencyMs * (count + 3))): Promise<void> {
    const target = this.stats.syncs + count;
    return waitUntil(`${this.name}: ${count} more status sync(s)`, () => this.stats.syncs >= target, {
      timeoutMs,
      intervalMs: 50,
      describe: () => this.stats,
    }).then(() => undefined);
  }

  /**
   * A kubelet restart's pod admission (kubelet-admission.ts): reads its Node and the non-terminal
   * pods bound to it from the API server and re-admits them in creation order against the stored
   * allocatable. Rejected pods are reported, not failed: the scenario decides what follows.
   */
  async readmitPods(): Promise<KubeletAdmission & { allocatable: Record<string, string> }> {
    const node = await this.client.get(`/api/v1/nodes/${this.name}`);
    const admin = adminClient(this.env);
    try {
      const fieldSelector = encodeURIComponent(`spec.nodeName=${this.name},status.phase!=Succeeded,status.phase!=Failed`);
      const pods = (await admin.get(`/api/v1/pods?fieldSelector=${fieldSelector}`)).items;
      return { ...admitPods(pods, node.status.allocatable), allocatable: node.status.allocatable };
    } finally {
      admin.close();
    }
  }

  /** Throws, with the errors, if any PATCH, GET or Lease renewal failed. */
  assertHealthy(): void {
    const { patchFailures, getFailures, leaseFailures, errors } = this.stats;
    if (patchFailures + getFailures + leaseFailures > 0) {
      throw new Error(`${this.name}: ${patchFailures} status PATCH, ${getFailures} GET and ${leaseFailures} Lease failures:\n  ${errors.join('\n  ')}`);
    }
  }

  /** Stops the loops; `deleteNode` deletes the Node and its Lease as admin. */
  async stop(options: { deleteNode?: boolean } = {}): Promise<void> {
    this.stopped = true;
    clearTimeout(this.timer);
    clearTimeout(this.leaseTimer);
    // Let an update in flight finish (at most 3 s; closing the client below aborts it).
    await Promise.race([this.queue.catch(() => undefined), new Promise((r) => setTimeout(r, 3_000).unref())]);
    if (options.deleteNode) {
      await deleteNodeAndLease(this.env, this.name);
    }
    this.client.close();
  }

  // --- internals -----------------------------------------------------------------------

  private enqueue<T>(task: () => Promise<T>): Promise<T> {
    const next = this.queue.then(task, task);
    this.queue = next.catch(() => undefined);
    return next;
  }

  private schedule(delayMs: number): void {
    if (this.stopped) return;
    // wait.JitterUntil(syncNodeStatus, nodeStatusUpdateFrequency, 0.04, ...)
    const jittered = delayMs * (1 + Math.random() * 0.04);
    this.timer = setTimeout(() => {
      void this.enqueue(() => this.sync(false)).finally(() => this.schedule(this.updateFrequencyMs));
    }, jittered);
    this.timer.unref?.();
  }

  private failure(kind: 'get' | 'patch' | 'lease', error: unknown): void {
    if (kind === 'get') this.stats.getFailures++;
    else if (kind === 'patch') this.stats.patchFailures++;
    else this.stats.leaseFailures++;
    const message = `${new Date().toISOString()} ${kind}: ${error instanceof Error ? error.message : String(error)}`;
    this.stats.errors.push(message);
    if (this.stats.errors.length > 50) this.stats.errors.shift();
  }

  private defaultTaints(): Taint[] {
    if (this.options.taints) return this.options.taints;
    if (this.options.kwok) return [this.env.kwok.taint as Taint];
    return [NO_KUBELET_TAINT];
  }

  private desiredStatus(original: any): any {
    return kubeletStatus(original, {
      name: this.name,
      capacity: this.capacity,
      allocatable: this.allocatable,
      ready: this.ready,
      images: this.images,
      ...(this.options.kubeletPort === undefined ? {} : { kubeletPort: this.options.kubeletPort }),
      nodeInfo: {
        machineID: '',
        systemUUID: '',
        bootID: '',
        kernelVersion: '6.1.0-e2e',
        osImage: 'kube-overcommit e2e simulated kubelet',
        containerRuntimeVersion: 'containerd://1.7.24',
        kubeletVersion: this.env.k8sVersion,
        kubeProxyVersion: '',
        operatingSystem: 'linux',
        architecture: 'amd64',
      },
    });
  }

  private async register(): Promise<void> {
    const annotations: Record<string, string> = {
      ...(this.options.kwok ? { [this.env.kwok.annotation.split('=')[0]!]: this.env.kwok.annotation.split('=')[1]! } : {}),
      ...this.options.annotations,
    };
    const node = kubeletNode(this.name, { labels: this.options.labels, annotations, taints: this.defaultTaints(), status: this.desiredStatus({}) });
    try {
      this.registered = await this.client.post('/api/v1/nodes', node);
    } catch (error) {
      if (!(error instanceof KubeApiError && error.status === 409)) throw error;
      // Already registered (a restarted kubelet): carry on with the stored Node.
      this.registered = await this.client.get(`/api/v1/nodes/${this.name}`);
    }
    this.lastReport = Date.now();
  }

  /** One iteration of the status loop; `stats.syncs` counts it once it is over. */
  private async sync(force: boolean): Promise<StatusUpdate | null> {
    if (this.stopped) return null;
    try {
      return await this.tryUpdateNodeStatus(force);
    } finally {
      this.stats.syncs++;
      for (const listener of this.listeners) listener();
    }
  }

  private async tryUpdateNodeStatus(force: boolean): Promise<StatusUpdate | null> {
    let last: StatusUpdate | null = null;
    // The kubelet retries a failed update up to nodeStatusUpdateRetry (5) times in a row.
    for (let attempt = 0; attempt < 5; attempt++) {
      let original: any;
      try {
        original = await this.client.get(`/api/v1/nodes/${this.name}`);
      } catch (error) {
        this.failure('get', error);
        continue;
      }
      const desired = this.desiredStatus(original.status);
      const changed = nodeStatusHasChanged(original.status, desired);
      const due = Date.now() - this.lastReport >= this.reportFrequencyMs;
      if (!changed && !due && !force) {
        this.stats.skipped++;
        return null;
      }
      const statusPatch = diffObject({ status: original.status ?? {} }, { status: desired }) ?? {};
      const update: StatusUpdate = { at: Date.now(), reason: force ? 'forced' : changed ? 'changed' : 'report', patch: statusPatch, ok: false };
      this.stats.patchAttempts++;
      last = update;
      this.updates.push(update);
      if (this.updates.length > 500) this.updates.shift();
      try {
        update.stored = await this.client.patch(`/api/v1/nodes/${this.name}/status`, statusPatch, 'strategic');
        update.ok = true;
        update.httpStatus = 200;
        this.stats.patchSuccesses++;
        this.lastReport = Date.now();
        return update;
      } catch (error) {
        update.error = error instanceof Error ? error.message : String(error);
        update.httpStatus = error instanceof KubeApiError ? error.status : undefined;
        this.failure('patch', error);
      }
    }
    return last;
  }

  /** Called after every sync iteration. Returns an unsubscribe function. */
  onSync(listener: () => void): () => void {
    this.listeners.push(listener);
    return () => {
      this.listeners = this.listeners.filter((l) => l !== listener);
    };
  }

  private async renewLease(): Promise<void> {
    if (this.stopped) return;
    const path = `/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/${this.name}`;
    try {
      let lease: any;
      try {
        lease = await this.client.get(path);
      } catch (error) {
        if (!(error instanceof KubeApiError && error.status === 404)) throw error;
      }
      if (lease === undefined) {
        await this.client.post(
          '/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases',
          nodeLease(this.name, this.leaseDurationSeconds, this.registered?.metadata?.uid),
        );
      } else {
        await this.client.put(path, renewedLease(lease, this.name, this.leaseDurationSeconds));
      }
      this.stats.leaseRenewals++;
    } catch (error) {
      this.failure('lease', error);
    }
    if (!this.stopped) {
      // The kubelet renews every 25 % of the lease duration.
      this.leaseTimer = setTimeout(() => void this.renewLease(), (this.leaseDurationSeconds * 1000) / 4);
      this.leaseTimer.unref?.();
    }
  }
}
