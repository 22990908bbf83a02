/**
 * The parts of a Pod the policies read, and the pod's effective requests computed the way
 * kube-scheduler does (k8s.io/component-helpers/resource AggregateContainerRequests + overhead):
 *
 *   regular containers and native sidecars (initContainers with restartPolicy Always) run together
 *   → their sum; an ordinary init container runs alone with the sidecars declared before it
 *   → its requests plus theirs; the pod needs the larger of the two, plus spec.overhead.
 *
 * A container's request is its limit where it sets only the limit, as the API server's
 * defaulting stores it (a pod we patch is defaulted again after the patch). Pod-level requests
 * (spec.resources.requests, PodLevelResources) replace the aggregate for the resources they
 * name, overhead added after, as the scheduler does. Amounts are exact, in base units.
 */
import { MANAGED_RESOURCES, type ManagedResource, type ResourceAmounts } from './resources.js';
import { parseResourceQuantity } from './quantity.js';
import { isRecord } from '../common/is-record.js';
import type { KubeObject } from './kube-objects.js';

export type ResourceList = Record<string, string | number>;

export interface ResourceRequirements {
  requests?: ResourceList;
  limits?: ResourceList;
  [other: string]: unknown;
}

export interface ContainerLike {
  name: string;
  restartPolicy?: string;
  resources?: ResourceRequirements;
  [other: string]: unknown;
}

export interface PodLike {
  metadata?: {
    name?: string;
    generateName?: string;
    namespace?: string;
    uid?: string;
    annotations?: Record<string, string>;
    [other: string]: unknown;
  };
  spec?: {
    nodeName?: string;
    containers?: ContainerLike[];
    initContainers?: ContainerLike[];
    ephemeralContainers?: ContainerLike[];
    volumes?: KubeObject[];
    overhead?: ResourceList;
    resources?: ResourceRequirements;
    [other: string]: unknown;
  };
  status?: { phase?: string; [other: string]: unknown };
}

/** The annotation the kubelet puts on the API object that mirrors a static pod. */
export const MIRROR_POD_ANNOTATION = 'kubernetes.io/config.mirror';

export function isMirrorPod(pod: PodLike | undefined): boolean {
  const annotations = pod?.metadata?.annotations;
  return typeof annotations === 'object' && annotations !== null && Object.prototype.hasOwnProperty.call(annotations, MIRROR_POD_ANNOTATION);
}

/** A pod whose containers will not run again: it holds no resources on its node. */
export function isTerminal(pod: PodLike): boolean {
  const phase = pod.status?.phase;
  return phase === 'Succeeded' || phase === 'Failed';
}

export function isSidecar(container: ContainerLike): boolean {
  return container.restartPolicy === 'Always';
}

/** Resources counted per container (everything managed except `pods`, which counts the pod itself). */
const CONTAINER_RESOURCES = MANAGED_RESOURCES.filter((r): r is Exclude<ManagedResource, 'pods'> => r !== 'pods');

/** `resources` of a ResourceList in base units; a missing key = not set. */
export function readList<R extends ManagedResource>(list: unknown, resources: readonly R[]): Partial<Record<R, bigint>> {
  const out: Partial<Record<R, bigint>> = {};
  if (!isRecord(list)) return out;
  for (const resource of resources) {
    const value = list[resource];
    if (typeof value === 'string' || typeof value === 'number') out[resource] = parseResourceQuantity(resource, value);
  }
  return out;
}

function add(into: ResourceAmounts, amounts: ResourceAmounts): void {
  for (const resource of CONTAINER_RESOURCES) {
    const amount = amounts[resource];
    if (amount !== undefined) into[resource] = (into[resource] ?? 0n) + amount;
  }
}

function maxInto(into: ResourceAmounts, amounts: ResourceAmounts): void {
  for (const resource of CONTAINER_RESOURCES) {
    const amount = amounts[resource];
    if (amount !== undefined && (into[resource] === undefined || amount > into[resource]!)) into[resource] = amount;
  }
}

/** A container's requests as stored: a resource with only a limit is requested at its limit. */
function containerRequests(container: ContainerLike): ResourceAmounts {
  return { ...readList(container.resources?.limits, CONTAINER_RESOURCES), ...readList(container.resources?.requests, CONTAINER_RESOURCES) };
}

/**
 * What the scheduler counts for this pod on its node: cpu (millicores), memory and
 * ephemeral-storage (bytes), and `pods: 1`. Throws on an unparsable quantity.
 */
export function effectivePodRequests(pod: PodLike): ResourceAmounts {
  const requests: ResourceAmounts = {};
  for (const container of pod.spec?.containers ?? []) add(requests, containerRequests(container));

  const sidecars: ResourceAmounts = {};
  const initPeak: ResourceAmounts = {};
  for (const container of pod.spec?.initContainers ?? []) {
    const own = containerRequests(container);
    if (isSidecar(container)) {
      add(requests, own);
      add(sidecars, own);
      maxInto(initPeak, sidecars);
    } else {
      const whileRunning: ResourceAmounts = {};
      add(whileRunning, own);
      add(whileRunning, sidecars);
      maxInto(initPeak, whileRunning);
    }
  }
  maxInto(requests, initPeak);

  const podLevel = readList(pod.spec?.resources?.requests, CONTAINER_RESOURCES);
  for (const resource of ['cpu', 'memory'] as const) {
    if (podLevel[resource] !== undefined) requests[resource] = podLevel[resource];
  }
  add(requests, readList(pod.spec?.overhead, CONTAINER_RESOURCES));
  requests.pods = 1n;
  return requests;
}

const QOS_RESOURCES = ['cpu', 'memory'] as const;

/**
 * The pod's QoS class is Guaranteed (k8s.io/kubernetes pkg/apis/core/v1/helper/qos GetPodQOS):
 * cpu and memory limits on every container (or at pod level, where set), and every request equal
 * to its limit (a request not set defaults to its limit). Throws on an unparsable quantity.
 */
export function isGuaranteed(pod: PodLike): boolean {
  const podLevel = pod.spec?.resources;
  const containers = podLevel?.requests !== undefined || podLevel?.limits !== undefined ? [{ name: '', resources: podLevel }] : allContainers(pod);
  const requests: Partial<Record<'cpu' | 'memory', bigint>> = {};
  const limits: Partial<Record<'cpu' | 'memory', bigint>> = {};
  for (const container of containers) {
    const own = readList(container.resources?.limits, QOS_RESOURCES);
    if (QOS_RESOURCES.some((resource) => own[resource] === undefined || own[resource] <= 0n)) return false;
    const asked = { ...own, ...readList(container.resources?.requests, QOS_RESOURCES) };
    for (const resource of QOS_RESOURCES) {
      requests[resource] = (requests[resource] ?? 0n) + asked[resource]!;
      limits[resource] = (limits[resource] ?? 0n) + own[resource]!;
    }
  }
  return containers.length > 0 && QOS_RESOURCES.every((resource) => requests[resource] === limits[resource]);
}

function allContainers(pod: PodLike): ContainerLike[] {
  return [...(pod.spec?.initContainers ?? []), ...(pod.spec?.containers ?? [])];
}

/**
 * The CPUs the kubelet's static CPU manager policy gives the pod for itself (cpumanager
 * policy_static.go podGuaranteedCPUs), in millicores: 0 unless the pod is Guaranteed; per
 * container its cpu request if it is an integer; the larger of (regular containers + native
 * sidecars) and (each init container + the sidecars declared before it). A pod with pod-level
 * resources gets none (the CPU manager leaves such pods in the shared pool). Throws on an
 * unparsable quantity.
 */
export function exclusiveCpus(pod: PodLike): bigint {
  if (pod.spec?.resources !== undefined || !isGuaranteed(pod)) return 0n;
  const whole = (container: ContainerLike): bigint => {
    const cpu = containerRequests(container).cpu ?? 0n;
    return cpu % 1000n === 0n ? cpu : 0n;
  };
  let sidecars = 0n;
  let initPeak = 0n;
  for (const container of pod.spec?.initContainers ?? []) {
    if (isSidecar(container)) sidecars += whole(container);
    else if (sidecars + whole(container) > initPeak) initPeak = sidecars + whole(container);
  }
  const running = (pod.spec?.containers ?? []).reduce((sum, container) => sum + whole(container), sidecars);
  return running > initPeak ? running : initPeak;
}
