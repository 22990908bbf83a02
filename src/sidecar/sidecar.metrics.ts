import { makeCounterProvider } from '@willsoto/nestjs-prometheus';

export const SIDECAR_INJECTIONS = 'kube_overcommit_sidecar_injections_total';
export const SIDECAR_CACHE_UNSYNCED = 'kube_overcommit_sidecar_cache_unsynced_total';

/**
 * The `template` label of a request for a template that is not configured. Template names
 * are DNS labels, so this cannot clash with one; the name asked for is not used as a label
 * value because it comes from the pod (unbounded cardinality). Warnings and logs name it.
 */
export const UNKNOWN_TEMPLATE_LABEL = '_unknown';

export const sidecarMetrics = [
  makeCounterProvider({
    name: SIDECAR_INJECTIONS,
    help:
      'Sidecar templates asked for by pods at CREATE, by template and outcome: injected (something added), already_present ' +
      '(reinvocation, nothing to add), conflict (a different container or volume of the same name; template skipped), ' +
      `unknown_template (template="${UNKNOWN_TEMPLATE_LABEL}"). Dry-run requests are not counted.`,
    labelNames: ['template', 'outcome'],
  }),
  makeCounterProvider({
    name: SIDECAR_CACHE_UNSYNCED,
    help:
      'Pods that asked for sidecars and got none because an informer cache had not listed yet, by cache (namespaces: labels ' +
      'unknown in a cluster, so sidecars.namespaceSelector cannot be evaluated). Dry-run requests are not counted.',
    labelNames: ['cache'],
  }),
];
