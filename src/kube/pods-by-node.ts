/**
 * What each node's bound, non-terminal pods take, in the two accountings of pod-resources.ts:
 * their requests as the scheduler counts them (scheduledPodRequests), read by the pod policies'
 * node cap, the plan's headroom and usage-aware holds; and what the kubelet has admitted them at
 * (admittedPodRequests), read by node oversell's commitment floor and whatever publishes or
 * predicts it. One pod informer (PodCache) feeds both.
 */
import { Logger } from '@nestjs/common';
import { MANAGED_RESOURCES, type ResourceAmounts, type NodeUsage } from '../domain/resources.js';
import { Memo } from '../domain/memo.js';
import {
  admittedPodRequests,
  scheduledPodRequests,
  exclusiveCpus,
  isMirrorPod,
  isTerminal,
  MIRROR_POD_ANNOTATION,
  type PodLike,
} from '../domain/pod-resources.js';

const logger = new Logger('PodCache');

/**
 * What the pod cache keeps of a pod: what identifies it (name, namespace, uid, resourceVersion,
 * the mirror-pod annotation), its node and phase, and its effective requests computed once on
 * arrival, in both accountings. Nothing reads the rest (containers, images, env, status) after that, and at a
 * cluster's pod count it is most of the webhook's memory.
 */
export interface CachedPod extends PodLike {
  metadata: { name?: string; namespace?: string; uid?: string; resourceVersion?: string; annotations?: Record<string, string> };
  spec: { nodeName?: string };
  status: { phase?: string };
  /** scheduledPodRequests, frozen (shared by the cache and the index). */
  requests: Readonly<ResourceAmounts>;
  /** admittedPodRequests, frozen (the same object as `requests` when they are equal). */
  admitted: Readonly<ResourceAmounts>;
  /** exclusiveCpus (millicores), where the pod has any. */
  exclusiveCpu?: bigint;
}

// Namespaces, node names and phases repeat across pods: one string each instead of one per pod.
const shared = new Memo<string, string>(65_536);
const share = (text: string | undefined) => (text === undefined ? undefined : shared.get(text, () => text));
// Pods of one Deployment request the same: one frozen object per distinct set of requests.
const sharedRequests = new Memo<string, Readonly<ResourceAmounts>>(65_536);

/** What a pod takes in both accountings, each frozen and shared between pods that take the same. */
export interface PodAccounts {
  requests: Readonly<ResourceAmounts>;
  admitted: Readonly<ResourceAmounts>;
}

function accountsOf(pod: PodLike): PodAccounts {
  let requests: ResourceAmounts;
  let admitted: ResourceAmounts;
  try {
    requests = scheduledPodRequests(pod);
    admitted = admittedPodRequests(pod);
  } catch (error) {
    // The API server validated these quantities; should one still not parse, the pod counts as `pods: 1` only.
    logger.warn(`pod ${pod.metadata?.namespace}/${pod.metadata?.name}: ${(error as Error).message}; counting it as one pod with no requests`);
    requests = admitted = { pods: 1n };
  }
  return { requests: sharedAmounts(requests), admitted: sharedAmounts(admitted) };
}

function sharedAmounts(amounts: ResourceAmounts): Readonly<ResourceAmounts> {
  const key = `${amounts.cpu}/${amounts.memory}/${amounts['ephemeral-storage']}/${amounts.pods}`;
  return sharedRequests.get(key, () => Object.freeze(amounts));
}

function exclusiveCpuOf(pod: PodLike): bigint {
  try {
    return exclusiveCpus(pod);
  } catch {
    return 0n; // accountsOf has logged the quantity that does not parse
  }
}

/** The pod cache's transform (ResilientInformer's `transform`): a CachedPod in place of the pod as received. */
export function cachedPod(pod: PodLike): CachedPod {
  const { name, namespace, uid, resourceVersion } = (pod.metadata ?? {}) as CachedPod['metadata'];
  const exclusiveCpu = exclusiveCpuOf(pod);
  return {
    metadata: {
      name,
      namespace: share(namespace),
      uid,
      resourceVersion,
      ...(isMirrorPod(pod) ? { annotations: { [MIRROR_POD_ANNOTATION]: '' } } : {}),
    },
    spec: { nodeName: share(pod.spec?.nodeName) },
    status: { phase: share(pod.status?.phase) },
    ...accountsOf(pod),
    ...(exclusiveCpu > 0n ? { exclusiveCpu } : {}),
  };
}

function isCached(pod: PodLike): pod is CachedPod {
  return (pod as Partial<CachedPod>).requests !== undefined;
}

/** The pod's key in the index: its uid (namespace/name for one without). */
export function keyOf(pod: PodLike): string | undefined {
  const uid = pod.metadata?.uid;
  if (uid) return uid;
  const { namespace, name } = pod.metadata ?? {};
  return name ? `${namespace ?? ''}/${name}` : undefined;
}

/**
 * The bound, non-terminal pods, indexed by node and updated from the pod informer's
 * add/update/delete events (a relist replays them): Map<node, Map<uid, both accountings>>.
 */
export class PodsByNode {
  private readonly byNode = new Map<string, Map<string, PodAccounts>>();
  /** The exclusive CPUs of the indexed pods that have any, by node: Map<node, Map<uid, millicores>>. */
  private readonly exclusiveByNode = new Map<string, Map<string, bigint>>();
  /** The node each indexed pod is on. */
  private readonly nodeOf = new Map<string, string>();
  /**
   * Each node's Σ admitted as last summed, dropped at any change of its pods: the node-policy
   * publisher reads every node's at each publication, and pods change on few nodes in between.
   */
  private readonly admittedSums = new Map<string, Readonly<ResourceAmounts>>();

  /** `pod` as received, or as the pod cache keeps it (cachedPod). */
  upsert(pod: PodLike | CachedPod): void {
    const key = keyOf(pod);
    if (key === undefined) return;
    const node = pod.spec?.nodeName;
    if (!node || isTerminal(pod)) {
      this.remove(pod);
      return;
    }
    const accounts = isCached(pod) ? { requests: pod.requests, admitted: pod.admitted } : accountsOf(pod);
    const exclusiveCpu = isCached(pod) ? (pod.exclusiveCpu ?? 0n) : exclusiveCpuOf(pod);
    const previous = this.nodeOf.get(key);
    if (previous !== undefined && previous !== node) {
      this.byNode.get(previous)?.delete(key);
      this.dropExclusive(previous, key);
      this.admittedSums.delete(previous);
    }
    this.admittedSums.delete(node);
    this.nodeOf.set(key, node);
    let pods = this.byNode.get(node);
    if (!pods) this.byNode.set(node, (pods = new Map()));
    pods.set(key, accounts);
    if (exclusiveCpu > 0n) {
      let exclusive = this.exclusiveByNode.get(node);
      if (!exclusive) this.exclusiveByNode.set(node, (exclusive = new Map()));
      exclusive.set(key, exclusiveCpu);
    } else this.dropExclusive(node, key);
  }

  private dropExclusive(node: string, key: string): void {
    const exclusive = this.exclusiveByNode.get(node);
    exclusive?.delete(key);
    if (exclusive?.size === 0) this.exclusiveByNode.delete(node);
  }

  remove(pod: PodLike): void {
    const key = keyOf(pod);
    if (key === undefined) return;
    const previous = this.nodeOf.get(key);
    if (previous === undefined) return;
    this.nodeOf.delete(key);
    this.admittedSums.delete(previous);
    const pods = this.byNode.get(previous);
    pods?.delete(key);
    if (pods?.size === 0) this.byNode.delete(previous);
    this.dropExclusive(previous, key);
  }

  /** The Σ scheduledPodRequests of the node's pods but the one keyed `exclude` (`pods`: their count), and their exclusive CPUs: what the cap reads. */
  usage(node: string, exclude?: string): NodeUsage {
    const requests = this.sum(node, 'requests', exclude);
    let exclusiveCpu = 0n;
    for (const [key, amount] of this.exclusiveByNode.get(node) ?? []) if (key !== exclude) exclusiveCpu += amount;
    return exclusiveCpu > 0n ? { requests, exclusiveCpu } : { requests };
  }

  /** The Σ admittedPodRequests of the node's pods (`pods`: their count): what the commitment floor reads. Frozen: the same object until the node's pods change. */
  admitted(node: string): Readonly<ResourceAmounts> {
    let sum = this.admittedSums.get(node);
    if (!sum) this.admittedSums.set(node, (sum = Object.freeze(this.sum(node, 'admitted'))));
    return sum;
  }

  private sum(node: string, accounting: keyof PodAccounts, exclude?: string): ResourceAmounts {
    const total: ResourceAmounts = { pods: 0n };
    for (const [key, accounts] of this.byNode.get(node) ?? []) {
      if (key === exclude) continue;
      const amounts = accounts[accounting];
      for (const resource of MANAGED_RESOURCES) {
        const amount = amounts[resource];
        if (amount !== undefined) total[resource] = (total[resource] ?? 0n) + amount;
      }
    }
    return total;
  }

  /** The node's bound non-terminal pods: both accountings by key (keyOf). */
  pods(node: string): ReadonlyMap<string, PodAccounts> {
    return this.byNode.get(node) ?? new Map<string, PodAccounts>();
  }

  /** For tests and metrics: how many pods are indexed. */
  get size(): number {
    return this.nodeOf.size;
  }
}
