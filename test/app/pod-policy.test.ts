import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { bindingReview, container, deploymentPod, mirrorPod, nativeSidecar, podReview } from '../fixtures/pods.js';
import { LEVEL, admitted, metricValue, send, startServer, type TestServer } from './harness.js';

const CONFIG = `
pods:
  defaultRequests: { cpu: 100m, memory: 128Mi }
  limitToRequest: { memoryRequestPercent: 50, cpuLimitPerGiBPercent: 200, cpuRequestPercent: 25 }
  cap: { mode: deny }
`;

const QUANTITY = /^[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+|[numkMGTPE]|[KMGTPE]i)?$/;

const applyResponse = (review: any, body: any) => admitted(review, body).object;

function expectValidResources(pod: any) {
  for (const c of [...(pod.spec.initContainers ?? []), ...pod.spec.containers]) {
    for (const field of ['requests', 'limits']) {
      for (const [resource, value] of Object.entries(c.resources?.[field] ?? {})) expect(value, `${c.name} ${field}.${resource}`).toMatch(QUANTITY);
    }
  }
}

describe('pod policies over HTTPS (no cluster: namespace labels unknown, no LimitRanges, cap fails open)', () => {
  let server: TestServer;
  beforeAll(async () => {
    server = await startServer(CONFIG);
  });
  afterAll(async () => {
    await server?.stop();
  });

  it("rewrites a Deployment pod's init, native sidecar and app containers", async () => {
    const review = podReview(deploymentPod());
    const reply = await server.mutate(review);
    expect(reply.status).toBe(200);
    const pod = applyResponse(review, reply.json());
    expectValidResources(pod);
    const [migrate, logShipper] = pod.spec.initContainers;
    expect(pod.spec.containers[0].resources).toEqual({ limits: { memory: '1Gi', cpu: '2' }, requests: { cpu: '500m', memory: '512Mi' } });
    expect(migrate.resources).toEqual({ limits: { cpu: '500m' }, requests: { cpu: '125m', memory: '128Mi' } });
    expect(logShipper.resources).toEqual({ requests: { cpu: '100m', memory: '128Mi' } });
    expect(JSON.parse(pod.metadata.annotations['kube-overcommit.io/original-resources'])).toEqual({
      migrate: { requests: { cpu: '500m' }, limits: { cpu: '500m' } },
      'log-shipper': {},
      checkout: { requests: { cpu: '250m', memory: '512Mi' }, limits: { memory: '1Gi' } },
    });
    // Everything else is as sent: service-account volume, owner, generateName, probes.
    expect(pod.spec.volumes).toEqual(review.request.object.spec.volumes);
    expect(pod.metadata.ownerReferences).toEqual(review.request.object.metadata.ownerReferences);
    expect(pod.metadata.generateName).toBe('checkout-6f8b9c7d4-');
    expect(pod.spec.containers[0].readinessProbe).toEqual(review.request.object.spec.containers[0].readinessProbe);
  });

  it('is idempotent under reinvocation: our output sent back gets no patch', async () => {
    const first = podReview(deploymentPod());
    const mutated = applyResponse(first, (await server.mutate(first)).json());
    const again = podReview(mutated);
    const reply = (await server.mutate(again)).json();
    expect(reply.response).toEqual({ uid: again.request.uid, allowed: true });
  });

  it('applies the percentages exactly and leaves containers without limits alone', async () => {
    const review = podReview(
      deploymentPod({
        initContainers: [nativeSidecar('mesh', { limits: { cpu: '1', memory: '300Mi' }, requests: { cpu: '1', memory: '300Mi' } })],
        containers: [
          container('batch', { limits: { memory: '1000M' }, requests: { memory: '1000M' } }),
          container('cache', { requests: { cpu: '2', memory: '4Gi' } }),
        ],
      }),
    );
    const pod = applyResponse(review, (await server.mutate(review)).json());
    expectValidResources(pod);
    // 300Mi × 50% = 150Mi; cpu limit 300/1024 GiB × 200% = 585.9m → 585m; request 25% → 146m.
    expect(pod.spec.initContainers[0].resources).toEqual({ limits: { cpu: '585m', memory: '300Mi' }, requests: { cpu: '146m', memory: '150Mi' } });
    expect(pod.spec.initContainers[0].restartPolicy).toBe('Always');
    // 1000M × 50% = 476.8Mi → 476Mi; cpu limit 1e9 B × 2 cores/GiB = 1862.6m → 1862m; request 465m; 100m default not applied (cpu now derived).
    expect(pod.spec.containers[0].resources).toEqual({ limits: { memory: '1000M', cpu: '1862m' }, requests: { memory: '476Mi', cpu: '465m' } });
    expect(pod.spec.containers[1].resources).toEqual({ requests: { cpu: '2', memory: '4Gi' } });
  });

  it('adds the annotations map to a pod that has none', async () => {
    const bare = deploymentPod({ initContainers: null, containers: [container('app')] });
    delete bare.metadata.annotations;
    const review = podReview(bare);
    const pod = applyResponse(review, (await server.mutate(review)).json());
    expect(pod.spec.containers[0].resources).toEqual({ requests: { cpu: '100m', memory: '128Mi' } });
    expect(JSON.parse(pod.metadata.annotations['kube-overcommit.io/original-resources'])).toEqual({ app: {} });
  });

  it('never touches kube-system, kube-node-lease, kube-public or its own namespace', async () => {
    for (const namespace of ['kube-system', 'kube-node-lease', 'kube-public', 'kube-overcommit']) {
      const review = podReview(deploymentPod({ namespace }));
      const reply = (await server.mutate(review)).json();
      expect(reply.response, namespace).toEqual({ uid: review.request.uid, allowed: true });
    }
  });

  it('skips mirror pods, even in an application namespace', async () => {
    for (const pod of [mirrorPod(), mirrorPod({ namespace: 'shop' })]) {
      const review = podReview(pod, { username: 'system:node:cp-1' });
      const reply = (await server.mutate(review)).json();
      expect(reply.response).toEqual({ uid: review.request.uid, allowed: true });
    }
  });

  it('fails open on the cap without a cluster (binding and CREATE with nodeName), and counts it', async () => {
    const binding = bindingReview('shop', 'checkout-6f8b9c7d4-x2x7q', 'worker-1');
    const reply = await server.mutate(binding);
    expect(reply.status).toBe(200);
    expect(reply.json().response).toEqual({ uid: binding.request.uid, allowed: true });

    const pinned = podReview(deploymentPod({ nodeName: 'worker-1' }));
    const pod = applyResponse(pinned, (await server.mutate(pinned)).json());
    expect(pod.spec.containers[0].resources.requests.memory).toBe('512Mi');

    const metrics = await server.metrics();
    expect(metricValue(metrics, 'kube_overcommit_pod_policy_cap_skipped_total', { reason: 'no-cluster' })).toBe(2);
    expect(metricValue(metrics, 'kube_overcommit_admission_requests_total', { resource: 'pods/binding', operation: 'CREATE', outcome: 'unchanged' })).toBe(1);
  });

  it('exports its counters: one Deployment pod counts once, each request and limit it changes once', async () => {
    const counts = (metrics: string) => [
      metricValue(metrics, 'kube_overcommit_pod_policy_pods_mutated_total') ?? 0,
      metricValue(metrics, 'kube_overcommit_pod_policy_requests_changed_total', { resource: 'memory', change: 'added' }) ?? 0,
      metricValue(metrics, 'kube_overcommit_pod_policy_limits_changed_total', { resource: 'cpu', change: 'added' }) ?? 0,
    ];
    const before = counts(await server.metrics());
    await server.mutate(podReview(deploymentPod()));
    const metrics = await server.metrics();
    // The first test's pod: a memory request added to migrate and log-shipper, a cpu limit to checkout.
    expect(counts(metrics)).toEqual([before[0]! + 1, before[1]! + 2, before[2]! + 1]);
    expect(metrics).toContain('# TYPE kube_overcommit_pod_policy_cap_denials_total counter');
    expect(metrics).toContain('# TYPE kube_overcommit_pod_policy_cap_warnings_total counter');
    expect(metrics).toContain('# TYPE kube_overcommit_pod_policy_cache_unsynced_total counter');
  });

  it('a dry run is answered the same and not counted', async () => {
    const before = metricValue(await server.metrics(), 'kube_overcommit_pod_policy_pods_mutated_total');
    const review = podReview(deploymentPod(), { dryRun: true });
    const reply = (await server.mutate(review)).json();
    expect(reply.response.patch).toBeDefined();
    expect(metricValue(await server.metrics(), 'kube_overcommit_pod_policy_pods_mutated_total')).toBe(before);
  });
});

describe('pod policies off (the defaults) and config reload', () => {
  let server: TestServer;
  beforeAll(async () => {
    server = await startServer('nodes: { defaultRatios: { cpu: 1.5 } }');
  });
  afterAll(async () => {
    await server?.stop();
  });

  it('leaves pods alone until pods: is configured, then applies it', async () => {
    const review = podReview(deploymentPod());
    expect((await server.mutate(review)).json().response).toEqual({ uid: review.request.uid, allowed: true });

    server.writeConfig('pods: { defaultRequests: { memory: 256Mi } }');
    await expect
      .poll(
        async () => {
          const next = podReview(deploymentPod());
          return applyResponse(next, (await server.mutate(next)).json()).spec.initContainers[1].resources;
        },
        { timeout: 2_000, interval: 50 },
      )
      .toEqual({ requests: { memory: '256Mi' } });
  });

  it('rejects an invalid pods: section whole, naming the field, and keeps serving', async () => {
    server.writeConfig('pods: { limitToRequest: { memoryRequestPercent: 150 } }');
    await expect
      .poll(async () => metricValue(await server.metrics(), 'kube_overcommit_config_reloads_total', { result: 'failure' }), { timeout: 2_000, interval: 50 })
      .toBe(1);
    expect(server.logs(LEVEL.error).map((line) => line.errors)).toContainEqual([
      'pods.limitToRequest.memoryRequestPercent: memoryRequestPercent must not be greater than 100',
    ]);
    expect((await send(`${server.https}/readyz`)).status).toBe(200);
    const review = podReview(deploymentPod());
    const pod = applyResponse(review, (await server.mutate(review)).json());
    expect(pod.spec.initContainers[1].resources).toEqual({ requests: { memory: '256Mi' } });
  });
});
