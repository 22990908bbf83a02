import { describe, expect, it } from 'vitest';
import { readShutdownDelayMs } from './lifecycle.service.js';

describe('readShutdownDelayMs', () => {
  it('drains 5 s in a cluster and stops at once outside one', () => {
    expect(readShutdownDelayMs({ KUBERNETES_SERVICE_HOST: '10.96.0.1' })).toBe(5_000);
    expect(readShutdownDelayMs({})).toBe(0);
  });

  it('takes OVERCOMMIT_SHUTDOWN_DELAY_MS wherever it runs, and names a bad value', () => {
    expect(readShutdownDelayMs({ OVERCOMMIT_SHUTDOWN_DELAY_MS: '200' })).toBe(200);
    expect(readShutdownDelayMs({ OVERCOMMIT_SHUTDOWN_DELAY_MS: '0', KUBERNETES_SERVICE_HOST: '10.96.0.1' })).toBe(0);
    expect(() => readShutdownDelayMs({ OVERCOMMIT_SHUTDOWN_DELAY_MS: '5s' })).toThrow('OVERCOMMIT_SHUTDOWN_DELAY_MS must be a non-negative integer, got "5s"');
  });
});
