import { describe, expect, it } from 'vitest';
import { BodyBudget, readDeclaredBodyBytes, readServerLimits } from './server-limits.js';

describe('readServerLimits', () => {
  it('has defaults an API server call never reaches', () => {
    expect(readServerLimits({})).toEqual({
      handshakeTimeoutMs: 5_000,
      headersTimeoutMs: 5_000,
      requestTimeoutMs: 10_000,
      keepAliveMs: 95_000,
      maxConnections: 1_000,
      maxBodyBytesInFlight: 64 * 1024 * 1024,
    });
  });

  it('reads each variable, 0 meaning no limit, and names a bad one', () => {
    expect(readServerLimits({ OVERCOMMIT_MAX_CONNECTIONS: '0', OVERCOMMIT_REQUEST_TIMEOUT_MS: ' 20000 ' })).toMatchObject({
      maxConnections: 0,
      requestTimeoutMs: 20_000,
    });
    expect(() => readServerLimits({ OVERCOMMIT_HEADERS_TIMEOUT_MS: '5s' })).toThrow('OVERCOMMIT_HEADERS_TIMEOUT_MS must be a non-negative integer, got "5s"');
    expect(() => readServerLimits({ OVERCOMMIT_MAX_BODY_BYTES_IN_FLIGHT: '-1' })).toThrow('OVERCOMMIT_MAX_BODY_BYTES_IN_FLIGHT');
    expect(() => readServerLimits({ OVERCOMMIT_HEADERS_TIMEOUT_MS: '20000' })).toThrow(
      'OVERCOMMIT_HEADERS_TIMEOUT_MS (20000) must not exceed OVERCOMMIT_REQUEST_TIMEOUT_MS (10000)',
    );
  });
});

describe('readDeclaredBodyBytes', () => {
  it('counts the declared length up to the body limit, a chunked body as the limit, none as 0', () => {
    expect(readDeclaredBodyBytes({ 'content-length': '1200' }, 3_000)).toBe(1200);
    expect(readDeclaredBodyBytes({ 'content-length': '9000' }, 3_000)).toBe(3_000);
    expect(readDeclaredBodyBytes({ 'transfer-encoding': 'chunked' }, 3_000)).toBe(3_000);
    expect(readDeclaredBodyBytes({}, 3_000)).toBe(0);
    expect(readDeclaredBodyBytes({ 'content-length': 'x' }, 3_000)).toBe(0);
  });
});

describe('BodyBudget', () => {
  it('refuses what would pass the limit and takes back what is released', () => {
    const budget = new BodyBudget(10);
    expect(budget.tryReserve(6)).toBe(true);
    expect(budget.tryReserve(5)).toBe(false);
    expect(budget.tryReserve(4)).toBe(true);
    expect(budget.tryReserve(0)).toBe(true);
    budget.release(6);
    expect(budget.bytesInFlight).toBe(4);
    expect(budget.tryReserve(6)).toBe(true);
    expect(new BodyBudget(0).tryReserve(1e12)).toBe(true);
  });
});
