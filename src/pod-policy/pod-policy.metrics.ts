import { makeCounterProvider, makeGaugeProvider } from '@willsoto/nestjs-prometheus';

export const PODS_MUTATED = 'kube_overcommit_pod_policy_pods_mutated_total';
export const REQUESTS_CHANGED = 'kube_overcommit_pod_policy_requests_changed_total';
export const LIMITS_CHANGED = 'kube_overcommit_pod_policy_limits_changed_total';
export const CAP_DENIALS = 'kube_overcommit_pod_policy_cap_denials_total';
export const CAP_WARNINGS = 'kube_overcommit_pod_policy_cap_warnings_total';
export const CAP_SKIPPED = 'kube_overcommit_pod_policy_cap_skipped_total';
export const CACHE_UNSYNCED = 'kube_overcommit_pod_policy_cache_unsynced_total';
export const CACHE_SYNCED = 'kube_overcommit_pod_policy_cache_synced';

export const podPolicyMetrics = [
  makeCounterProvider({
    name: PODS_MUTATED,
    help: 'Pods whose container resources the pod policies changed (CREATE; a reinvocation that changes nothing is not counted; dry runs are not counted).',
  }),
  makeCounterProvider({
    name: REQUESTS_CHANGED,
    help: 'Container requests changed by the pod policies, by resource (cpu, memory) and change (added: a default where none was set; lowered; raised).',
    labelNames: ['resource', 'change'],
  }),
  makeCounterProvider({
    name: LIMITS_CHANGED,
    help: 'Container limits changed by the pod policies (the cpu limit derived from the memory limit), by resource and change (added, lowered, raised).',
    labelNames: ['resource', 'change'],
  }),
  makeCounterProvider({
    name: CAP_DENIALS,
    help: 'Bindings, pod creations and in-place resizes refused by the node cap (mode deny), by the managed resource that would exceed raw allocatable × ratio (one count per resource exceeded).',
    labelNames: ['resource'],
  }),
  makeCounterProvider({
    name: CAP_WARNINGS,
    help: 'Bindings, pod creations and in-place resizes admitted with a warning by the node cap (mode warn), by the managed resource that would exceed raw allocatable × ratio.',
    labelNames: ['resource'],
  }),
  makeCounterProvider({
    name: CAP_SKIPPED,
    help: 'Node cap checks that could not run and admitted the pod, by reason: no-cluster (not running against an API server), pod-unknown (pods/binding for a pod not in the cache), node-unknown.',
    labelNames: ['reason'],
  }),
  makeCounterProvider({
    name: CACHE_UNSYNCED,
    help: 'Pod-policy decisions skipped (the pod admitted unchanged) because an informer cache had not listed yet, by cache (namespaces: labels unknown, so the namespaceSelector cannot be evaluated; limitranges: no mutation; pods, nodes: no cap check).',
    labelNames: ['cache'],
  }),
  makeGaugeProvider({
    name: CACHE_SYNCED,
    help: 'Pod-policy informer caches running, by cache (pods, nodes, limitranges): 1 once it has listed, 0 until then. A cache runs only while the pod policy in force needs it (pods and nodes for the cap, limitranges for mutations); no series while it is off.',
    labelNames: ['cache'],
  }),
];
