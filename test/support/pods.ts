import type { E2eEnv } from './env.js';
import { adminClient, KubeApiError, type KubeClient } from './kube-client.js';
import { waitUntil } from './wait.js';

/**
 * A namespace (with these labels), ready for pods: the controller-manager has made its
 * "default" ServiceAccount (the ServiceAccount admission plugin refuses pods before that).
 */
export async function createNamespace(env: E2eEnv, name: string, labels: Record<string, string> = {}): Promise<void> {
  const admin = adminClient(env);
  try {
    await admin.post('/api/v1/namespaces', { apiVersion: 'v1', kind: 'Namespace', metadata: { name, labels } });
    await waitUntil(`ServiceAccount ${name}/default`, () => admin.get(`/api/v1/namespaces/${name}/serviceaccounts/default`), { timeoutMs: 30_000 });
  } finally {
    admin.close();
  }
}

/** Deletes a namespace without waiting for it to go. */
export async function deleteNamespace(env: E2eEnv, name: string): Promise<void> {
  const admin = adminClient(env);
  try {
    await admin.delete(`/api/v1/namespaces/${name}`).catch((e) => (e instanceof KubeApiError && e.status === 404 ? undefined : Promise.reject(e)));
  } finally {
    admin.close();
  }
}

export interface PodCounts {
  total: number;
  /** spec.nodeName set. */
  bound: number;
  running: number;
  /** PodScheduled=False with reason Unschedulable: the scheduler tried and found no node. */
  unschedulable: number;
  /** Bound pods per node. */
  byNode: Record<string, number>;
}

export async function listPods(client: KubeClient, namespace: string, labelSelector?: string): Promise<any[]> {
  const list = await client.get(`/api/v1/namespaces/${namespace}/pods`, labelSelector ? { labelSelector } : undefined);
  return list.items ?? [];
}

export function countPods(pods: any[]): PodCounts {
  const counts: PodCounts = { total: pods.length, bound: 0, running: 0, unschedulable: 0, byNode: {} };
  for (const pod of pods) {
    const node = pod.spec?.nodeName;
    if (node) {
      counts.bound++;
      counts.byNode[node] = (counts.byNode[node] ?? 0) + 1;
    }
    if (pod.status?.phase === 'Running') counts.running++;
    if ((pod.status?.conditions ?? []).some((c: any) => c.type === 'PodScheduled' && c.status === 'False' && c.reason === 'Unschedulable'))
      counts.unschedulable++;
  }
  return counts;
}

/**
 * Deletes the pods and waits until none is left. Pods on kwok nodes are finished off by kwok
 * (its pod-delete stage) after their grace period; `force` removes them at once (grace 0).
 */
export async function deleteAllPods(client: KubeClient, namespace: string, options: { labelSelector?: string; force?: boolean } = {}): Promise<void> {
  const { labelSelector, force } = options;
  // A collection DELETE answers once every pod is marked: hundreds of pods on a loaded machine take
  // longer than a single request's 15 s.
  await client.request('DELETE', `/api/v1/namespaces/${namespace}/pods`, {
    query: { ...(force ? { gracePeriodSeconds: 0 } : {}), ...(labelSelector ? { labelSelector } : {}) },
    timeoutMs: 120_000,
  });
  await waitUntil(`pods in ${namespace} deleted`, async () => (await listPods(client, namespace, labelSelector)).length === 0, { timeoutMs: 60_000 });
}

/**
 * A pod for `node` (its hostname label: kube-scheduler still binds it, so the cap sees the binding): one pause
 * container requesting `cpu` and 64Mi, no ServiceAccount token, no grace period.
 */
export function pinnedPod(namespace: string, name: string, node: string, cpu: string): any {
  return {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { name, namespace },
    spec: {
      nodeSelector: { 'kubernetes.io/hostname': node },
      automountServiceAccountToken: false,
      terminationGracePeriodSeconds: 0,
      containers: [{ name: 'app', image: 'registry.k8s.io/pause:3.10', resources: { requests: { cpu, memory: '64Mi' } } }],
    },
  };
}

/** The namespace's pods by name. */
export async function podsByName(client: KubeClient, namespace: string): Promise<Map<string, any>> {
  const list = await client.get(`/api/v1/namespaces/${namespace}/pods`);
  return new Map(list.items.map((p: any) => [p.metadata.name, p]));
}
