import { describe, expect, it, vi } from 'vitest';
import { Memo } from './memo.js';

describe('Memo', () => {
  it('computes a key once while it is held', () => {
    const memo = new Memo<string, number>(4);
    const compute = vi.fn((key: string) => key.length);
    expect(memo.get('abc', compute)).toBe(3);
    expect(memo.get('abc', compute)).toBe(3);
    expect(compute).toHaveBeenCalledTimes(1);
  });

  it('memoises undefined and null results too', () => {
    const memo = new Memo<string, null | undefined>(4);
    const compute = vi.fn(() => undefined);
    memo.get('a', compute);
    memo.get('a', compute);
    expect(compute).toHaveBeenCalledTimes(1);
  });

  it('empties when `limit` entries are held', () => {
    const memo = new Memo<number, number>(2);
    const compute = vi.fn((key: number) => key * 2);
    memo.get(1, compute);
    memo.get(2, compute);
    memo.get(3, compute); // full: emptied, then 3 held
    memo.get(3, compute);
    memo.get(1, compute);
    expect(compute.mock.calls.map(([key]) => key)).toEqual([1, 2, 3, 1]);
  });

  it('empties when the keys held reach `maxKeyChars` characters, and never holds a longer key', () => {
    const memo = new Memo<string, number>(1_000, 100);
    const compute = vi.fn((key: string) => key.length);
    memo.get('a'.repeat(60), compute);
    memo.get('a'.repeat(60), compute);
    memo.get('b'.repeat(60), compute); // 120 characters: emptied, then b held
    memo.get('b'.repeat(60), compute);
    memo.get('a'.repeat(60), compute);
    expect(compute).toHaveBeenCalledTimes(3);

    const huge = 'x'.repeat(1 << 20);
    expect(memo.get(huge, compute)).toBe(1 << 20);
    expect(memo.get(huge, compute)).toBe(1 << 20);
    expect(compute).toHaveBeenCalledTimes(5); // computed every time, never held
    memo.get('a'.repeat(60), compute); // and what was held is still there
    expect(compute).toHaveBeenCalledTimes(5);
  });

  it('holds at most limit × 512 key characters by default', () => {
    const memo = new Memo<string, number>(4);
    const compute = vi.fn((key: string) => key.length);
    memo.get('k'.repeat(2_049), compute);
    memo.get('k'.repeat(2_049), compute);
    expect(compute).toHaveBeenCalledTimes(2);
    memo.get('k'.repeat(2_048), compute);
    memo.get('k'.repeat(2_048), compute);
    expect(compute).toHaveBeenCalledTimes(3);
  });
});
