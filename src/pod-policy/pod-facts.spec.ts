import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { container, runningPod } from '../../test/fixtures/pods.js';
import { Outcomes, runs } from '../../test/support/property.js';
import { PodsByNode } from '../kube/pods-by-node.js';
import { scheduledPodRequests, type PodLike } from '../domain/pod-resources.js';

const Mi = (n: number) => BigInt(n) * 1024n * 1024n;

function pod(name: string, node: string, cpu: string, memory = '64Mi', phase = 'Running'): PodLike {
  const p = runningPod(name, node, { initContainers: null, containers: [container('app', { requests: { cpu, memory } })] });
  p.status.phase = phase;
  return p;
}

describe('PodsByNode', () => {
  it('sums the effective requests of the non-terminal pods bound to each node', () => {
    const index = new PodsByNode();
    index.upsert(pod('a', 'n1', '100m'));
    index.upsert(pod('b', 'n1', '1', '1Gi'));
    index.upsert(pod('c', 'n2', '300m'));
    index.upsert(pod('done', 'n1', '4', '4Gi', 'Succeeded'));
    const pending = pod('pending', 'n1', '8');
    delete pending.spec!.nodeName;
    index.upsert(pending);
    expect(index.usage('n1')).toEqual({ requests: { pods: 2n, cpu: 1100n, memory: Mi(1088) } });
    expect(index.usage('n2')).toEqual({ requests: { pods: 1n, cpu: 300n, memory: Mi(64) } });
    expect(index.usage('empty')).toEqual({ requests: { pods: 0n } });
  });

  it('sums the exclusive CPUs of the Guaranteed pods with integer cpu, following moves and completion, excluding a uid', () => {
    const index = new PodsByNode();
    const guaranteed = (name: string, node: string, cpu: string) =>
      runningPod(name, node, { initContainers: null, containers: [container('app', { requests: { cpu, memory: '1Gi' }, limits: { cpu, memory: '1Gi' } })] });
    const two = guaranteed('two', 'n1', '2');
    index.upsert(two);
    index.upsert(guaranteed('one', 'n1', '1'));
    index.upsert(guaranteed('half', 'n1', '500m'));
    index.upsert(pod('shared', 'n1', '1'));
    expect(index.usage('n1').exclusiveCpu).toBe(3000n);
    expect(index.usage('n1', two.metadata.uid).exclusiveCpu).toBe(1000n);
    index.upsert({ ...two, spec: { ...two.spec, nodeName: 'n2' } });
    expect([index.usage('n1').exclusiveCpu, index.usage('n2').exclusiveCpu]).toEqual([1000n, 2000n]);
    index.upsert({ ...two, spec: { ...two.spec, nodeName: 'n2' }, status: { phase: 'Succeeded' } });
    expect(index.usage('n2').exclusiveCpu).toBeUndefined();
  });

  it('follows updates: binding, completion, deletion; excludes a uid on request', () => {
    const index = new PodsByNode();
    const p = pod('a', 'n1', '100m');
    const unbound = structuredClone(p);
    delete unbound.spec!.nodeName;
    index.upsert(unbound);
    expect(index.size).toBe(0);
    index.upsert(p);
    expect(index.usage('n1').requests.cpu).toBe(100n);
    expect(index.usage('n1', p.metadata!.uid).requests).toEqual({ pods: 0n });
    index.upsert({ ...p, status: { phase: 'Failed' } });
    expect(index.usage('n1').requests).toEqual({ pods: 0n });
    index.upsert(p);
    index.remove(p);
    expect(index.size).toBe(0);
  });

  it('after any sequence of informer events equals a recomputation from the surviving objects', () => {
    const event = fc.record({
      kind: fc.constantFrom('upsert', 'upsert', 'remove'),
      pod: fc.integer({ min: 0, max: 7 }),
      node: fc.constantFrom(undefined, 'n1', 'n2', 'n3'),
      phase: fc.constantFrom('Pending', 'Running', 'Succeeded', 'Failed'),
      cpu: fc.integer({ min: 0, max: 4000 }),
    });
    const seen = new Outcomes('new pod', 'pod updated', 'pod moved to another node', 'pod removed', 'unknown pod removed');
    fc.assert(
      fc.property(fc.array(event, { maxLength: 60, size: 'medium' }), (events) => {
        const index = new PodsByNode();
        const live = new Map<string, PodLike>();
        for (const e of events) {
          const uid = `uid-${e.pod}`;
          const known = live.get(uid);
          if (e.kind === 'remove') seen.add(known ? 'pod removed' : 'unknown pod removed');
          else seen.add(!known ? 'new pod' : known.spec?.nodeName !== e.node ? 'pod moved to another node' : 'pod updated');
          const p: PodLike = {
            metadata: { name: `p${e.pod}`, namespace: 'shop', uid },
            spec: { ...(e.node ? { nodeName: e.node } : {}), containers: [{ name: 'app', resources: { requests: { cpu: `${e.cpu}m` } } }] },
            status: { phase: e.phase },
          };
          if (e.kind === 'upsert') {
            index.upsert(p);
            live.set(uid, p);
          } else {
            index.remove(p);
            live.delete(uid);
          }
        }
        for (const node of ['n1', 'n2', 'n3']) {
          const expected = { pods: 0n } as Record<string, bigint>;
          for (const p of live.values()) {
            if (p.spec?.nodeName !== node || p.status?.phase === 'Succeeded' || p.status?.phase === 'Failed') continue;
            const r = scheduledPodRequests(p);
            expected.pods += 1n;
            expected.cpu = (expected.cpu ?? 0n) + r.cpu!;
          }
          expect(index.usage(node).requests).toEqual(expected);
        }
      }),
      runs(100),
    );
    // Of about 2,500 events (two seeds): 8 % updates in place, 26 % moves, 17 % removals of a live pod.
    seen.expectEach();
    seen.expectShare('pod updated', 0.03);
    seen.expectShare('pod moved to another node', 0.1);
    seen.expectShare('pod removed', 0.08);
  });
});
