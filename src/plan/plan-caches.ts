import type { NodeCache } from '../kube/node-cache.service.js';
import type { PodCache } from '../kube/pod-cache.service.js';

/**
 * Starts the node and pod caches for the plan, kept from then on (one LIST each, then
 * watches). True once both have listed.
 */
export function watchForPlan(nodes: NodeCache, pods: PodCache): boolean {
  if (!nodes.available) return false;
  nodes.use('plan', true);
  pods.use('plan', true);
  return nodes.isSynced() && pods.isSynced();
}
