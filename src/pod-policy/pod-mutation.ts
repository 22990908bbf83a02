/**
 * The policy over a whole pod: every container (init, native sidecar, regular) through
 * applyContainerPolicy, the JSON Patch that writes the result, and the record of originals.
 *
 * Idempotence under reinvocation (and for a pod re-created from a dump of one we mutated):
 * the original cpu/memory requests and limits of every container we change are recorded in
 * the annotation `kube-overcommit.io/original-resources`, JSON keyed by container name:
 *
 *   {"app":{"requests":{"cpu":"500m","memory":"1Gi"},"limits":{"memory":"2Gi"}},"sidecar":{}}
 *
 * A recorded entry is trusted only when applying the policy to it gives exactly what the
 * container now holds, both as the API server stores them (a limit without a request gets the
 * limit as its request, also after our patch): the object carries our output. Then the policy
 * is computed from the recorded originals, otherwise from what the container holds (someone
 * changed it since, or the annotation was forged: it then cannot make us write anything we would
 * not write anyway). So mutate(mutate(x)) = mutate(x), and so is a reinvocation on what the API
 * server stored of mutate(x).
 *
 * Pod-level resources (spec.resources, PodLevelResources): a resource the pod sets at pod level,
 * in its requests or its limits, is held: every container keeps what it holds for it. The
 * scheduler counts the pod-level request instead of the containers', and the API server refuses
 * a pod whose containers' aggregate request exceeds the pod-level request or whose container
 * limit exceeds the pod-level limit; changing only the other resources keeps a valid pod valid.
 * A held resource is taken from the container as it is also when the policy is computed from
 * the recorded originals: after our patch, the API server's defaulting fills the pod-level
 * request of a pod with pod-level limits from the containers' requests, so a resource we
 * changed can be held at the reinvocation, which must then change nothing.
 */
import type { PatchOperation } from '../admission/admission.types.js';
import { annotationPatch } from '../admission/annotation-patch.js';
import { jsonPointer } from '../domain/json-pointer.js';
import { formatResourceQuantity } from '../domain/quantity.js';
import { applyContainerPolicy, sameAmounts, settingsWithout, type ContainerAmounts, type PolicyAmounts, type PolicySettings } from './container-policy.js';
import { POLICY_RESOURCES, type ContainerBounds, type PolicyResource } from './limit-range.js';
import { readList, type ContainerLike, type PodLike, type ResourceRequirements } from '../domain/pod-resources.js';
import { isRecord } from '../common/is-record.js';

export const ORIGINAL_RESOURCES_ANNOTATION = 'kube-overcommit.io/original-resources';

type RecordedList = Partial<Record<PolicyResource, string>>;
export interface RecordedResources {
  requests?: RecordedList;
  limits?: RecordedList;
}

export type ContainerKind = 'initContainers' | 'containers';

export type Change = 'added' | 'lowered' | 'raised';

export interface ResourceChange {
  container: string;
  field: 'requests' | 'limits';
  resource: PolicyResource;
  change: Change;
}

export interface PodMutationPlan {
  patch: PatchOperation[];
  /** What changed relative to the object as received (empty when the patch is). */
  changes: ResourceChange[];
}

export function readContainerAmounts(resources: ResourceRequirements | undefined): ContainerAmounts {
  return { requests: readList(resources?.requests, POLICY_RESOURCES), limits: readList(resources?.limits, POLICY_RESOURCES) };
}

function recordList(list: unknown): RecordedList | undefined {
  if (!isRecord(list)) return undefined;
  const out: RecordedList = {};
  for (const resource of POLICY_RESOURCES) {
    const value = list[resource];
    if (typeof value === 'string' || typeof value === 'number') out[resource] = String(value);
  }
  return Object.keys(out).length > 0 ? out : undefined;
}

/** The cpu/memory part of a container's resources, as the annotation records it. */
export function recordResources(resources: ResourceRequirements | undefined): RecordedResources {
  const requests = recordList(resources?.requests);
  const limits = recordList(resources?.limits);
  return { ...(requests ? { requests } : {}), ...(limits ? { limits } : {}) };
}

const holdsNegative = (amounts: ContainerAmounts) => [...Object.values(amounts.requests), ...Object.values(amounts.limits)].some((amount) => amount! < 0n);

/** The annotation, parsed defensively: anything not exactly our shape counts as absent. */
export function readOriginals(
  annotations: Readonly<Record<string, string>> | undefined,
): Map<string, { recorded: RecordedResources; amounts: ContainerAmounts }> {
  const out = new Map<string, { recorded: RecordedResources; amounts: ContainerAmounts }>();
  const text = annotations?.[ORIGINAL_RESOURCES_ANNOTATION];
  if (typeof text !== 'string') return out;
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    return out;
  }
  if (!isRecord(parsed)) return out;
  for (const [name, entry] of Object.entries(parsed)) {
    if (!isRecord(entry) || Object.keys(entry).some((key) => key !== 'requests' && key !== 'limits')) continue;
    const lists = [entry.requests, entry.limits];
    const valid = lists.every(
      (list) =>
        list === undefined ||
        (isRecord(list) &&
          Object.entries(list).every(([resource, value]) => (POLICY_RESOURCES as readonly string[]).includes(resource) && typeof value === 'string')),
    );
    if (!valid) continue;
    try {
      const recorded = entry as RecordedResources;
      const amounts = readContainerAmounts(recorded as ResourceRequirements);
      if (holdsNegative(amounts)) continue;
      out.set(name, { recorded, amounts });
    } catch {
      // An unparsable quantity: the entry is ignored.
    }
  }
  return out;
}

/** cpu and memory the pod sets at pod level (spec.resources.requests or .limits). */
export function readPodLevelResources(pod: PodLike): Set<PolicyResource> {
  const held = new Set<PolicyResource>();
  const resources = pod.spec?.resources;
  if (!isRecord(resources)) return held;
  for (const list of [resources.requests, resources.limits]) {
    if (!isRecord(list)) continue;
    for (const resource of POLICY_RESOURCES) if (Object.hasOwn(list, resource)) held.add(resource);
  }
  return held;
}

/**
 * `amounts` as the API server stores them: it defaults the request of a resource that has a
 * limit and no request to the limit, also after a webhook's patch (a cpu limit the policy
 * derives from memory, with no cpu request percentage, is stored with that request).
 */
function asDefaulted(amounts: ContainerAmounts): ContainerAmounts {
  const missing = POLICY_RESOURCES.filter((resource) => amounts.limits[resource] !== undefined && amounts.requests[resource] === undefined);
  if (missing.length === 0) return amounts;
  const requests: PolicyAmounts = { ...amounts.requests };
  for (const resource of missing) requests[resource] = amounts.limits[resource];
  return { requests, limits: amounts.limits };
}

/** Whether the API server stores the same amounts for both. */
const sameStored = (a: ContainerAmounts, b: ContainerAmounts) => sameAmounts(asDefaulted(a), asDefaulted(b));

/** `amounts` with the held resources as `current` has them. */
function holding(amounts: ContainerAmounts, current: ContainerAmounts, held: ReadonlySet<PolicyResource>): ContainerAmounts {
  if (held.size === 0) return amounts;
  const out: ContainerAmounts = { requests: { ...amounts.requests }, limits: { ...amounts.limits } };
  for (const resource of held) {
    for (const field of ['requests', 'limits'] as const) {
      const value = current[field][resource];
      if (value === undefined) delete out[field][resource];
      else out[field][resource] = value;
    }
  }
  return out;
}

function changeOf(before: bigint | undefined, after: bigint | undefined): Change | null {
  if (before === after || after === undefined) return null;
  if (before === undefined) return 'added';
  return after < before ? 'lowered' : 'raised';
}

/** `resources` with the cpu/memory values of `after` written where they differ from `before`. */
function writeResources(resources: ResourceRequirements | undefined, before: ContainerAmounts, after: ContainerAmounts): ResourceRequirements {
  // Only core/v1 ResourceRequirements' fields: the API server decodes the pod before calling us,
  // so any other key comes from another client, and copying it would echo it, however much of
  // it there is, into the patch.
  const out: ResourceRequirements = {};
  for (const field of ['limits', 'requests', 'claims']) if (resources?.[field] !== undefined) out[field] = resources[field];
  for (const field of ['requests', 'limits'] as const) {
    const list: Record<string, string | number> = { ...(isRecord(out[field]) ? out[field] : {}) };
    let changed = false;
    for (const resource of POLICY_RESOURCES) {
      const value = after[field][resource];
      if (value === before[field][resource]) continue;
      changed = true;
      if (value === undefined) delete list[resource];
      else list[resource] = formatResourceQuantity(resource, value);
    }
    if (changed) out[field] = list;
  }
  return out;
}

export function planPodMutation(pod: PodLike, settings: PolicySettings, bounds: ContainerBounds): PodMutationPlan {
  const originals = readOriginals(pod.metadata?.annotations);
  const held = readPodLevelResources(pod);
  const podSettings = settingsWithout(settings, held);
  // Keyed by container names a client chose: no prototype for a `__proto__` name to replace.
  const record: Record<string, RecordedResources> = Object.create(null);
  const patch: PatchOperation[] = [];
  const changes: ResourceChange[] = [];

  const kinds: ContainerKind[] = ['initContainers', 'containers'];
  for (const kind of kinds) {
    const containers: ContainerLike[] = Array.isArray(pod.spec?.[kind]) ? (pod.spec![kind] as ContainerLike[]) : [];
    containers.forEach((container, index) => {
      if (!isRecord(container) || typeof container.name !== 'string') return;
      const current = readContainerAmounts(container.resources);
      // The API server refuses a negative amount; its original could not be recorded (readOriginals
      // distrusts it), so changing the container would not be idempotent.
      if (holdsNegative(current)) return;
      const policy = (amounts: ContainerAmounts) => holding(applyContainerPolicy(amounts, podSettings, bounds), current, held);
      let origin = current;
      let originRecord = recordResources(container.resources);
      const entry = originals.get(container.name);
      if (entry && sameStored(policy(entry.amounts), current)) {
        origin = entry.amounts;
        originRecord = entry.recorded;
      }
      const result = policy(origin);
      if (!sameAmounts(result, origin)) record[container.name] = originRecord;
      if (sameStored(result, current)) return;
      patch.push({ op: 'add', path: jsonPointer(['spec', kind, String(index), 'resources']), value: writeResources(container.resources, current, result) });
      for (const field of ['requests', 'limits'] as const) {
        for (const resource of POLICY_RESOURCES) {
          const change = changeOf(current[field][resource], result[field][resource]);
          if (change) changes.push({ container: container.name, field, resource, change });
        }
      }
    });
  }

  const desired = Object.keys(record).length > 0 ? JSON.stringify(record) : null;
  patch.push(...annotationPatch(pod.metadata, { [ORIGINAL_RESOURCES_ANNOTATION]: desired }, { malformed: 'overwrite' }));
  return { patch, changes };
}
