/**
 * What the pod policies need to know about the cluster, from informer caches only (never an
 * API call on the request path), behind an interface so the decisions can be tested with
 * plain objects. PodFactsService (pod-facts.service.ts) implements it with informers.
 */
import { Logger } from '@nestjs/common';
import { MANAGED_RESOURCES } from '../config/config.schema.js';
import type { NodeLike, ResourceAmounts } from '../node-oversell/node-oversell.rules.js';
import type { LimitRangeLike } from './limit-range.js';
import type { NodeUsage } from './node-cap.js';
import { effectivePodRequests, isTerminal, type PodLike } from './pod-resources.js';

export const POD_FACTS = Symbol('POD_FACTS');

export type FactsCache = 'pods' | 'nodes' | 'limitranges';

export interface PodFacts {
  /** False outside a cluster: there are no caches, the cap cannot be enforced, no LimitRange is known. */
  readonly available: boolean;
  /** True once the cache has listed successfully. */
  isSynced(cache: FactsCache): boolean;
  limitRanges(namespace: string): readonly LimitRangeLike[];
  node(name: string): NodeLike | undefined;
  pod(namespace: string, name: string): PodLike | undefined;
  /** The requests of the node's non-terminal pods, leaving out the pod with uid `exclude`. */
  nodeUsage(nodeName: string, exclude?: string): NodeUsage;
}

interface Entry {
  node: string;
  requests: ResourceAmounts;
}

function keyOf(pod: PodLike): string | undefined {
  const uid = pod.metadata?.uid;
  if (uid) return uid;
  const { namespace, name } = pod.metadata ?? {};
  return name ? `${namespace ?? ''}/${name}` : undefined;
}

/**
 * The effective requests of bound, non-terminal pods, indexed by node and updated from the
 * pod informer's add/update/delete events (a relist replays them): Map<node, Map<uid, requests>>.
 */
export class PodsByNode {
  private readonly logger = new Logger('PodPolicy');
  private readonly byNode = new Map<string, Map<string, ResourceAmounts>>();
  private readonly byKey = new Map<string, Entry>();

  upsert(pod: PodLike): void {
    const key = keyOf(pod);
    if (key === undefined) return;
    const node = pod.spec?.nodeName;
    if (!node || isTerminal(pod)) {
      this.remove(pod);
      return;
    }
    let requests: ResourceAmounts;
    try {
      requests = effectivePodRequests(pod);
    } catch (error) {
      // The API server validated these quantities; should one still not parse, the pod counts as `pods: 1` only.
      this.logger.warn(`pod ${pod.metadata?.namespace}/${pod.metadata?.name}: ${(error as Error).message}; counting it as one pod with no requests`);
      requests = { pods: 1n };
    }
    const previous = this.byKey.get(key);
    if (previous && previous.node !== node) this.byNode.get(previous.node)?.delete(key);
    this.byKey.set(key, { node, requests });
    let pods = this.byNode.get(node);
    if (!pods) this.byNode.set(node, (pods = new Map()));
    pods.set(key, requests);
  }

  remove(pod: PodLike): void {
    const key = keyOf(pod);
    if (key === undefined) return;
    const previous = this.byKey.get(key);
    if (!previous) return;
    this.byKey.delete(key);
    const pods = this.byNode.get(previous.node);
    pods?.delete(key);
    if (pods?.size === 0) this.byNode.delete(previous.node);
  }

  clear(): void {
    this.byNode.clear();
    this.byKey.clear();
  }

  usage(node: string, exclude?: string): NodeUsage {
    const requests: ResourceAmounts = { pods: 0n };
    for (const [key, amounts] of this.byNode.get(node) ?? []) {
      if (key === exclude) continue;
      for (const resource of MANAGED_RESOURCES) {
        const amount = amounts[resource];
        if (amount !== undefined) requests[resource] = (requests[resource] ?? 0n) + amount;
      }
    }
    return { requests };
  }

  /** For tests and metrics: how many pods are indexed. */
  get size(): number {
    return this.byKey.size;
  }
}
