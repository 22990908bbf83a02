import { describe, expect, it } from 'vitest';
import { IDLE_GRACE_MS, planDrainClose } from './server-drain.js';

describe('planDrainClose', () => {
  const at = 10_000;

  it('never closes a connection with a call in flight', () => {
    expect(planDrainClose({ inFlight: 1, idleSince: 0 }, at)).toBe(false);
    expect(planDrainClose({ inFlight: 2, idleSince: 0 }, at)).toBe(false);
  });

  it('closes a connection with nothing in flight once idle (since accepted or answered) for the grace, not before', () => {
    expect(planDrainClose({ inFlight: 0, idleSince: at - IDLE_GRACE_MS + 1 }, at)).toBe(false);
    expect(planDrainClose({ inFlight: 0, idleSince: at - IDLE_GRACE_MS }, at)).toBe(true);
  });
});
