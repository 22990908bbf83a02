import { Injectable, type OnModuleDestroy, type OnModuleInit } from '@nestjs/common';
import { InjectMetric } from '@willsoto/nestjs-prometheus';
import type { Gauge } from 'prom-client';
import { AdmissionStrategyProvider } from '../admission/admission-strategy.decorator.js';
import type { AdmissionRequest, AdmissionStrategy, PatchOperation, StrategyResult } from '../admission/admission.types.js';
import { jsonPointer } from '../common/json-pointer.js';
import { MANAGED_RESOURCES, type OvercommitConfig } from '../config/config.schema.js';
import { NODE_ALLOCATABLE_OVERCOMMITTED_METRIC, NODE_ALLOCATABLE_RAW_METRIC, NODE_RATIO_METRIC } from './node-oversell.metrics.js';
import {
  NODE_ANNOTATIONS,
  type NodeLike,
  type NodePolicy,
  type NodeStatusPlan,
  planNodeStatus,
  resolveNodePolicy,
} from './node-oversell.rules.js';
import { baseAmountToNumber, formatResourceQuantity } from './quantity.js';

// The only paths a node patch touches, escaped once (the patch is built at every heartbeat).
const ALLOCATABLE_PATH = Object.fromEntries(MANAGED_RESOURCES.map((resource) => [resource, jsonPointer(['status', 'allocatable', resource])]));
const ANNOTATION_PATH = Object.fromEntries(NODE_ANNOTATIONS.map((key) => [key, jsonPointer(['metadata', 'annotations', key])]));

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

  const current = node.metadata?.annotations;
  const added: Record<string, string> = {};
  for (const key of NODE_ANNOTATIONS) {
    const desired = plan.annotations[key];
    const present = current !== undefined && current !== null && Object.prototype.hasOwnProperty.call(current, key);
    if (desired === null) {
      if (present) ops.push({ op: 'remove', path: ANNOTATION_PATH[key] });
    } else if (!present || current[key] !== desired) {
      if (current === undefined || current === null) added[key] = desired;
      else ops.push({ op: present ? 'replace' : 'add', path: ANNOTATION_PATH[key], value: desired });
    }
  }
  if (Object.keys(added).length > 0) {
    ops.push(
      node.metadata === undefined || node.metadata === null
        ? { op: 'add', path: '/metadata', value: { annotations: added } }
        : { op: 'add', path: '/metadata/annotations', value: added },
    );
  }
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

/**
 * Inflates the allocatable each kubelet reports by its node's ratios (DESIGN.md, "Node
 * oversell"). Sees Node CREATE and every nodes/status UPDATE (the whole merged Node).
 */
@Injectable()
@AdmissionStrategyProvider({
  name: 'node-oversell',
  rules: [
    { resource: 'nodes', subResource: '', operations: ['CREATE'] },
    { resource: 'nodes', subResource: 'status', operations: ['UPDATE'] },
  ],
})
export class NodeOversellStrategy implements AdmissionStrategy, OnModuleInit, OnModuleDestroy {
  /**
   * Per node: the pool label and the values the gauges hold, so unchanged updates cost nothing,
   * and when this replica last admitted it (Date.now()), for pruneSilentNodes.
   */
  private readonly exported = new Map<string, { pool: string; signature: string; seenAt: number }>();
  private pruneTimer?: NodeJS.Timeout;

  constructor(
    @InjectMetric(NODE_ALLOCATABLE_RAW_METRIC) private readonly rawGauge: Gauge<string>,
    @InjectMetric(NODE_ALLOCATABLE_OVERCOMMITTED_METRIC) private readonly overcommittedGauge: Gauge<string>,
    @InjectMetric(NODE_RATIO_METRIC) private readonly ratioGauge: Gauge<string>,
  ) {}

  onModuleInit(): void {
    this.pruneTimer = setInterval(() => this.pruneSilentNodes(Date.now()), PRUNE_INTERVAL_MS).unref();
  }

  onModuleDestroy(): void {
    clearInterval(this.pruneTimer);
  }

  /** Removes the gauges of nodes not admitted here for NODE_METRICS_TTL_MS before `now`. */
  pruneSilentNodes(now: number): void {
    for (const [node, { pool, seenAt }] of this.exported) {
      if (now - seenAt < NODE_METRICS_TTL_MS) continue;
      this.exported.delete(node);
      for (const resource of MANAGED_RESOURCES) {
        this.rawGauge.remove({ node, resource });
        this.overcommittedGauge.remove({ node, resource });
        this.ratioGauge.remove({ node, resource, pool });
      }
    }
  }

  admit(request: AdmissionRequest, config: OvercommitConfig): StrategyResult {
    const node = request.object as NodeLike | undefined;
    if (typeof node !== 'object' || node === null) return {};
    const policy = resolveNodePolicy(node.metadata?.labels, config.nodes);
    const plan = planNodeStatus(node, policy);
    if (plan === null) return {};
    const patch = nodeStatusPatch(node, plan);
    const name = node.metadata?.name ?? request.name;
    if (!request.dryRun && name) this.export(name, plan, policy);
    return patch.length === 0 ? {} : { patch };
  }

  private export(node: string, plan: NodeStatusPlan, policy: NodePolicy | null): void {
    const pool = policy?.pool ?? '';
    let signature = '';
    for (const resource of MANAGED_RESOURCES) signature += `${plan.raw[resource]}/${plan.allocatable[resource]}/${plan.ratios[resource]};`;
    const previous = this.exported.get(node);
    const seenAt = Date.now();
    if (previous?.pool === pool && previous.signature === signature) {
      previous.seenAt = seenAt; // the steady state: a heartbeat
      return;
    }
    if (previous !== undefined && previous.pool !== pool) {
      for (const resource of MANAGED_RESOURCES) this.ratioGauge.remove({ node, resource, pool: previous.pool });
    }
    this.exported.set(node, { pool, signature, seenAt });
    for (const resource of MANAGED_RESOURCES) {
      const raw = plan.raw[resource];
      const inflated = plan.allocatable[resource];
      if (raw === undefined || inflated === undefined) {
        this.rawGauge.remove({ node, resource });
        this.overcommittedGauge.remove({ node, resource });
        this.ratioGauge.remove({ node, resource, pool });
        continue;
      }
      this.rawGauge.set({ node, resource }, baseAmountToNumber(resource, raw));
      this.overcommittedGauge.set({ node, resource }, baseAmountToNumber(resource, inflated));
      this.ratioGauge.set({ node, resource, pool }, plan.ratios[resource] ?? 1);
    }
  }
}
