/**
 * Helpers for the pod-level scenarios (pod policies, sidecars): kwok nodes registered by a
 * simulated kubelet, Deployments and the pods their ReplicaSets create, dry-run probes that wait
 * until the webhook's namespace cache knows a namespace, writes that return the API server's
 * admission warnings, and events.
 */
import { readFileSync } from 'node:fs';
import https from 'node:https';
import type { E2eEnv } from '../../support/env.js';
import { KubeApiError, type KubeClient } from '../../support/kube-client.js';
import { listPods } from '../../support/pods.js';
import { SimKubelet, type SimKubeletOptions } from '../../support/sim-kubelet.js';
import { waitUntil } from '../../support/wait.js';

export const POD_POLICY_LABEL = 'kube-overcommit.io/pod-policy';
export const SIDECARS_LABEL = 'kube-overcommit.io/sidecars';
export const ORIGINAL_RESOURCES_ANNOTATION = 'kube-overcommit.io/original-resources';
export const INJECT_ANNOTATION = 'kube-overcommit.io/inject';
export const INJECTED_ANNOTATION = 'kube-overcommit.io/injected';
export const PAUSE_IMAGE = 'registry.k8s.io/pause:3.10';

/**
 * A Node managed by kwok (annotation kwok.x-k8s.io/node=fake, taint kwok.x-k8s.io/node=fake:NoSchedule),
 * registered and status-updated by a SimKubelet as system:node:<name> — so the nodes webhook
 * inflates it and writes its raw/ratios annotations — whose pods kwok moves to Running.
 * Resolves once kwok holds its Lease and the Node is Ready.
 */
export async function startKwokNode(env: E2eEnv, admin: KubeClient, options: Omit<SimKubeletOptions, 'kwok'>): Promise<SimKubelet> {
  const kubelet = await SimKubelet.start(env, { updateFrequencyMs: 2_000, reportFrequencyMs: 10_000, ...options, kwok: true });
  try {
    await waitUntil(`kwok's Lease for ${options.name}`, () => admin.get(`/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/${options.name}`), {
      timeoutMs: 30_000,
    });
  } catch (error) {
    await kubelet.stop({ deleteNode: true }).catch(() => undefined);
    throw error;
  }
  return kubelet;
}

/** Pod spec parts that put a pod on one kwok node through kube-scheduler. */
export function onKwokNode(env: E2eEnv, nodeName: string) {
  return {
    nodeSelector: { 'kubernetes.io/hostname': nodeName },
    tolerations: [{ key: env.kwok.taint.key, operator: 'Exists', effect: env.kwok.taint.effect }],
    automountServiceAccountToken: false,
    terminationGracePeriodSeconds: 0,
  };
}

/** A Deployment manifest: `app` label = name, the pod template's metadata and spec as given. */
export function deployment(name: string, replicas: number, template: { annotations?: Record<string, string>; spec: any }) {
  return {
    apiVersion: 'apps/v1',
    kind: 'Deployment',
    metadata: { name, labels: { app: name } },
    spec: {
      replicas,
      selector: { matchLabels: { app: name } },
      template: { metadata: { labels: { app: name }, ...(template.annotations ? { annotations: template.annotations } : {}) }, spec: template.spec },
    },
  };
}

/**
 * Waits until the Deployment's ReplicaSet has created `count` pods (owned by a ReplicaSet owned by
 * the Deployment) that satisfy `ready` (default: Running); returns them, oldest first.
 */
export async function waitForDeploymentPods(
  admin: KubeClient,
  namespace: string,
  name: string,
  count: number,
  options: { ready?: (pod: any) => boolean; timeoutMs?: number } = {},
): Promise<any[]> {
  const ready = options.ready ?? ((pod: any) => pod.status?.phase === 'Running');
  const pods = () => listPods(admin, namespace, `app=${name}`);
  return waitUntil(
    `${count} pod(s) of Deployment ${namespace}/${name}`,
    async () => {
      const all = (await pods()).filter((p) => !p.metadata.deletionTimestamp);
      if (all.length !== count || !all.every(ready)) return undefined;
      if (!all.every((p) => p.metadata.ownerReferences?.some((o: any) => o.kind === 'ReplicaSet' && o.controller))) return undefined;
      return all.sort(
        (a, b) => String(a.metadata.creationTimestamp).localeCompare(String(b.metadata.creationTimestamp)) || a.metadata.name.localeCompare(b.metadata.name),
      );
    },
    {
      timeoutMs: options.timeoutMs ?? 60_000,
      intervalMs: 300,
      describe: async () =>
        (await pods()).map((p) => ({ name: p.metadata.name, node: p.spec.nodeName, phase: p.status?.phase, conditions: p.status?.conditions })),
    },
  );
}

/**
 * Dry-run pod CREATEs (`?dryRun=All`: every admission webhook runs — ours declare sideEffects
 * None — nothing is stored, and the product counts no metric for dry runs) until `admitted(pod)`
 * holds for the pod the API server answers with. The webhook answers pods of a namespace it has
 * not seen yet (its namespace informer lags the creation by the watch latency) as out of scope:
 * this waits for that, without sleeping.
 */
export async function waitForWebhookToSeeNamespace(
  admin: KubeClient,
  namespace: string,
  probe: { annotations?: Record<string, string>; spec?: any },
  admitted: (pod: any) => boolean,
  timeoutMs = 20_000,
): Promise<any> {
  const pod = {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { generateName: 'probe-', ...(probe.annotations ? { annotations: probe.annotations } : {}) },
    spec: probe.spec ?? { automountServiceAccountToken: false, containers: [{ name: 'probe', image: PAUSE_IMAGE }] },
  };
  let last: any;
  return waitUntil(
    `the webhook to handle pods of namespace ${namespace} (dry-run probe)`,
    async () => {
      last = await admin.post(`/api/v1/namespaces/${namespace}/pods`, pod, { dryRun: 'All' });
      return admitted(last) ? last : undefined;
    },
    { timeoutMs, intervalMs: 200, describe: () => ({ annotations: last?.metadata?.annotations, spec: last?.spec }) },
  );
}

export interface AdmissionAnswer {
  status: number;
  body: any;
  /** The API server's `Warning` headers (admission warnings), text only. */
  warnings: string[];
}

/** RFC 7234 warning values as the API server writes them: `299 - "text"`. */
function parseWarnings(header: string | string[] | undefined): string[] {
  const values = header === undefined ? [] : Array.isArray(header) ? header : [header];
  const out: string[] = [];
  for (const value of values) {
    for (const m of value.matchAll(/\d{3} \S+ "((?:[^"\\]|\\.)*)"/g)) out.push(m[1]!.replace(/\\(.)/g, '$1'));
  }
  return out;
}

/** POST as admin, answering status, body and the admission warnings (KubeClient drops headers). */
export function postWithWarnings(env: E2eEnv, path: string, body: unknown, query: Record<string, string> = {}): Promise<AdmissionAnswer> {
  const url = new URL(path, env.apiserverUrl);
  for (const [k, v] of Object.entries(query)) url.searchParams.set(k, v);
  const payload = JSON.stringify(body);
  return new Promise((resolve, reject) => {
    const req = https.request(
      url,
      {
        method: 'POST',
        ca: readFileSync(env.caFile),
        headers: {
          authorization: `Bearer ${env.adminToken}`,
          accept: 'application/json',
          'content-type': 'application/json',
          'content-length': Buffer.byteLength(payload),
        },
        timeout: 15_000,
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => {
          const text = Buffer.concat(chunks).toString('utf8');
          let parsed: any = text;
          try {
            parsed = JSON.parse(text);
          } catch {
            // not JSON
          }
          resolve({ status: res.statusCode ?? 0, body: parsed, warnings: parseWarnings(res.headers.warning) });
        });
        res.on('error', reject);
      },
    );
    req.on('timeout', () => req.destroy(new Error(`POST ${path}: no answer`)));
    req.on('error', reject);
    req.end(payload);
  });
}

/** Events about one object of a namespace (core/v1 view; events.k8s.io events show up too), oldest first. */
export async function eventsFor(admin: KubeClient, namespace: string, name: string, reason?: string): Promise<any[]> {
  const list = await admin.get(`/api/v1/namespaces/${namespace}/events`, {
    fieldSelector: `involvedObject.name=${name}${reason ? `,reason=${reason}` : ''}`,
  });
  return (list.items ?? []).sort((a: any, b: any) =>
    String(a.eventTime ?? a.firstTimestamp ?? a.metadata.creationTimestamp).localeCompare(
      String(b.eventTime ?? b.firstTimestamp ?? b.metadata.creationTimestamp),
    ),
  );
}

/** DELETE that ignores 404. */
export async function deleteIfExists(admin: KubeClient, path: string): Promise<void> {
  await admin.delete(path).catch((e) => (e instanceof KubeApiError && e.status === 404 ? undefined : Promise.reject(e)));
}

/** A short random suffix for object names. */
export function suffix(): string {
  return `${Date.now().toString(36).slice(-4)}${Math.random().toString(36).slice(2, 5)}`;
}

/**
 * `kubectl patch pod <name> --subresource resize` of container `app`'s cpu request: the HTTP
 * status and body (a refusal answered, not thrown).
 */
export async function resizeCpu(admin: KubeClient, namespace: string, name: string, cpu: string): Promise<{ status: number; body: any }> {
  const patch = { spec: { containers: [{ name: 'app', resources: { requests: { cpu } } }] } };
  try {
    return { status: 200, body: await admin.patch(`/api/v1/namespaces/${namespace}/pods/${name}/resize`, patch) };
  } catch (error) {
    if (error instanceof KubeApiError) return { status: error.status, body: error.body };
    throw error;
  }
}
