/**
 * The real node (`npm run node:up`, then `npm run test:node`): the kubelet and kube-proxy built from
 * the pinned Kubernetes module, containerd + runc + the CNI bridge from Debian's packages, the image
 * built from the Dockerfile and k8s/ applied as shipped (test/e2e/node/overlay: image reference and
 * pull policy only). What only a real node can show: the webhook reached by kube-apiserver through
 * its Service, the kubelet's own status write inflated, workloads in containers whose cgroups follow
 * their requests and limits, an in-place resize actuated in the cgroup and counted by the pod cap and
 * the commitment floor, kubelet restarts that keep every container, the kernel's OOM killer and the
 * eviction signals from capacity, and the webhook pods' CPU and memory as the kubelet measures them
 * (written to REAL_NODE_RESULT).
 *
 * No node up → every test fails in beforeAll, saying how to start one (never skipped as passing).
 * The tests run in order and share the node: the ratios set by the first are the later ones' premise.
 */
import { execFile } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadAvg, machineInfo } from '../../../bench/lib.js';
import { KubeApiError, KubeClient } from '../../support/kube-client.js';
import { baseUnits, formatBaseUnits, inflatedBaseUnits } from '../../support/quantity.js';
import { TerminalStateError, waitUntil } from '../../support/wait.js';
import { POD_POLICY_LABEL, resizeCpu } from '../harness/workloads.js';
import { ContainerUsageSampler, summaryPath, type UsageWindow } from './kubelet-stats.js';

const REPO = resolve(import.meta.dirname, '../../..');
const NODE_DIR = process.env.NODE_DIR ?? join(REPO, 'test/e2e/.run/node');
const NAMESPACE = 'real-node-e2e';
const PLATFORM = 'kube-overcommit';
const RATIOS = { cpu: '1.5', memory: '1.2' };
const FLOOR_ANNOTATION = 'kube-overcommit.io/floor';
/**
 * Where the availability test writes the webhook pods' CPU and memory as the kubelet measured them
 * (relative to the repository); bench/results/real-node-webhook.json is the committed run.
 */
const RESULT_FILE = resolve(REPO, process.env.REAL_NODE_RESULT ?? 'test/e2e/.run/node/logs/real-node-webhook.json');

/** KEY=value lines written by node.sh up (values shell-quoted only when they need it; ours never do). */
function readEnvFile(file: string): Record<string, string> {
  const out: Record<string, string> = {};
  for (const line of readFileSync(file, 'utf8').split('\n')) {
    const m = /^([A-Z_0-9]+)=(.*)$/.exec(line);
    if (m) out[m[1]] = m[2].replace(/^'(.*)'$/, '$1');
  }
  return out;
}

function run(file: string, args: string[], options: { input?: string; timeoutMs?: number } = {}): Promise<string> {
  return new Promise((resolvePromise, reject) => {
    const child = execFile(file, args, { timeout: options.timeoutMs ?? 120_000, maxBuffer: 64 * 1024 * 1024 }, (error, stdout, stderr) => {
      if (error) reject(new Error(`${file} ${args.join(' ')} failed: ${stderr.trim() || error.message}`));
      else resolvePromise(stdout);
    });
    if (options.input !== undefined) child.stdin!.end(options.input);
  });
}

let env: Record<string, string>;
let cluster: Record<string, string>;
let admin: KubeClient;
const kubectl = (args: string[], options: { input?: string; timeoutMs?: number } = {}) =>
  run(env.KUBECTL, [`--kubeconfig=${env.KUBECONFIG}`, '--request-timeout=30s', ...args], options);

/** A v1 cgroup file of a container (cgroupfs driver: /kubepods/<qos>/pod<uid>/<container id>). */
function cgroupValue(controller: 'cpu' | 'memory', pod: any, file: string, level: 'container' | 'pod' = 'container'): bigint {
  const qos = pod.status.qosClass === 'Guaranteed' ? '' : `${pod.status.qosClass.toLowerCase()}/`;
  const id = String(pod.status.containerStatuses[0].containerID).replace(/^containerd:\/\//, '');
  const dir = `/sys/fs/cgroup/${controller}/kubepods/${qos}pod${pod.metadata.uid}${level === 'container' ? `/${id}` : ''}`;
  return BigInt(readFileSync(`${dir}/${file}`, 'utf8').trim());
}

/** The kubelet's cpu.shares for a cpu request (pkg/kubelet/cm: MilliCPUToShares). */
const shares = (milli: bigint) => (milli * 1024n) / 1000n;

function workloadPod(name: string, resources: { requests: Record<string, string>; limits?: Record<string, string> }, args: string[] = []): any {
  return {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { name, namespace: NAMESPACE, labels: { app: 'real-node-e2e' } },
    spec: {
      restartPolicy: args.length ? 'Never' : 'Always',
      terminationGracePeriodSeconds: 2,
      automountServiceAccountToken: false,
      enableServiceLinks: false,
      containers: [
        {
          name: 'app',
          image: env.WORKLOAD_IMAGE,
          imagePullPolicy: 'Never',
          args,
          resources,
          resizePolicy: [
            { resourceName: 'cpu', restartPolicy: 'NotRequired' },
            { resourceName: 'memory', restartPolicy: 'NotRequired' },
          ],
        },
      ],
    },
  };
}

async function getPod(name: string, namespace = NAMESPACE): Promise<any> {
  return admin.get(`/api/v1/namespaces/${namespace}/pods/${name}`);
}

async function waitRunning(names: string[]): Promise<any[]> {
  return waitUntil(
    `pods ${names.join(', ')} Running and ready`,
    async () => {
      const pods = await Promise.all(names.map((n) => getPod(n)));
      for (const p of pods) if (p.status.phase === 'Failed') throw new TerminalStateError(`${p.metadata.name} Failed: ${p.status.reason}: ${p.status.message}`);
      const ready = pods.every((p) => p.status.phase === 'Running' && p.status.containerStatuses?.[0]?.ready === true);
      return ready ? pods : undefined;
    },
    { timeoutMs: 120_000, intervalMs: 500 },
  );
}

/** The ConfigMap's config: `ratios` for every node; the pod cap off as shipped, or in `deny`. */
async function setRatios(ratios: Record<string, string>, cap: 'off' | 'deny' = 'off'): Promise<void> {
  const config = [
    'nodes:',
    `  defaultRatios: { ${Object.entries(ratios)
      .map(([r, v]) => `${r}: ${v}`)
      .join(', ')} }`,
    '  coalesceStatusWrites: true',
    '  pools: []',
    ...(cap === 'deny' ? ['pods:', '  cap: { mode: deny }'] : []),
    '',
  ].join('\n');
  await kubectl(['-n', PLATFORM, 'patch', 'configmap', 'kube-overcommit-config', '--type=merge', '-p', JSON.stringify({ data: { 'config.yaml': config } })]);
}

/** Node as stored, and what the kubelet reported as raw (the webhook's record). */
async function nodeView(): Promise<{ node: any; raw: Record<string, string>; capacity: Record<string, string>; ratios: Record<string, number> }> {
  const node = await admin.get(`/api/v1/nodes/${env.NODE_NAME}`);
  const record = JSON.parse(node.metadata.annotations?.['kube-overcommit.io/allocatable-raw'] ?? '{}');
  const ratios = JSON.parse(node.metadata.annotations?.['kube-overcommit.io/ratios'] ?? '{}');
  return { node, raw: record.allocatable ?? {}, capacity: record.capacity ?? {}, ratios };
}

/** The Node's stored allocatable once it is floor(raw × ratio) for cpu and memory under `ratios`. */
async function waitInflated(ratios: Record<string, string>, timeoutMs = 60_000) {
  return waitUntil(
    `Node ${env.NODE_NAME} stored allocatable = floor(raw × ${JSON.stringify(ratios)})`,
    async () => {
      const v = await nodeView();
      if (v.raw.cpu === undefined) return undefined;
      const done = Object.entries(ratios).every(([r, ratio]) => baseUnits(r, v.node.status.allocatable[r]) === inflatedBaseUnits(r, v.raw[r], ratio));
      return done ? v : undefined;
    },
    { timeoutMs, intervalMs: 500 },
  );
}

/** kube-apiserver's counter for the nodes entry of the webhook configuration (name, type, rejected or fail-open). */
async function apiserverWebhookCount(metric: string, webhook: string): Promise<number> {
  const text: string = await admin.request('GET', '/metrics');
  let total = 0;
  for (const line of text.split('\n')) {
    if (!line.startsWith(`${metric}{`) || !line.includes(`name="${webhook}"`)) continue;
    total += Number(line.slice(line.lastIndexOf(' ') + 1));
  }
  return total;
}

/** The pods on the node: the workloads and the webhook's replicas. */
async function nodePods(): Promise<any[]> {
  return [...(await admin.get(`/api/v1/namespaces/${NAMESPACE}/pods`)).items, ...(await admin.get(`/api/v1/namespaces/${PLATFORM}/pods`)).items];
}

const containerIds = (pods: any[]) => new Map<string, string>(pods.map((p: any) => [p.metadata.name, p.status.containerStatuses[0].containerID]));

/** Σ of a resource over the pods' containers: their requests, or what the kubelet admitted (the larger of allocated and actual). */
function cpuSum(pods: any[], count: 'requests' | 'admitted'): bigint {
  let sum = 0n;
  for (const pod of pods) {
    for (const container of pod.spec.containers) {
      const requested = baseUnits('cpu', container.resources?.requests?.cpu ?? '0');
      const status = pod.status.containerStatuses?.find((c: any) => c.name === container.name);
      const held = [status?.allocatedResources?.cpu, status?.resources?.requests?.cpu].filter((q) => q !== undefined).map((q) => baseUnits('cpu', q));
      sum += count === 'requests' || held.length === 0 ? requested : held.reduce((a, b) => (a > b ? a : b));
    }
  }
  return sum;
}

/** A POST answered: its status and body, a refusal included. */
async function answer(request: Promise<any>): Promise<{ status: number; body: any }> {
  try {
    return { status: 200, body: await request };
  } catch (error) {
    if (error instanceof KubeApiError) return { status: error.status, body: error.body };
    throw error;
  }
}

/**
 * `node.sh restart-kubelet` (SIGTERM, started again with the same flags); resolves with the restart
 * time once the new kubelet has renewed its Lease and had 20 s to sync every pod.
 */
async function restartKubelet(): Promise<number> {
  const kubeletPid = readFileSync(env.KUBELET_PID_FILE, 'utf8').trim();
  await run('bash', [join(REPO, 'test/e2e/node/node.sh'), 'restart-kubelet', env.NODE_DIR]);
  const restartedAt = Date.now();
  expect(readFileSync(env.KUBELET_PID_FILE, 'utf8').trim()).not.toBe(kubeletPid);
  // Heartbeat-only status writes are coalesced (the Ready condition's heartbeat time does not
  // move): the Lease says the new kubelet is there.
  await waitUntil(
    'the restarted kubelet renews its Lease',
    async () => {
      const lease = await admin.get(`/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/${env.NODE_NAME}`);
      return Date.parse(lease.spec.renewTime) > restartedAt && lease;
    },
    { timeoutMs: 90_000, intervalMs: 500 },
  );
  // Let the pod workers sync every pod once (the kubelet's resync is 10 s: give it two).
  await new Promise((r) => setTimeout(r, 20_000));
  return restartedAt;
}

/**
 * Every pod of `idsBefore` Running with the container it had (same id, 0 restarts), no other pod,
 * and none rejected at the kubelet's re-admission since `since` (its OutOfcpu/OutOfmemory Events).
 */
async function expectContainersKept(idsBefore: Map<string, string>, since: number): Promise<void> {
  const podsAfter = await nodePods();
  for (const pod of podsAfter) {
    expect({ pod: pod.metadata.name, phase: pod.status.phase, reason: pod.status.reason }).toEqual({
      pod: pod.metadata.name,
      phase: 'Running',
      reason: undefined,
    });
    expect(pod.status.containerStatuses[0].containerID).toBe(idsBefore.get(pod.metadata.name));
    expect(pod.status.containerStatuses[0].restartCount).toBe(0);
  }
  expect(podsAfter.map((p: any) => p.metadata.name).sort()).toEqual([...idsBefore.keys()].sort());
  const rejections = [];
  for (const namespace of [NAMESPACE, PLATFORM]) {
    for (const event of (await admin.get(`/api/v1/namespaces/${namespace}/events`)).items) {
      const at = Date.parse(event.lastTimestamp ?? event.eventTime ?? event.metadata.creationTimestamp);
      if (/^OutOf/.test(event.reason) && at >= Math.floor(since / 1000) * 1000)
        rejections.push(`${event.involvedObject.name}: ${event.reason}: ${event.message}`);
    }
  }
  expect(rejections).toEqual([]);
}

beforeAll(async () => {
  const envFile = join(NODE_DIR, 'node.env');
  if (!existsSync(envFile))
    throw new Error(`no real node at ${NODE_DIR}: start one with \`npm run node:up\` (test/e2e/node/node.sh), then run \`npm run test:node\``);
  env = readEnvFile(envFile);
  cluster = readEnvFile(join(env.CLUSTER_DIR, 'env'));
  admin = new KubeClient(cluster.APISERVER_URL, cluster.ADMIN_TOKEN, readFileSync(cluster.CA_FILE), 'admin');
  await kubectl(['delete', 'namespace', NAMESPACE, '--ignore-not-found', '--wait=true', '--timeout=120s']);
  await kubectl(['create', 'namespace', NAMESPACE]);
});

afterAll(async () => {
  if (admin === undefined) return;
  await kubectl(['delete', 'namespace', NAMESPACE, '--ignore-not-found', '--wait=true', '--timeout=120s']).catch(() => undefined);
  await setRatios({ cpu: '1', memory: '1' }).catch(() => undefined);
  admin.close();
});

describe('real node: kubelet + containerd, the image from the Dockerfile, k8s/ as shipped', () => {
  it('runs the shipped Deployment: 2 replicas Ready on the real node, the image built here, the webhook reached through its Service', async () => {
    const deployment = await admin.get(`/apis/apps/v1/namespaces/${PLATFORM}/deployments/kube-overcommit`);
    expect(deployment.spec.replicas).toBe(2);
    expect(deployment.status.readyReplicas).toBe(2);
    const container = deployment.spec.template.spec.containers[0];
    expect(container.image).toBe('ghcr.io/kube-overcommit/kube-overcommit:0.1.0');
    expect(container.imagePullPolicy).toBe('Never');
    // The rest as k8s/ renders it: non-root, read-only root filesystem, probes, resources.
    expect(container.securityContext.readOnlyRootFilesystem).toBe(true);
    expect(deployment.spec.template.spec.securityContext.runAsUser).toBe(65532);
    expect(container.resources.limits.memory).toBe('512Mi');

    const pods = (await admin.get(`/api/v1/namespaces/${PLATFORM}/pods`, { labelSelector: 'app.kubernetes.io/name=kube-overcommit' })).items;
    expect(pods.length).toBe(2);
    for (const pod of pods) {
      expect(pod.spec.nodeName).toBe(env.NODE_NAME);
      expect(pod.status.phase).toBe('Running');
      expect(pod.status.containerStatuses[0].ready).toBe(true);
      expect(pod.status.containerStatuses[0].containerID).toMatch(/^containerd:\/\/[0-9a-f]{64}$/);
      expect(pod.status.podIP).toMatch(/^10\.88\./);
    }
    const slices = (
      await admin.get(`/apis/discovery.k8s.io/v1/namespaces/${PLATFORM}/endpointslices`, { labelSelector: 'kubernetes.io/service-name=kube-overcommit' })
    ).items;
    const addresses = slices.flatMap((s: any) => s.endpoints.filter((e: any) => e.conditions.ready).flatMap((e: any) => e.addresses)).sort();
    expect(addresses).toEqual(pods.map((p: any) => p.status.podIP).sort());

    const configuration = await admin.get('/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations/kube-overcommit');
    for (const webhook of configuration.webhooks) {
      expect(webhook.clientConfig.url).toBeUndefined();
      expect(webhook.clientConfig.service).toMatchObject({ name: 'kube-overcommit', namespace: PLATFORM, port: 443 });
      expect(webhook.clientConfig.caBundle.length).toBeGreaterThan(100);
    }
    expect((await admin.get(`/apis/policy/v1/namespaces/${PLATFORM}/poddisruptionbudgets/kube-overcommit`)).metadata.name).toBe('kube-overcommit');
  });

  it("inflates the real kubelet's own status write through the Service: floor(raw × ratio), and a ConfigMap edit reaches the Node", async () => {
    const callsBefore = await apiserverWebhookCount('apiserver_admission_webhook_admission_duration_seconds_count', 'nodes.kube-overcommit.io');
    await setRatios(RATIOS);
    const inflated = await waitInflated(RATIOS);
    // The raw values are what this kubelet computes: capacity from the machine (cpu: its cores),
    // allocatable = capacity − the hard eviction threshold for memory (100Mi), nothing reserved.
    const cores = BigInt(readFileSync('/proc/cpuinfo', 'utf8').match(/^processor\s*:/gm)!.length);
    expect(baseUnits('cpu', inflated.capacity.cpu)).toBe(cores * 1000n);
    expect(baseUnits('cpu', inflated.raw.cpu)).toBe(cores * 1000n);
    expect(baseUnits('memory', inflated.raw.memory)).toBe(baseUnits('memory', inflated.capacity.memory) - 100n * 2n ** 20n);
    // Capacity is never changed; allocatable is floor(raw × ratio).
    expect(inflated.node.status.capacity.cpu).toBe(inflated.capacity.cpu);
    expect(baseUnits('cpu', inflated.node.status.allocatable.cpu)).toBe((cores * 1000n * 3n) / 2n);
    expect(baseUnits('memory', inflated.node.status.allocatable.memory)).toBe(inflatedBaseUnits('memory', inflated.raw.memory, '1.2'));
    expect(inflated.ratios).toMatchObject({ cpu: 1.5, memory: 1.2 });
    // kube-apiserver calls the nodes entry at the kubelet's next status write (every 10 s while the
    // stored allocatable differs from the kubelet's): clientConfig.service is its only way there.
    const callsAfter = await waitUntil(
      'kube-apiserver calls the nodes entry',
      async () => {
        const n = await apiserverWebhookCount('apiserver_admission_webhook_admission_duration_seconds_count', 'nodes.kube-overcommit.io');
        return n > callsBefore ? n : undefined;
      },
      { timeoutMs: 30_000, intervalMs: 1000 },
    );
    expect(callsAfter).toBeGreaterThan(callsBefore);
    expect(await apiserverWebhookCount('apiserver_admission_webhook_fail_open_count', 'nodes.kube-overcommit.io')).toBe(0);

    // An edit of the ratio alone: the next kubelet write is stored at the new ratio, from the recorded raw.
    await setRatios({ cpu: '2', memory: '1.2' });
    const edited = await waitInflated({ cpu: '2', memory: '1.2' });
    expect(baseUnits('cpu', edited.node.status.allocatable.cpu)).toBe(cores * 2000n);
    expect(edited.raw.cpu).toBe(inflated.raw.cpu);
    await setRatios(RATIOS);
    await waitInflated(RATIOS);
  });

  it("runs pods past the node's raw allocatable, each in cgroups sized from its own requests and limits; kubepods from capacity", async () => {
    const { raw, capacity } = await nodeView();
    const rawCpu = baseUnits('cpu', raw.cpu);
    // 4 × 500m + the webhook's 2 × 250m: 2500m requested on a node whose kubelet computes 2000m.
    const names = ['burstable-0', 'burstable-1', 'guaranteed-0', 'guaranteed-1'];
    for (const name of names) {
      const resources = name.startsWith('burstable')
        ? { requests: { cpu: '500m', memory: '32Mi' }, limits: { cpu: '1', memory: '64Mi' } }
        : { requests: { cpu: '500m', memory: '48Mi' }, limits: { cpu: '500m', memory: '48Mi' } };
      await admin.post(`/api/v1/namespaces/${NAMESPACE}/pods`, workloadPod(name, resources));
    }
    const pods = await waitRunning(names);
    const platformPods = (await admin.get(`/api/v1/namespaces/${PLATFORM}/pods`)).items;
    const requested = [...pods, ...platformPods].reduce(
      (sum: bigint, p: any) => sum + p.spec.containers.reduce((s: bigint, c: any) => s + baseUnits('cpu', c.resources?.requests?.cpu ?? '0'), 0n),
      0n,
    );
    expect(requested).toBeGreaterThan(rawCpu);

    for (const pod of pods) {
      expect(pod.spec.nodeName).toBe(env.NODE_NAME);
      const burstable = pod.metadata.name.startsWith('burstable');
      expect(pod.status.qosClass).toBe(burstable ? 'Burstable' : 'Guaranteed');
      expect(cgroupValue('cpu', pod, 'cpu.shares')).toBe(shares(500n));
      expect(cgroupValue('cpu', pod, 'cpu.cfs_quota_us')).toBe(burstable ? 100_000n : 50_000n);
      expect(cgroupValue('cpu', pod, 'cpu.cfs_period_us')).toBe(100_000n);
      expect(cgroupValue('memory', pod, 'memory.limit_in_bytes')).toBe((burstable ? 64n : 48n) * 2n ** 20n);
    }
    // The node-level cgroup: sized from what the kubelet computes (capacity, nothing reserved),
    // never from the inflated allocatable the API server stores.
    const kubepodsShares = BigInt(readFileSync('/sys/fs/cgroup/cpu/kubepods/cpu.shares', 'utf8').trim());
    expect(kubepodsShares).toBe(shares(baseUnits('cpu', capacity.cpu)));
    const kubepodsMemory = BigInt(readFileSync('/sys/fs/cgroup/memory/kubepods/memory.limit_in_bytes', 'utf8').trim());
    expect(kubepodsMemory).toBeLessThanOrEqual(baseUnits('memory', capacity.memory));
    expect(kubepodsMemory).toBeGreaterThanOrEqual(baseUnits('memory', raw.memory));
  });

  it('actuates an in-place resize in the cgroup (pods/resize, no restart)', async () => {
    const before = await getPod('burstable-0');
    const containerId = before.status.containerStatuses[0].containerID;
    await admin.patch(
      `/api/v1/namespaces/${NAMESPACE}/pods/burstable-0/resize`,
      { spec: { containers: [{ name: 'app', resources: { requests: { cpu: '700m', memory: '32Mi' }, limits: { cpu: '1500m', memory: '96Mi' } } }] } },
      'strategic',
    );
    const resized = await waitUntil(
      'burstable-0 resized (status.containerStatuses[0].resources)',
      async () => {
        const p = await getPod('burstable-0');
        const r = p.status.containerStatuses?.[0]?.resources;
        const pending = (p.status.conditions ?? []).find((c: any) => c.type === 'PodResizePending');
        if (pending?.reason === 'Infeasible') throw new TerminalStateError(`resize Infeasible: ${pending.message}`);
        return r?.requests?.cpu === '700m' && r?.limits?.cpu === '1500m' && r?.limits?.memory === '96Mi' && p;
      },
      { timeoutMs: 90_000, intervalMs: 500 },
    );
    expect(resized.status.containerStatuses[0].containerID).toBe(containerId);
    expect(resized.status.containerStatuses[0].restartCount).toBe(0);
    expect(cgroupValue('cpu', resized, 'cpu.shares')).toBe(shares(700n));
    expect(cgroupValue('cpu', resized, 'cpu.cfs_quota_us')).toBe(150_000n);
    expect(cgroupValue('memory', resized, 'memory.limit_in_bytes')).toBe(96n * 2n ** 20n);
  });

  it("counts the resized pod in the cap: in deny mode, a pod created on the node and a resize that fitted before it are refused with the cap's message", async () => {
    const { raw, ratios } = await nodeView();
    const pods = (await nodePods()).filter((p: any) => p.spec.nodeName === env.NODE_NAME);
    expect((await getPod('burstable-0')).spec.containers[0].resources.requests.cpu).toBe('700m');
    const requested = cpuSum(pods, 'requests');
    const cap = inflatedBaseUnits('cpu', raw.cpu, RATIOS.cpu);
    // 100m past the cap with the resized pod's 700m; 100m under it with the 500m it had before.
    const extra = cap - requested + 100n;
    expect(cap - (requested - 200n) - extra).toBe(100n);
    await kubectl(['label', 'namespace', NAMESPACE, `${POD_POLICY_LABEL}=enabled`]);
    await setRatios(RATIOS, 'deny');
    try {
      const onNode = (name: string, cpu: string) => {
        const pod = workloadPod(name, { requests: { cpu, memory: '16Mi' } });
        pod.spec.nodeName = env.NODE_NAME;
        return pod;
      };
      // In force once the webhook has the new config and knows the namespace's label: a dry-run pod of 100 CPUs is refused.
      await waitUntil(
        'the cap in deny mode in the namespace',
        async () => (await answer(admin.post(`/api/v1/namespaces/${NAMESPACE}/pods`, onNode('probe', '100'), { dryRun: 'All' }))).status === 403,
        { timeoutMs: 60_000, intervalMs: 1000 },
      );
      const capText = `cap ${formatBaseUnits('cpu', cap)} (raw allocatable ${raw.cpu} × ratio ${ratios.cpu})`;
      const created = await answer(admin.post(`/api/v1/namespaces/${NAMESPACE}/pods`, onNode('extra', formatBaseUnits('cpu', extra))));
      expect(created.status).toBe(403);
      expect(created.body.message).toBe(
        `admission webhook "pod-policy.kube-overcommit.io" denied the request: kube-overcommit: pod ${NAMESPACE}/extra would exceed the overcommit cap of node ${env.NODE_NAME}: ` +
          `cpu: ${formatBaseUnits('cpu', requested + extra)} requested (${formatBaseUnits('cpu', requested)} by ${pods.length} pods on the node + ${formatBaseUnits('cpu', extra)} by this pod) > ${capText}`,
      );
      // burstable-1 resized by the same amount: refused too, and it keeps its 500m.
      const resized = await resizeCpu(admin, NAMESPACE, 'burstable-1', formatBaseUnits('cpu', 500n + extra));
      expect(resized.status).toBe(403);
      expect(resized.body.message).toBe(
        `admission webhook "pod-policy.kube-overcommit.io" denied the request: kube-overcommit: pod ${NAMESPACE}/burstable-1 would exceed the overcommit cap of node ${env.NODE_NAME}: ` +
          `cpu: ${formatBaseUnits('cpu', requested + extra)} requested (${formatBaseUnits('cpu', requested - 500n)} by ${pods.length - 1} pods on the node + ${formatBaseUnits('cpu', 500n + extra)} by this pod) > ${capText}`,
      );
      expect((await getPod('burstable-1')).spec.containers[0].resources.requests.cpu).toBe('500m');
      expect((await answer(getPod('extra'))).status).toBe(404);
    } finally {
      await setRatios(RATIOS);
      await kubectl(['label', 'namespace', NAMESPACE, `${POD_POLICY_LABEL}-`]);
    }
  });

  it('keeps the resized requests stored when the ratio drops below them (the commitment floor): a restarted kubelet re-admits every pod', async () => {
    const pods = await nodePods();
    const burstable = pods.find((p: any) => p.metadata.name === 'burstable-0');
    expect(burstable.status.containerStatuses[0].allocatedResources.cpu).toBe('700m');
    // What the kubelet admitted, the resized pod at its 700m: above floor(raw × 1).
    const admitted = cpuSum(pods, 'admitted');
    const { raw } = await nodeView();
    expect(admitted).toBeGreaterThan(baseUnits('cpu', raw.cpu));
    const idsBefore = containerIds(pods);
    await setRatios({ cpu: '1', memory: RATIOS.memory });
    const floored = await waitUntil(
      "the floor deciding the Node's cpu",
      async () => {
        const v = await nodeView();
        return v.node.metadata.annotations[FLOOR_ANNOTATION] ? v : undefined;
      },
      { timeoutMs: 60_000, intervalMs: 500 },
    );
    expect(baseUnits('cpu', floored.node.status.allocatable.cpu)).toBe(admitted);
    expect(JSON.parse(floored.node.metadata.annotations[FLOOR_ANNOTATION])).toEqual({ cpu: formatBaseUnits('cpu', admitted) });
    // The restarted kubelet re-admits its pods against the stored value: raw cpu would reject some
    // (OutOfcpu, the scene of docs/real-node.md); the floor keeps every one.
    const restartedAt = await restartKubelet();
    await expectContainersKept(idsBefore, restartedAt);
    expect(baseUnits('cpu', (await nodeView()).node.status.allocatable.cpu)).toBe(admitted);
    await setRatios(RATIOS);
    const back = await waitInflated(RATIOS);
    expect(back.node.metadata.annotations[FLOOR_ANNOTATION]).toBeUndefined();
  });

  it('keeps every container through a kubelet restart: same container ids, no OutOfcpu, allocatable inflated again', async () => {
    const idsBefore = containerIds(await nodePods());
    const { raw } = await nodeView();
    const restartedAt = await restartKubelet();
    const callsAfterRestart = await apiserverWebhookCount('apiserver_admission_webhook_admission_duration_seconds_count', 'nodes.kube-overcommit.io');
    const ready = (await admin.get(`/api/v1/nodes/${env.NODE_NAME}`)).status.conditions.find((c: any) => c.type === 'Ready');
    expect(ready.status).toBe('True');
    await expectContainersKept(idsBefore, restartedAt);
    // The restarted kubelet's next status write, inflated again by the webhook from the same raw.
    await waitUntil(
      'a status write of the restarted kubelet through the nodes entry',
      async () => (await apiserverWebhookCount('apiserver_admission_webhook_admission_duration_seconds_count', 'nodes.kube-overcommit.io')) > callsAfterRestart,
      { timeoutMs: 30_000, intervalMs: 1000 },
    );
    const after = await nodeView();
    expect(after.raw.cpu).toBe(raw.cpu);
    expect(baseUnits('cpu', after.node.status.allocatable.cpu)).toBe(inflatedBaseUnits('cpu', raw.cpu, RATIOS.cpu));
    expect(baseUnits('memory', after.node.status.allocatable.memory)).toBe(inflatedBaseUnits('memory', after.raw.memory, RATIOS.memory));
  });

  it('lets the kernel OOM-kill a container past its memory limit; the node stays Ready and its memory from capacity', async () => {
    await admin.post(
      `/api/v1/namespaces/${NAMESPACE}/pods`,
      workloadPod('oom', { requests: { cpu: '10m', memory: '16Mi' }, limits: { memory: '32Mi' } }, ['alloc', '64']),
    );
    const killed = await waitUntil(
      'pod oom ended (phase Failed or Succeeded)',
      async () => {
        const p = await getPod('oom');
        return (p.status.phase === 'Failed' || p.status.phase === 'Succeeded') && p;
      },
      { timeoutMs: 90_000, intervalMs: 500 },
    );
    expect(killed.status.containerStatuses[0].state.terminated.reason).toBe('OOMKilled');
    expect(killed.status.containerStatuses[0].state.terminated.exitCode).toBe(137);
    expect(killed.status.phase).toBe('Failed');
    const { node, raw, capacity } = await nodeView();
    const conditions = Object.fromEntries(node.status.conditions.map((c: any) => [c.type, c.status]));
    expect(conditions).toMatchObject({ Ready: 'True', MemoryPressure: 'False' });
    // The eviction threshold is applied to capacity: raw memory = capacity − 100Mi, whatever is stored.
    expect(baseUnits('memory', raw.memory)).toBe(baseUnits('memory', capacity.memory) - 100n * 2n ** 20n);
    expect(baseUnits('memory', node.status.allocatable.memory)).toBeGreaterThan(baseUnits('memory', capacity.memory));
    // And the eviction manager's signals (read from the summary API) are computed from capacity, not
    // from the stored, inflated allocatable: memory.available = capacity − the node's working set,
    // allocatableMemory.available = the kubelet's own allocatable for pods (capacity, nothing
    // reserved here) − the pods' working set.
    const summary = await admin.get(summaryPath(env.NODE_NAME));
    const podsContainer = summary.node.systemContainers.find((c: any) => c.name === 'pods');
    for (const memory of [summary.node.memory, podsContainer.memory])
      expect(BigInt(memory.availableBytes) + BigInt(memory.workingSetBytes)).toBe(baseUnits('memory', capacity.memory));
    // The other pods were not touched.
    for (const name of ['burstable-0', 'burstable-1', 'guaranteed-0', 'guaranteed-1']) expect((await getPod(name)).status.phase).toBe('Running');
    await admin
      .delete(`/api/v1/namespaces/${NAMESPACE}/pods/oom`)
      .catch((e) => (e instanceof KubeApiError && e.status === 404 ? undefined : Promise.reject(e)));
  });

  it('keeps answering through a rollout restart and an evicted replica (the PDB refusing the second): 0 rejected, 0 failed-open calls, one endpoint ready at least; its CPU and memory as the kubelet measures them', async () => {
    // Traffic: the kubelet's status writes (every 10 s while inflated) and a pod-create loop in a
    // namespace the pod-policy entry selects (the pods fit no node: admission only).
    const loopNamespace = 'real-node-e2e-loop';
    const startedAt = new Date();
    const loadAvgAtStart = loadAvg();
    await setRatios(RATIOS);
    await waitInflated(RATIOS);
    // The webhook's containers as the kubelet measures them: 30 s idle (the kubelet's status
    // writes and the readiness probes only), 20 s of the loop alone, then the disruptions.
    const webhookContainers = { namespace: PLATFORM, podPrefix: 'kube-overcommit-', container: 'webhook' };
    const idleSampler = new ContainerUsageSampler(admin, env.NODE_NAME, webhookContainers);
    await new Promise((r) => setTimeout(r, 30_000));
    const idle = await idleSampler.stop();
    await kubectl(['delete', 'namespace', loopNamespace, '--ignore-not-found', '--wait=true', '--timeout=120s']);
    await kubectl(['create', 'namespace', loopNamespace]);
    await kubectl(['label', 'namespace', loopNamespace, 'kube-overcommit.io/pod-policy=enabled']);
    const entries = ['nodes.kube-overcommit.io', 'pod-policy.kube-overcommit.io'];
    const counts = async (metric: string) => Promise.all(entries.map((e) => apiserverWebhookCount(metric, e)));
    const callsBefore = await counts('apiserver_admission_webhook_admission_duration_seconds_count');
    const failOpenBefore = await counts('apiserver_admission_webhook_fail_open_count');
    const rejectedBefore = await counts('apiserver_admission_webhook_rejection_count');

    let stop = false;
    const created: number[] = [];
    const createErrors: string[] = [];
    const readyEndpoints: number[] = [];
    const steadySampler = new ContainerUsageSampler(admin, env.NODE_NAME, webhookContainers);
    let disruptionSampler: ContainerUsageSampler | undefined;
    const loop = (async () => {
      for (let i = 0; !stop && i < 600; i++) {
        const pod = {
          apiVersion: 'v1',
          kind: 'Pod',
          metadata: { name: `loop-${i}`, namespace: loopNamespace },
          spec: {
            nodeSelector: { 'real-node-e2e/never': 'true' },
            containers: [{ name: 'app', image: env.WORKLOAD_IMAGE, imagePullPolicy: 'Never', resources: { requests: { cpu: '1m' } } }],
          },
        };
        const started = Date.now();
        try {
          await admin.post(`/api/v1/namespaces/${loopNamespace}/pods`, pod);
          created.push(Date.now() - started);
        } catch (error) {
          createErrors.push(String(error));
        }
        const slices = await admin
          .get(`/apis/discovery.k8s.io/v1/namespaces/${PLATFORM}/endpointslices`, { labelSelector: 'kubernetes.io/service-name=kube-overcommit' })
          .catch(() => undefined);
        if (slices) readyEndpoints.push(slices.items.flatMap((sl: any) => (sl.endpoints ?? []).filter((e: any) => e.conditions?.ready)).length);
        await new Promise((r) => setTimeout(r, 200));
      }
    })();
    let steady: { usage: UsageWindow; podsCreated: number } | undefined;
    try {
      await new Promise((r) => setTimeout(r, 20_000));
      steady = { usage: await steadySampler.stop(), podsCreated: created.length };
      disruptionSampler = new ContainerUsageSampler(admin, env.NODE_NAME, webhookContainers);
      await kubectl(['-n', PLATFORM, 'rollout', 'restart', 'deployment/kube-overcommit']);
      await kubectl(['-n', PLATFORM, 'rollout', 'status', 'deployment/kube-overcommit', '--timeout=180s'], { timeoutMs: 200_000 });
      // One of the two serving replicas (the rollout's old pods may still be terminating).
      const pods = (await admin.get(`/api/v1/namespaces/${PLATFORM}/pods`, { labelSelector: 'app.kubernetes.io/name=kube-overcommit' })).items;
      const serving = pods.filter((p: any) => !p.metadata.deletionTimestamp && p.status.containerStatuses?.[0]?.ready);
      expect(serving.length).toBe(2);
      // Deleted as a drain deletes it: the Eviction API, which honours the PDB (maxUnavailable 1).
      // The other one, evicted at once, is refused while the first one's successor is not Ready.
      await waitUntil(
        'the PDB allowing one disruption',
        async () => {
          const pdb = await admin.get(`/apis/policy/v1/namespaces/${PLATFORM}/poddisruptionbudgets/kube-overcommit`);
          return pdb.status.currentHealthy === 2 && pdb.status.disruptionsAllowed === 1;
        },
        { timeoutMs: 30_000, intervalMs: 500 },
      );
      const evict = (pod: any) =>
        answer(
          admin.post(`/api/v1/namespaces/${PLATFORM}/pods/${pod.metadata.name}/eviction`, {
            apiVersion: 'policy/v1',
            kind: 'Eviction',
            metadata: { name: pod.metadata.name, namespace: PLATFORM },
          }),
        );
      const evicted = await evict(serving[0]);
      const refused = await evict(serving[1]);
      expect(evicted.status).toBe(200);
      expect(refused.status).toBe(429);
      expect(refused.body.message).toBe("Cannot evict pod as it would violate the pod's disruption budget.");
      await waitUntil(`${serving[0].metadata.name} deleted`, async () => (await answer(getPod(serving[0].metadata.name, PLATFORM))).status === 404, {
        timeoutMs: 60_000,
        intervalMs: 500,
      });
      await kubectl(['-n', PLATFORM, 'rollout', 'status', 'deployment/kube-overcommit', '--timeout=120s'], { timeoutMs: 150_000 });
      // More traffic to the new replicas: a kubelet status write at least.
      await new Promise((r) => setTimeout(r, 12_000));
    } finally {
      stop = true;
      await loop;
      await steadySampler.stop();
      await disruptionSampler?.stop();
      await kubectl(['delete', 'namespace', loopNamespace, '--wait=false']).catch(() => undefined);
    }
    const disruptions = { usage: await disruptionSampler!.stop(), podsCreated: created.length - steady!.podsCreated };

    const callsAfter = await counts('apiserver_admission_webhook_admission_duration_seconds_count');
    const failOpenAfter = await counts('apiserver_admission_webhook_fail_open_count');
    const rejectedAfter = await counts('apiserver_admission_webhook_rejection_count');
    const sorted = [...created].sort((x, y) => x - y);
    process.stderr.write(
      `real-node availability: ${created.length} pods created, ${createErrors.length} errors, create p50 ${sorted[Math.floor(sorted.length / 2)]} ms, ` +
        `max ${sorted.at(-1)} ms; webhook calls nodes ${callsAfter[0] - callsBefore[0]}, pod-policy ${callsAfter[1] - callsBefore[1]}; ` +
        `ready endpoints min ${Math.min(...readyEndpoints)} over ${readyEndpoints.length} samples; webhook cpu median/max (m), working set median/max (MiB): ` +
        [idle, steady!.usage, disruptions.usage]
          .map(
            (w, i) =>
              `${['idle', 'loop', 'disruptions'][i]} ${w.cpuMillicores.median}/${w.cpuMillicores.max}, ${w.workingSetMiB.median}/${w.workingSetMiB.max}`,
          )
          .join('; ') +
        '\n',
    );
    const deployment = await admin.get(`/apis/apps/v1/namespaces/${PLATFORM}/deployments/kube-overcommit`);
    const { node } = await nodeView();
    const delta = (after: number[], before: number[]) => Object.fromEntries(entries.map((e, i) => [e, after[i] - before[i]]));
    const result = {
      benchmark: 'real-node-webhook',
      command: 'npm run node:up && REAL_NODE_RESULT=bench/results/real-node-webhook.json npm run test:node',
      startedAt: startedAt.toISOString(),
      finishedAt: new Date().toISOString(),
      machine: { ...machineInfo(), loadAvgAtStart },
      cluster: { node: env.NODE_NAME, kubelet: node.status.nodeInfo.kubeletVersion, containerRuntime: node.status.nodeInfo.containerRuntimeVersion },
      deployment: { replicas: deployment.spec.replicas, resources: deployment.spec.template.spec.containers[0].resources },
      source:
        `the kubelet's summary API (GET ${summaryPath(env.NODE_NAME)}), container "webhook" of each replica: CPU = Δ usageCoreNanoSeconds / Δ sample time ` +
        'between consecutive readings of one container (as metrics-server computes it), polled every 2 s; memory = workingSetBytes',
      idle: { traffic: "the kubelet's status writes (every 10 s while inflated) and the readiness probes (every 2 s)", ...idle },
      loop: {
        traffic: 'the same and a pod-create loop in a pod-policy namespace (a pod every ~0.2 s after the last answer and an EndpointSlice read), nothing else',
        ...steady!.usage,
        podsCreated: steady!.podsCreated,
      },
      disruptions: {
        traffic:
          'the same loop through kubectl rollout restart, then the eviction of one serving replica (the Eviction API), then 12 s more; ' +
          'the replicas replaced and their successors (whose start-up is in the CPU figures)',
        ...disruptions.usage,
        podsCreated: disruptions.podsCreated,
      },
      creates: {
        pods: created.length,
        errors: createErrors.length,
        p50Ms: sorted[Math.floor(sorted.length / 2)],
        maxMs: sorted.at(-1),
        readyEndpointsMin: Math.min(...readyEndpoints),
        readyEndpointSamples: readyEndpoints.length,
      },
      apiserver: {
        calls: delta(callsAfter, callsBefore),
        rejected: delta(rejectedAfter, rejectedBefore),
        failedOpen: delta(failOpenAfter, failOpenBefore),
      },
    };
    mkdirSync(dirname(RESULT_FILE), { recursive: true });
    writeFileSync(RESULT_FILE, `${JSON.stringify(result, null, 2)}\n`);
    process.stderr.write(`real-node availability: written to ${relative(REPO, RESULT_FILE)}\n`);

    expect(createErrors).toEqual([]);
    expect(created.length).toBeGreaterThan(20);
    // Both entries were called through the disruptions; none failed open, none rejected.
    expect(callsAfter[0]).toBeGreaterThan(callsBefore[0]);
    expect(callsAfter[1] - callsBefore[1]).toBeGreaterThanOrEqual(created.length);
    expect(failOpenAfter).toEqual(failOpenBefore);
    expect(rejectedAfter).toEqual(rejectedBefore);
    expect(Math.min(...readyEndpoints)).toBeGreaterThanOrEqual(1);
    expect(deployment.status.readyReplicas).toBe(2);
    // The kubelet measured every window (the disruptions': the replicas replaced and their
    // successors), every replica within the Deployment's memory limit.
    expect([idle, steady!.usage].map((w) => w.containers)).toEqual([2, 2]);
    expect(steady!.usage.cpuMillicores.intervals).toBeGreaterThan(0);
    expect(disruptions.usage.containers).toBeGreaterThanOrEqual(4);
    const limitMiB = Number(baseUnits('memory', deployment.spec.template.spec.containers[0].resources.limits.memory) / 2n ** 20n);
    expect(Math.max(...[idle, steady!.usage, disruptions.usage].map((w) => w.workingSetMiB.max))).toBeLessThan(limitMiB);
  });

  it('installs the same with helm install of the chart: the Deployment Ready on the real node, the webhook behind its Service, a ratio from the values on the Node', async () => {
    const home = join(env.NODE_DIR, 'helm');
    const helm = (args: string[]) =>
      new Promise<string>((resolvePromise, reject) => {
        execFile(
          join(REPO, 'test/e2e/.bin/helm'),
          [`--kubeconfig=${env.KUBECONFIG}`, ...args],
          {
            timeout: 300_000,
            env: { ...process.env, HELM_CACHE_HOME: join(home, 'cache'), HELM_CONFIG_HOME: join(home, 'config'), HELM_DATA_HOME: join(home, 'data') },
          },
          (error, stdout, stderr) => (error ? reject(new Error(`helm ${args.join(' ')}: ${stderr || error.message}`)) : resolvePromise(stdout)),
        );
      });
    // Over the objects k8s/ installed (the same names: --take-ownership); image as built here, never
    // pulled; cpu × 2 from the values; the node-status policy off (its path is not this test's).
    const values = [
      '--set',
      'image.pullPolicy=Never',
      '--set',
      'namespace.create=true',
      '--set',
      'nodePolicy.enabled=false',
      '--set-json',
      'config={"nodes":{"defaultRatios":{"cpu":2},"pools":[]}}',
    ];
    try {
      const install = await helm([
        'install',
        'kube-overcommit',
        join(REPO, 'charts/kube-overcommit'),
        '--namespace',
        PLATFORM,
        '--take-ownership',
        '--wait',
        '--timeout',
        '180s',
        ...values,
      ]);
      expect(install).toMatch(/STATUS: deployed/);
      await kubectl(['-n', PLATFORM, 'rollout', 'status', 'deployment/kube-overcommit', '--timeout=180s'], { timeoutMs: 200_000 });
      const deployment = await admin.get(`/apis/apps/v1/namespaces/${PLATFORM}/deployments/kube-overcommit`);
      expect(deployment.metadata.labels['app.kubernetes.io/managed-by']).toBe('Helm');
      expect(deployment.status.readyReplicas).toBe(2);
      expect(deployment.spec.template.spec.containers[0].image).toBe('ghcr.io/kube-overcommit/kube-overcommit:0.1.0');
      const pods = (await admin.get(`/api/v1/namespaces/${PLATFORM}/pods`, { labelSelector: 'app.kubernetes.io/name=kube-overcommit' })).items.filter(
        (p: any) => !p.metadata.deletionTimestamp,
      );
      expect(pods.map((p: any) => [p.spec.nodeName, p.status.phase])).toEqual([
        [env.NODE_NAME, 'Running'],
        [env.NODE_NAME, 'Running'],
      ]);
      const configuration = await admin.get('/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations/kube-overcommit');
      expect(configuration.metadata.labels['app.kubernetes.io/managed-by']).toBe('Helm');
      for (const webhook of configuration.webhooks) {
        expect(webhook.clientConfig.url).toBeUndefined();
        expect(webhook.clientConfig.service).toMatchObject({ name: 'kube-overcommit', namespace: PLATFORM });
      }
      const inflated = await waitInflated({ cpu: '2' });
      expect(baseUnits('cpu', inflated.node.status.allocatable.cpu)).toBe(baseUnits('cpu', inflated.raw.cpu) * 2n);
    } finally {
      // k8s/ as node:up applied it back (it takes the objects over again), Helm's release records gone.
      await kubectl(['apply', '-k', join(REPO, 'test/e2e/node/overlay')]);
      await kubectl(['-n', PLATFORM, 'delete', 'secret', '-l', 'owner=helm,name=kube-overcommit', '--ignore-not-found']);
      await kubectl(['-n', PLATFORM, 'rollout', 'status', 'deployment/kube-overcommit', '--timeout=180s'], { timeoutMs: 200_000 });
    }
  });
});
