import { describe, expect, it } from 'vitest';
import { nodeWindowMs } from './coalescing-window.js';

describe('nodeWindowMs', () => {
  it('fixed per node, the period less up to 10 % in whole seconds (4m30s–5m for 5m, docs/status-coalescing.md), spread over it', () => {
    // worker-1's window, as status-coalescing.rules.spec.ts's WINDOW_MS takes it.
    expect(nodeWindowMs('worker-1', 300_000)).toBe(298_000);
    // Spread: a thousand nodes take every whole second of the range, 31 of them for 5m, 7 for 1m.
    for (const [period, shortest, seconds] of [
      [300_000, 270_000, 31],
      [60_000, 54_000, 7],
    ]) {
      const windows = Array.from({ length: 1000 }, (_, i) => nodeWindowMs(`node-${i}`, period));
      for (const window of windows) {
        expect(window % 1_000).toBe(0);
        expect(window).toBeGreaterThanOrEqual(shortest);
        expect(window).toBeLessThanOrEqual(period);
      }
      expect(new Set(windows).size).toBe(seconds);
    }
  });

  it('at least one second, for a report period shorter than one', () => {
    expect(nodeWindowMs('worker-1', 400)).toBe(1_000);
  });
});
