/**
 * The runtime services the node features share, by injection token: each is provided by the
 * module that owns it (a global module, as KubeModule is) and injected by token, so no feature
 * imports another's module or class.
 */
import type { NodesConfig } from './node-oversell.config.js';
import type { NodePolicy } from './node-oversell.rules.js';
import type { NodeUsageEntry } from './usage-aware.rules.js';
import type { ResourceAmounts } from '../resources.js';
import type { NodeLike } from '../node-like.js';

/** The commitment floor (CommitmentFloor, provided by NodeOversellModule): node oversell and the reconciler read it. */
export const NODE_COMMITMENTS = Symbol('NODE_COMMITMENTS');

/** What is committed on each node, as the commitment floor (rule 6) reads it. */
export interface NodeCommitments {
  /** The sum of what the kubelet has admitted the node's bound non-terminal pods at (pod-resources.ts admittedPodRequests; `pods`: their count); undefined while unknown. */
  committed(node: string): Readonly<ResourceAmounts> | undefined;
}

/** True unless the config turns the commitment floor off (`nodes.commitmentFloor: false`). */
export function floorEnabled(nodes: NodesConfig | undefined): boolean {
  return nodes?.commitmentFloor !== false;
}

/** The Node Events (NodeEvents, provided by NodeOversellModule): node oversell and the usage-aware leader record them. */
export const NODE_EVENTS = Symbol('NODE_EVENTS');

/** Normal Events on Nodes, recorded without waiting for the API server. */
export interface NodeEventRecorder {
  record(node: { name: string; uid?: string }, reason: string, message: string): void;
}

/**
 * The usage-aware ratios (UsageRatios, provided by UsageModule): node oversell reads them as
 * NodeUsageRatios, GET /plan and the reconciler as PublishedUsage.
 */
export const NODE_USAGE = Symbol('NODE_USAGE');

/** What node oversell asks of usage-aware ratios at each Node status write. */
export interface NodeUsageRatios {
  /** The policy with its published ratios (capped at the ceilings), and the decisions to annotate. */
  effective(name: string, policy: NodePolicy | null, stored: NodeLike | undefined): { policy: NodePolicy | null; decisions: NodeUsageEntry };
}

/** What the plan and the reconciler read of usage-aware ratios: each node's published entry, and when new ones are read. */
export interface PublishedUsage {
  /** The node's published entry, as this replica read it. */
  published(name: string): NodeUsageEntry | undefined;
  /** Calls `listener` after every new set of published ratios this replica reads; returns its removal. */
  onRead(listener: () => void): () => void;
}
