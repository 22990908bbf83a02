import { describe, expect, it } from 'vitest';
import { readEnvInteger } from './env-integer.js';

describe('readEnvInteger', () => {
  it('takes the fallback when unset or blank, else the integer (trimmed)', () => {
    expect(readEnvInteger({}, 'N', { fallback: 7 })).toBe(7);
    expect(readEnvInteger({ N: '  ' }, 'N', { fallback: 7 })).toBe(7);
    expect(readEnvInteger({ N: ' 0 ' }, 'N', { fallback: 7 })).toBe(0);
    expect(readEnvInteger({ N: '65535' }, 'N', { fallback: 7, max: 65535 })).toBe(65535);
  });

  it('names the variable, the bound and the value of anything else', () => {
    expect(() => readEnvInteger({ N: '5s' }, 'N', { fallback: 1 })).toThrow('N must be a non-negative integer, got "5s"');
    expect(() => readEnvInteger({ N: '-1' }, 'N', { fallback: 1 })).toThrow('N must be a non-negative integer, got "-1"');
    expect(() => readEnvInteger({ N: '0' }, 'N', { fallback: 1, min: 1, expected: 'a positive integer' })).toThrow('N must be a positive integer, got "0"');
    expect(() => readEnvInteger({ P: '65536' }, 'P', { fallback: 1, max: 65535, expected: 'a port number' })).toThrow('P must be a port number, got "65536"');
    for (const bad of ['1.5', '1e400', 'NaN', '9007199254740993']) expect(() => readEnvInteger({ N: bad }, 'N', { fallback: 1 }), bad).toThrow(/^N must be/);
  });
});
