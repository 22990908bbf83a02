import fc from 'fast-check';
import fastJsonPatch from 'fast-json-patch';
import { describe, expect, it } from 'vitest';
import { Outcomes, runs } from '../../test/support/property.js';
import { container, deploymentPod, nativeSidecar } from '../../test/fixtures/pods.js';
import { aggregateContainerRequests, defaultPod, resourceViolations } from '../../test/fixtures/apiserver-pod-resources.js';
import { parseQuantity, parseResourceQuantity } from '../domain/quantity.js';
import { MIB, policySettings, type PolicySettings } from './container-policy.js';
import type { ContainerBounds } from './limit-range.js';
import { ORIGINAL_RESOURCES_ANNOTATION, planPodMutation, readOriginals, readPodLevelResources } from './pod-mutation.js';
import type { PodLike } from '../domain/pod-resources.js';

const CRO = policySettings({
  defaultRequests: { cpu: '100m', memory: '128Mi' },
  limitToRequest: { memoryRequestPercent: 50, cpuLimitPerGiBPercent: 200, cpuRequestPercent: 25 },
});

/** Applies a plan the way the API server does (validating every op against the object). */
function mutate(pod: PodLike, settings: PolicySettings, bounds: ContainerBounds = {}) {
  const plan = planPodMutation(pod, settings, bounds);
  const out: any = fastJsonPatch.applyPatch(structuredClone(pod), plan.patch, true, false).newDocument;
  return { plan, pod: out };
}

describe('planPodMutation on a Deployment pod', () => {
  it('applies defaults and percentages to init, native sidecar and regular containers, and records the originals', () => {
    const { plan, pod } = mutate(deploymentPod(), CRO);
    const [migrate, logShipper] = pod.spec.initContainers;
    const [checkout] = pod.spec.containers;
    // checkout: memory limit 1Gi → request 512Mi, cpu limit 2 (200%/GiB), cpu request 500m (25%).
    expect(checkout.resources).toEqual({ limits: { memory: '1Gi', cpu: '2' }, requests: { cpu: '500m', memory: '512Mi' } });
    // migrate: only a cpu limit → cpu request 25% of it, memory gets the default.
    expect(migrate.resources).toEqual({ limits: { cpu: '500m' }, requests: { cpu: '125m', memory: '128Mi' } });
    // log-shipper (native sidecar) set nothing → both defaults.
    expect(logShipper.resources).toEqual({ requests: { cpu: '100m', memory: '128Mi' } });
    expect(logShipper.restartPolicy).toBe('Always');
    expect(JSON.parse(pod.metadata.annotations[ORIGINAL_RESOURCES_ANNOTATION])).toEqual({
      migrate: { requests: { cpu: '500m' }, limits: { cpu: '500m' } },
      'log-shipper': {},
      checkout: { requests: { cpu: '250m', memory: '512Mi' }, limits: { memory: '1Gi' } },
    });
    // The other annotations survive; nothing but resources and the annotation is touched.
    expect(pod.metadata.annotations['kubectl.kubernetes.io/restartedAt']).toBe('2026-11-21T17:02:10Z');
    expect(plan.patch.map((op) => op.path)).toEqual([
      '/spec/initContainers/0/resources',
      '/spec/initContainers/1/resources',
      '/spec/containers/0/resources',
      '/metadata/annotations/kube-overcommit.io~1original-resources',
    ]);
    expect(plan.changes).toEqual(
      expect.arrayContaining([
        { container: 'checkout', field: 'requests', resource: 'cpu', change: 'raised' },
        { container: 'checkout', field: 'limits', resource: 'cpu', change: 'added' },
        { container: 'migrate', field: 'requests', resource: 'cpu', change: 'lowered' },
        { container: 'log-shipper', field: 'requests', resource: 'memory', change: 'added' },
      ]),
    );
    expect(plan.changes).toHaveLength(6);
  });

  it('writes only the fields of core/v1 ResourceRequirements, whatever else a client put beside them', () => {
    const pod = deploymentPod();
    const claims = [{ name: 'gpu' }];
    pod.spec.initContainers[1].resources = { claims, extra: Object.fromEntries(Array.from({ length: 10_000 }, (_, i) => [`k${i}`, 1])) };
    const { pod: out } = mutate(pod, CRO);
    expect(out.spec.initContainers[1].resources).toEqual({ claims, requests: { cpu: '100m', memory: '128Mi' } });
  });

  it('records a container named `__proto__` like any other', () => {
    const pod = deploymentPod();
    pod.spec.initContainers[1].name = '__proto__';
    const { pod: out } = mutate(pod, CRO);
    expect(Object.keys(JSON.parse(out.metadata.annotations[ORIGINAL_RESOURCES_ANNOTATION]))).toEqual(['migrate', '__proto__', 'checkout']);
  });

  it('is a no-op (no patch at all) on its own output', () => {
    const { pod } = mutate(deploymentPod(), CRO);
    expect(planPodMutation(pod, CRO, {})).toEqual({ patch: [], changes: [] });
  });

  it('adds the annotations map when the pod has none, keeps extended resources and claims', () => {
    const pod = deploymentPod({
      initContainers: null,
      containers: [
        container('gpu', { limits: { memory: '2Gi', 'nvidia.com/gpu': '1' }, requests: { memory: '2Gi', 'nvidia.com/gpu': '1' }, claims: [{ name: 'gpu' }] }),
      ],
    });
    delete pod.metadata.annotations;
    const { pod: out } = mutate(pod, policySettings({ limitToRequest: { memoryRequestPercent: 25 } }));
    expect(out.spec.containers[0].resources).toEqual({
      limits: { memory: '2Gi', 'nvidia.com/gpu': '1' },
      requests: { memory: '512Mi', 'nvidia.com/gpu': '1' },
      claims: [{ name: 'gpu' }],
    });
    expect(Object.keys(out.metadata.annotations)).toEqual([ORIGINAL_RESOURCES_ANNOTATION]);
  });

  it('computes from the recorded originals on reinvocation, even after the config changed in between', () => {
    const first = mutate(deploymentPod(), policySettings({ limitToRequest: { memoryRequestPercent: 50 } })).pod;
    expect(first.spec.containers[0].resources.requests.memory).toBe('512Mi');
    // Another webhook ran in between and changed nothing of ours; then we are called again.
    const again = mutate(first, policySettings({ limitToRequest: { memoryRequestPercent: 50 } }));
    expect(again.plan.patch).toEqual([]);
  });

  it('does not trust a recorded entry that our output does not match (edited since, or forged)', () => {
    const pod = deploymentPod({
      initContainers: null,
      annotations: { [ORIGINAL_RESOURCES_ANNOTATION]: JSON.stringify({ checkout: { limits: { memory: '64Gi' } } }) },
    });
    const { pod: out } = mutate(pod, policySettings({ limitToRequest: { memoryRequestPercent: 25 } }));
    // From the container's real 1Gi limit, not the forged 64Gi.
    expect(out.spec.containers[0].resources.requests.memory).toBe('256Mi');
    expect(out.spec.containers[0].resources.limits.memory).toBe('1Gi');
    expect(JSON.parse(out.metadata.annotations[ORIGINAL_RESOURCES_ANNOTATION])).toEqual({
      checkout: { requests: { cpu: '250m', memory: '512Mi' }, limits: { memory: '1Gi' } },
    });
  });

  it('leaves a container holding a negative amount as it is, so that mutating twice changes nothing more', () => {
    // Changing it would record an original that readOriginals distrusts on the next call.
    const pod = deploymentPod({ containers: [container('checkout', { limits: { memory: '1Gi' }, requests: { cpu: '-0.9', memory: '512Mi' } })] });
    const once = mutate(pod, CRO);
    expect(once.pod.spec.containers[0].resources).toEqual({ limits: { memory: '1Gi' }, requests: { cpu: '-0.9', memory: '512Mi' } });
    expect(Object.keys(JSON.parse(once.pod.metadata.annotations[ORIGINAL_RESOURCES_ANNOTATION]))).toEqual(['migrate', 'log-shipper']);
    expect(planPodMutation(once.pod, CRO, {})).toEqual({ patch: [], changes: [] });
  });

  it('changes nothing at the reinvocation after the API server defaulted the request of a cpu limit it derived', () => {
    // A memory-only container and no cpu request percentage: the patch adds a cpu limit alone, and
    // the API server stores a cpu request equal to it before the reinvocation.
    const settings = policySettings({ limitToRequest: { cpuLimitPerGiBPercent: 1 } });
    const pod = deploymentPod({ initContainers: null, containers: [container('app', { limits: { memory: '1M' }, requests: { memory: '1M' } })] });
    const once = mutate(pod, settings).pod;
    expect(once.spec.containers[0].resources).toEqual({ limits: { memory: '1M', cpu: '1m' }, requests: { memory: '1M' } });
    const stored = defaultPod(once);
    expect(stored.spec.containers[0].resources.requests).toEqual({ memory: '1M', cpu: '1m' });
    expect(planPodMutation(stored, settings, {})).toEqual({ patch: [], changes: [] });
    expect(planPodMutation(once, settings, {})).toEqual({ patch: [], changes: [] });
  });

  it('removes a stale annotation of ours when nothing is changed any more', () => {
    const pod = deploymentPod({ annotations: { [ORIGINAL_RESOURCES_ANNOTATION]: 'not json' } });
    const plan = planPodMutation(pod, policySettings({}), {});
    expect(plan.patch).toEqual([{ op: 'remove', path: '/metadata/annotations/kube-overcommit.io~1original-resources' }]);
  });

  it('clamps to the LimitRange', () => {
    const bounds: ContainerBounds = { cpu: { max: 1500n, min: 200n }, memory: { maxLimitRequestRatio: parseQuantity('1.5') } };
    const { pod } = mutate(deploymentPod({ initContainers: null }), CRO, bounds);
    // cpu limit 2000m → max 1500m; cpu request 25% = 375m; memory request 512Mi < 1Gi/1.5 → 683Mi (ceil, in bytes).
    expect(pod.spec.containers[0].resources.limits.cpu).toBe('1500m');
    expect(pod.spec.containers[0].resources.requests.cpu).toBe('375m');
    expect(pod.spec.containers[0].resources.requests.memory).toBe(String((1024n ** 3n * 2n + 2n) / 3n));
  });

  it('writes quantities the API server reads back to the same amounts', () => {
    const { pod } = mutate(
      deploymentPod({ containers: [container('a', { limits: { memory: '1000M' }, requests: { memory: '1000M' } })] }),
      policySettings({ limitToRequest: { memoryRequestPercent: 33.3, cpuLimitPerGiBPercent: 150, cpuRequestPercent: 10 } }),
    );
    expect(pod.spec.containers[0].resources.requests).toEqual({ memory: '317Mi', cpu: '139m' });
    expect(pod.spec.containers[0].resources.limits).toEqual({ memory: '1000M', cpu: '1396m' });
  });
});

describe('readOriginals', () => {
  it('reads only entries of exactly our shape', () => {
    const read = (value: unknown) => readOriginals({ [ORIGINAL_RESOURCES_ANNOTATION]: JSON.stringify(value) });
    expect([...read({ a: { requests: { cpu: '1' } }, b: {} }).keys()]).toEqual(['a', 'b']);
    expect(read({ a: { requests: { cpu: 1 } } }).size).toBe(0);
    expect(read({ a: { requests: { gpu: '1' } } }).size).toBe(0);
    expect(read({ a: { other: {} } }).size).toBe(0);
    expect(read({ a: { limits: { memory: 'lots' } } }).size).toBe(0);
    expect(read({ a: { limits: { memory: '-1' } } }).size).toBe(0);
    expect(read([1]).size).toBe(0);
    expect(readOriginals(undefined).size).toBe(0);
  });
});

// ---- idempotence over random pods ------------------------------------------------------------

const maybe = <T>(arb: fc.Arbitrary<T>) => fc.option(arb, { nil: undefined });
const cpuText = fc.oneof(
  fc.integer({ min: 1, max: 16_000 }).map((m) => `${m}m`),
  fc.integer({ min: 1, max: 16 }).map(String),
  fc.constantFrom('0.5', '1.25'),
);
const memText = fc.oneof(
  fc.integer({ min: 1, max: 65_536 }).map((n) => `${n}Mi`),
  fc.integer({ min: 1, max: 64 }).map((n) => `${n}Gi`),
  fc.integer({ min: 1, max: 64_000 }).map((n) => `${n}M`),
  fc.integer({ min: 1_000_000, max: 1 << 30 }).map(String),
);
const resourcesArb = fc
  .record({ cpuReq: maybe(cpuText), cpuLim: maybe(cpuText), memReq: maybe(memText), memLim: maybe(memText) })
  .map(({ cpuReq, cpuLim, memReq, memLim }) => {
    // API defaulting: a limit without a request → request = limit. (Request ≤ limit is not enforced here: we must not care.)
    const requests: Record<string, string> = {};
    const limits: Record<string, string> = {};
    if (cpuReq ?? cpuLim) requests.cpu = (cpuReq ?? cpuLim)!;
    if (memReq ?? memLim) requests.memory = (memReq ?? memLim)!;
    if (cpuLim) limits.cpu = cpuLim;
    if (memLim) limits.memory = memLim;
    return { ...(Object.keys(requests).length ? { requests } : {}), ...(Object.keys(limits).length ? { limits } : {}) };
  });
const podArb = fc
  .record({
    inits: fc.array(fc.record({ resources: resourcesArb, sidecar: fc.boolean() }), { maxLength: 3 }),
    containers: fc.array(resourcesArb, { minLength: 1, maxLength: 3 }),
    annotations: fc.boolean(),
  })
  .map(({ inits, containers, annotations }) => {
    const pod = deploymentPod({
      initContainers: inits.map((c, i) => (c.sidecar ? nativeSidecar(`side-${i}`, c.resources) : container(`init-${i}`, c.resources))),
      containers: containers.map((r, i) => container(`app-${i}`, r)),
    });
    if (!annotations) delete pod.metadata.annotations;
    return pod as PodLike;
  });
const settingsArb = fc
  .record({
    cpu: maybe(cpuText),
    memory: maybe(memText),
    memoryRequestPercent: maybe(fc.integer({ min: 1, max: 100 })),
    cpuLimitPerGiBPercent: maybe(fc.integer({ min: 1, max: 800 })),
    cpuRequestPercent: maybe(fc.integer({ min: 10, max: 1000 }).map((n) => n / 10)),
  })
  .map((s) => policySettings({ defaultRequests: { cpu: s.cpu, memory: s.memory }, limitToRequest: s }));
const boundsArb = fc
  .record({
    cpuMin: maybe(fc.bigInt({ min: 1n, max: 500n })),
    memMax: maybe(fc.bigInt({ min: 1n << 20n, max: 1n << 34n })),
    ratio: maybe(fc.constantFrom('1', '2', '2.5')),
  })
  .map(({ cpuMin, memMax, ratio }): ContainerBounds => ({
    cpu: { ...(cpuMin !== undefined ? { min: cpuMin } : {}), ...(ratio ? { maxLimitRequestRatio: parseQuantity(ratio) } : {}) },
    memory: memMax !== undefined ? { max: memMax } : {},
  }));

describe('planPodMutation properties', () => {
  it('mutate(mutate(x)) = mutate(x), also after the API server defaulted mutate(x), the patch always applies cleanly', () => {
    const seen = new Outcomes('patched', 'left as it was');
    fc.assert(
      fc.property(podArb, settingsArb, boundsArb, (pod, settings, bounds) => {
        const first = mutate(pod, settings, bounds);
        seen.add(first.plan.patch.length > 0 ? 'patched' : 'left as it was');
        const once = first.pod;
        const twice = mutate(once, settings, bounds);
        expect(twice.plan.patch).toEqual([]);
        expect(twice.pod).toEqual(once);
        expect(planPodMutation(defaultPod(once), settings, bounds).patch).toEqual([]);
      }),
      runs(1000),
    );
    // About 99 % patched (two seeds).
    seen.expectShare('patched', 0.5);
    seen.expectShare('left as it was', 0.002);
  });

  it('the recorded originals are exactly what each changed container held', () => {
    const seen = new Outcomes('changed container recorded', 'container left as it was');
    fc.assert(
      fc.property(podArb, settingsArb, boundsArb, (pod, settings, bounds) => {
        const once = mutate(pod, settings, bounds).pod;
        const recorded = readOriginals(once.metadata?.annotations);
        for (const kind of ['initContainers', 'containers'] as const) {
          (pod.spec?.[kind] ?? []).forEach((c, i) => {
            const entry = recorded.get(c.name);
            const changed = JSON.stringify(c.resources) !== JSON.stringify(once.spec[kind][i].resources);
            seen.add(changed ? 'changed container recorded' : 'container left as it was');
            if (changed)
              expect(entry?.recorded).toEqual({
                ...(c.resources?.requests ? { requests: c.resources.requests } : {}),
                ...(c.resources?.limits ? { limits: c.resources.limits } : {}),
              });
          });
        }
      }),
      runs(500),
    );
    seen.expectShare('changed container recorded', 0.3);
    seen.expectShare('container left as it was', 0.02);
  });
});

// ---- pod-level resources -------------------------------------------------------------------

describe('planPodMutation on a pod with pod-level resources', () => {
  const twoContainers = (resources: Record<string, unknown>) => {
    const pod = deploymentPod({ initContainers: null, containers: [container('app'), container('worker')] });
    pod.spec.resources = resources;
    return pod as PodLike;
  };

  it('leaves a resource the pod sets at pod level alone, so the API server still accepts the pod', () => {
    const pod = defaultPod(twoContainers({ requests: { cpu: '600m', memory: '1Gi' }, limits: { cpu: '2', memory: '2Gi' } }));
    // What a per-container default of 500m would make of it: refused (1 CPU of containers > 600m at pod level).
    const naive = structuredClone(pod);
    for (const c of naive.spec.containers) c.resources = { requests: { cpu: '500m' } };
    expect(resourceViolations(defaultPod(naive))).toEqual(['resources.requests.cpu: below the aggregate container requests of 1000']);

    const plan = planPodMutation(pod, policySettings({ defaultRequests: { cpu: '500m', memory: '128Mi' }, limitToRequest: { memoryRequestPercent: 50 } }), {});
    expect(plan).toEqual({ patch: [], changes: [] });
    expect(resourceViolations(pod)).toEqual([]);
  });

  it('still applies the policy to the resources the pod does not set at pod level', () => {
    const pod = deploymentPod({
      initContainers: null,
      containers: [container('app', { limits: { memory: '1Gi' }, requests: { memory: '1Gi' } }), container('worker')],
    });
    pod.spec.resources = { requests: { cpu: '1' } };
    const { pod: out } = mutate(pod, CRO);
    // No cpu default, no cpu limit from the memory limit, no cpu request from it: cpu is the pod's.
    expect(out.spec.containers[0].resources).toEqual({ limits: { memory: '1Gi' }, requests: { memory: '512Mi' } });
    expect(out.spec.containers[1].resources).toEqual({ requests: { memory: '128Mi' } });
    expect(resourceViolations(defaultPod(out))).toEqual([]);
  });

  it('changes nothing at the reinvocation after the API server filled the pod-level request from our defaults', () => {
    const pod = defaultPod(twoContainers({ limits: { cpu: '2' } }));
    expect(pod.spec.resources).toEqual({ limits: { cpu: '2' }, requests: { cpu: '2' } });
    const once = defaultPod(mutate(pod, CRO).pod);
    // Pod-level limits make the API server default the memory request we caused: it is now held.
    expect(once.spec.resources.requests).toEqual({ cpu: '2', memory: String(256n * MIB) });
    expect(once.spec.containers[0].resources).toEqual({ requests: { memory: '128Mi' } });
    expect(planPodMutation(once, CRO, {})).toEqual({ patch: [], changes: [] });
  });
});

/** Containers whose requests are within their limits, as validation requires. */
const validResourcesArb = resourcesArb.map((resources: Record<string, Record<string, string>>) => {
  for (const resource of ['cpu', 'memory'] as const) {
    const request = resources.requests?.[resource];
    const limit = resources.limits?.[resource];
    if (request && limit && parseResourceQuantity(resource, request) > parseResourceQuantity(resource, limit)) {
      resources.requests[resource] = limit;
      resources.limits[resource] = request;
    }
  }
  return resources;
});
const podLevelMode = fc.constantFrom('none', 'requests', 'limits', 'both');
/** A valid pod with pod-level resources, as the webhook receives it (defaulted). */
const podLevelPodArb = fc
  .record({
    inits: fc.array(fc.record({ resources: validResourcesArb, sidecar: fc.boolean() }), { maxLength: 3 }),
    containers: fc.array(validResourcesArb, { minLength: 1, maxLength: 3 }),
    cpu: podLevelMode,
    memory: podLevelMode,
    requestSlack: fc.nat({ max: 4000 }),
    limitSlack: fc.nat({ max: 4000 }),
  })
  .map(({ inits, containers, cpu, memory, requestSlack, limitSlack }) => {
    const pod = deploymentPod({
      initContainers: inits.map((c, i) => (c.sidecar ? nativeSidecar(`side-${i}`, c.resources) : container(`init-${i}`, c.resources))),
      containers: containers.map((r, i) => container(`app-${i}`, r)),
    });
    const aggregate = aggregateContainerRequests(pod);
    const requests: Record<string, string> = {};
    const limits: Record<string, string> = {};
    for (const [resource, mode, unit, format] of [
      ['cpu', cpu, 1n, (n: bigint) => `${n}m`],
      ['memory', memory, MIB, String],
    ] as const) {
      if (mode === 'none') continue;
      const request = (aggregate[resource] ?? 0n) + BigInt(requestSlack) * unit;
      if (mode !== 'limits') requests[resource] = format(request);
      if (mode === 'requests') continue;
      const containerLimits = (pod.spec.containers as any[]).map((c) =>
        c.resources.limits?.[resource] ? parseResourceQuantity(resource, c.resources.limits[resource]) : 0n,
      );
      const limit = [request, ...containerLimits].reduce((a, b) => (a > b ? a : b)) + BigInt(limitSlack) * unit;
      limits[resource] = format(limit);
    }
    pod.spec.resources = { ...(Object.keys(requests).length ? { requests } : {}), ...(Object.keys(limits).length ? { limits } : {}) };
    return defaultPod(pod) as PodLike;
  });

describe('planPodMutation properties with pod-level resources', () => {
  it('every patched pod passes the API server pod-level rules, held resources are untouched, reinvocation after defaulting changes nothing', () => {
    // Per pod: patched or not, and whether the pod level held a resource the containers then kept.
    const seen = new Outcomes('patched', 'left as it was', 'a resource held at pod level');
    const parameters = runs(1000);
    fc.assert(
      fc.property(podLevelPodArb, settingsArb, boundsArb, (pod, settings, bounds) => {
        expect(resourceViolations(pod)).toEqual([]);
        const first = mutate(pod, settings, bounds);
        seen.add(first.plan.patch.length > 0 ? 'patched' : 'left as it was');
        const once = defaultPod(first.pod);
        expect(resourceViolations(once)).toEqual([]);
        const held = readPodLevelResources(pod);
        if (held.size > 0) seen.add('a resource held at pod level');
        for (const kind of ['initContainers', 'containers'] as const) {
          (pod.spec?.[kind] ?? []).forEach((c, i) => {
            for (const resource of held) {
              for (const field of ['requests', 'limits'] as const)
                expect(once.spec[kind][i].resources?.[field]?.[resource]).toBe(c.resources?.[field]?.[resource]);
            }
          });
        }
        expect(planPodMutation(once, settings, bounds).patch).toEqual([]);
      }),
      parameters,
    );
    // Per run over two seeds: 0.17 patched, 0.83 left as it was, 0.94 with a resource held at pod level.
    seen.expectPerRun('patched', 0.08, parameters);
    seen.expectPerRun('left as it was', 0.3, parameters);
    seen.expectPerRun('a resource held at pod level', 0.2, parameters);
  });
});

describe('pod mutation: edges found by mutation testing', () => {
  const read = (value: unknown) => readOriginals({ [ORIGINAL_RESOURCES_ANNOTATION]: JSON.stringify(value) });

  it('readOriginals: an array of entries is not our shape; one unknown resource rejects the entry; a zero amount is kept', () => {
    expect(read([{ requests: { cpu: '1' } }]).size).toBe(0);
    expect(read({ a: { requests: { cpu: '1', 'nvidia.com/gpu': '1' } } }).size).toBe(0);
    expect(read({ a: { requests: { cpu: '0' } } }).get('a')?.amounts).toEqual({ requests: { cpu: 0n }, limits: {} });
  });

  it('a pod with no annotations, no resources anywhere and a container without a name: the named ones get the defaults, recorded', () => {
    const pod = { metadata: { name: 'bare', namespace: 'team' }, spec: { containers: [{ name: 'app', image: 'x' }, { image: 'unnamed' }] } } as PodLike;
    const { plan, pod: out } = mutate(pod, CRO);
    expect(out.spec.containers[0].resources).toEqual({ requests: { cpu: '100m', memory: '128Mi' } });
    expect(out.spec.containers[1]).toEqual({ image: 'unnamed' });
    expect(JSON.parse(out.metadata.annotations[ORIGINAL_RESOURCES_ANNOTATION])).toEqual({ app: {} });
    expect(plan.changes).toEqual([
      { container: 'app', field: 'requests', resource: 'cpu', change: 'added' },
      { container: 'app', field: 'requests', resource: 'memory', change: 'added' },
    ]);
  });
});
