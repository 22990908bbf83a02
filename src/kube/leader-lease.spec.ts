import { describe, expect, it } from 'vitest';
import type { V1Lease } from '@kubernetes/client-node';
import { DEFAULT_LEASE_TIMING, leaseTaken, planLease } from './leader-lease.js';

const lease = (holderIdentity?: string, renewTime?: string, leaseDurationSeconds = 15): V1Lease => ({
  metadata: { name: 'l', namespace: 'n', resourceVersion: '7' },
  spec: { holderIdentity, renewTime: renewTime as never, leaseDurationSeconds },
});

describe('planLease', () => {
  it('takes a Lease nobody holds, and renews its own', () => {
    expect(planLease(lease(), 'a', undefined, 0).take).toBe(true);
    expect(planLease(lease('a', 't1'), 'a', undefined, 0).take).toBe(true);
  });

  it("waits out another holder's lease duration on its own clock, from when it first saw the record", () => {
    const first = planLease(lease('b', 't1'), 'a', undefined, 1_000);
    expect(first).toEqual({ take: false, observed: { record: 'b@t1', since: 1_000 } });
    expect(planLease(lease('b', 't1'), 'a', first.observed, 15_999).take).toBe(false);
    expect(planLease(lease('b', 't1'), 'a', first.observed, 16_000).take).toBe(true);
  });

  it('a renewal by the holder restarts the clock, whatever the renewTime says', () => {
    const first = planLease(lease('b', '2000-01-01T00:00:00.000000Z'), 'a', undefined, 0);
    const renewed = planLease(lease('b', '2000-01-01T00:00:02.000000Z'), 'a', first.observed, 14_000);
    expect(renewed).toEqual({ take: false, observed: { record: 'b@2000-01-01T00:00:02.000000Z', since: 14_000 } });
    expect(planLease(lease('b', '2000-01-01T00:00:02.000000Z'), 'a', renewed.observed, 28_999).take).toBe(false);
  });
});

describe('leaseTaken', () => {
  const now = new Date('2026-01-01T00:00:00.123Z');

  it('writes holder, duration and times with microseconds, as the API server parses MicroTime', () => {
    const taken = leaseTaken(lease(), 'a', DEFAULT_LEASE_TIMING, now);
    expect(JSON.parse(JSON.stringify(taken.spec))).toEqual({
      holderIdentity: 'a',
      leaseDurationSeconds: 15,
      renewTime: '2026-01-01T00:00:00.123000Z',
      acquireTime: '2026-01-01T00:00:00.123000Z',
      leaseTransitions: 0,
    });
    expect(taken.metadata?.resourceVersion).toBe('7');
  });

  it('counts a transition when taken from another holder, keeps acquireTime on renewal', () => {
    const fromB = { ...lease('b', 'x'), spec: { ...lease('b', 'x').spec, leaseTransitions: 3 } };
    expect(leaseTaken(fromB, 'a', DEFAULT_LEASE_TIMING, now).spec?.leaseTransitions).toBe(4);
    const mine = { ...lease('a', 'x'), spec: { ...lease('a', 'x').spec, acquireTime: new Date('2025-12-31T00:00:00Z'), leaseTransitions: 4 } };
    const renewed = JSON.parse(JSON.stringify(leaseTaken(mine, 'a', DEFAULT_LEASE_TIMING, now).spec));
    expect(renewed).toMatchObject({ acquireTime: '2025-12-31T00:00:00.000000Z', renewTime: '2026-01-01T00:00:00.123000Z', leaseTransitions: 4 });
  });
});
