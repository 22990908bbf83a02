/**
 * The kubelet's pod admission (pkg/kubelet/lifecycle/predicate.go, the scheduler's NodeResourcesFit
 * run by the kubelet): pods in creation order, each admitted if the requests of the pods admitted
 * before it plus its own fit the Node's allocatable as the API server stores it, for every
 * resource the pod requests, and one more pod fits `pods`. On a restart the kubelet runs it again
 * over every non-terminal pod bound to it: a pod that no longer fits is rejected (OutOfcpu,
 * OutOfmemory, OutOfpods) and fails. Written here from the kubelet's rules, independent of the
 * product's own code.
 */
import { baseUnits } from './quantity.js';

const COUNTED = ['cpu', 'memory'] as const;
type Counted = (typeof COUNTED)[number];
type Requests = Record<Counted, bigint>;

function containerRequests(container: any): Requests {
  const list = { ...container.resources?.limits, ...container.resources?.requests };
  return Object.fromEntries(COUNTED.map((r) => [r, list[r] === undefined ? 0n : baseUnits(r, list[r])])) as Requests;
}

const zero = (): Requests => ({ cpu: 0n, memory: 0n });
const plus = (a: Requests, b: Requests): Requests => ({ cpu: a.cpu + b.cpu, memory: a.memory + b.memory });
const max = (a: Requests, b: Requests): Requests => ({ cpu: a.cpu > b.cpu ? a.cpu : b.cpu, memory: a.memory > b.memory ? a.memory : b.memory });

/**
 * component-helpers' PodRequests: regular containers and restartable init containers (native
 * sidecars) together, or an init container with the sidecars started before it, whichever is
 * larger; pod-level requests instead where set; plus spec.overhead.
 */
export function podRequests(pod: any): Requests {
  let running = zero();
  for (const container of pod.spec?.containers ?? []) running = plus(running, containerRequests(container));
  let sidecars = zero();
  let initPeak = zero();
  for (const container of pod.spec?.initContainers ?? []) {
    if (container.restartPolicy === 'Always') {
      sidecars = plus(sidecars, containerRequests(container));
      running = plus(running, containerRequests(container));
      initPeak = max(initPeak, sidecars);
    } else {
      initPeak = max(initPeak, plus(sidecars, containerRequests(container)));
    }
  }
  let requests = max(running, initPeak);
  const podLevel = pod.spec?.resources?.requests ?? {};
  for (const r of COUNTED) if (podLevel[r] !== undefined) requests = { ...requests, [r]: baseUnits(r, podLevel[r]) };
  const overhead = pod.spec?.overhead ?? {};
  for (const r of COUNTED) if (overhead[r] !== undefined) requests = { ...requests, [r]: requests[r] + baseUnits(r, overhead[r]) };
  return requests;
}

export interface KubeletAdmission {
  admitted: string[];
  /** Pods rejected, with the kubelet's reason (`OutOfcpu`, `OutOfmemory`, `OutOfpods`). */
  rejected: Array<{ pod: string; reason: string }>;
}

/** Admits `pods` (any order: sorted by creationTimestamp, then name, as the kubelet does) against `allocatable`. */
export function admitPods(pods: any[], allocatable: Record<string, string>): KubeletAdmission {
  const ordered = [...pods].sort(
    (a, b) => Date.parse(a.metadata.creationTimestamp) - Date.parse(b.metadata.creationTimestamp) || a.metadata.name.localeCompare(b.metadata.name),
  );
  const capacity = Object.fromEntries(COUNTED.map((r) => [r, baseUnits(r, allocatable[r] ?? '0')])) as Requests;
  const maxPods = BigInt(allocatable.pods ?? '0');
  let used = zero();
  const result: KubeletAdmission = { admitted: [], rejected: [] };
  for (const pod of ordered) {
    const name = `${pod.metadata.namespace}/${pod.metadata.name}`;
    const requests = podRequests(pod);
    const over = COUNTED.find((r) => requests[r] > 0n && used[r] + requests[r] > capacity[r]);
    if (BigInt(result.admitted.length) + 1n > maxPods) result.rejected.push({ pod: name, reason: 'OutOfpods' });
    else if (over !== undefined) result.rejected.push({ pod: name, reason: `OutOf${over}` });
    else {
      result.admitted.push(name);
      used = plus(used, requests);
    }
  }
  return result;
}
