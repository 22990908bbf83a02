import { Inject, Injectable, Logger, type OnApplicationShutdown, type OnModuleInit, Optional } from '@nestjs/common';
import { InjectMetric, makeCounterProvider, makeGaugeProvider } from '@willsoto/nestjs-prometheus';
import type { Counter, Gauge } from 'prom-client';
import { AdmissionregistrationV1Api, CoordinationV1Api, CoreV1Api, KubeConfig, PatchStrategy, setHeaderOptions, VersionApi } from '@kubernetes/client-node';
import { BackgroundTasks } from '../common/background-tasks.js';
import type { NodesConfig } from '../domain/node-rules/node-oversell.config.js';
import type { ResourceAmounts } from '../domain/resources.js';
import { ConfigStore } from '../config/config.store.js';
import { apiErrorCode, describeApiError } from '../kube/api-error.js';
import { KUBE_ENV, inCluster, platformNamespace } from '../kube/kube.env.js';
import { DEFAULT_LEASE_TIMING, LeaderLease, type LeaseTiming, leaseIdentity } from '../kube/leader-lease.js';
import { requestTimeout } from '../kube/request-timeout.js';
import { NodeCache } from '../kube/node-cache.service.js';
import { PodCache } from '../kube/pod-cache.service.js';
import { floorEnabled, NODE_COMMITMENTS, type NodeCommitments, NODE_USAGE, type PublishedUsage } from '../domain/node-rules/node-services.js';
import {
  ENTRY_VALIDITY_MS,
  planShardPatches,
  planShards,
  shardName,
  shardOf,
  type Shards,
  TARGET_SHARDS,
  TargetEntryPlans,
  validUntil,
} from './node-targets.rules.js';

/** The policy the targets are for (k8s/node-policy/policy.yaml). */
export const NODE_POLICY_NAME = 'kube-overcommit-nodes';
/** The Lease electing the replica that publishes (k8s/node-policy/targets.yaml). */
export const NODE_POLICY_LEASE = 'kube-overcommit-node-policy';
export const NODE_POLICY_ACTIVE_METRIC = 'kube_overcommit_node_policy_active';
export const NODE_TARGETS_METRIC = 'kube_overcommit_node_targets_published';
export const NODE_TARGET_WRITES_METRIC = 'kube_overcommit_node_target_writes_total';
export const NODE_POLICY_PATH_CHECKS_METRIC = 'kube_overcommit_node_policy_path_checks_total';
export const NODE_POLICY_LEADER_METRIC = 'kube_overcommit_node_policy_leader';
export const NODE_TARGET_DRIFT_METRIC = 'kube_overcommit_node_target_drift_total';
export const NODE_TARGET_PLANS_METRIC = 'kube_overcommit_node_target_plans_total';

/** A shard's metadata alone: its resourceVersion, without the entries. */
const PARTIAL_METADATA = 'application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1';

/** The committed requests of a node the floor does not know (off, or pods not listed yet): one object, so rule 9 compares it by reference. */
const NOTHING_COMMITTED: Readonly<ResourceAmounts> = Object.freeze({});

/** Each shard as this leader last read or wrote it; null: the ConfigMap does not exist. */
type ShardStates = Array<{ data: Map<string, string>; resourceVersion: string } | null>;

/** Which engine serves node status writes, as found at start-up (and re-checked at each config change). */
export type StatusPath = 'policy' | 'webhook-only';

/**
 * What a look-up of the path found. Only a definite answer moves the path: the config turning
 * the policy off, the API server not serving MutatingAdmissionPolicy v1 (its discovery lists no
 * such resource, or answers 404 for the group version), the policy absent (404) or unreadable by
 * the platform's ServiceAccount (403: the component's RBAC is not installed, so neither is the
 * component). Any other failure (429, 5xx, a timeout, a reset connection) says nothing about the
 * path: `unknown`, the last path is kept and the look-up retried with backoff.
 */
export interface PathAnswer {
  path: StatusPath | 'unknown';
  why: string;
}

export interface NodePolicyTiming {
  /** After a change, the publication waits this long for more (a config edit moves every node at once). */
  debounceMs: number;
  /** A full publication this often while leading: what an event did not show. */
  resyncMs: number;
  /** The path looked up again this often (the policy installed or removed, the API server upgraded). */
  detectMs: number;
  /** After a look-up without a definite answer, the next one after this, doubled at each failure up to detectMs. */
  detectRetryMs: number;
  /** A look-up's request gives up after this. */
  requestTimeoutMs: number;
  lease: LeaseTiming;
  /** How long a published entry stays valid (node-targets.rules.ts, rule 8). */
  entryValidityMs: number;
  /** Wall-clock milliseconds: an entry's valid-until is compared with the kubelets' heartbeats. */
  clock: () => number;
}
/** Optional provider: the publisher's timing (specs shorten it). */
export const NODE_POLICY_TIMING = Symbol('NODE_POLICY_TIMING');
const DEFAULT_TIMING: NodePolicyTiming = {
  debounceMs: 1_000,
  resyncMs: 30_000,
  detectMs: 60_000,
  detectRetryMs: 1_000,
  requestTimeoutMs: 10_000,
  lease: DEFAULT_LEASE_TIMING,
  entryValidityMs: ENTRY_VALIDITY_MS,
  clock: () => Date.now(),
};

export const nodePolicyMetrics = [
  makeGaugeProvider({
    name: NODE_POLICY_ACTIVE_METRIC,
    help: `1 while node status writes are served by the MutatingAdmissionPolicy ${NODE_POLICY_NAME} with the webhook for what it cannot decide (the API server serves admissionregistration.k8s.io/v1 MutatingAdmissionPolicy, the policy is installed, nodes.admissionPolicy is not false); 0 while the webhook alone serves them.`,
  }),
  makeGaugeProvider({
    name: NODE_TARGETS_METRIC,
    help: 'Nodes whose target this replica published for the node-status policy (while it holds the Lease), by state: published, or left (not published: their shard was full).',
    labelNames: ['state'],
  }),
  makeCounterProvider({
    name: NODE_TARGET_WRITES_METRIC,
    help: 'Writes of the published targets (one merge PATCH of a shard ConfigMap), by result: written or error.',
    labelNames: ['result'],
  }),
  makeCounterProvider({
    name: NODE_POLICY_PATH_CHECKS_METRIC,
    help: 'Look-ups of the path serving node status writes, by answer: policy, webhook-only, or unknown (the API server gave no definite answer: the last path is kept, the look-up retried with backoff).',
    labelNames: ['answer'],
  }),
  makeGaugeProvider({
    name: NODE_POLICY_LEADER_METRIC,
    help: '1 while this replica holds the Lease kube-overcommit-node-policy and publishes the node targets; 0 otherwise.',
  }),
  makeCounterProvider({
    name: NODE_TARGET_DRIFT_METRIC,
    help: 'What the publishing leader found changed in the shard ConfigMaps by another writer at a re-read (every resync) and wrote back, by kind: entry (an entry changed, added or removed), shard-missing (a shard ConfigMap absent at a re-read).',
    labelNames: ['kind'],
  }),
  makeCounterProvider({
    name: NODE_TARGET_PLANS_METRIC,
    help: "Nodes' targets at each publication, by how: planned (the Node, its committed requests, the config or its usage entry changed since the last publication) or reused (none did).",
    labelNames: ['how'],
  }),
];

/**
 * Publishes each node's target for the node-status policy (node-targets.rules.ts) into the shard
 * ConfigMaps, from the one replica holding the Lease, while the path is active; withdraws every
 * entry when a definite answer says the webhook alone serves (PathAnswer: `nodes.admissionPolicy`
 * set to false, the API not served, the policy absent), never on a failed look-up. Start-up logs
 * which path serves node status writes. The leader keeps the Node cache running.
 *
 * RBAC: get and patch the shard ConfigMaps, get and update the Lease (the manifests create them),
 * get the policy.
 */
@Injectable()
export class NodeTargetsPublisher implements OnModuleInit, OnApplicationShutdown {
  private readonly logger = new Logger('NodePolicy');
  private lease?: LeaderLease;
  private core?: CoreV1Api;
  private leading = false;
  private path?: StatusPath;
  /** What the shards hold, as last read or written by this leader; undefined until read. */
  private shards?: ShardStates;
  /** Each node's last planned entry, reused while its inputs are the same (node-targets.rules.ts, rule 9). */
  private plans = new TargetEntryPlans();
  /** A resync came: read the shards again before the next publication. */
  private rereadDue = false;
  private timer?: NodeJS.Timeout;
  private resync?: NodeJS.Timeout;
  private detect?: NodeJS.Timeout;
  /** Look-ups started: an answer to an older one than the last is dropped. */
  private lookups = 0;
  /** Look-ups in a row without a definite answer: the backoff's exponent. */
  private unanswered = 0;
  private stopped = false;
  private running?: Promise<void>;
  private again = false;
  private readonly unsubscribe: Array<() => void> = [];
  private readonly timing: NodePolicyTiming;

  // eslint-disable-next-line max-params -- Nest resolves each parameter by its token: the list counts the provider's dependencies.
  constructor(
    private readonly kube: KubeConfig,
    @Inject(KUBE_ENV) private readonly env: NodeJS.ProcessEnv,
    private readonly config: ConfigStore,
    private readonly nodes: NodeCache,
    private readonly pods: PodCache,
    @Inject(NODE_COMMITMENTS) private readonly commitments: NodeCommitments,
    @Inject(NODE_USAGE) private readonly usage: PublishedUsage,
    private readonly background: BackgroundTasks,
    @InjectMetric(NODE_POLICY_ACTIVE_METRIC) private readonly activeGauge: Gauge<string>,
    @InjectMetric(NODE_TARGETS_METRIC) private readonly targetsGauge: Gauge<string>,
    @InjectMetric(NODE_TARGET_WRITES_METRIC) private readonly writes: Counter<string>,
    @InjectMetric(NODE_POLICY_PATH_CHECKS_METRIC) private readonly checks: Counter<string>,
    @InjectMetric(NODE_POLICY_LEADER_METRIC) private readonly leaderGauge: Gauge<string>,
    @InjectMetric(NODE_TARGET_DRIFT_METRIC) private readonly drift: Counter<string>,
    @InjectMetric(NODE_TARGET_PLANS_METRIC) private readonly plansCounter: Counter<string>,
    @Optional() @Inject(NODE_POLICY_TIMING) timing?: Partial<NodePolicyTiming>,
  ) {
    this.timing = { ...DEFAULT_TIMING, ...timing };
  }

  onModuleInit(): void {
    this.activeGauge.set(0);
    this.leaderGauge.set(0);
    for (const kind of ['entry', 'shard-missing']) this.drift.inc({ kind }, 0);
    for (const result of ['written', 'error']) this.writes.inc({ result }, 0);
    for (const answer of ['policy', 'webhook-only', 'unknown']) this.checks.inc({ answer }, 0);
    for (const how of ['planned', 'reused']) this.plansCounter.inc({ how }, 0);
    if (!inCluster(this.env)) {
      this.logger.log('node status path: the webhook alone (not in a cluster)');
      return;
    }
    const guard = <A extends unknown[]>(fn: (...args: A) => unknown) => this.background.guard('node-targets', fn);
    this.core = this.kube.makeApiClient(CoreV1Api);
    this.lease = new LeaderLease(
      this.kube.makeApiClient(CoordinationV1Api),
      { namespace: platformNamespace(this.env), name: NODE_POLICY_LEASE },
      leaseIdentity(this.env),
      guard((leader: boolean) => this.lead(leader)),
      { timing: this.timing.lease },
    );
    const changed = guard(() => this.schedule());
    this.unsubscribe.push(this.nodes.onNodes({ changed, listed: changed }), this.pods.onListed(changed), this.usage.onRead(changed));
    this.config.onChange(guard(({ config }) => this.follow(config.nodes)));
    this.lease.start();
    this.follow(this.config.snapshot().config.nodes);
  }

  async onApplicationShutdown(): Promise<void> {
    this.stopped = true;
    this.unsubscribe.forEach((unsubscribe) => unsubscribe());
    clearTimeout(this.detect);
    await this.lease?.stop();
    this.lead(false);
    await this.running;
  }

  /**
   * Looks the path up (and logs it when it changes), then publishes if leading; the next look-up
   * after detectMs, or sooner with backoff after an answer that was not definite.
   */
  private follow(nodes: NodesConfig | undefined): void {
    clearTimeout(this.detect);
    const lookup = ++this.lookups;
    void this.background.guard('node-targets', async () => {
      const answer = await this.detectPath(nodes);
      if (this.stopped || lookup !== this.lookups) return; // a newer look-up decides
      this.checks.inc({ answer: answer.path });
      const next = this.background.guard('node-targets', () => this.follow(this.config.snapshot().config.nodes));
      if (answer.path === 'unknown') {
        const delay = Math.min(this.timing.detectMs, this.timing.detectRetryMs * 2 ** this.unanswered++);
        this.logger.warn(`could not tell which path serves node status writes (${answer.why}): keeping ${this.describePath()}; asking again in ${delay} ms`);
        this.detect = setTimeout(next, delay);
        return;
      }
      this.unanswered = 0;
      if (answer.path !== this.path)
        this.logger.log(
          `node status path: ${answer.path === 'policy' ? `the MutatingAdmissionPolicy ${NODE_POLICY_NAME}, the webhook for what it cannot decide` : `the webhook alone (${answer.why})`}`,
        );
      this.path = answer.path;
      this.activeGauge.set(answer.path === 'policy' ? 1 : 0);
      this.schedule();
      this.detect = setTimeout(next, this.timing.detectMs);
    })();
  }

  private describePath(): string {
    if (this.path === undefined) return 'none decided yet, nothing published or withdrawn';
    return this.path === 'policy' ? 'the policy path' : 'the webhook alone';
  }

  /** The policy path is on when the config allows it, the API server serves MutatingAdmissionPolicy v1 and the policy is installed (PathAnswer). */
  private async detectPath(nodes: NodesConfig | undefined): Promise<PathAnswer> {
    if (nodes?.admissionPolicy === false) return { path: 'webhook-only', why: 'nodes.admissionPolicy: false' };
    const admission = this.kube.makeApiClient(AdmissionregistrationV1Api);
    const options = requestTimeout(this.timing.requestTimeoutMs);
    const server = this.kube.getCurrentCluster()?.server;
    let served: boolean;
    try {
      served = (await admission.getAPIResources(options)).resources.some((resource) => resource.name === 'mutatingadmissionpolicies');
    } catch (error) {
      if (apiErrorCode(error) !== 404) return { path: 'unknown', why: describeApiError(error, server) };
      served = false;
    }
    if (!served) {
      const version = await this.kube
        .makeApiClient(VersionApi)
        .getCode(options)
        .then((info) => info.gitVersion)
        .catch(() => 'unknown version');
      return {
        path: 'webhook-only',
        why: `the API server, ${version}, does not serve admissionregistration.k8s.io/v1 MutatingAdmissionPolicy: 1.36 or later does`,
      };
    }
    try {
      await admission.readMutatingAdmissionPolicy({ name: NODE_POLICY_NAME }, options);
      return { path: 'policy', why: '' };
    } catch (error) {
      const code = apiErrorCode(error);
      const why = `the policy ${NODE_POLICY_NAME} could not be read: ${describeApiError(error, server)}`;
      if (code === 404) return { path: 'webhook-only', why };
      if (code === 403) return { path: 'webhook-only', why: `${why} (the component k8s/node-policy, which grants reading it, is not installed)` };
      return { path: 'unknown', why };
    }
  }

  private lead(leader: boolean): void {
    if (leader === this.leading) return;
    this.leading = leader;
    this.leaderGauge.set(leader ? 1 : 0);
    this.nodes.use('node-policy', leader);
    clearInterval(this.resync);
    this.shards = undefined;
    this.plans = new TargetEntryPlans();
    this.targetsGauge.reset();
    if (!leader) return;
    this.resync = setInterval(
      this.background.guard('node-targets', () => {
        this.rereadDue = true;
        this.schedule();
      }),
      this.timing.resyncMs,
    );
    this.schedule();
  }

  /** One publication debounceMs after the first change, one at a time. */
  private schedule(): void {
    if (!this.leading || this.timer) return;
    this.timer = setTimeout(
      this.background.guard('node-targets', () => {
        this.timer = undefined;
        if (this.running) {
          this.again = true;
          return;
        }
        this.running = this.publish()
          .catch((error: unknown) => this.logger.warn(`could not publish the node targets: ${describeApiError(error, this.kube.getCurrentCluster()?.server)}`))
          .finally(() => {
            this.running = undefined;
            if (this.again) {
              this.again = false;
              this.schedule();
            }
          });
      }),
      this.timing.debounceMs,
    );
  }

  /** Whether a publication can be planned: the path known, and on the policy path every cache the plan reads listed. */
  private ready(): boolean {
    if (this.path === undefined) return false; // not looked up yet: neither publish nor withdraw
    if (this.path !== 'policy') return true;
    return this.nodes.isSynced() && (!floorEnabled(this.config.snapshot().config.nodes) || this.pods.isSynced());
  }

  /** The entries the shards must hold now: an entry's valid-until kept from `shards` while it may be (rule 8). */
  private desired(shards: ShardStates): Shards {
    if (this.path !== 'policy') return Array.from({ length: TARGET_SHARDS }, () => new Map());
    const nodesConfig = this.config.snapshot().config.nodes;
    const now = this.timing.clock();
    const entries = [];
    for (const node of this.nodes.nodes()) {
      const name = node.metadata?.name ?? '';
      const planned = this.plans.plan(node, this.commitments.committed(name) ?? NOTHING_COMMITTED, nodesConfig, this.usage.published(name));
      if (planned) entries.push({ name, entry: validUntil(planned.entry, shards[shardOf(name)]?.data.get(name), now, this.timing.entryValidityMs) });
    }
    const { planned, reused } = this.plans.endPublication();
    this.plansCounter.inc({ how: 'planned' }, planned);
    this.plansCounter.inc({ how: 'reused' }, reused);
    const { shards: desired, left } = planShards(entries);
    this.targetsGauge.set({ state: 'published' }, entries.length - left);
    this.targetsGauge.set({ state: 'left' }, left);
    if (left > 0) this.logger.warn(`${left} node targets did not fit their shard: the webhook serves those nodes`);
    return desired;
  }

  /**
   * Reads the shards when this leader does not know them (it just took the Lease, or a write
   * failed) or a resync is due, then writes what differs from the entries planned: a hand edit, a
   * `kubectl replace`, a deposed leader's late write or a recreated shard is repaired within one
   * resync, each entry found other than this leader left it counted as drift. A shard that does
   * not exist is left alone (its nodes are the webhook's: the policy finds no param) and counted.
   */
  private async publish(): Promise<void> {
    if (!this.leading || !this.ready()) return;
    const shards = await this.knownShards();
    if (!shards || !this.leading) return;
    const desired = this.desired(shards);
    const present = shards.map((shard) => shard?.data ?? new Map<string, string>());
    for (const { shard, data } of planShardPatches(present, desired)) {
      if (!this.leading) return;
      if (!shards[shard]) continue; // no ConfigMap to write (counted at the read)
      try {
        const written = await this.core!.patchNamespacedConfigMap(
          { name: shardName(shard), namespace: platformNamespace(this.env), body: { data }, fieldManager: 'kube-overcommit-node-policy' },
          setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
        );
        // What the shard holds now, another writer's concurrent change included: the next plan repairs it.
        shards[shard] = { data: new Map(Object.entries(written.data ?? {})), resourceVersion: written.metadata?.resourceVersion ?? '' };
        this.writes.inc({ result: 'written' });
      } catch (error) {
        this.writes.inc({ result: 'error' });
        this.logger.warn(`could not publish ${shardName(shard)}: ${describeApiError(error, this.kube.getCurrentCluster()?.server)}`);
        this.shards = undefined; // read again before the next write
        return;
      }
    }
  }

  /** The shards as this leader knows them, read first when it does not or a resync is due; undefined when they cannot be read on the webhook-alone path. */
  private async knownShards(): Promise<ShardStates | undefined> {
    const reread = this.rereadDue;
    this.rereadDue = false;
    if (this.shards && !reread) return this.shards;
    const known = this.shards;
    const read = this.readShards(known);
    // The webhook alone: the shards may not even exist (k8s/node-policy not installed), nothing to withdraw.
    const shards = this.path === 'policy' ? await read : await read.catch(() => undefined);
    if (!shards) return undefined;
    // Drift is the policy path's: without it the shards may not exist at all (the component not installed).
    if (known && this.path === 'policy') this.countDrift(known, shards);
    this.shards = shards;
    return shards;
  }

  /** Entries the shards hold other than this leader left them (changed, added, removed), and shards gone, counted as drift. */
  private countDrift(known: ShardStates, read: ShardStates): void {
    read.forEach((shard, index) => {
      const before = known[index];
      if (!shard) {
        this.drift.inc({ kind: 'shard-missing' });
        if (before) this.logger.warn(`${shardName(index)} is gone: the webhook serves its nodes until it is created again (k8s/node-policy)`);
        return;
      }
      if (!before || before.resourceVersion === shard.resourceVersion) return;
      const names = new Set([...before.data.keys(), ...shard.data.keys()]);
      const changed = [...names].filter((name) => before.data.get(name) !== shard.data.get(name)).length;
      if (changed === 0) return;
      this.drift.inc({ kind: 'entry' }, changed);
      this.logger.warn(`${shardName(index)}: ${changed} entries changed by another writer; writing the planned ones back`);
    });
  }

  /**
   * Every shard as stored, null for one that does not exist. With `known`, a shard whose
   * resourceVersion (read alone, as PartialObjectMetadata) is the known one is not read again.
   */
  private async readShards(known: ShardStates | undefined): Promise<ShardStates> {
    const namespace = platformNamespace(this.env);
    return Promise.all(
      Array.from({ length: TARGET_SHARDS }, async (_, shard) => {
        const name = shardName(shard);
        try {
          const before = known?.[shard];
          if (before) {
            const metadata = await this.core!.readNamespacedConfigMap({ name, namespace }, setHeaderOptions('Accept', PARTIAL_METADATA));
            if (metadata.metadata?.resourceVersion === before.resourceVersion) return before;
          }
          const configMap = await this.core!.readNamespacedConfigMap({ name, namespace });
          return { data: new Map(Object.entries(configMap.data ?? {})), resourceVersion: configMap.metadata?.resourceVersion ?? '' };
        } catch (error) {
          if (apiErrorCode(error) === 404) return null;
          throw error;
        }
      }),
    );
  }
}
