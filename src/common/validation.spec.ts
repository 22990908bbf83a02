import { Type } from 'class-transformer';
import { IsArray, IsObject, IsOptional, IsString, ValidateNested } from 'class-validator';
import { describe, expect, it } from 'vitest';
import { MAX_PROBLEMS, validateAs } from './validation.js';

class Leaf {
  @IsString() name: string;
}

class Root {
  @IsOptional() @IsObject() @ValidateNested() @Type(() => Leaf) leaf?: Leaf;
  @IsOptional() @IsArray() @ValidateNested({ each: true }) @Type(() => Leaf) leaves?: Leaf[];
  @IsOptional() @IsObject() labels?: Record<string, string>;
}

describe('validateAs', () => {
  it('builds nested classes and keeps every other value as parsed, whatever its keys', () => {
    const labels = JSON.parse('{"constructor":"a","toString":"b","__proto__":"c"}');
    const result = validateAs(Root, { leaf: { name: 'x' }, leaves: [{ name: 'y' }], labels });
    expect(result.ok).toBe(true);
    if (!result.ok) return;
    expect(result.value.leaf).toBeInstanceOf(Leaf);
    expect(result.value.leaves![0]).toBeInstanceOf(Leaf);
    expect(result.value.labels).toBe(labels);
  });

  it('names undeclared keys, including those named like Object.prototype members, at any declared depth', () => {
    const result = validateAs(Root, JSON.parse('{"constructor":{"name":1},"leaf":{"name":"x","toString":"y"},"leaves":[{"name":"z","__proto__":{}}]}'));
    expect(result).toEqual({
      ok: false,
      errors: [
        'constructor: property constructor should not exist',
        'leaf.toString: property toString should not exist',
        'leaves[0].__proto__: property __proto__ should not exist',
      ],
    });
  });

  it('answers an array where the schema has an object, and the reverse, without looking inside', () => {
    const many = Array.from({ length: 100_000 }, () => ({ name: 1 }));
    const result = validateAs(Root, { leaf: many, leaves: { name: 'x' } });
    expect(result).toEqual({ ok: false, errors: ['leaf: leaf must be an object', 'leaves: leaves must be an array'] });
  });

  it('lists at most MAX_PROBLEMS problems and counts the rest', () => {
    const result = validateAs(Root, { leaves: Array.from({ length: 50 }, () => ({ name: 1 })) });
    expect(result.ok).toBe(false);
    if (result.ok) return;
    expect(result.errors).toHaveLength(MAX_PROBLEMS + 1);
    expect(result.errors.at(-1)).toBe(`... and ${50 - MAX_PROBLEMS} more problems`);
  });
});
