import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { runs } from '../../test/support/property.js';
import { container, mirrorPod, resizingPod, runningPod } from '../../test/fixtures/pods.js';
import { admittedPodRequests, scheduledPodRequests, isMirrorPod, type PodLike } from '../domain/pod-resources.js';
import { cachedPod, keyOf, PodsByNode } from './pods-by-node.js';

describe('cachedPod', () => {
  it('keeps identity, node, phase and both accountings of its requests (init containers and sidecars counted), nothing else', () => {
    const pod = runningPod('web-1', 'n1', {
      initContainers: [container('setup', { requests: { cpu: '2' } }), { ...container('proxy', { requests: { cpu: '100m' } }), restartPolicy: 'Always' }],
    }) as PodLike;
    const cached = cachedPod(pod);
    expect(cached).toEqual({
      metadata: { name: 'web-1', namespace: pod.metadata!.namespace, uid: pod.metadata!.uid, resourceVersion: pod.metadata!.resourceVersion },
      spec: { nodeName: 'n1' },
      status: { phase: 'Running' },
      requests: scheduledPodRequests(pod),
      admitted: admittedPodRequests(pod),
    });
    expect(Object.isFrozen(cached.requests)).toBe(true);
    expect(Object.isFrozen(cached.admitted)).toBe(true);
  });

  it('pods requesting the same share one requests object; a mirror pod stays recognisable', () => {
    const a = cachedPod(runningPod('a', 'n1') as PodLike);
    const b = cachedPod(runningPod('b', 'n2') as PodLike);
    expect(b.requests).toBe(a.requests);
    const mirror = cachedPod(mirrorPod() as PodLike);
    expect(isMirrorPod(mirror)).toBe(true);
    expect(isMirrorPod(a)).toBe(false);
  });

  it('the index counts a cached pod as it counts the pod it came from', () => {
    const pod = runningPod('a', 'n1') as PodLike;
    const fromPod = new PodsByNode();
    fromPod.upsert(pod);
    const fromCache = new PodsByNode();
    fromCache.upsert(cachedPod(pod));
    expect(fromCache.usage('n1')).toEqual(fromPod.usage('n1'));
    expect(fromCache.admitted('n1')).toEqual(fromPod.admitted('n1'));
    fromCache.remove(cachedPod(pod));
    expect(fromCache.size).toBe(0);
  });

  it('follows an in-place resize as the kubelet reports it: the cap counts the desired requests, the floor only what the kubelet admitted', () => {
    const index = new PodsByNode();
    const web = (state: Parameters<typeof resizingPod>[2]) => {
      const pod = resizingPod('web', 'n1', state);
      pod.metadata.uid = 'uid-web';
      index.upsert(cachedPod(pod));
    };
    const cpu = () => [index.usage('n1').requests.cpu, index.admitted('n1').cpu];
    web({ desired: '1', allocated: '1' });
    expect(cpu()).toEqual([1000n, 1000n]);
    web({ desired: '3', allocated: '1', pending: 'Deferred' });
    expect(cpu()).toEqual([3000n, 1000n]);
    web({ desired: '3', allocated: '1' }); // not answered yet
    expect(cpu()).toEqual([3000n, 1000n]);
    web({ desired: '3', allocated: '1', pending: 'Infeasible' });
    expect(cpu()).toEqual([1000n, 1000n]);
    web({ desired: '500m', allocated: '500m', actual: '1' });
    expect(cpu()).toEqual([1000n, 1000n]);
    web({ desired: '3', allocated: '3', actual: '1' }); // allocated, not actuated yet
    expect(cpu()).toEqual([3000n, 3000n]);
    web({ desired: '500m', allocated: '500m' });
    const halfCpu = { cpu: 500n, memory: 256n * 1024n * 1024n, pods: 1n };
    expect(index.pods('n1').get('uid-web')).toEqual({ requests: halfCpu, admitted: halfCpu });
  });

  it('pods(node): the bound pods by key, following a pod that moves or ends', () => {
    const a = runningPod('a', 'n1') as PodLike;
    const b = runningPod('b', 'n1') as PodLike;
    const index = new PodsByNode();
    index.upsert(a);
    index.upsert(b);
    expect([...index.pods('n1').keys()]).toEqual([keyOf(a), keyOf(b)]);
    index.upsert({ ...b, spec: { ...b.spec, nodeName: 'n2' } });
    index.upsert({ ...a, status: { phase: 'Succeeded' } });
    expect([...index.pods('n1').keys()]).toEqual([]);
    expect(index.pods('n2').get(keyOf(b)!)).toEqual({ requests: scheduledPodRequests(b), admitted: admittedPodRequests(b) });
  });
});

describe('PodsByNode.admitted', () => {
  it('is the Σ admittedPodRequests of the node’s bound, non-terminal pods after any sequence of upserts and removals; the same frozen object while its pods do not change', () => {
    const step = fc.record({
      pod: fc.constantFrom('p1', 'p2', 'p3', 'p4'),
      node: fc.constantFrom('n1', 'n2', undefined),
      cpu: fc.constantFrom('100m', '250m', '1'),
      phase: fc.constantFrom('Running', 'Running', 'Succeeded'),
      remove: fc.boolean(),
    });
    fc.assert(
      fc.property(fc.array(step, { maxLength: 25 }), (steps) => {
        const index = new PodsByNode();
        /** The model: each pod's last state (deleted: absent). */
        const pods = new Map<string, PodLike>();
        const uids = new Map<string, string>();
        for (const { pod: name, node, cpu, phase, remove } of steps) {
          const before = { n1: index.admitted('n1'), n2: index.admitted('n2') };
          const moved = new Set([pods.get(name)?.spec?.nodeName, node]);
          if (remove) {
            const gone = pods.get(name);
            if (gone) index.remove(gone);
            pods.delete(name);
          } else {
            const pod = runningPod(name, node ?? '', { containers: [container('app', { requests: { cpu } })] }) as PodLike;
            if (!node) delete pod.spec!.nodeName;
            pod.metadata!.uid = uids.get(name) ?? pod.metadata!.uid;
            uids.set(name, pod.metadata!.uid!);
            pod.status!.phase = phase;
            index.upsert(pod);
            pods.set(name, pod);
          }
          for (const n of ['n1', 'n2'] as const) {
            const sum = index.admitted(n);
            expect(Object.isFrozen(sum)).toBe(true);
            const bound = [...pods.values()].filter((p) => p.spec?.nodeName === n && p.status?.phase === 'Running');
            expect(sum.pods).toBe(BigInt(bound.length));
            expect(sum.cpu ?? 0n).toBe(bound.reduce((total, p) => total + (admittedPodRequests(p).cpu ?? 0n), 0n));
            if (!moved.has(n)) expect(sum).toBe(before[n]);
          }
        }
      }),
      runs(100),
    );
  });
});
