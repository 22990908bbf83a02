import { describe, expect, it } from 'vitest';
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
