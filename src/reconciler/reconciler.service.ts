import { Inject, Injectable, Logger, type OnApplicationShutdown, type OnModuleInit } from '@nestjs/common';
import { InjectMetric, makeCounterProvider, makeGaugeProvider } from '@willsoto/nestjs-prometheus';
import type { Counter, Gauge } from 'prom-client';
import { CoordinationV1Api, CoreV1Api, KubeConfig, PatchStrategy, setHeaderOptions } from '@kubernetes/client-node';
import { BackgroundTasks } from '../common/background-tasks.js';
import type { NodesConfig } from '../domain/node-rules/node-oversell.config.js';
import { ConfigStore } from '../config/config.store.js';
import { KUBE_ENV, inCluster, platformNamespace } from '../kube/kube.env.js';
import { LeaderLease, leaseIdentity } from '../kube/leader-lease.js';
import { PodCache } from '../kube/pod-cache.service.js';
import { NodeCache } from '../kube/node-cache.service.js';
import { floorEnabled, NODE_COMMITMENTS, type NodeCommitments, NODE_USAGE, type PublishedUsage } from '../domain/node-rules/node-services.js';
import type { NodeLike } from '../domain/node-like.js';
import { fullBucket, isNudgeDue, type Nudged, planNudges, readNudge, type TokenBucket, takeToken } from './reconciler.rules.js';

/** The Lease that elects the one replica that nudges, in the webhook's namespace (k8s/base/rbac.yaml). */
export const RECONCILER_LEASE = 'kube-overcommit-reconciler';
export const RECONCILE_NUDGES_METRIC = 'kube_overcommit_reconcile_nudges_total';
export const RECONCILER_LEADER_METRIC = 'kube_overcommit_reconciler_leader';
export const RECONCILER_ENABLED_METRIC = 'kube_overcommit_reconciler_enabled';
/** applied: the Node as stored after the nudge matches its plan; unchanged: it does not (the webhook did not write it); failed: the PATCH failed. */
export const NUDGE_OUTCOMES = ['applied', 'unchanged', 'failed'] as const;
type NudgeOutcome = (typeof NUDGE_OUTCOMES)[number];

/** Before a node is nudged again for the same target (rule 2): the webhook may be down. */
const RETRY_AFTER_MS = 30_000;
/** A full scan this often while leading: retries, and anything an event did not show. */
const RESYNC_MS = 30_000;
/** Nudges in flight at once: the pace is the token bucket's, this only bounds a slow API server. */
const MAX_IN_FLIGHT = 32;

export const reconcilerMetrics = [
  makeCounterProvider({
    name: RECONCILE_NUDGES_METRIC,
    help: `Nudges (no-op PATCHes of nodes/<name>/status, so that the webhook writes the planned allocatable) sent by the reconciler, by outcome: ${NUDGE_OUTCOMES.join(', ')}.`,
    labelNames: ['outcome'],
  }),
  makeGaugeProvider({
    name: RECONCILER_LEADER_METRIC,
    help: `1 while this replica holds the Lease ${RECONCILER_LEASE} and reconciles nodes, else 0.`,
  }),
  // With the leader gauge: "enabled and nobody leads" (alert KubeOvercommitReconcilerLeaderMissing).
  makeGaugeProvider({
    name: RECONCILER_ENABLED_METRIC,
    help: `1 while this replica runs for the Lease ${RECONCILER_LEASE} (nodes.reconcile.enabled, in a cluster), else 0.`,
  }),
];

/**
 * Nudges the nodes whose stored allocatable differs from the plan (reconciler.rules.ts), from
 * the one replica holding the Lease, at most `nodes.reconcile.maxNodesPerSecond` a second. It
 * runs while `nodes.reconcile.enabled` (the default) and the webhook talks to a cluster; it
 * scans every node when it becomes leader, when the config changes, when the caches list and
 * every 30 s, and checks a node at each of its cache events. The leader keeps the Node cache
 * (NodeCache) running; the other replicas do not need it.
 *
 * RBAC: patch on nodes/status; get and update on the Lease (created by the manifests).
 */
@Injectable()
export class Reconciler implements OnModuleInit, OnApplicationShutdown {
  private readonly logger = new Logger('Reconciler');
  private lease?: LeaderLease;
  private core?: CoreV1Api;
  private running = false;
  private leading = false;
  private readonly nudged = new Map<string, Nudged>();
  /** Due nodes, in the order found: node → target. */
  private readonly queue = new Map<string, string>();
  private bucket: TokenBucket = fullBucket(1, 0);
  private inFlight = 0;
  private wait?: NodeJS.Timeout;
  private resync?: NodeJS.Timeout;
  private lastError = '';
  private readonly unsubscribe: Array<() => void> = [];

  // eslint-disable-next-line max-params -- Nest resolves each parameter by its token: the list counts the provider's dependencies.
  constructor(
    private readonly kube: KubeConfig,
    @Inject(KUBE_ENV) private readonly env: NodeJS.ProcessEnv,
    private readonly config: ConfigStore,
    private readonly nodes: NodeCache,
    private readonly pods: PodCache,
    @Inject(NODE_COMMITMENTS) private readonly commitments: NodeCommitments,
    private readonly background: BackgroundTasks,
    @Inject(NODE_USAGE) private readonly usage: PublishedUsage,
    @InjectMetric(RECONCILE_NUDGES_METRIC) private readonly nudges: Counter<string>,
    @InjectMetric(RECONCILER_LEADER_METRIC) private readonly leaderGauge: Gauge<string>,
    @InjectMetric(RECONCILER_ENABLED_METRIC) private readonly enabledGauge: Gauge<string>,
  ) {}

  onModuleInit(): void {
    for (const outcome of NUDGE_OUTCOMES) this.nudges.inc({ outcome }, 0);
    this.leaderGauge.set(0);
    this.enabledGauge.set(0);
    if (!inCluster(this.env)) return;
    const guard = <A extends unknown[]>(fn: (...args: A) => unknown) => this.background.guard('reconcile', fn);
    this.core = this.kube.makeApiClient(CoreV1Api);
    const ref = { namespace: platformNamespace(this.env), name: RECONCILER_LEASE };
    this.lease = new LeaderLease(
      this.kube.makeApiClient(CoordinationV1Api),
      ref,
      leaseIdentity(this.env),
      guard((leader: boolean) => this.lead(leader)),
    );
    const scan = guard(() => this.scan());
    this.unsubscribe.push(
      this.nodes.onNodes({ changed: guard((node: NodeLike) => this.check(node)), listed: scan }),
      this.pods.onListed(scan),
      // New published usage-aware ratios are new targets, like a config edit.
      this.usage.onRead(scan),
    );
    this.config.onChange(guard(({ config }) => this.follow(config.nodes)));
    this.follow(this.config.snapshot().config.nodes);
  }

  async onApplicationShutdown(): Promise<void> {
    this.unsubscribe.forEach((unsubscribe) => unsubscribe());
    this.running = false;
    await this.lease?.stop();
    this.lead(false);
  }

  /** Runs for the Lease while the config enables the reconciler; a new config means new targets. */
  private follow(nodes: NodesConfig | undefined): void {
    const enabled = nodes?.reconcile?.enabled !== false;
    this.enabledGauge.set(enabled ? 1 : 0);
    if (enabled && !this.running) {
      this.running = true;
      this.logger.log(
        `reconciler on, at most ${nodes?.reconcile?.maxNodesPerSecond ?? 100} nodes a second; leader by Lease ${platformNamespace(this.env)}/${RECONCILER_LEASE}`,
      );
      this.lease!.start();
    } else if (!enabled && this.running) {
      this.running = false;
      this.logger.log('reconciler off (nodes.reconcile.enabled: false)');
      void this.lease!.stop();
      this.lead(false);
    } else this.scan();
  }

  private lead(leader: boolean): void {
    if (leader === this.leading) return;
    this.leading = leader;
    this.leaderGauge.set(leader ? 1 : 0);
    this.nodes.use('reconciler', leader);
    clearInterval(this.resync);
    clearTimeout(this.wait);
    this.wait = undefined;
    this.queue.clear();
    if (!leader) return;
    this.bucket = fullBucket(this.rate(), performance.now());
    this.resync = setInterval(
      this.background.guard('reconcile', () => this.scan()),
      RESYNC_MS,
    );
    this.scan();
  }

  private rate(): number {
    return this.config.snapshot().config.nodes?.reconcile?.maxNodesPerSecond ?? 100;
  }

  /** Undefined: the plan cannot be trusted yet (a cache has not listed). */
  private committedOf(): ((node: string) => ReturnType<NodeCommitments['committed']>) | undefined {
    if (!this.nodes.isSynced()) return undefined;
    if (!floorEnabled(this.config.snapshot().config.nodes)) return () => undefined;
    // The webhook's floor reads the pod cache: until it has listed, what it writes is not known.
    if (!this.pods.isSynced()) return undefined;
    return (node) => this.commitments.committed(node);
  }

  private scan(): void {
    const committedOf = this.committedOf();
    if (!this.leading || !committedOf) return;
    const now = performance.now();
    for (const [node, last] of this.nudged) if (now - last.at >= RETRY_AFTER_MS) this.nudged.delete(node);
    const retry = { nudged: this.nudged, now, retryAfterMs: RETRY_AFTER_MS };
    for (const { node, target } of planNudges(this.nodes.nodes(), this.config.snapshot().config.nodes, committedOf, retry, (name) =>
      this.usage.published(name),
    )) {
      this.queue.set(node, target);
    }
    this.pump();
  }

  private check(node: NodeLike): void {
    const committedOf = this.committedOf();
    const name = node.metadata?.name;
    if (!this.leading || !committedOf || !name) return;
    const decision = readNudge(node, this.config.snapshot().config.nodes, committedOf(name), this.usage.published(name));
    if (decision.due && isNudgeDue(decision.target, this.nudged.get(name), performance.now(), RETRY_AFTER_MS)) {
      this.queue.set(name, decision.target);
      this.pump();
    }
  }

  /** Sends the queued nudges as the token bucket allows (rule 4), each re-checked against the cache first. */
  private pump(): void {
    const committedOf = this.committedOf();
    if (this.wait || !this.leading || !committedOf) return;
    const nodesConfig = this.config.snapshot().config.nodes;
    const rate = this.rate();
    for (const [name] of this.queue) {
      if (this.inFlight >= MAX_IN_FLIGHT) return;
      const node = this.nodes.node(name);
      const decision = node ? readNudge(node, nodesConfig, committedOf(name), this.usage.published(name)) : undefined;
      if (!decision?.due || !isNudgeDue(decision.target, this.nudged.get(name), performance.now(), RETRY_AFTER_MS)) {
        this.queue.delete(name);
        continue;
      }
      const { bucket, waitMs } = takeToken(this.bucket, rate, performance.now());
      this.bucket = bucket;
      if (waitMs > 0) {
        this.wait = setTimeout(
          this.background.guard('reconcile', () => {
            this.wait = undefined;
            this.pump();
          }),
          waitMs,
        );
        return;
      }
      this.queue.delete(name);
      this.nudged.set(name, { target: decision.target, at: performance.now() });
      this.inFlight++;
      void this.nudge(name).then(
        this.background.guard('reconcile', (outcome: NudgeOutcome) => {
          this.inFlight--;
          this.nudges.inc({ outcome });
          this.pump();
        }),
      );
    }
  }

  /**
   * An empty merge patch of the node's status: the API server runs admission on the stored
   * Node, the webhook patches it to the plan, and the write is stored (with no patch from the
   * webhook, the object is unchanged and nothing is written).
   */
  private async nudge(name: string): Promise<NudgeOutcome> {
    try {
      const stored = await this.core!.patchNodeStatus(
        { name, body: {}, fieldManager: 'kube-overcommit-reconciler' },
        setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
      );
      const committed = this.committedOf()?.(name);
      return readNudge(stored as NodeLike, this.config.snapshot().config.nodes, committed, this.usage.published(name)).due ? 'unchanged' : 'applied';
    } catch (error) {
      const message = (error as Error).message;
      if (message !== this.lastError) this.logger.warn(`could not nudge node ${name}: ${message}`);
      this.lastError = message;
      return 'failed';
    }
  }
}
