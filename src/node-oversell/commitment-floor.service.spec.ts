import { describe, expect, it } from 'vitest';
import { configStore } from '../../test/fixtures/config-store.js';
import { resizingPod, runningPod } from '../../test/fixtures/pods.js';
import type { PodCache } from '../kube/pod-cache.service.js';
import { PodsByNode } from '../kube/pods-by-node.js';
import type { PodLike } from '../domain/pod-resources.js';
import { CommitmentFloor } from './commitment-floor.service.js';

/** The pod cache as the floor reads it: the real index behind it, listed or not. */
function podCache(pods: PodLike[], synced: boolean): PodCache {
  const index = new PodsByNode();
  for (const pod of pods) index.upsert(pod);
  const cache = { isSynced: () => synced, use: () => undefined, admitted: (node: string) => index.admitted(node), usage: (node: string) => index.usage(node) };
  return cache as unknown as PodCache;
}

describe('CommitmentFloor', () => {
  const pods = [resizingPod('web', 'worker-1', { desired: '3', allocated: '1', pending: 'Deferred' }), runningPod('db', 'worker-1') as PodLike];

  it('reads what the kubelet admitted the pods at, not what they ask for: a deferred resize counts at its allocated cpu', () => {
    const cache = podCache(pods, true);
    const floor = new CommitmentFloor(cache, configStore());
    const asked = cache.usage('worker-1').requests.cpu!;
    const committed = floor.committed('worker-1')!;
    // web asks for 3 CPUs and holds 1: the floor counts 2 CPUs less than the cap does.
    expect(asked - committed.cpu!).toBe(2000n);
    expect(committed).toEqual(cache.admitted('worker-1'));
    expect(committed.pods).toBe(2n);
  });

  it('unknown until the cache has listed', () => {
    expect(new CommitmentFloor(podCache(pods, false), configStore()).committed('worker-1')).toBeUndefined();
  });
});
