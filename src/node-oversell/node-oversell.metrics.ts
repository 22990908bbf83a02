import { makeCounterProvider, makeGaugeProvider } from '@willsoto/nestjs-prometheus';

/** Raw allocatable per node and managed resource: cores (float) for cpu, bytes, or a count. */
export const NODE_ALLOCATABLE_RAW_METRIC = 'kube_overcommit_node_allocatable_raw';
/** The allocatable written (raw × ratio), same units. */
export const NODE_ALLOCATABLE_OVERCOMMITTED_METRIC = 'kube_overcommit_node_allocatable_overcommitted';
/** The ratio applied per node, resource and pool (pool "" = default ratios); 1 when none applies. */
export const NODE_RATIO_METRIC = 'kube_overcommit_node_ratio';

/** What decided the allocatable written, per node and resource: reason `static` (the ratio), `usage`, `hot` or `stale` (usage-aware ratios) or `floor` (the commitment floor); value 1. */
export const NODE_ALLOCATABLE_REASON_METRIC = 'kube_overcommit_node_allocatable_reason';

/** Nodes whose gauges were dropped: `silent` (an hour without an admission here) or `limit` (OVERCOMMIT_NODE_METRICS_MAX_NODES reached). */
export const NODE_METRICS_DROPPED_METRIC = 'kube_overcommit_node_metrics_dropped_total';

export const nodeOversellMetrics = [
  makeGaugeProvider({
    name: NODE_ALLOCATABLE_RAW_METRIC,
    help: 'Raw allocatable the kubelet reported, per node and managed resource (cpu in cores, memory and ephemeral-storage in bytes, pods as a count). Updated at each nodes/status admission this replica served; the series of a node go after an hour without one (a deleted node).',
    labelNames: ['node', 'resource'],
  }),
  makeGaugeProvider({
    name: NODE_ALLOCATABLE_OVERCOMMITTED_METRIC,
    help: 'Allocatable written to the Node (floor(raw × ratio), or the requests bound to the node when the commitment floor decides), per node and managed resource, in the units of kube_overcommit_node_allocatable_raw.',
    labelNames: ['node', 'resource'],
  }),
  makeGaugeProvider({
    name: NODE_RATIO_METRIC,
    help: 'Overcommit ratio applied, per node, managed resource and pool ("" = default ratios); 1 when none applies or the node opted out.',
    labelNames: ['node', 'resource', 'pool'],
  }),
  makeGaugeProvider({
    name: NODE_ALLOCATABLE_REASON_METRIC,
    help: 'What decided the allocatable written, per node and managed resource: reason="static" (floor(raw × ratio)), "usage", "hot" or "stale" (the usage-aware effective ratio and why: docs/usage-aware.md) or "floor" (the commitment floor: the requests bound to the node, above raw × ratio). Value 1; one series per node and resource.',
    labelNames: ['node', 'resource', 'reason'],
  }),
  makeCounterProvider({
    name: NODE_METRICS_DROPPED_METRIC,
    help: 'Nodes whose per-node gauges this replica dropped, by reason: silent (an hour without an admission for it here) or limit (OVERCOMMIT_NODE_METRICS_MAX_NODES nodes exported: the least recently admitted one goes).',
    labelNames: ['reason'],
  }),
];
