/**
 * The node cap on an in-place resize (pods/resize UPDATE, KEP-1287, GA in Kubernetes 1.35): what
 * the resized pod moves between, as pure functions.
 *
 *   1. The pod holds, on its node, what the scheduler counts for it as stored (the review's
 *      oldObject: pod-resources.ts scheduledPodRequests, a resizing pod as the largest of its
 *      desired requests unless Infeasible, its allocated and its actual ones).
 *   2. The resize stores what kube-apiserver keeps of the body (podResizeStrategy,
 *      dropNonResizeUpdates): the stored pod with each container's resources and resizePolicy,
 *      and the pod-level resources, as sent; the status stays the stored one. Any other change
 *      in the body is dropped, so it cannot lower what is counted (an overhead or a sidecar's
 *      restartPolicy edited in the body counts as stored). A body whose containers were added,
 *      removed, reordered or renamed is refused by the API server: no plan.
 *   3. The resized pod will hold the same accounting over what the resize stores, its new
 *      desired requests always counted: the kubelet decides the resize anew, whatever the stored
 *      PodResizePending condition says of the previous one.
 *   4. Only an increase is checked (node-cap.ts capViolations with `held`): a resource the resize
 *      does not raise passes whatever the node holds, so a resize down (or one that changes
 *      nothing the cap counts) always passes, even on a node already over its cap.
 *   5. The pod policies never rewrite a resize: the kubelet applies exactly the resources asked
 *      for, the API server refuses a resize that changes anything else, and a policy rewriting
 *      the requests would fight the user's (or the vertical autoscaler's) resize.
 *
 * Exclusive CPUs are not checked on a resize: the kubelet's static CPU manager policy leaves a
 * resize of a Guaranteed pod's cpu Infeasible (InPlacePodVerticalScalingExclusiveCPUs is off by
 * default), so no resize changes the cores a pod holds.
 */
import type { ResourceAmounts } from '../domain/resources.js';
import { scheduledPodRequests, type ContainerLike, type PodLike } from '../domain/pod-resources.js';
import { isRecord } from '../common/is-record.js';

export interface ResizePlan {
  /** Rule 1: what the pod holds now. */
  held: ResourceAmounts;
  /** Rule 3: what it will hold once the kubelet accepts the resize. */
  resized: ResourceAmounts;
}

/** Rule 2's containers: the stored ones with the body's resources and resizePolicy; null when the list was changed otherwise. */
function resizedContainers(stored: unknown, sent: unknown): ContainerLike[] | null | undefined {
  if (!Array.isArray(stored)) return Array.isArray(sent) && sent.length > 0 ? null : undefined;
  if (!Array.isArray(sent) || sent.length !== stored.length) return null;
  const out: ContainerLike[] = [];
  for (let i = 0; i < stored.length; i++) {
    const [before, after] = [stored[i] as ContainerLike, sent[i] as unknown];
    if (!isRecord(after) || !isRecord(before) || after.name !== before.name) return null;
    out.push({ ...before, resources: after.resources as ContainerLike['resources'], resizePolicy: after.resizePolicy });
  }
  return out;
}

/**
 * Rule 2: the pod a pods/resize stores, from the stored pod and the body sent; null when the
 * API server refuses it (containers added, removed, reordered or renamed).
 */
export function readResizedPod(stored: PodLike, sent: PodLike): PodLike | null {
  const containers = resizedContainers(stored.spec?.containers, sent.spec?.containers);
  const initContainers = resizedContainers(stored.spec?.initContainers, sent.spec?.initContainers);
  if (containers === null || initContainers === null) return null;
  // A body without pod-level resources keeps the stored ones (PodLevelResourcesFixDefaulting).
  const resources = sent.spec?.resources ?? stored.spec?.resources;
  return {
    ...stored,
    spec: { ...stored.spec, containers, initContainers, ...(resources !== undefined ? { resources } : {}) },
  };
}

/** Rules 1–3: what the pod holds and what it will hold; null when the API server refuses the resize. */
export function planResize(stored: PodLike, sent: PodLike): ResizePlan | null {
  const resized = readResizedPod(stored, sent);
  if (resized === null) return null;
  return { held: scheduledPodRequests(stored), resized: scheduledPodRequests(resized, 'always') };
}
