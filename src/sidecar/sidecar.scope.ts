import { matchesLabelSelector, type LabelSelector } from '../config/label-selector.js';

/** Namespaces never injected, whatever their labels say. */
export const SYSTEM_NAMESPACES: readonly string[] = ['kube-system', 'kube-node-lease', 'kube-public'];

/** The platform's own namespace: POD_NAMESPACE (the Deployment sets it from the downward API), default `kube-overcommit`. */
export function platformNamespace(env: NodeJS.ProcessEnv): string {
  return env.POD_NAMESPACE || 'kube-overcommit';
}

export type ScopeDecision = { inScope: true } | { inScope: false; reason: string };

/**
 * Whether pods of `namespace` may get sidecars. `labels` undefined means the namespace
 * cache does not know them (no cluster, not synced yet, namespace just created): the
 * webhook's namespaceSelector, evaluated by the API server, has already decided.
 */
export function sidecarScope(
  namespace: string,
  selector: LabelSelector,
  labels: Readonly<Record<string, string>> | undefined,
  ownNamespace: string,
): ScopeDecision {
  if (namespace === '') return { inScope: false, reason: 'the pod has no namespace' };
  if (SYSTEM_NAMESPACES.includes(namespace) || namespace === ownNamespace) {
    return { inScope: false, reason: `namespace "${namespace}" never gets sidecars` };
  }
  if (labels !== undefined && !matchesLabelSelector(selector, labels)) {
    return { inScope: false, reason: `namespace "${namespace}" has not opted in to sidecar injection (sidecars.namespaceSelector)` };
  }
  return { inScope: true };
}
