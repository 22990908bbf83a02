/**
 * The parts of a Pod the policies read, and two accountings of what a pod takes on its node:
 *
 *   - scheduledPodRequests: what the pod asks for, counted the way the 1.37 kube-scheduler
 *     counts it (k8s.io/component-helpers/resource PodRequests, with the status resources of
 *     in-place resize and of pod-level resize): rules 1–5. The pod cap reads it: it decides
 *     whether a binding, a pod created on a node or a resize may have what it asks for.
 *   - admittedPodRequests: what the kubelet has admitted the pod at, never what it has been
 *     asked for: rule 6. The commitment floor reads it (and whatever publishes or predicts the
 *     floor): a value that counted a resize the kubelet Deferred would let the kubelet's next
 *     retry fit that resize against it, and so on without bound.
 *
 * The rules:
 *
 *
 *   1. Containers: regular containers and native sidecars (initContainers with restartPolicy
 *      Always) run together → their sum; an ordinary init container runs alone with the sidecars
 *      declared before it → its requests plus theirs; the pod needs the larger of the two.
 *   2. A container's desired request is its spec's, its limit where it sets only the limit (the
 *      API server defaults the request to it, also after a webhook's patch).
 *   3. A pod the API stores counts, per resource, the largest of its desired requests (rule 1
 *      over the spec; left out while its resize is Infeasible, the PodResizePending condition),
 *      its allocated requests and its actual ones (rule 1 over
 *      status.containerStatuses[].allocatedResources and .resources.requests, each falling back
 *      as upstream does; or the pod-level status.allocatedResources and status.resources.requests
 *      where both are reported). A pod with no status counts its desired requests.
 *   4. Pod-level requests (spec.resources, cpu and memory) replace rule 3's value for the
 *      resources they name. A pod-level request the pod does not set is what the API server
 *      defaults it to (DefaultPodLevelResources, at CREATE after the webhooks since 1.37): the
 *      pod-level limit where no container sets the resource (where one does, the containers'
 *      aggregate, which rule 3 counts anyway). A stored pod with a pod-level status counts, per
 *      resource, the largest of its pod-level desired (unless Infeasible), actual and allocated
 *      requests.
 *   5. spec.overhead (RuntimeClass) is added last; the pod counts 1 toward `pods`.
 *   6. Admitted: per resource, the larger of the pod's allocated and actual requests (rule 3's
 *      status values, per container or the pod-level status where both are reported), and at
 *      pod level the larger of status.allocatedResources and status.resources.requests where
 *      the pod reports a pod-level status. The desired requests never count on their own: a
 *      resize the kubelet Deferred, found Infeasible or has not answered yet adds nothing. A
 *      container the kubelet reports no resources for (no status yet: a pod it has not seen,
 *      or a container not started; or a minor without in-place resize, where the spec cannot
 *      change) counts its spec's requests: what the kubelet admits it at when it first does.
 *      Overhead and `pods` as in rule 5.
 *
 * Amounts are exact, in base units.
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

/** What the kubelet reports of a container's resources (in-place resize). */
export interface ContainerStatusLike {
  name?: string;
  /** What the kubelet admitted the container at. */
  allocatedResources?: ResourceList;
  /** What the runtime runs it with. */
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
  status?: {
    phase?: string;
    conditions?: Array<{ type?: string; reason?: string; [other: string]: unknown }>;
    containerStatuses?: ContainerStatusLike[];
    initContainerStatuses?: ContainerStatusLike[];
    /** Pod-level (InPlacePodLevelResourcesVerticalScaling): what the kubelet admitted the pod at. */
    allocatedResources?: ResourceList;
    /** Pod-level: what the pod runs with. */
    resources?: ResourceRequirements;
    [other: string]: unknown;
  };
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

/** The kubelet refused the pod's resize for good (PodResizePending, reason Infeasible): its desired requests are not counted. */
export function isResizeInfeasible(pod: PodLike): boolean {
  const conditions = pod.status?.conditions;
  const pending = Array.isArray(conditions) ? conditions.find((condition) => isRecord(condition) && condition.type === 'PodResizePending') : undefined;
  return pending?.reason === 'Infeasible';
}

/** Resources counted per container (everything managed except `pods`, which counts the pod itself). */
const CONTAINER_RESOURCES = MANAGED_RESOURCES.filter((r): r is Exclude<ManagedResource, 'pods'> => r !== 'pods');
/** The managed resources a pod may set at pod level (with hugepages, which are not managed). */
const POD_LEVEL_RESOURCES = ['cpu', 'memory'] as const;
const isPodLevelResource = (name: string) => name === 'cpu' || name === 'memory' || name.startsWith('hugepages-');

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

/** Per resource, the largest of `lists` (a resource in none is absent). */
function largest(...lists: ResourceAmounts[]): ResourceAmounts {
  const out: ResourceAmounts = {};
  for (const list of lists) maxInto(out, list);
  return out;
}

/** A container's desired requests (rule 2): a resource with only a limit is requested at its limit. */
function containerRequests(container: ContainerLike): ResourceAmounts {
  return { ...readList(container.resources?.limits, CONTAINER_RESOURCES), ...readList(container.resources?.requests, CONTAINER_RESOURCES) };
}

/** Rule 1 over what `read` gives for each container. */
function aggregate(pod: PodLike, read: (container: ContainerLike) => ResourceAmounts): ResourceAmounts {
  const requests: ResourceAmounts = {};
  for (const container of pod.spec?.containers ?? []) add(requests, read(container));

  const sidecars: ResourceAmounts = {};
  const initPeak: ResourceAmounts = {};
  for (const container of pod.spec?.initContainers ?? []) {
    const own = read(container);
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
  return requests;
}

/** The pod's container statuses by name, regular ones first (upstream findContainerStatus). */
function containerStatuses(pod: PodLike): Map<string, ContainerStatusLike> {
  const byName = new Map<string, ContainerStatusLike>();
  for (const list of [pod.status?.containerStatuses, pod.status?.initContainerStatuses]) {
    if (!Array.isArray(list)) continue;
    for (const status of list) if (isRecord(status) && typeof status.name === 'string' && !byName.has(status.name)) byName.set(status.name, status);
  }
  return byName;
}

/**
 * Rule 3's allocated and actual requests: the pod-level status where both are reported, else
 * per container its status's (actual: status resources, else allocated), else, without a status
 * and unless the resize is Infeasible, its desired requests.
 */
function statusRequests(pod: PodLike, infeasible: boolean): { allocated: ResourceAmounts; actual: ResourceAmounts } {
  const status = pod.status;
  if (isRecord(status?.allocatedResources) && isRecord(status.resources) && isRecord(status.resources.requests))
    return { allocated: readList(status.allocatedResources, CONTAINER_RESOURCES), actual: readList(status.resources.requests, CONTAINER_RESOURCES) };
  const statuses = containerStatuses(pod);
  const allocatedOf = (container: ContainerLike): ResourceAmounts | undefined => {
    const allocated = statuses.get(container.name)?.allocatedResources;
    return isRecord(allocated) ? readList(allocated, CONTAINER_RESOURCES) : undefined;
  };
  const fallback = (container: ContainerLike) => (infeasible ? {} : containerRequests(container));
  const actualOf = (container: ContainerLike): ResourceAmounts => {
    const resources = statuses.get(container.name)?.resources;
    return isRecord(resources) && isRecord(resources.requests)
      ? readList(resources.requests, CONTAINER_RESOURCES)
      : (allocatedOf(container) ?? fallback(container));
  };
  return { allocated: aggregate(pod, (container) => allocatedOf(container) ?? fallback(container)), actual: aggregate(pod, actualOf) };
}

/** Whether the pod sets cpu, memory or hugepages at pod level (IsPodLevelResourcesSet). */
function isPodLevelResourcesSet(pod: PodLike): boolean {
  const resources = pod.spec?.resources;
  return isRecord(resources) && [resources.requests, resources.limits].some((list) => isRecord(list) && Object.keys(list).some(isPodLevelResource));
}

/**
 * Rule 4's pod-level requests, null when the pod sets no pod-level resource: those it sets, and
 * the pod-level limit of a resource no container sets (DefaultPodLevelResources). A resource a
 * container sets defaults to the containers' aggregate, the value counted without it: left out.
 * `containers` is the containers' desired aggregate.
 */
function podLevelRequests(pod: PodLike, containers: ResourceAmounts): Partial<Record<'cpu' | 'memory', bigint>> | null {
  if (!isPodLevelResourcesSet(pod)) return null;
  const requests = readList(pod.spec?.resources?.requests, POD_LEVEL_RESOURCES);
  const limits = readList(pod.spec?.resources?.limits, POD_LEVEL_RESOURCES);
  for (const resource of POD_LEVEL_RESOURCES) if (containers[resource] === undefined) requests[resource] ??= limits[resource];
  return requests;
}

/**
 * Whose desired requests count: `unless-infeasible`, a pod as the API stores it, read as the
 * scheduler reads it; `always`, a resize under review (the kubelet decides it anew, whatever the
 * stored PodResizePending condition says of the previous one).
 */
export type DesiredRequests = 'unless-infeasible' | 'always';

/**
 * What the scheduler counts for this pod on its node (rules 1–5): cpu (millicores), memory and
 * ephemeral-storage (bytes), and `pods: 1`. Throws on an unparsable quantity.
 */
export function scheduledPodRequests(pod: PodLike, desired: DesiredRequests = 'unless-infeasible'): ResourceAmounts {
  const infeasible = desired === 'unless-infeasible' && isResizeInfeasible(pod);
  const specified = aggregate(pod, containerRequests);
  const { allocated, actual } = statusRequests(pod, infeasible);
  return podTotal(pod, largest(infeasible ? {} : specified, allocated, actual), specified, infeasible ? 'status' : 'spec-and-status');
}

/**
 * What the kubelet has admitted the pod at (rule 6): the larger of its allocated and actual
 * requests, its desired ones only for a container the kubelet reports nothing for. What the
 * commitment floor counts. Throws on an unparsable quantity.
 */
export function admittedPodRequests(pod: PodLike): ResourceAmounts {
  const specified = aggregate(pod, containerRequests);
  const { allocated, actual } = statusRequests(pod, false);
  return podTotal(pod, largest(allocated, actual), specified, 'status');
}

/**
 * Rules 4 and 5 over the containers' total `containers`: the pod-level requests in place of it
 * where the pod sets them (with a pod-level status: the largest of its status values, and of its
 * pod-level desired requests when `podLevelFrom` says so), then the overhead and `pods: 1`.
 * `specified` is the containers' desired aggregate.
 */
function podTotal(pod: PodLike, containers: ResourceAmounts, specified: ResourceAmounts, podLevelFrom: 'spec-and-status' | 'status'): ResourceAmounts {
  const requests = containers;
  const podLevel = podLevelRequests(pod, specified);
  if (podLevel !== null) {
    const status = pod.status?.resources;
    const effective = isRecord(status)
      ? largest(
          podLevelFrom === 'status' ? {} : podLevel,
          readList(status.requests, POD_LEVEL_RESOURCES),
          readList(pod.status?.allocatedResources, POD_LEVEL_RESOURCES),
        )
      : podLevel;
    for (const resource of POD_LEVEL_RESOURCES) if (effective[resource] !== undefined) requests[resource] = effective[resource];
  }
  add(requests, readList(pod.spec?.overhead, CONTAINER_RESOURCES));
  requests.pods = 1n;
  return requests;
}

const QOS_RESOURCES = ['cpu', 'memory'] as const;

/**
 * The pod's QoS class is Guaranteed (k8s.io/kubernetes pkg/apis/core/v1/helper/qos
 * ComputePodQOS): with pod-level resources, the pod-level cpu and memory requests (as defaulted,
 * rule 4) equal to their non-zero limits; otherwise cpu and memory limits on every container and
 * every request equal to its limit (a request not set defaults to its limit). A resize never
 * changes it (the API server refuses one that would). Throws on an unparsable quantity.
 */
export function isGuaranteed(pod: PodLike): boolean {
  const specified = aggregate(pod, containerRequests);
  const podLevel = podLevelRequests(pod, specified);
  if (podLevel !== null) {
    const limits = readList(pod.spec?.resources?.limits, QOS_RESOURCES);
    const requested = (resource: 'cpu' | 'memory') => podLevel[resource] ?? specified[resource];
    return QOS_RESOURCES.every((resource) => limits[resource] !== undefined && limits[resource] > 0n && requested(resource) === limits[resource]);
  }
  const containers = allContainers(pod);
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
 * container its cpu request if it is an integer, as the kubelet allocated it
 * (status.containerStatuses[].allocatedResources where reported: the static policy leaves a
 * resize of those cores Infeasible); the larger of (regular containers + native sidecars) and
 * (each init container + the sidecars declared before it). A pod with pod-level resources gets
 * none (the CPU manager leaves such pods in the shared pool: PodLevelResourceManagers is off by
 * default). Throws on an unparsable quantity.
 */
export function exclusiveCpus(pod: PodLike): bigint {
  if (isPodLevelResourcesSet(pod) || !isGuaranteed(pod)) return 0n;
  const statuses = containerStatuses(pod);
  const whole = (container: ContainerLike): bigint => {
    const allocated = statuses.get(container.name)?.allocatedResources;
    const cpu = (isRecord(allocated) ? readList(allocated, ['cpu']) : containerRequests(container)).cpu ?? 0n;
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
