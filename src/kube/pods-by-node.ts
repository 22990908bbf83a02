/**
 * The requests committed to each node: the effective requests (pod-resources.ts, counted as the
 * scheduler counts them) of its bound, non-terminal pods. Read by the pod policies' node cap
 * and by node oversell's commitment floor, from one pod informer (PodCache).
 */
import { Logger } from '@nestjs/common';
import { MANAGED_RESOURCES } from '../config/config.schema.js';
import type { ResourceAmounts } from '../node-oversell/node-oversell.rules.js';
import type { NodeUsage } from '../pod-policy/node-cap.js';
import { effectivePodRequests, isTerminal, type PodLike } from '../pod-policy/pod-resources.js';

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
  private readonly logger = new Logger('PodCache');
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
