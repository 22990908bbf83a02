import { Inject, Injectable, Logger, type OnApplicationShutdown, type OnModuleInit } from '@nestjs/common';
import { InjectMetric, makeCounterProvider, makeGaugeProvider } from '@willsoto/nestjs-prometheus';
import type { Counter, Gauge } from 'prom-client';
import { AdmissionregistrationV1Api, CoordinationV1Api, CoreV1Api, KubeConfig, PatchStrategy, setHeaderOptions, VersionApi } from '@kubernetes/client-node';
import { BackgroundTasks } from '../common/background-tasks.js';
import type { NodesConfig } from '../domain/node-rules/node-oversell.config.js';
import { ConfigStore } from '../config/config.store.js';
import { describeApiError } from '../kube/api-error.js';
import { KUBE_ENV, inCluster, platformNamespace } from '../kube/kube.env.js';
import { LeaderLease, leaseIdentity } from '../kube/leader-lease.js';
import { NodeCache } from '../kube/node-cache.service.js';
import { PodCache } from '../kube/pod-cache.service.js';
import { floorEnabled, NODE_COMMITMENTS, type NodeCommitments, NODE_USAGE, type PublishedUsage } from '../domain/node-rules/node-services.js';
import { planShardPatches, planShards, planTargetEntry, shardName, type Shards, TARGET_SHARDS } from './node-targets.rules.js';

/** The policy the targets are for (k8s/node-policy/policy.yaml). */
export const NODE_POLICY_NAME = 'kube-overcommit-nodes';
/** The Lease electing the replica that publishes (k8s/node-policy/targets.yaml). */
export const NODE_POLICY_LEASE = 'kube-overcommit-node-policy';
export const NODE_POLICY_ACTIVE_METRIC = 'kube_overcommit_node_policy_active';
export const NODE_TARGETS_METRIC = 'kube_overcommit_node_targets_published';
export const NODE_TARGET_WRITES_METRIC = 'kube_overcommit_node_target_writes_total';

/** Which engine serves node status writes, as found at start-up (and re-checked at each config change). */
export type StatusPath = 'policy' | 'webhook-only';

/** After a change, the publication waits this long for more (a config edit moves every node at once). */
const DEBOUNCE_MS = 1_000;
/** A full publication this often while leading: what an event did not show. */
const RESYNC_MS = 30_000;
/** The path looked up again this often (the policy installed or removed, the API server upgraded). */
const DETECT_MS = 60_000;

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
];

/**
 * Publishes each node's target for the node-status policy (node-targets.rules.ts) into the shard
 * ConfigMaps, from the one replica holding the Lease, while the path is active; withdraws every
 * entry when `nodes.admissionPolicy` is set to false. Start-up logs which path serves node status
 * writes. The leader keeps the Node cache running.
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
  private published?: Map<string, string>[];
  private timer?: NodeJS.Timeout;
  private resync?: NodeJS.Timeout;
  private detect?: NodeJS.Timeout;
  private running?: Promise<void>;
  private again = false;
  private readonly unsubscribe: Array<() => void> = [];
  /** Why the webhook alone serves, for the start-up line. */
  private why = '';

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
  ) {}

  onModuleInit(): void {
    this.activeGauge.set(0);
    for (const result of ['written', 'error']) this.writes.inc({ result }, 0);
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
    );
    const changed = guard(() => this.schedule());
    this.unsubscribe.push(this.nodes.onNodes({ changed, listed: changed }), this.pods.onListed(changed), this.usage.onRead(changed));
    this.config.onChange(guard(({ config }) => this.follow(config.nodes)));
    this.lease.start();
    this.follow(this.config.snapshot().config.nodes);
    this.detect = setInterval(
      guard(() => this.follow(this.config.snapshot().config.nodes)),
      DETECT_MS,
    );
  }

  async onApplicationShutdown(): Promise<void> {
    this.unsubscribe.forEach((unsubscribe) => unsubscribe());
    clearInterval(this.detect);
    await this.lease?.stop();
    this.lead(false);
    await this.running;
  }

  /** Finds the path in force (and logs it when it changes), then publishes if leading. */
  private follow(nodes: NodesConfig | undefined): void {
    void this.background.guard('node-targets', async () => {
      const path = await this.detectPath(nodes);
      if (path !== this.path)
        this.logger.log(
          `node status path: ${path === 'policy' ? `the MutatingAdmissionPolicy ${NODE_POLICY_NAME}, the webhook for what it cannot decide` : `the webhook alone (${this.why})`}`,
        );
      this.path = path;
      this.activeGauge.set(path === 'policy' ? 1 : 0);
      this.schedule();
    })();
  }

  /** The policy path is on when the config allows it, the API server serves MutatingAdmissionPolicy v1 and the policy is installed. */
  private async detectPath(nodes: NodesConfig | undefined): Promise<StatusPath> {
    if (nodes?.admissionPolicy === false) return this.webhookOnly('nodes.admissionPolicy: false');
    const admission = this.kube.makeApiClient(AdmissionregistrationV1Api);
    try {
      const served = (await admission.getAPIResources()).resources.some((resource) => resource.name === 'mutatingadmissionpolicies');
      if (!served) {
        const version = await this.kube
          .makeApiClient(VersionApi)
          .getCode()
          .then((info) => info.gitVersion)
          .catch(() => 'unknown version');
        return this.webhookOnly(`the API server, ${version}, does not serve admissionregistration.k8s.io/v1 MutatingAdmissionPolicy: 1.36 or later does`);
      }
      await admission.readMutatingAdmissionPolicy({ name: NODE_POLICY_NAME });
      return 'policy';
    } catch (error) {
      return this.webhookOnly(`the policy ${NODE_POLICY_NAME} could not be read: ${describeApiError(error, this.kube.getCurrentCluster()?.server)}`);
    }
  }

  private webhookOnly(why: string): StatusPath {
    this.why = why;
    return 'webhook-only';
  }

  private lead(leader: boolean): void {
    if (leader === this.leading) return;
    this.leading = leader;
    this.nodes.use('node-policy', leader);
    clearInterval(this.resync);
    this.published = undefined;
    this.targetsGauge.reset();
    if (!leader) return;
    this.resync = setInterval(
      this.background.guard('node-targets', () => this.schedule()),
      RESYNC_MS,
    );
    this.schedule();
  }

  /** One publication DEBOUNCE_MS after the first change, one at a time. */
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
      DEBOUNCE_MS,
    );
  }

  /** The entries the shards must hold now; undefined while a cache the plan reads has not listed. */
  private desired(): Shards | undefined {
    const nodesConfig = this.config.snapshot().config.nodes;
    if (this.path === undefined) return undefined; // not looked up yet: neither publish nor withdraw
    if (this.path !== 'policy') return Array.from({ length: TARGET_SHARDS }, () => new Map());
    if (!this.nodes.isSynced() || (floorEnabled(nodesConfig) && !this.pods.isSynced())) return undefined;
    const entries = [];
    for (const node of this.nodes.nodes()) {
      const name = node.metadata?.name ?? '';
      const entry = planTargetEntry(node, this.commitments.committed(name) ?? {}, nodesConfig, this.usage.published(name));
      if (entry) entries.push(entry);
    }
    const { shards, left } = planShards(entries);
    this.targetsGauge.set({ state: 'published' }, entries.length - left);
    this.targetsGauge.set({ state: 'left' }, left);
    if (left > 0) this.logger.warn(`${left} node targets did not fit their shard: the webhook serves those nodes`);
    return shards;
  }

  private async publish(): Promise<void> {
    const desired = this.desired();
    if (!this.leading || !desired) return;
    if (!this.published) {
      const read = this.readShards();
      // The webhook alone: the shards may not even exist (k8s/node-policy not installed), nothing to withdraw.
      this.published = this.path === 'policy' ? await read : await read.catch(() => undefined);
      if (!this.published) return;
    }
    for (const { shard, data } of planShardPatches(this.published, desired)) {
      if (!this.leading) return;
      try {
        await this.core!.patchNamespacedConfigMap(
          { name: shardName(shard), namespace: platformNamespace(this.env), body: { data }, fieldManager: 'kube-overcommit-node-policy' },
          setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
        );
        this.published[shard] = new Map(desired[shard]);
        this.writes.inc({ result: 'written' });
      } catch (error) {
        this.writes.inc({ result: 'error' });
        this.logger.warn(`could not publish ${shardName(shard)}: ${describeApiError(error, this.kube.getCurrentCluster()?.server)}`);
        this.published = undefined; // read again before the next write
        return;
      }
    }
  }

  private async readShards(): Promise<Map<string, string>[]> {
    const namespace = platformNamespace(this.env);
    return Promise.all(
      Array.from({ length: TARGET_SHARDS }, async (_, shard) => {
        const configMap = await this.core!.readNamespacedConfigMap({ name: shardName(shard), namespace });
        return new Map(Object.entries(configMap.data ?? {}));
      }),
    );
  }
}
