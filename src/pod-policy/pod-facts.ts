/**
 * What the pod policies need to know about the cluster, from informer caches only (never an
 * API call on the request path), behind an interface so the decisions can be tested with
 * plain objects. PodFactsService (pod-facts.service.ts) implements it with informers.
 */
import type { NodeLike } from '../domain/node-like.js';
import type { LimitRangeLike } from './limit-range.js';
import type { NodeUsage } from '../domain/resources.js';
import type { CachedPod } from '../kube/pods-by-node.js';

export const POD_FACTS = Symbol('POD_FACTS');

export type FactsCache = 'pods' | 'nodes' | 'limitranges';

export interface PodFacts {
  /** False outside a cluster: there are no caches, the cap cannot be enforced, no LimitRange is known. */
  readonly available: boolean;
  /** True once the cache has listed successfully. */
  isSynced(cache: FactsCache): boolean;
  limitRanges(namespace: string): readonly LimitRangeLike[];
  node(name: string): NodeLike | undefined;
  /** A pod as the pod cache keeps it (its effective requests computed). */
  pod(namespace: string, name: string): CachedPod | undefined;
  /** The requests of the node's non-terminal pods, leaving out the pod with uid `exclude`. */
  nodeUsage(nodeName: string, exclude?: string): NodeUsage;
}
