/**
 * The per-node cap: the requests of a node's non-terminal pods plus a new pod's must stay
 * within raw allocatable × the node's ratio, for each managed resource.
 *
 * Raw allocatable and ratio come from node-oversell's annotations, read with its own rule 3
 * (docs/architecture.md, "The node rules"): when the stored allocatable is our output, raw is the recorded raw; otherwise
 * (the webhook was down when a kubelet wrote) the stored allocatable is raw. A node with no
 * (valid) record is capped at its allocatable as stored. Like the scheduler's fit check, a
 * resource the pod does not request is not checked (the pod count always is).
 *
 * A resize (pods/resize, pod-resize.ts) is checked for the resources it raises only: the pod's
 * new requests in place of what it holds, the rest of the node as for a binding.
 *
 * On a node of a pool with `exclusiveCpus` (its kubelets run the static CPU manager policy),
 * the exclusive CPUs (pod-resources.ts exclusiveCpus: Guaranteed pods, integer cpu) of its pods
 * plus the new pod's must also stay within the raw cpu allocatable: the kubelet gives them whole
 * cores, which no ratio creates, and would reject the pod at admission.
 */
import { MANAGED_RESOURCES, type ManagedResource, type NodeUsage, type ResourceAmounts } from '../domain/resources.js';
import { isOptedOut, planRecordedStatus, rawAllocatable, readAmounts, readRecord, type AppliedRatios } from '../domain/node-rules/node-oversell.rules.js';
import type { NodeLike } from '../domain/node-like.js';
import { formatResourceQuantity } from '../domain/quantity.js';

export interface NodeCap {
  /** The most that may be requested on the node, per managed resource present. */
  cap: ResourceAmounts;
  raw: ResourceAmounts;
  /** Ratios ≠ 1 from the node's record. */
  ratios: AppliedRatios;
  /** Where the cap came from: our record, the stored allocatable (no record), or the raw value of an opted-out node. */
  source: 'annotations' | 'allocatable' | 'opted-out';
}

export interface CapViolation {
  resource: ManagedResource;
  /** Requested by the pods already on the node. */
  onNode: bigint;
  /** Requested by this pod. */
  pod: bigint;
  total: bigint;
  cap: bigint;
  raw: bigint;
  ratio: number;
}

/** Throws on an unparsable allocatable (the API server validated it, so this does not happen). */
export function nodeCap(node: NodeLike): NodeCap {
  if (isOptedOut(node.metadata?.labels)) {
    // An opted-out node keeps our last annotations (the webhook no longer sees it) and may
    // still store an inflated value until its kubelet reports again: its cap is the raw value.
    const raw = rawAllocatable(node) ?? {};
    return { cap: raw, raw, ratios: {}, source: 'opted-out' };
  }
  if (readRecord(node.metadata?.annotations) === null) {
    const allocatable = readAmounts(node.status?.allocatable);
    return { cap: allocatable, raw: allocatable, ratios: {}, source: 'allocatable' };
  }
  const plan = planRecordedStatus(node);
  if (plan === null) return { cap: {}, raw: {}, ratios: {}, source: 'annotations' };
  return { cap: plan.allocatable, raw: plan.raw, ratios: plan.ratios, source: 'annotations' };
}

/**
 * The resources over the cap with `pod` on the node. `held`, for a pod already there (a resize):
 * what it holds now; a resource it does not raise is not checked.
 */
export function capViolations(cap: NodeCap, usage: NodeUsage, pod: ResourceAmounts, held?: ResourceAmounts): CapViolation[] {
  const violations: CapViolation[] = [];
  for (const resource of MANAGED_RESOURCES) {
    const limit = cap.cap[resource];
    const requested = resource === 'pods' ? 1n : (pod[resource] ?? 0n);
    if (limit === undefined || requested <= 0n) continue;
    if (held !== undefined && requested <= (held[resource] ?? 0n)) continue;
    const onNode = usage.requests[resource] ?? 0n;
    const total = onNode + requested;
    if (total > limit) {
      violations.push({ resource, onNode, pod: requested, total, cap: limit, raw: cap.raw[resource] ?? limit, ratio: cap.ratios[resource] ?? 1 });
    }
  }
  return violations;
}

/** The exclusive CPUs on the node past its raw cpu allocatable, or null when they fit (or the pod has none). */
export interface ExclusiveCpuViolation {
  onNode: bigint;
  pod: bigint;
  total: bigint;
  raw: bigint;
}

export function exclusiveCpuViolation(cap: NodeCap, usage: NodeUsage, pod: bigint): ExclusiveCpuViolation | null {
  const raw = cap.raw.cpu;
  if (raw === undefined || pod <= 0n) return null;
  const onNode = usage.exclusiveCpu ?? 0n;
  const total = onNode + pod;
  return total > raw ? { onNode, pod, total, raw } : null;
}

/** `exclusive cpu: 6 requested (4 by pods on the node + 2 by this pod) > raw cpu allocatable 4 (...)`. */
export function describeExclusiveViolation(violation: ExclusiveCpuViolation): string {
  const f = (amount: bigint) => formatResourceQuantity('cpu', amount);
  return (
    `exclusive cpu: ${f(violation.total)} requested (${f(violation.onNode)} by pods on the node + ${f(violation.pod)} by this pod) ` +
    `> raw cpu allocatable ${f(violation.raw)} (the static CPU manager policy gives Guaranteed pods whole cores: never overcommitted)`
  );
}

/** `memory: 17Gi requested (16Gi by 12 pods on the node + 1Gi by this pod) > cap 16Gi (raw allocatable 16Gi × ratio 1)`. */
export function describeViolation(violation: CapViolation, podsOnNode: bigint): string {
  const f = (amount: bigint) => formatResourceQuantity(violation.resource, amount);
  const pods = `${podsOnNode} pod${podsOnNode === 1n ? '' : 's'}`;
  return (
    `${violation.resource}: ${f(violation.total)} requested (${f(violation.onNode)} by ${pods} on the node + ${f(violation.pod)} by this pod) ` +
    `> cap ${f(violation.cap)} (raw allocatable ${f(violation.raw)} × ratio ${violation.ratio})`
  );
}

export function capMessage(
  nodeName: string,
  pod: string,
  violations: readonly CapViolation[],
  usage: NodeUsage,
  exclusive: ExclusiveCpuViolation | null = null,
): string {
  const podsOnNode = usage.requests.pods ?? 0n;
  const parts = violations.map((v) => describeViolation(v, podsOnNode));
  if (exclusive !== null) parts.push(describeExclusiveViolation(exclusive));
  return `kube-overcommit: pod ${pod} would exceed the overcommit cap of node ${nodeName}: ${parts.join('; ')}`;
}
