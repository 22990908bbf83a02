import { makeCounterProvider, makeGaugeProvider } from '@willsoto/nestjs-prometheus';

/** The effective ratio the usage-aware leader published, per node and resource (docs/usage-aware.md). */
export const NODE_USAGE_RATIO_METRIC = 'kube_overcommit_node_usage_ratio';
/** The inputs of a published usage-aware ratio, per node, resource and input (A, R, U). */
export const NODE_USAGE_INPUT_METRIC = 'kube_overcommit_node_usage_input';
/** The usage-aware leader's publications of the ConfigMap, by result (written, unchanged, error). */
export const USAGE_PUBLISH_METRIC = 'kube_overcommit_usage_publish_total';
/** The nodes whose published entry is hot, by reason: `hot` (ratio 1) or `hot-full` (no new pod; hot-nodes.rules.ts). */
export const HOT_NODES_METRIC = 'kube_overcommit_usage_hot_nodes';
/** The usage-aware leader's failed reads of metrics.k8s.io. */
export const USAGE_METRICS_ERRORS_METRIC = 'kube_overcommit_usage_metrics_errors_total';

export const usageMetrics = [
  makeGaugeProvider({
    name: NODE_USAGE_RATIO_METRIC,
    help: 'Usage-aware effective ratio as published by the leader (ConfigMap kube-overcommit-usage), per node and resource; the webhook caps it at the ceiling of the config in force.',
    labelNames: ['node', 'resource'],
  }),
  makeGaugeProvider({
    name: NODE_USAGE_INPUT_METRIC,
    help: 'Inputs of the published usage-aware ratio, per node, resource and input: A (raw allocatable), R (requests of bound pods), U (smoothed usage of its pods); cores or bytes.',
    labelNames: ['node', 'resource', 'input'],
  }),
  makeCounterProvider({
    name: USAGE_PUBLISH_METRIC,
    help: 'Publications of the usage-aware ratios by the leader, by result: written (the ConfigMap changed), unchanged, error.',
    labelNames: ['result'],
  }),
  makeCounterProvider({
    name: USAGE_METRICS_ERRORS_METRIC,
    help: 'Failed reads of metrics.k8s.io by the usage-aware leader (the nodes get no new sample and go stale).',
  }),
  makeGaugeProvider({
    name: HOT_NODES_METRIC,
    help: 'Usage-aware nodes whose published entry is hot, by reason: hot (hotAction ratio1: ratio 1) or hot-full (hotAction full: allocatable = the requests bound, no new pod).',
    labelNames: ['reason'],
  }),
];
