import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { container, deploymentPod, mirrorPod, nativeSidecar, resizingPod, runningPod } from '../../test/fixtures/pods.js';
import { Outcomes, runs } from '../../test/support/property.js';
import {
  admittedPodRequests,
  scheduledPodRequests,
  exclusiveCpus,
  isGuaranteed,
  isMirrorPod,
  isResizeInfeasible,
  isTerminal,
  type ContainerLike,
  type PodLike,
  type ResourceRequirements,
} from './pod-resources.js';

const Mi = (n: number) => BigInt(n) * 1024n * 1024n;

describe('scheduledPodRequests (as kube-scheduler counts a pod)', () => {
  it('sums regular containers and native sidecars; an init container runs with the sidecars before it', () => {
    const pod = deploymentPod({
      initContainers: [
        nativeSidecar('mesh', { requests: { cpu: '100m', memory: '64Mi' } }),
        container('migrate', { requests: { cpu: '2', memory: '128Mi' } }),
        nativeSidecar('logs', { requests: { cpu: '50m', memory: '32Mi' } }),
      ],
      containers: [container('app', { requests: { cpu: '500m', memory: '1Gi' } })],
    });
    // running: 500m + 100m + 50m = 650m, 1Gi + 64Mi + 32Mi; migrate: 2 + 100m (mesh before it) = 2100m, 128Mi + 64Mi.
    expect(scheduledPodRequests(pod)).toEqual({ cpu: 2100n, memory: Mi(1024 + 96), pods: 1n });
  });

  it('adds the pod overhead (RuntimeClass) and counts ephemeral-storage', () => {
    const pod = deploymentPod({
      initContainers: null,
      containers: [container('app', { requests: { cpu: '1', memory: '1Gi', 'ephemeral-storage': '2Gi', 'nvidia.com/gpu': '1' } })],
      overhead: { cpu: '250m', memory: '120Mi' },
    });
    expect(scheduledPodRequests(pod)).toEqual({ cpu: 1250n, memory: Mi(1024 + 120), 'ephemeral-storage': 2n * 1024n ** 3n, pods: 1n });
  });

  it('takes pod-level requests (PodLevelResources) for the resources they name', () => {
    const pod = deploymentPod({ initContainers: null, containers: [container('app', { requests: { cpu: '1', memory: '1Gi' } })] });
    pod.spec.resources = { requests: { cpu: '3' } };
    expect(scheduledPodRequests(pod)).toEqual({ cpu: 3000n, memory: Mi(1024), pods: 1n });
  });

  it("adds the overhead on top of pod-level requests, and keeps the containers' sum for a resource not set at pod level", () => {
    const pod = deploymentPod({
      initContainers: null,
      containers: [container('app', { requests: { cpu: '1', memory: '1Gi' } }), container('worker', { requests: { cpu: '250m', memory: '256Mi' } })],
      overhead: { cpu: '100m', memory: '64Mi' },
    });
    pod.spec.resources = { requests: { memory: '2Gi' }, limits: { memory: '4Gi' } };
    expect(scheduledPodRequests(pod)).toEqual({ cpu: 1350n, memory: Mi(2048 + 64), pods: 1n });
  });

  it('counts a container that sets only a limit at its limit, as the API server defaults its request', () => {
    // What a pod looks like after our patch derived a cpu limit (the API server defaults it again after the webhooks).
    const pod = deploymentPod({
      initContainers: [container('migrate', { limits: { memory: '2Gi' } })],
      containers: [container('app', { limits: { cpu: '2', memory: '1Gi' }, requests: { memory: '512Mi' } })],
    });
    expect(scheduledPodRequests(pod)).toEqual({ cpu: 2000n, memory: Mi(2048), pods: 1n });
  });

  it('counts a pod with no requests as one pod', () => {
    expect(scheduledPodRequests({ spec: { containers: [{ name: 'a' }] } })).toEqual({ pods: 1n });
    expect(scheduledPodRequests({})).toEqual({ pods: 1n });
  });

  it('the default fixture: checkout 250m/512Mi, migrate 500m alone', () => {
    expect(scheduledPodRequests(deploymentPod())).toEqual({ cpu: 500n, memory: Mi(512), pods: 1n });
  });

  it('equals max(containers + all sidecars, max over init i of (init i + sidecars before i)) + overhead', () => {
    const amount = fc.option(fc.integer({ min: 0, max: 10_000 }), { nil: undefined });
    const containerArb = fc.record({ cpu: amount, memory: amount, sidecar: fc.boolean() });
    // For cpu: which term of the max decides (an init container only when it is above the rest).
    const seen = new Outcomes('the running containers decide', 'an init container decides', 'nothing requested');
    fc.assert(
      fc.property(fc.array(containerArb, { maxLength: 5 }), fc.array(containerArb, { maxLength: 5 }), amount, (inits, regular, overhead) => {
        const res = (c: { cpu?: number; memory?: number }) => ({
          requests: { ...(c.cpu !== undefined ? { cpu: `${c.cpu}m` } : {}), ...(c.memory !== undefined ? { memory: `${c.memory}Ki` } : {}) },
        });
        const pod: PodLike = {
          spec: {
            initContainers: inits.map((c, i) => ({ name: `i${i}`, resources: res(c), ...(c.sidecar ? { restartPolicy: 'Always' } : {}) })),
            containers: regular.map((c, i) => ({ name: `c${i}`, resources: res(c) })),
            ...(overhead !== undefined ? { overhead: { cpu: `${overhead}m` } } : {}),
          },
        };
        for (const [resource, unit] of [
          ['cpu', 1n],
          ['memory', 1024n],
        ] as const) {
          const of = (c: { cpu?: number; memory?: number }) => BigInt(c[resource] ?? 0) * unit;
          const sidecars = inits.filter((c) => c.sidecar);
          const running = [...regular, ...sidecars].reduce((sum, c) => sum + of(c), 0n);
          let peak = 0n;
          inits.forEach((c, i) => {
            if (c.sidecar) return;
            const before = inits
              .slice(0, i)
              .filter((s) => s.sidecar)
              .reduce((sum, s) => sum + of(s), 0n);
            if (of(c) + before > peak) peak = of(c) + before;
          });
          const expected = (running > peak ? running : peak) + (resource === 'cpu' ? BigInt(overhead ?? 0) : 0n);
          const anySet = [...inits, ...regular].some((c) => c[resource] !== undefined) || (resource === 'cpu' && overhead !== undefined);
          expect(scheduledPodRequests(pod)[resource]).toBe(anySet ? expected : undefined);
          if (resource === 'cpu') seen.add(!anySet ? 'nothing requested' : peak > running ? 'an init container decides' : 'the running containers decide');
        }
      }),
      runs(100),
    );
    // About 80 % the running containers, 20 % an init container (three seeds).
    seen.expectShare('an init container decides', 0.08);
    seen.expectShare('the running containers decide', 0.4);
  });
});

describe('scheduledPodRequests of a resizing pod (in-place resize, as the 1.37 scheduler counts it)', () => {
  const cpuOf = (pod: PodLike, desired?: 'always') => scheduledPodRequests(pod, desired).cpu;

  it('a resize up the kubelet has Deferred: the desired cpu counts (2 > allocated 1)', () => {
    expect(scheduledPodRequests(resizingPod('p', 'n', { desired: '2', allocated: '1', pending: 'Deferred' }))).toEqual({
      cpu: 2000n,
      memory: Mi(256),
      pods: 1n,
    });
  });

  it('a resize the kubelet found Infeasible: the desired cpu is left out (allocated 1, though 3 is asked)', () => {
    const pod = resizingPod('p', 'n', { desired: '3', allocated: '1', pending: 'Infeasible' });
    expect(isResizeInfeasible(pod)).toBe(true);
    expect(cpuOf(pod)).toBe(1000n);
    // A new resize under review: the kubelet decides it anew, so its desired cpu counts.
    expect(cpuOf(pod, 'always')).toBe(3000n);
  });

  it('a resize down not yet allocated, or allocated but not yet actuated: the larger allocated or actual cpu counts', () => {
    expect(cpuOf(resizingPod('p', 'n', { desired: '500m', allocated: '2' }))).toBe(2000n);
    expect(cpuOf(resizingPod('p', 'n', { desired: '500m', allocated: '500m', actual: '2' }))).toBe(2000n);
    // Done: all three agree.
    expect(cpuOf(resizingPod('p', 'n', { desired: '500m', allocated: '500m' }))).toBe(500n);
  });

  it('a container without a status counts its desired requests (none while Infeasible); actual falls back to allocated', () => {
    const pod = resizingPod('p', 'n', { desired: '1', allocated: '1' });
    pod.spec.containers.push(container('late', { requests: { cpu: '300m' } }));
    expect(cpuOf(pod)).toBe(1300n);
    pod.status.conditions.unshift({ type: 'PodResizePending', status: 'True', reason: 'Infeasible' });
    expect(cpuOf(pod)).toBe(1000n);
    const noActual = resizingPod('p', 'n', { desired: '1', allocated: '2' });
    delete noActual.status.containerStatuses[0].resources;
    expect(cpuOf(noActual)).toBe(2000n);
  });

  it('a native sidecar is found among the init container statuses and counted with the containers', () => {
    const pod = resizingPod('p', 'n', { desired: '1', allocated: '1' });
    pod.spec.initContainers = [nativeSidecar('mesh', { requests: { cpu: '100m' } })];
    pod.status.initContainerStatuses = [{ name: 'mesh', allocatedResources: { cpu: '400m' }, resources: { requests: { cpu: '400m' } } }];
    expect(cpuOf(pod)).toBe(1400n);
  });

  it('the pod-level status (allocatedResources and resources, both reported) stands for the containers', () => {
    const pod = resizingPod('p', 'n', { desired: '1', allocated: '1' });
    pod.status.allocatedResources = { cpu: '1500m', memory: '256Mi' };
    pod.status.resources = { requests: { cpu: '1200m', memory: '256Mi' } };
    expect(scheduledPodRequests(pod)).toEqual({ cpu: 1500n, memory: Mi(256), pods: 1n });
    // Only one of the two reported: the containers' statuses are read.
    delete pod.status.resources;
    expect(cpuOf(pod)).toBe(1000n);
  });

  it('pod-level requests being resized: the largest of desired (unless Infeasible), actual and allocated', () => {
    const pod = resizingPod('p', 'n', { desired: '500m', allocated: '500m' });
    pod.spec.resources = { requests: { cpu: '3' }, limits: { cpu: '4' } };
    pod.status.allocatedResources = { cpu: '2' };
    pod.status.resources = { requests: { cpu: '2' } };
    expect(cpuOf(pod)).toBe(3000n);
    pod.status.conditions.unshift({ type: 'PodResizePending', status: 'True', reason: 'Infeasible' });
    expect(cpuOf(pod)).toBe(2000n);
  });

  it('property: with every container reported, the largest of the desired (unless Infeasible), allocated and actual aggregates', () => {
    const cpu = fc.integer({ min: 0, max: 4000 });
    const member = fc.record({ desired: cpu, allocated: cpu, actual: cpu, kind: fc.constantFrom('app', 'init', 'sidecar') });
    const seen = new Outcomes('desired', 'allocated', 'actual', 'infeasible');
    fc.assert(
      fc.property(fc.array(member, { minLength: 1, maxLength: 5 }), fc.constantFrom(undefined, 'Deferred', 'Infeasible'), (members, pending) => {
        const named = members.map((m, i) => ({ ...m, name: `c${i}` }));
        const make = (m: (typeof named)[number]) => ({
          name: m.name,
          resources: { requests: { cpu: `${m.desired}m` } },
          ...(m.kind === 'sidecar' ? { restartPolicy: 'Always' } : {}),
        });
        const pod: PodLike = {
          spec: { containers: named.filter((m) => m.kind === 'app').map(make), initContainers: named.filter((m) => m.kind !== 'app').map(make) },
          status: {
            conditions: pending ? [{ type: 'PodResizePending', reason: pending }] : [],
            containerStatuses: named.map((m) => ({
              name: m.name,
              allocatedResources: { cpu: `${m.allocated}m` },
              resources: { requests: { cpu: `${m.actual}m` } },
            })),
          },
        };
        // The scheduler's aggregate, written out: containers and sidecars together, or an init container with the sidecars before it.
        const model = (field: 'desired' | 'allocated' | 'actual') => {
          let running = 0;
          let sidecars = 0;
          let peak = 0;
          for (const m of named) {
            if (m.kind === 'init') {
              peak = Math.max(peak, sidecars + m[field]);
              continue;
            }
            running += m[field];
            if (m.kind === 'sidecar') {
              sidecars += m[field];
              peak = Math.max(peak, sidecars);
            }
          }
          return Math.max(running, peak);
        };
        const candidates = { desired: pending === 'Infeasible' ? -1 : model('desired'), allocated: model('allocated'), actual: model('actual') };
        const expected = Math.max(...Object.values(candidates));
        expect(scheduledPodRequests(pod).cpu).toBe(BigInt(expected));
        if (pending === 'Infeasible') seen.add('infeasible');
        else seen.add((['desired', 'allocated', 'actual'] as const).find((k) => candidates[k] === expected)!);
      }),
      runs(300),
    );
    seen.expectEach();
  });
});

describe('admittedPodRequests (what the kubelet admitted: the commitment floor)', () => {
  const cpuOf = (pod: PodLike) => admittedPodRequests(pod).cpu;

  it('a resize the kubelet Deferred, found Infeasible or has not answered yet adds nothing above what it allocated', () => {
    for (const pending of ['Deferred', 'Infeasible', undefined] as const) {
      const pod = resizingPod('p', 'n', { desired: '1500m', allocated: '450m', pending });
      expect(admittedPodRequests(pod), pending ?? 'not answered').toEqual({ cpu: 450n, memory: Mi(256), pods: 1n });
    }
    // What the cap counts for the same Deferred pod: the desired cpu.
    expect(scheduledPodRequests(resizingPod('p', 'n', { desired: '1500m', allocated: '450m', pending: 'Deferred' })).cpu).toBe(1500n);
  });

  it('the larger of allocated and actual: a resize down allocated but not yet actuated, a resize up allocated but not yet actuated', () => {
    expect(cpuOf(resizingPod('p', 'n', { desired: '500m', allocated: '500m', actual: '2' }))).toBe(2000n);
    expect(cpuOf(resizingPod('p', 'n', { desired: '2', allocated: '2', actual: '500m' }))).toBe(2000n);
    expect(cpuOf(resizingPod('p', 'n', { desired: '500m', allocated: '2' }))).toBe(2000n);
  });

  it('a container the kubelet reports no resources for counts its spec: a pod not seen yet, a container not started, a minor without resize', () => {
    const pod = resizingPod('p', 'n', { desired: '1', allocated: '1' });
    pod.spec.containers.push(container('late', { requests: { cpu: '300m' } }));
    expect(cpuOf(pod)).toBe(1300n);
    const unseen = runningPod('fresh', 'n', { initContainers: null, containers: [container('app', { requests: { cpu: '700m' } })] }) as PodLike;
    delete unseen.status;
    expect(admittedPodRequests(unseen)).toEqual(scheduledPodRequests(unseen));
    const waiting = resizingPod('p', 'n', { desired: '1', allocated: '1' });
    waiting.status.containerStatuses[0] = { name: 'app', state: { waiting: { reason: 'ContainerCreating' } } };
    expect(cpuOf(waiting)).toBe(1000n);
  });

  it('a native sidecar and an init container by their statuses, with the scheduler aggregate', () => {
    const pod = resizingPod('p', 'n', { desired: '1', allocated: '1' });
    pod.spec.initContainers = [nativeSidecar('mesh', { requests: { cpu: '900m' } }), container('setup', { requests: { cpu: '5' } })];
    pod.status.initContainerStatuses = [
      { name: 'mesh', allocatedResources: { cpu: '100m' }, resources: { requests: { cpu: '100m' } } },
      { name: 'setup', allocatedResources: { cpu: '2' } },
    ];
    // max(app 1 + mesh 100m, mesh 100m + setup 2): setup's allocated 2, never its desired 5.
    expect(cpuOf(pod)).toBe(2100n);
  });

  it('pod-level: the larger of the pod-level allocated and actual where the pod reports them, never its pod-level desired', () => {
    const pod = resizingPod('p', 'n', { desired: '500m', allocated: '500m' });
    pod.spec.resources = { requests: { cpu: '3' }, limits: { cpu: '4' } };
    pod.status.allocatedResources = { cpu: '2' };
    pod.status.resources = { requests: { cpu: '1500m' } };
    expect(cpuOf(pod)).toBe(2000n);
    // No pod-level status (a minor without pod-level resize): the pod-level spec, which cannot change there.
    delete pod.status.resources;
    expect(cpuOf(pod)).toBe(3000n);
  });

  it('the overhead is added and the pod counts one', () => {
    const pod = resizingPod('p', 'n', { desired: '2', allocated: '1', pending: 'Deferred' });
    pod.spec.overhead = { cpu: '250m', memory: '64Mi' };
    expect(admittedPodRequests(pod)).toEqual({ cpu: 1250n, memory: Mi(320), pods: 1n });
  });

  it("property: a reported container's desired requests never move it, and it never exceeds what the scheduler counts unless Infeasible hides a container without status", () => {
    const cpu = fc.integer({ min: 0, max: 4000 });
    const member = fc.record({
      desired: cpu,
      resized: cpu,
      allocated: cpu,
      actual: fc.option(cpu, { nil: undefined }),
      reported: fc.boolean(),
      kind: fc.constantFrom('app', 'init', 'sidecar'),
    });
    const seen = new Outcomes('below-scheduled', 'equal', 'unreported');
    fc.assert(
      fc.property(fc.array(member, { minLength: 1, maxLength: 5 }), fc.constantFrom(undefined, 'Deferred', 'Infeasible'), (members, pending) => {
        const named = members.map((m, i) => ({ ...m, name: `c${i}` }));
        const podWith = (desired: (m: (typeof named)[number]) => number): PodLike => {
          const make = (m: (typeof named)[number]) => ({
            name: m.name,
            resources: { requests: { cpu: `${desired(m)}m` } },
            ...(m.kind === 'sidecar' ? { restartPolicy: 'Always' } : {}),
          });
          return {
            spec: { containers: named.filter((m) => m.kind === 'app').map(make), initContainers: named.filter((m) => m.kind !== 'app').map(make) },
            status: {
              conditions: pending ? [{ type: 'PodResizePending', reason: pending }] : [],
              containerStatuses: named
                .filter((m) => m.reported)
                .map((m) => ({
                  name: m.name,
                  allocatedResources: { cpu: `${m.allocated}m` },
                  ...(m.actual === undefined ? {} : { resources: { requests: { cpu: `${m.actual}m` } } }),
                })),
            },
          };
        };
        const before = podWith((m) => m.desired);
        // A resize of the reported containers only: what the kubelet admitted is unchanged.
        const after = podWith((m) => (m.reported ? m.resized : m.desired));
        expect(admittedPodRequests(after)).toEqual(admittedPodRequests(before));
        const admitted = admittedPodRequests(after).cpu!;
        const scheduled = scheduledPodRequests(after).cpu!;
        const hidden = pending === 'Infeasible' && named.some((m) => !m.reported);
        if (!hidden) expect(admitted <= scheduled).toBe(true);
        if (named.some((m) => !m.reported)) seen.add('unreported');
        seen.add(admitted < scheduled ? 'below-scheduled' : 'equal');
      }),
      runs(300),
    );
    seen.expectEach();
  });
});

describe('pod-level resources as the API server defaults them (1.37, after the webhooks)', () => {
  it('a pod-level limit with no container setting the resource: the request is the limit', () => {
    const pod = deploymentPod({ initContainers: null, containers: [container('app', { requests: { memory: '1Gi' } })] });
    pod.spec.resources = { limits: { cpu: '2' } };
    expect(scheduledPodRequests(pod)).toEqual({ cpu: 2000n, memory: Mi(1024), pods: 1n });
  });

  it("a pod-level limit where a container sets the resource: the request is the containers' aggregate, overhead added", () => {
    const pod = deploymentPod({
      initContainers: null,
      containers: [container('app', { requests: { cpu: '500m' } }), container('b', { limits: { cpu: '250m' } })],
    });
    pod.spec.resources = { limits: { cpu: '2' } };
    pod.spec.overhead = { cpu: '100m' };
    expect(scheduledPodRequests(pod).cpu).toBe(850n);
  });

  it('an empty spec.resources is no pod-level resource: the pod keeps its exclusive CPUs', () => {
    const fixed = { requests: { cpu: '2', memory: '1Gi' }, limits: { cpu: '2', memory: '1Gi' } };
    const pod: PodLike = { spec: { containers: [container('a', fixed) as ContainerLike], resources: {} } };
    expect(exclusiveCpus(pod)).toBe(2000n);
  });

  it('QoS at pod level: Guaranteed when the (defaulted) pod-level requests equal non-zero limits', () => {
    const limits = { cpu: '2', memory: '1Gi' };
    const pod = (containerResources: ResourceRequirements, resources: ResourceRequirements): PodLike => ({
      spec: { containers: [container('a', containerResources) as ContainerLike], resources },
    });
    expect(isGuaranteed(pod({}, { limits }))).toBe(true);
    expect(isGuaranteed(pod({ requests: { cpu: '500m' } }, { limits }))).toBe(false);
    expect(isGuaranteed(pod({}, { requests: { cpu: '1' }, limits }))).toBe(false);
    expect(isGuaranteed(pod({}, { requests: limits }))).toBe(false);
  });
});

describe('pod predicates', () => {
  it('recognises mirror pods by the kubelet annotation', () => {
    expect(isMirrorPod(mirrorPod())).toBe(true);
    expect(isMirrorPod(deploymentPod())).toBe(false);
    expect(isMirrorPod(undefined)).toBe(false);
  });

  it('terminal = Succeeded or Failed', () => {
    const pod = runningPod('a', 'n');
    expect(isTerminal(pod)).toBe(false);
    for (const phase of ['Succeeded', 'Failed']) expect(isTerminal({ ...pod, status: { phase } })).toBe(true);
    for (const phase of ['Pending', 'Running', 'Unknown']) expect(isTerminal({ ...pod, status: { phase } })).toBe(false);
  });
});

describe('exclusiveCpus (the static CPU manager policy)', () => {
  const fixed = (cpu: string, memory = '1Gi') => ({ requests: { cpu, memory }, limits: { cpu, memory } });
  const pod = (containers: any[], initContainers: any[] = [], extra: Record<string, unknown> = {}): PodLike => ({
    metadata: { name: 'p', namespace: 'shop' },
    spec: { containers, initContainers, ...extra },
  });

  it('Guaranteed: cpu and memory limits on every container, every request equal to its limit (an absent request defaults to it)', () => {
    expect(isGuaranteed(pod([container('a', fixed('2')), container('b', { limits: { cpu: '1', memory: '1Gi' } })]))).toBe(true);
    expect(isGuaranteed(pod([container('a', { requests: { cpu: '1', memory: '1Gi' }, limits: { cpu: '2', memory: '1Gi' } })]))).toBe(false);
    expect(isGuaranteed(pod([container('a', { limits: { cpu: '2' } })]))).toBe(false);
    expect(isGuaranteed(pod([container('a', fixed('2'))], [container('init', { requests: { cpu: '1' } })]))).toBe(false);
    expect(isGuaranteed(pod([container('a')]))).toBe(false);
  });

  it('counts the integer cpu of each container of a Guaranteed pod, as podGuaranteedCPUs does', () => {
    expect(exclusiveCpus(pod([container('a', fixed('2')), container('b', fixed('1'))]))).toBe(3000n);
    // a fractional container stays in the shared pool
    expect(exclusiveCpus(pod([container('a', fixed('2')), container('b', fixed('500m'))]))).toBe(2000n);
    // not Guaranteed: none
    expect(exclusiveCpus(pod([container('a', { requests: { cpu: '2', memory: '1Gi' } })]))).toBe(0n);
    // an init container runs before: the larger of it and the regular containers; a native sidecar adds to both
    expect(exclusiveCpus(pod([container('a', fixed('1'))], [container('init', fixed('3'))]))).toBe(3000n);
    expect(exclusiveCpus(pod([container('a', fixed('2'))], [nativeSidecar('mesh', fixed('1')), container('init', fixed('2'))]))).toBe(3000n);
    // pod-level resources: the CPU manager leaves the pod in the shared pool
    expect(exclusiveCpus(pod([container('a', fixed('2'))], [], { resources: fixed('2') }))).toBe(0n);
  });

  it('reads the cpu the kubelet allocated: a resize of the cores the static policy left Infeasible holds the old ones', () => {
    const pod = resizingPod('p', 'n', { desired: '3', allocated: '2', pending: 'Infeasible' });
    pod.spec.containers[0].resources = { requests: { cpu: '3', memory: '256Mi' }, limits: { cpu: '3', memory: '256Mi' } };
    expect(exclusiveCpus(pod)).toBe(2000n);
  });

  it('property: whole cores, never more than the cpu the scheduler counts for the pod', () => {
    const cpu = fc.oneof(
      fc.integer({ min: 1, max: 8 }).map(String),
      fc.integer({ min: 1, max: 8000 }).map((m) => `${m}m`),
    );
    const member = fc.record({ cpu, kind: fc.constantFrom('app', 'init', 'sidecar'), limitOnly: fc.boolean() });
    const seen = new Outcomes('the running containers decide', 'an init container decides', 'no whole core');
    fc.assert(
      fc.property(fc.array(member, { minLength: 1, maxLength: 6 }), (members) => {
        const make = (m: (typeof members)[number], i: number) =>
          m.kind === 'sidecar'
            ? nativeSidecar(`s${i}`, m.limitOnly ? { limits: { cpu: m.cpu, memory: '1Gi' } } : fixed(m.cpu))
            : container(`c${i}`, m.limitOnly ? { limits: { cpu: m.cpu, memory: '1Gi' } } : fixed(m.cpu));
        const apps = members.filter((m) => m.kind === 'app');
        const p = pod(
          (apps.length > 0 ? apps : [{ cpu: '1', kind: 'app' as const, limitOnly: false }]).map(make),
          members.filter((m) => m.kind !== 'app').map(make),
        );
        const exclusive = exclusiveCpus(p);
        expect(exclusive % 1000n).toBe(0n);
        expect(exclusive).toBeLessThanOrEqual(scheduledPodRequests(p).cpu ?? 0n);
        // Every pod drawn is Guaranteed (a limit alone is also the request): the whole cores of
        // each container, the larger of the running ones and each init container's moment.
        const whole = (m: (typeof members)[number]) => {
          const milli = m.cpu.endsWith('m') ? BigInt(m.cpu.slice(0, -1)) : BigInt(m.cpu) * 1000n;
          return milli % 1000n === 0n ? milli : 0n;
        };
        let [sidecars, initPeak] = [0n, 0n];
        for (const m of members.filter((m) => m.kind !== 'app')) {
          if (m.kind === 'sidecar') sidecars += whole(m);
          else if (sidecars + whole(m) > initPeak) initPeak = sidecars + whole(m);
        }
        const running = (apps.length > 0 ? apps : [{ cpu: '1', kind: 'app' as const, limitOnly: false }]).reduce((sum, m) => sum + whole(m), sidecars);
        expect(exclusive).toBe(running > initPeak ? running : initPeak);
        seen.add(exclusive === 0n ? 'no whole core' : initPeak > running ? 'an init container decides' : 'the running containers decide');
      }),
      runs(100),
    );
    // About 70 % the running containers, 22 % an init container, 8 % no whole core (three seeds).
    seen.expectShare('the running containers decide', 0.4);
    seen.expectShare('an init container decides', 0.08);
    seen.expectShare('no whole core', 0.02);
  });
});

// ---------------------------------------------------------------------------------------------
// Edges the mutation run (docs/testing.md) found untested
// ---------------------------------------------------------------------------------------------

describe('pod resources: edges found by mutation testing', () => {
  const fixed = (cpu: string, memory = '1Gi') => ({ requests: { cpu, memory }, limits: { cpu, memory } });

  it('predicates of a pod without metadata, annotations, status or conditions of the right shape', () => {
    expect(isMirrorPod({})).toBe(false);
    expect(isMirrorPod({ metadata: { annotations: null } } as unknown as PodLike)).toBe(false);
    expect(isTerminal({})).toBe(false);
    const withConditions = (conditions: unknown[]) => ({ status: { conditions } }) as unknown as PodLike;
    expect(isResizeInfeasible(withConditions([null, { type: 'PodResizePending', reason: 'Infeasible' }]))).toBe(true);
    expect(
      isResizeInfeasible(
        withConditions([
          { type: 'Ready', reason: 'Infeasible' },
          { type: 'PodResizePending', reason: 'Deferred' },
        ]),
      ),
    ).toBe(false);
    expect(isResizeInfeasible(withConditions([{ type: 'Ready', reason: 'Infeasible' }]))).toBe(false);
  });

  it('reads a quantity given as a JSON number', () => {
    const pod = deploymentPod({ initContainers: null, containers: [container('app', { requests: { cpu: 2, memory: 1024 } as any })] });
    expect(scheduledPodRequests(pod)).toEqual({ cpu: 2000n, memory: 1024n, pods: 1n });
  });

  it('container statuses: entries that are no object or have no name are skipped; a regular container’s status is found before an init container’s of the same name', () => {
    const pod = resizingPod('p', 'n', { desired: '3', allocated: '2', pending: 'Deferred' });
    const regular = pod.status.containerStatuses[0];
    pod.status.containerStatuses = [null, { image: 'x' }, regular];
    pod.status.initContainerStatuses = [{ ...regular, allocatedResources: { cpu: '5' }, resources: { requests: { cpu: '5' } } }];
    expect(admittedPodRequests(pod).cpu).toBe(2000n);
  });

  it('pod-level resources: any cpu, memory or hugepages key makes them set, whatever else the list holds; no other key does', () => {
    const pod = (resources: ResourceRequirements): PodLike => ({ spec: { containers: [container('a', fixed('2')) as ContainerLike], resources } });
    expect(exclusiveCpus(pod({ limits: { 'ephemeral-storage': '1Gi' } }))).toBe(2000n);
    expect(exclusiveCpus(pod({ requests: { 'hugepages-2Mi': '2Mi' } }))).toBe(0n);
    expect(exclusiveCpus(pod({ limits: { cpu: '2', 'ephemeral-storage': '1Gi' } }))).toBe(0n);
    // Without a status the pod-level requests count as the spec sets them.
    expect(scheduledPodRequests({ spec: { containers: [container('a', {}) as ContainerLike], resources: { requests: { cpu: '3' } } } }).cpu).toBe(3000n);
  });

  it('QoS: zero limits, a container without resources, no container at all, no spec: not Guaranteed', () => {
    expect(isGuaranteed({ spec: { containers: [container('a', {}) as ContainerLike], resources: fixed('0', '0') } })).toBe(false);
    expect(isGuaranteed({ spec: { containers: [container('a', fixed('0', '0')) as ContainerLike] } })).toBe(false);
    expect(isGuaranteed({ spec: { containers: [{ name: 'a' }] } })).toBe(false);
    expect(isGuaranteed({ spec: { containers: [] } })).toBe(false);
    expect(isGuaranteed({})).toBe(false);
    expect(scheduledPodRequests({})).toEqual({ pods: 1n });
  });
});
