/**
 * The plan: per node, what the webhook writes at the node's next status write under a config,
 * beside what is stored and what its pods request. Pure functions, shared by `GET /plan` (from
 * the server's informer caches) and `kube-overcommit plan` (from one LIST). The invariants:
 *
 *   1. Planned allocatable = planNodeStatus(stored, policy, stored, committed).allocatable, the
 *      function the webhook runs, on the stored Node as both the incoming object and oldObject,
 *      with what the kubelet admitted the node's pods at (pod-resources.ts admittedPodRequests)
 *      as the commitment floor when the config has it on: what a
 *      status write that does not change the kubelet's raw values produces. Plan and webhook
 *      cannot disagree.
 *   2. The mode does not change the plan: a node in `shadow` plans what `enforce` writes.
 *   3. Requests are the requests of the node's bound, non-terminal pods as the scheduler counts
 *      them (scheduledPodRequests: a Deferred resize at its desired requests); headroom = planned − requests, per resource, negative when
 *      overcommitted; `fits` = how many more pods of the given size the headroom holds, the
 *      pod counting one against `pods`.
 *   4. `matches` is true when every managed resource's stored value equals the planned one
 *      (compared by value, so "4000m" matches "4").
 *   5. Usage-aware ratios: the ratio in force is the published one, capped at the ceiling, as the
 *      webhook applies it (effectivePolicy); `ratioReasons` says per resource what decided the
 *      planned value: `static`, `usage`, `hot`, `stale`, `floor`, or `hot-full` for every
 *      resource of a full hot node (hot-nodes.rules.ts: planned = its requests).
 *   6. On a node of a pool with `exclusiveCpus`, `exclusiveCpus` shows the exclusive CPUs its
 *      pods request (Guaranteed, integer cpu) beside the raw cpu allocatable that bounds them
 *      (the pod cap, docs/pod-policy.md); null elsewhere.
 */
import { type NodeMode, type NodesConfig } from './node-oversell.config.js';
import { MANAGED_RESOURCES, type ManagedResource, type ResourceAmounts } from '../resources.js';
import { type AppliedRatios, type NodePolicy, type NodeStatusPlan, planNodeStatus, readAmounts, readRecord, resolveNodePolicy } from './node-oversell.rules.js';
import type { NodeLike } from '../node-like.js';
import { floorEnabled } from './node-services.js';
import { formatResourceQuantity, parseResourceQuantity } from '../quantity.js';
import { effectivePolicy, formatUsageEntry, type NodeUsageEntry, type UsageReason } from './usage-aware.rules.js';

/** Quantities per managed resource, in the canonical form of formatResourceQuantity. */
export type Quantities = Partial<Record<ManagedResource, string>>;

/** Why the node has the ratios it has: a pool, the default ratios, or an opt-out label. */
export type RatioReason = 'pool' | 'defaultRatios' | 'opted-out';

export interface NodePlanRow {
  node: string;
  /** The matching pool's name; null for the default ratios or an opted-out node. */
  pool: string | null;
  reason: RatioReason;
  /** null when opted out (nothing to enforce or shadow). */
  mode: NodeMode | null;
  /** The ratios the planned values apply, only those ≠ 1. */
  ratios: AppliedRatios;
  /** What decided each planned value (rule 5). */
  ratioReasons: Partial<Record<ManagedResource, UsageReason | 'floor'>>;
  raw: Quantities;
  planned: Quantities;
  stored: Quantities;
  requests: Quantities;
  headroom: Quantities;
  /** Rule 6: exclusive CPUs requested and the raw cpu that bounds them; null when the pool does not declare exclusiveCpus. */
  exclusiveCpus: { requested: string; raw: string } | null;
  /** How many more pods of the requested size fit; null when no size was given. */
  fits: number | null;
  matches: boolean;
  /** Set when the stored Node cannot be planned (an unparsable quantity): the other fields are empty. */
  error?: string;
}

export interface ClusterPlan {
  nodes: NodePlanRow[];
  /** The pod size `fits` counts, as given. */
  podSize: Quantities | null;
}

/** The amounts present, as Quantities. */
export function formatQuantities(amounts: ResourceAmounts): Quantities {
  const out: Quantities = {};
  for (const resource of MANAGED_RESOURCES) {
    const amount = amounts[resource];
    if (amount !== undefined) out[resource] = formatResourceQuantity(resource, amount);
  }
  return out;
}

/**
 * `cpu=500m,memory=1Gi`: the managed resources of one pod. Throws with the offending part on
 * anything else (an unknown resource, a bad or negative quantity, a repeated key).
 */
export function readPodSize(text: string): ResourceAmounts {
  const size: ResourceAmounts = {};
  for (const part of text.split(',')) {
    const [key, value, extra] = part.trim().split('=');
    if (!(MANAGED_RESOURCES as readonly string[]).includes(key) || value === undefined || extra !== undefined) {
      throw new Error(`pod size ${JSON.stringify(part)}: expected <resource>=<quantity>, resource one of ${MANAGED_RESOURCES.join(', ')}`);
    }
    const resource = key as ManagedResource;
    if (size[resource] !== undefined) throw new Error(`pod size: ${resource} given twice`);
    const amount = parseResourceQuantity(resource, value);
    if (amount < 0n) throw new Error(`pod size: ${resource} must not be negative`);
    size[resource] = amount;
  }
  return size;
}

/** How many pods of `size` fit in `headroom` (rule 3): the pod itself counts one against `pods`. */
export function podsThatFit(headroom: ResourceAmounts, size: ResourceAmounts): number {
  const perPod: ResourceAmounts = { ...size, pods: 1n };
  let fits: bigint | undefined;
  for (const resource of MANAGED_RESOURCES) {
    const need = perPod[resource];
    if (need === undefined || need === 0n) continue;
    const left = headroom[resource] ?? 0n;
    const count = left <= 0n ? 0n : left / need;
    if (fits === undefined || count < fits) fits = count;
  }
  return Number(fits ?? 0n);
}

/** planned − requests per planned resource (rule 3). */
function headroomOf(planned: ResourceAmounts, requests: ResourceAmounts): ResourceAmounts {
  const headroom: ResourceAmounts = {};
  for (const resource of MANAGED_RESOURCES) {
    const amount = planned[resource];
    if (amount !== undefined) headroom[resource] = amount - (requests[resource] ?? 0n);
  }
  return headroom;
}

/** Rule 5: per planned resource, `hot-full` on a full node, else the floor when it decided, else the usage-aware reason, else `static`. */
function ratioReasons(
  planned: ResourceAmounts,
  { floor, full }: Pick<NodeStatusPlan, 'floor' | 'full'>,
  decisions: NodeUsageEntry,
): NodePlanRow['ratioReasons'] {
  const reasons: NodePlanRow['ratioReasons'] = {};
  for (const resource of MANAGED_RESOURCES) {
    if (planned[resource] === undefined) continue;
    const decision = (decisions as Partial<Record<ManagedResource, { reason: UsageReason }>>)[resource];
    reasons[resource] = full ? 'hot-full' : floor[resource] !== undefined ? 'floor' : (decision?.reason ?? 'static');
  }
  return reasons;
}

/** Rule 6: the exclusive CPUs requested beside the raw cpu that bounds them, where the pool declares exclusiveCpus. */
function exclusiveCpusOf(policy: NodePolicy | null, plan: NodeStatusPlan | null, requested = 0n): NodePlanRow['exclusiveCpus'] {
  const raw = plan?.raw.cpu;
  if (!policy?.exclusiveCpus || raw === undefined) return null;
  return { requested: formatResourceQuantity('cpu', requested), raw: formatResourceQuantity('cpu', raw) };
}

/**
 * What is known of a node beside its object and its pods' requests: its published usage-aware
 * entry, the Σ of its pods' exclusive CPUs, and the Σ of what the kubelet admitted them at (the
 * floor, rule 1; absent: the requests, as for pods with no resize pending, where the two agree).
 */
export interface NodeFacts {
  usage?: NodeUsageEntry;
  exclusiveCpu?: bigint;
  admitted?: ResourceAmounts;
}

/** A stored Node's policy (usage-aware ratios applied), the usage decisions, and a thunk of its plan (rule 1). */
export interface StoredNodePlan {
  policy: NodePolicy | null;
  decisions: NodeUsageEntry;
  /** Rule 1's plan, with the usage annotation the webhook writes; throws on an unreadable quantity. */
  plan(): NodeStatusPlan | null;
}

/**
 * Rule 1 for one stored Node: planNodeStatus on the Node as incoming object and oldObject, the
 * `admitted` requests as the floor when the config has it on, and the usage-aware entry as the webhook
 * applies it (effectivePolicy, the decisions annotated). The plan's allocatable and annotations
 * are what the webhook writes at a status write that keeps the kubelet's raw values.
 */
export function planStoredNode(node: NodeLike, admitted: ResourceAmounts, nodesConfig: NodesConfig | undefined, usage?: NodeUsageEntry): StoredNodePlan {
  const { policy, decisions } = effectivePolicy(resolveNodePolicy(node.metadata?.labels, nodesConfig), usage, readRecord(node.metadata?.annotations)?.ratios);
  const annotation = Object.keys(decisions).length > 0 ? formatUsageEntry(decisions) : null;
  return { policy, decisions, plan: () => planNodeStatus(node, policy, node, floorEnabled(nodesConfig) ? admitted : undefined, annotation) };
}

/** The plan for one stored Node, with the requests of its bound pods and its published usage-aware entry (rules 1–5). */
export function planNode(
  node: NodeLike,
  requests: ResourceAmounts,
  nodesConfig: NodesConfig | undefined,
  podSize: ResourceAmounts | null,
  { usage, exclusiveCpu, admitted = requests }: NodeFacts = {},
): NodePlanRow {
  const stored = planStoredNode(node, admitted, nodesConfig, usage);
  const { policy, decisions } = stored;
  const row = unplannedRow(node, policy, requests);
  try {
    const plan = stored.plan();
    return { ...row, ...plannedColumns(node, plan, requests, decisions, podSize), exclusiveCpus: exclusiveCpusOf(policy, plan, exclusiveCpu) };
  } catch (error) {
    return { ...row, error: (error as Error).message, matches: false };
  }
}

/** A node's row before its plan: who decides its ratios, and its requests; the planned columns empty. */
function unplannedRow(node: NodeLike, policy: NodePolicy | null, requests: ResourceAmounts): NodePlanRow {
  return {
    node: node.metadata?.name ?? '',
    pool: policy?.pool ?? null,
    reason: policy === null ? 'opted-out' : policy.pool === null ? 'defaultRatios' : 'pool',
    mode: policy?.mode ?? null,
    ratios: {},
    ratioReasons: {},
    raw: {},
    planned: {},
    stored: {},
    requests: formatQuantities(requests),
    headroom: {},
    exclusiveCpus: null,
    fits: null,
    matches: true,
  };
}

/** Rules 1, 3, 4 and 5: the columns a node's plan fills (`plan` null: the node has no allocatable). */
function plannedColumns(
  node: NodeLike,
  plan: NodeStatusPlan | null,
  requests: ResourceAmounts,
  decisions: NodeUsageEntry,
  podSize: ResourceAmounts | null,
): Pick<NodePlanRow, 'ratios' | 'ratioReasons' | 'raw' | 'planned' | 'stored' | 'headroom' | 'fits' | 'matches'> {
  const stored = plan?.incoming ?? readAmounts(node.status?.allocatable);
  const planned = plan?.allocatable ?? {};
  const headroom = headroomOf(planned, requests);
  return {
    ratios: plan?.ratios ?? {},
    ratioReasons: ratioReasons(planned, plan ?? { floor: {}, full: false }, decisions),
    raw: formatQuantities(plan?.raw ?? {}),
    planned: formatQuantities(planned),
    stored: formatQuantities(stored),
    headroom: formatQuantities(headroom),
    fits: podSize === null ? null : podsThatFit(headroom, podSize),
    matches: MANAGED_RESOURCES.every((resource) => planned[resource] === stored[resource]),
  };
}

/** Per-node lookups by name beside the requests: the published usage-aware entry, the Σ of the pods' exclusive CPUs, the Σ admitted (NodeFacts). */
export interface NodeFactsOf {
  usageOf?: (node: string) => NodeUsageEntry | undefined;
  exclusiveOf?: (node: string) => bigint;
  admittedOf?: (node: string) => ResourceAmounts;
}

/**
 * The plan of every node, sorted by name; `requestsOf` gives the Σ requests of a node's bound
 * pods, `usageOf` its published usage-aware entry, `exclusiveOf` the Σ of their exclusive CPUs.
 */
export function planCluster(
  nodes: Iterable<NodeLike>,
  requestsOf: (node: string) => ResourceAmounts,
  nodesConfig: NodesConfig | undefined,
  podSize: ResourceAmounts | null = null,
  { usageOf = () => undefined, exclusiveOf = () => 0n, admittedOf }: NodeFactsOf = {},
): ClusterPlan {
  const rows: NodePlanRow[] = [];
  for (const node of nodes) {
    const name = node.metadata?.name ?? '';
    const requests = requestsOf(name);
    rows.push(
      planNode(node, requests, nodesConfig, podSize, { usage: usageOf(name), exclusiveCpu: exclusiveOf(name), admitted: admittedOf?.(name) ?? requests }),
    );
  }
  rows.sort((a, b) => (a.node < b.node ? -1 : a.node > b.node ? 1 : 0));
  return { nodes: rows, podSize: podSize === null ? null : formatQuantities(podSize) };
}

const COLUMNS = ['NODE', 'POOL', 'MODE', 'RATIOS', 'RESOURCE', 'RAW', 'PLANNED', 'STORED', 'REQUESTS', 'HEADROOM', 'FITS', 'MATCHES'] as const;

/**
 * The plan as a table for people: one line per node and managed resource present (node-level
 * columns on its first line only), columns padded to their widest cell.
 */
export function formatPlanTable(plan: ClusterPlan): string {
  const lines: string[][] = [[...COLUMNS]];
  for (const row of plan.nodes) {
    const pool = row.reason === 'pool' ? row.pool! : row.reason;
    // A usage-aware ratio says why it is what it is: cpu=1.7(usage).
    const why = (resource: string) => {
      const reason = row.ratioReasons[resource as ManagedResource];
      return reason === 'usage' || reason === 'hot' || reason === 'hot-full' || reason === 'stale' ? `(${reason})` : '';
    };
    const shown = MANAGED_RESOURCES.filter((resource) => row.ratios[resource] !== undefined || why(resource) !== '');
    const ratios = shown.map((resource) => `${resource}=${row.ratios[resource] ?? 1}${why(resource)}`).join(',') || '-';
    const head = [row.node, pool, row.mode ?? '-', ratios];
    const blank = head.map(() => '');
    if (row.error !== undefined) {
      lines.push([...head, `error: ${row.error}`]);
      continue;
    }
    const resources = MANAGED_RESOURCES.filter((resource) => row.stored[resource] !== undefined || row.planned[resource] !== undefined);
    if (resources.length === 0) lines.push([...head, '(no allocatable)']);
    resources.forEach((resource, i) => {
      const cell = (q: Quantities) => q[resource] ?? '-';
      const tail = i === 0 ? [row.fits === null ? '-' : String(row.fits), row.matches ? 'yes' : 'no'] : ['', ''];
      lines.push([
        ...(i === 0 ? head : blank),
        resource,
        cell(row.raw),
        cell(row.planned),
        cell(row.stored),
        row.requests[resource] ?? '0',
        cell(row.headroom),
        ...tail,
      ]);
    });
  }
  const widths = COLUMNS.map((_, c) => Math.max(...lines.map((line) => (line[c] ?? '').length)));
  return (
    lines
      .map((line) =>
        line
          .map((cell, c) => (c === line.length - 1 ? cell : cell.padEnd(widths[c])))
          .join('  ')
          .trimEnd(),
      )
      .join('\n') + '\n'
  );
}
