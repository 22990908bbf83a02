import { describe, expect, it } from 'vitest';
import { IDLE_GRACE_MS, planDrainClose } from './server-drain.js';

describe('planDrainClose', () => {
  const at = 10_000;

  it('never closes a connection with a call in flight, listening or not', () => {
    for (const listening of [true, false]) {
      expect(planDrainClose({ inFlight: 1, used: true, idleSince: 0 }, at, listening)).toBe(false);
      expect(planDrainClose({ inFlight: 2, used: false, idleSince: 0 }, at, listening)).toBe(false);
    }
  });

  it('closes a kept-alive connection once it has been idle for the grace, not before', () => {
    for (const listening of [true, false]) {
      expect(planDrainClose({ inFlight: 0, used: true, idleSince: at - IDLE_GRACE_MS + 1 }, at, listening)).toBe(false);
      expect(planDrainClose({ inFlight: 0, used: true, idleSince: at - IDLE_GRACE_MS }, at, listening)).toBe(true);
    }
  });

  it('leaves a connection without a call yet to send it while the listeners accept; once they are closed, for the grace', () => {
    expect(planDrainClose({ inFlight: 0, used: false, idleSince: 0 }, at, true)).toBe(false);
    expect(planDrainClose({ inFlight: 0, used: false, idleSince: at - IDLE_GRACE_MS + 1 }, at, false)).toBe(false);
    expect(planDrainClose({ inFlight: 0, used: false, idleSince: at - IDLE_GRACE_MS }, at, false)).toBe(true);
  });
});
