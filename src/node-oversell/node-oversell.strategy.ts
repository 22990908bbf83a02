import { Inject, Injectable, type OnModuleDestroy, type OnModuleInit } from '@nestjs/common';
import { InjectMetric } from '@willsoto/nestjs-prometheus';
import type { Counter, Gauge } from 'prom-client';
import { AdmissionStrategyProvider } from '../admission/admission-strategy.decorator.js';
import type { AdmissionRequest, AdmissionStrategy, PatchOperation, StrategyResult } from '../admission/admission.types.js';
import { annotationPatch } from '../admission/annotation-patch.js';
import { BackgroundTasks } from '../common/background-tasks.js';
import { readEnvInteger } from '../common/env-integer.js';
import { RecencyMap } from '../common/recency-map.js';
import { jsonPointer } from '../domain/json-pointer.js';
import { type OvercommitConfig } from '../overcommit.config.js';
import { MANAGED_RESOURCES, type ManagedResource } from '../domain/resources.js';
import { KUBE_ENV } from '../kube/kube.env.js';
import {
  floorEnabled,
  NODE_COMMITMENTS,
  NODE_EVENTS,
  type NodeCommitments,
  type NodeEventRecorder,
  NODE_USAGE,
  type NodeUsageRatios,
} from '../domain/node-rules/node-services.js';
import { NodeStatusPlans } from './node-status-plans.js';
import {
  NODE_ALLOCATABLE_OVERCOMMITTED_METRIC,
  NODE_ALLOCATABLE_RAW_METRIC,
  NODE_ALLOCATABLE_REASON_METRIC,
  NODE_METRICS_DROPPED_METRIC,
  NODE_RATIO_METRIC,
} from './node-oversell.metrics.js';
import {
  FLOOR_ANNOTATION,
  inflate,
  USAGE_ANNOTATION,
  type NodePolicy,
  type NodeStatusPlan,
  planNodeStatus,
  resolveNodePolicy,
} from '../domain/node-rules/node-oversell.rules.js';
import type { NodeLike } from '../domain/node-like.js';
import { baseAmountToNumber, formatResourceQuantity } from '../domain/quantity.js';
import { formatUsageEntry, type NodeUsageEntry } from '../domain/node-rules/usage-aware.rules.js';
import { isRecord } from '../common/is-record.js';

// The allocatable paths a node patch touches, escaped once (the patch is built at every heartbeat).
const ALLOCATABLE_PATH = Object.fromEntries(MANAGED_RESOURCES.map((resource) => [resource, jsonPointer(['status', 'allocatable', resource])]));

/**
 * RFC 6902 operations that turn `node` into what `plan` wants: a `replace` per managed
 * allocatable whose value changes (compared by value, so "4000m" vs "4" is no change), and
 * add/replace/remove per annotation of ours that changes (`/metadata/annotations` added as a
 * whole object when the node has none). Capacity and every other resource are never touched.
 */
export function nodeStatusPatch(node: NodeLike, plan: NodeStatusPlan): PatchOperation[] {
  const ops: PatchOperation[] = [];
  for (const resource of MANAGED_RESOURCES) {
    const desired = plan.allocatable[resource];
    if (desired === undefined || desired === plan.incoming[resource]) continue;
    ops.push({ op: 'replace', path: ALLOCATABLE_PATH[resource], value: formatResourceQuantity(resource, desired) });
  }

  // plan.annotations has each of NODE_ANNOTATIONS, in that order (planAnnotations).
  for (const op of annotationPatch(node.metadata, plan.annotations)) ops.push(op);
  return ops;
}

/**
 * How long a node's gauges stay without an admission for it at this replica. Every kubelet
 * writes its status at least every 5 minutes (nodeStatusReportFrequency), every 10 s when
 * inflated, so only a deleted node (or one whose calls all went to other replicas for an hour)
 * falls silent that long; its series then go, instead of growing with node churn.
 */
export const NODE_METRICS_TTL_MS = 60 * 60 * 1000;
const PRUNE_INTERVAL_MS = 60 * 1000;

/** Nodes whose gauges one replica exports at most, unless OVERCOMMIT_NODE_METRICS_MAX_NODES says otherwise. */
export const DEFAULT_NODE_METRICS_MAX_NODES = 10_000;

/** OVERCOMMIT_NODE_METRICS_MAX_NODES, a positive integer. Throws (the app does not start) on anything else. */
export function nodeMetricsMaxNodes(env: NodeJS.ProcessEnv): number {
  return readEnvInteger(env, 'OVERCOMMIT_NODE_METRICS_MAX_NODES', { fallback: DEFAULT_NODE_METRICS_MAX_NODES, min: 1, expected: 'a positive integer' });
}

const MAX_NODE_NAME_LENGTH = 253;
// apimachinery's IsDNS1123Subdomain, which the API server applies to Node names; no library here has it.
const DNS_SUBDOMAIN = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;

/** True for a string the API server accepts as a Node name: only those become a `node` label value. */
export function isNodeName(name: unknown): name is string {
  return typeof name === 'string' && name.length <= MAX_NODE_NAME_LENGTH && DNS_SUBDOMAIN.test(name);
}

/**
 * Inflates the allocatable each kubelet reports by its node's ratios (the rules in
 * node-oversell.rules.ts). Sees Node CREATE and every nodes/status UPDATE (the whole merged
 * Node, and the stored one as oldObject).
 */
@Injectable()
@AdmissionStrategyProvider({
  name: 'node-oversell',
  entry: 'nodes',
  rules: [
    { resource: 'nodes', subResource: '', operations: ['CREATE'] },
    { resource: 'nodes', subResource: 'status', operations: ['UPDATE'] },
  ],
})
export class NodeOversellStrategy implements AdmissionStrategy, OnModuleInit, OnModuleDestroy {
  /**
   * Per node: the pool label and the values the gauges hold (raw, allocatable, ratio, floor and
   * reason per resource, compared one by one), so unchanged updates cost nothing,
   * and when this replica last admitted it (Date.now()), for pruneSilentNodes. In the order the
   * nodes were last admitted, least recent first: both the silent and the over-limit nodes to
   * drop are at the front.
   */
  private readonly exported = new RecencyMap<string, { pool: string; values: readonly unknown[]; seenAt: number }>();
  private readonly maxNodes: number;
  /** Each node's last plan, reused while its heartbeats read the same (node-status-plans.ts). */
  private readonly plans: NodeStatusPlans;
  private pruneTimer?: NodeJS.Timeout;

  // eslint-disable-next-line max-params -- Nest resolves each parameter by its token: the list counts the provider's dependencies.
  constructor(
    @InjectMetric(NODE_ALLOCATABLE_RAW_METRIC) private readonly rawGauge: Gauge<string>,
    @InjectMetric(NODE_ALLOCATABLE_OVERCOMMITTED_METRIC) private readonly overcommittedGauge: Gauge<string>,
    @InjectMetric(NODE_RATIO_METRIC) private readonly ratioGauge: Gauge<string>,
    @InjectMetric(NODE_ALLOCATABLE_REASON_METRIC) private readonly reasonGauge: Gauge<string>,
    @InjectMetric(NODE_METRICS_DROPPED_METRIC) private readonly dropped: Counter<string>,
    private readonly background: BackgroundTasks,
    @Inject(KUBE_ENV) env: NodeJS.ProcessEnv,
    @Inject(NODE_COMMITMENTS) private readonly commitments: NodeCommitments,
    @Inject(NODE_EVENTS) private readonly events: NodeEventRecorder,
    @Inject(NODE_USAGE) private readonly usage: NodeUsageRatios,
  ) {
    this.maxNodes = nodeMetricsMaxNodes(env);
    this.plans = new NodeStatusPlans(this.maxNodes);
    for (const reason of ['silent', 'limit']) this.dropped.inc({ reason }, 0);
  }

  onModuleInit(): void {
    this.pruneTimer = setInterval(
      this.background.guard('node-metrics-prune', () => this.pruneSilentNodes(Date.now())),
      PRUNE_INTERVAL_MS,
    ).unref();
  }

  onModuleDestroy(): void {
    clearInterval(this.pruneTimer);
  }

  /** Removes the gauges of nodes not admitted here for NODE_METRICS_TTL_MS before `now`. */
  pruneSilentNodes(now: number): void {
    // Least recently admitted first: stop at the first node still calling.
    for (const [node, { seenAt }] of this.exported) {
      if (now - seenAt < NODE_METRICS_TTL_MS) break;
      this.drop(node, 'silent');
    }
  }

  private drop(node: string, reason: 'silent' | 'limit'): void {
    const { pool } = this.exported.get(node)!;
    this.exported.delete(node);
    this.plans.forget(node);
    this.dropped.inc({ reason });
    for (const resource of MANAGED_RESOURCES) this.removeSeries(node, resource, pool);
  }

  /** Every gauge series of one node's resource. */
  private removeSeries(node: string, resource: (typeof MANAGED_RESOURCES)[number], pool: string): void {
    this.rawGauge.remove({ node, resource });
    this.overcommittedGauge.remove({ node, resource });
    this.ratioGauge.remove({ node, resource, pool });
    for (const reason of ALLOCATABLE_REASONS) this.reasonGauge.remove({ node, resource, reason });
  }

  admit(request: AdmissionRequest, config: OvercommitConfig): StrategyResult {
    const node = asNode(request.object);
    if (node === undefined) return {};
    const name = node.metadata?.name ?? request.name;
    const { policy, decisions, plan } = this.planStatus(node, asNode(request.oldObject), name, config);
    if (plan === null) return {};
    const patch = nodeStatusPatch(node, plan);
    if (!request.dryRun && isNodeName(name)) {
      this.export(name, plan, policy, decisions);
      // Shadow writes nothing to the Node, so nothing starts or stops deciding there.
      if (policy?.mode !== 'shadow') this.reportFloor(name, node, plan);
    }
    // Shadow: the object stays as its writer sent it, so a kubelet write brings an inflated node back to raw.
    return patch.length === 0 || policy?.mode === 'shadow' ? {} : { patch };
  }

  /**
   * The node's policy under `config` with its usage-aware ratios applied, the usage decisions,
   * and its plan; `stored` is the Node as stored (the request's oldObject), absent on CREATE.
   */
  private planStatus(node: NodeLike, stored: NodeLike | undefined, name: string | undefined, config: OvercommitConfig) {
    const { policy, decisions } = this.usage.effective(name ?? '', resolveNodePolicy(node.metadata?.labels, config.nodes), stored ?? node);
    const committed = floorEnabled(config.nodes) && isNodeName(name) ? this.commitments.committed(name) : undefined;
    const usage = Object.keys(decisions).length > 0 ? formatUsageEntry(decisions) : null;
    const plan = isNodeName(name) ? this.plans.plan(name, node, policy, stored, committed, usage) : planNodeStatus(node, policy, stored, committed, usage);
    return { policy, decisions, plan };
  }

  /**
   * A Normal Event when the floor starts deciding the node's allocatable, and when it stops, read
   * from the incoming object's floor annotation: the same on every replica, and a reinvocation
   * (which carries our annotation) records nothing twice. A full hot node's floor is not reported
   * here: the usage-aware leader records NodeHot and NodeCooled (hot-nodes.rules.ts).
   */
  private reportFloor(name: string, node: NodeLike, plan: NodeStatusPlan): void {
    const annotations = isRecord(node.metadata?.annotations) ? node.metadata.annotations : {};
    const wasFull = typeof annotations[USAGE_ANNOTATION] === 'string' && annotations[USAGE_ANNOTATION].includes('"hot-full"');
    const before = typeof annotations[FLOOR_ANNOTATION] === 'string' && !wasFull;
    const after = plan.annotations[FLOOR_ANNOTATION] !== null && !plan.full;
    if (before === after) return;
    const uid = (node.metadata as { uid?: unknown } | undefined)?.uid;
    const ref = { name, ...(typeof uid === 'string' ? { uid } : {}) };
    if (after) this.events.record(ref, 'CommitmentFloorApplied', floorMessage(plan));
    else this.events.record(ref, 'CommitmentFloorLifted', 'allocatable follows the ratios again: the requests bound to the node fit in raw × ratio');
  }

  private export(node: string, plan: NodeStatusPlan, policy: NodePolicy | null, decisions: NodeUsageEntry): void {
    const pool = policy?.pool ?? '';
    const previous = this.exported.get(node);
    const seenAt = Date.now();
    if (previous?.pool === pool && exportsAlike(previous.values, plan, decisions)) {
      previous.seenAt = seenAt; // the steady state: a heartbeat
      this.exported.touch(node);
      return;
    }
    const values = exportValues(plan, decisions);
    if (previous !== undefined && previous.pool !== pool) {
      for (const resource of MANAGED_RESOURCES) this.ratioGauge.remove({ node, resource, pool: previous.pool });
    }
    // A new node beyond the limit: the least recently admitted one makes room.
    if (previous === undefined && this.exported.size >= this.maxNodes) this.drop(this.exported.oldest()![0], 'limit');
    this.exported.set(node, { pool, values, seenAt });
    for (const resource of MANAGED_RESOURCES) this.setSeries(node, resource, pool, plan, reasonOf(plan, decisions, resource));
  }

  /** One node resource's gauges as `plan` has them: its series removed when the plan has no value for it. */
  private setSeries(node: string, resource: ManagedResource, pool: string, plan: NodeStatusPlan, reason: AllocatableReason): void {
    const raw = plan.raw[resource];
    const inflated = plan.allocatable[resource];
    if (raw === undefined || inflated === undefined) {
      this.removeSeries(node, resource, pool);
      return;
    }
    this.rawGauge.set({ node, resource }, baseAmountToNumber(resource, raw));
    this.overcommittedGauge.set({ node, resource }, baseAmountToNumber(resource, inflated));
    this.ratioGauge.set({ node, resource, pool }, plan.ratios[resource] ?? 1);
    for (const other of ALLOCATABLE_REASONS) if (other !== reason) this.reasonGauge.remove({ node, resource, reason: other });
    this.reasonGauge.set({ node, resource, reason }, 1);
  }
}

/** The request's object or oldObject as a Node: undefined when it is not an object. */
function asNode(object: unknown): NodeLike | undefined {
  return typeof object === 'object' && object !== null ? (object as NodeLike) : undefined;
}

/**
 * What a node's gauges hold (raw, allocatable, ratio, floor and reason per resource), compared
 * one by one with what they held: an admission that changes none of it sets no gauge.
 */
function exportValues(plan: NodeStatusPlan, decisions: NodeUsageEntry): unknown[] {
  const values: unknown[] = [];
  for (const resource of MANAGED_RESOURCES)
    for (let slot = 0; slot < EXPORTED_PER_RESOURCE; slot++) values.push(exportedValue(plan, decisions, resource, slot));
  return values;
}

/** Whether `values` (from exportValues) are what `plan` and `decisions` export: compared in place, nothing built on a heartbeat. */
function exportsAlike(values: readonly unknown[], plan: NodeStatusPlan, decisions: NodeUsageEntry): boolean {
  let i = 0;
  for (const resource of MANAGED_RESOURCES) {
    for (let slot = 0; slot < EXPORTED_PER_RESOURCE; slot++) if (!Object.is(values[i++], exportedValue(plan, decisions, resource, slot))) return false;
  }
  return true;
}

/** Raw, allocatable, ratio, floor and reason: what the gauges hold per resource, in that order. */
const EXPORTED_PER_RESOURCE = 5;

function exportedValue(plan: NodeStatusPlan, decisions: NodeUsageEntry, resource: ManagedResource, slot: number): unknown {
  switch (slot) {
    case 0:
      return plan.raw[resource];
    case 1:
      return plan.allocatable[resource];
    case 2:
      return plan.ratios[resource];
    case 3:
      return plan.floor[resource];
    default:
      return reasonOf(plan, decisions, resource);
  }
}

/** What decided the node's allocatable for `resource`: a full hot node's requests, the floor, its usage-aware ratio, else its static ratio. */
function reasonOf(plan: NodeStatusPlan, decisions: NodeUsageEntry, resource: ManagedResource): AllocatableReason {
  if (plan.full) return 'hot-full';
  return plan.floor[resource] !== undefined ? 'floor' : ((decisions as Partial<Record<string, { reason: AllocatableReason }>>)[resource]?.reason ?? 'static');
}

/** What decided a node's allocatable for a resource: its ratio (`static`), its usage-aware ratio and why (docs/usage-aware.md), or the commitment floor. */
const ALLOCATABLE_REASONS = ['static', 'usage', 'hot', 'hot-full', 'stale', 'floor'] as const;
type AllocatableReason = (typeof ALLOCATABLE_REASONS)[number];

/** `allocatable raised to the requests bound to the node: cpu 7200m (raw 4 × ratio 1 = 4)`. */
function floorMessage(plan: NodeStatusPlan): string {
  const planned = inflate(plan.raw, plan.ratios);
  const parts = MANAGED_RESOURCES.filter((resource) => plan.floor[resource] !== undefined).map((resource) => {
    const f = (amount: bigint | undefined) => formatResourceQuantity(resource, amount ?? 0n);
    return `${resource} ${f(plan.floor[resource])} (raw ${f(plan.raw[resource])} × ratio ${plan.ratios[resource] ?? 1} = ${f(planned[resource])})`;
  });
  return `allocatable raised to the requests bound to the node, so the kubelet keeps admitting its running pods: ${parts.join(', ')}`;
}
