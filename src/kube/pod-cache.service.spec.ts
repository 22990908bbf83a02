import { describe, expect, it } from 'vitest';
import { FLOOR_READY_WAIT_MS, floorCacheReady } from './pod-cache.service.js';

describe('floorCacheReady (readiness while the commitment floor reads the pod cache)', () => {
  const started = 1_000_000;

  it('waits for the first list only while the floor reads the cache', () => {
    expect(floorCacheReady({ floorReads: true, synced: false, startedAt: started, now: started + 1 })).toBe(false);
    expect(floorCacheReady({ floorReads: true, synced: true, startedAt: started, now: started + 1 })).toBe(true);
    expect(floorCacheReady({ floorReads: false, synced: false, startedAt: started, now: started + 1 })).toBe(true);
    // Outside a cluster the cache never starts and the floor never reads it.
    expect(floorCacheReady({ floorReads: false, synced: false, startedAt: undefined, now: started })).toBe(true);
  });

  it('serves anyway 60 s after the cache started, listed or not', () => {
    expect(FLOOR_READY_WAIT_MS).toBe(60_000);
    expect(floorCacheReady({ floorReads: true, synced: false, startedAt: started, now: started + 59_999 })).toBe(false);
    expect(floorCacheReady({ floorReads: true, synced: false, startedAt: started, now: started + 60_000 })).toBe(true);
  });
});
