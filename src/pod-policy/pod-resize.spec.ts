import { describe, expect, it } from 'vitest';
import { container, nativeSidecar, resizingPod, runningPod } from '../../test/fixtures/pods.js';
import type { PodLike } from '../domain/pod-resources.js';
import { planResize, readResizedPod } from './pod-resize.js';

const Mi = (n: number) => BigInt(n) * 1024n * 1024n;

/** `pod` with its `app` container's cpu request set to `cpu`, as `kubectl patch --subresource resize` sends it. */
function withCpu(pod: any, cpu: string): any {
  const sent = structuredClone(pod);
  sent.spec.containers[0].resources.requests.cpu = cpu;
  return sent;
}

describe('planResize', () => {
  it('a resize up: held is what the stored pod counts, resized the new desired cpu', () => {
    const stored = resizingPod('web', 'n1', { desired: '1', allocated: '1' });
    expect(planResize(stored, withCpu(stored, '2500m'))).toEqual({
      held: { cpu: 1000n, memory: Mi(256), pods: 1n },
      resized: { cpu: 2500n, memory: Mi(256), pods: 1n },
    });
  });

  it('a resize down while the kubelet still holds more: the pod keeps counting what is allocated', () => {
    const stored = resizingPod('web', 'n1', { desired: '1', allocated: '2' });
    expect(planResize(stored, withCpu(stored, '500m'))).toMatchObject({ held: { cpu: 2000n }, resized: { cpu: 2000n } });
  });

  it('a new resize after an Infeasible one: held leaves the old desired out, resized counts the new one', () => {
    const stored = resizingPod('web', 'n1', { desired: '8', allocated: '1', pending: 'Infeasible' });
    expect(planResize(stored, withCpu(stored, '3'))).toMatchObject({ held: { cpu: 1000n }, resized: { cpu: 3000n } });
  });

  it('changes outside the resources in the body are what the API server drops: the stored overhead, sidecars and status count', () => {
    const stored = runningPod('web', 'n1', {
      initContainers: [nativeSidecar('mesh', { requests: { cpu: '200m' } })],
      containers: [container('app', { requests: { cpu: '1' } })],
      overhead: { cpu: '100m' },
    });
    const sent = withCpu(stored, '1500m');
    delete sent.spec.overhead;
    delete sent.spec.initContainers[0].restartPolicy;
    sent.status = { phase: 'Running', conditions: [{ type: 'PodResizePending', reason: 'Infeasible' }] };
    const resized = readResizedPod(stored, sent)!;
    expect(resized.spec!.overhead).toEqual({ cpu: '100m' });
    expect(resized.spec!.initContainers![0]!.restartPolicy).toBe('Always');
    expect(resized.status).toBe(stored.status);
    expect(planResize(stored, sent)).toMatchObject({ held: { cpu: 1300n }, resized: { cpu: 1800n } });
  });

  it('pod-level resources: as sent, or the stored ones when the body leaves them out', () => {
    const stored = runningPod('web', 'n1', { initContainers: null, containers: [container('app')] }) as PodLike;
    stored.spec!.resources = { requests: { cpu: '1' }, limits: { cpu: '2' } };
    const sent = structuredClone(stored);
    sent.spec!.resources = { requests: { cpu: '2' }, limits: { cpu: '2' } };
    expect(planResize(stored, sent)).toMatchObject({ held: { cpu: 1000n }, resized: { cpu: 2000n } });
    delete sent.spec!.resources;
    expect(planResize(stored, sent)).toMatchObject({ resized: { cpu: 1000n } });
  });

  it('none when the API server refuses the body: a container added, removed or renamed', () => {
    const stored = resizingPod('web', 'n1', { desired: '1', allocated: '1' });
    const renamed = withCpu(stored, '2');
    renamed.spec.containers[0].name = 'other';
    const added = withCpu(stored, '2');
    added.spec.containers.push(container('extra', { requests: { cpu: '1' } }));
    const removed = structuredClone(stored);
    removed.spec.containers = [];
    for (const sent of [renamed, added, removed]) expect(planResize(stored, sent)).toBeNull();
  });
});

describe('pods/resize: edges found by mutation testing (docs/testing.md)', () => {
  it('an init container list added, an init container renamed, a container that is no object: refused', () => {
    const stored = resizingPod('web', 'n1', { desired: '1', allocated: '1' });
    delete stored.spec.initContainers;
    const addsInit = withCpu(stored, '2');
    addsInit.spec.initContainers = [nativeSidecar('mesh', { requests: { cpu: '100m' } })];
    expect(planResize(stored, addsInit)).toBeNull();
    const noInit = withCpu(stored, '2');
    noInit.spec.initContainers = [];
    expect(planResize(stored, noInit)).not.toBeNull();
    const withSidecar = structuredClone(stored);
    withSidecar.spec.initContainers = [nativeSidecar('mesh', { requests: { cpu: '100m' } })];
    const renamedInit = withCpu(withSidecar, '2');
    renamedInit.spec.initContainers[0].name = 'other';
    expect(planResize(withSidecar, renamedInit)).toBeNull();
    const notAnObject = withCpu(stored, '2');
    notAnObject.spec.containers[0] = null;
    expect(planResize(stored, notAnObject)).toBeNull();
  });

  it('a stored pod and a body without spec: no containers, no pod-level resources', () => {
    const resized = readResizedPod({}, {});
    expect(resized).not.toBeNull();
    expect(Object.hasOwn(resized!.spec!, 'resources')).toBe(false);
    expect(resized!.spec!.containers).toBeUndefined();
  });
});
