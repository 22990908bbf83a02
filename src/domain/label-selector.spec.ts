import { plainToInstance } from 'class-transformer';
import { validateSync } from 'class-validator';
import { describe, expect, it } from 'vitest';
import { LabelSelector, matchesLabelSelector } from './label-selector.js';

describe('matchesLabelSelector', () => {
  it('treats keys named like Object.prototype members as labels like any other', () => {
    for (const key of ['constructor', 'toString', 'hasOwnProperty', '__proto__']) {
      const labels = JSON.parse(`{"${key}":"x"}`);
      expect(matchesLabelSelector({ matchLabels: JSON.parse(`{"${key}":"x"}`) }, labels), key).toBe(true);
      expect(matchesLabelSelector({ matchLabels: JSON.parse(`{"${key}":"x"}`) }, {}), key).toBe(false);
      expect(matchesLabelSelector({ matchExpressions: [{ key, operator: 'Exists' }] }, {}), key).toBe(false);
      expect(matchesLabelSelector({ matchExpressions: [{ key, operator: 'DoesNotExist' }] }, {}), key).toBe(true);
      expect(matchesLabelSelector({ matchExpressions: [{ key, operator: 'In', values: ['x'] }] }, labels), key).toBe(true);
      expect(matchesLabelSelector({ matchExpressions: [{ key, operator: 'NotIn', values: ['x'] }] }, {}), key).toBe(true);
    }
  });
});

describe('matchesLabelSelector, as labels.Selector evaluates metav1.LabelSelector', () => {
  const labels = { app: 'shop', tier: 'web' };

  it('an empty selector matches every object, one without labels included', () => {
    expect(matchesLabelSelector({}, labels)).toBe(true);
    expect(matchesLabelSelector({ matchLabels: {}, matchExpressions: [] }, undefined)).toBe(true);
  });

  it('matchLabels: every pair present with its value', () => {
    expect(matchesLabelSelector({ matchLabels: { app: 'shop' } }, labels)).toBe(true);
    expect(matchesLabelSelector({ matchLabels: { app: 'shop', tier: 'web' } }, labels)).toBe(true);
    expect(matchesLabelSelector({ matchLabels: { app: 'shop', tier: 'db' } }, labels)).toBe(false);
    expect(matchesLabelSelector({ matchLabels: { zone: 'a' } }, labels)).toBe(false);
    expect(matchesLabelSelector({ matchLabels: { app: 'shop' } }, undefined)).toBe(false);
    expect(matchesLabelSelector({ matchLabels: { app: '' } }, { app: '' })).toBe(true);
  });

  it.each([
    ['In, value listed', { key: 'tier', operator: 'In', values: ['web', 'db'] }, true],
    ['In, value not listed', { key: 'tier', operator: 'In', values: ['db'] }, false],
    ['In, label absent', { key: 'zone', operator: 'In', values: ['a'] }, false],
    ['NotIn, value listed', { key: 'tier', operator: 'NotIn', values: ['web'] }, false],
    ['NotIn, value not listed', { key: 'tier', operator: 'NotIn', values: ['db'] }, true],
    ['NotIn, label absent', { key: 'zone', operator: 'NotIn', values: ['a'] }, true],
    ['Exists, present', { key: 'app', operator: 'Exists' }, true],
    ['Exists, absent', { key: 'zone', operator: 'Exists' }, false],
    ['DoesNotExist, present', { key: 'app', operator: 'DoesNotExist' }, false],
    ['DoesNotExist, absent', { key: 'zone', operator: 'DoesNotExist' }, true],
  ] as const)('matchExpressions %s', (_, requirement, matches) => {
    expect(
      matchesLabelSelector({ matchExpressions: [{ ...requirement, values: 'values' in requirement ? [...requirement.values] : undefined }] }, labels),
    ).toBe(matches);
  });

  it('every requirement and every pair must hold (AND)', () => {
    const tierWeb = { key: 'tier', operator: 'In' as const, values: ['web'] };
    const noZone = { key: 'zone', operator: 'DoesNotExist' as const };
    expect(matchesLabelSelector({ matchLabels: { app: 'shop' }, matchExpressions: [tierWeb, noZone] }, labels)).toBe(true);
    expect(matchesLabelSelector({ matchLabels: { app: 'shop' }, matchExpressions: [tierWeb, noZone] }, { ...labels, zone: 'a' })).toBe(false);
    expect(matchesLabelSelector({ matchLabels: { app: 'blog' }, matchExpressions: [tierWeb] }, labels)).toBe(false);
  });
});

describe('LabelSelector validation', () => {
  const problems = (selector: unknown) =>
    validateSync(plainToInstance(LabelSelector, selector)).flatMap(function flatten(error): string[] {
      return [...Object.values(error.constraints ?? {}), ...(error.children ?? []).flatMap(flatten)];
    });

  it('accepts what the API server accepts', () => {
    expect(problems({ matchLabels: { 'example.com/team': 'a-1', app: '' }, matchExpressions: [{ key: 'tier', operator: 'Exists' }] })).toEqual([]);
    expect(problems({ matchExpressions: [{ key: 'tier', operator: 'NotIn', values: ['x'] }] })).toEqual([]);
  });

  it('refuses bad keys and values, values with Exists, none with In, and unknown operators', () => {
    expect(problems({ matchLabels: { 'Bad Key': 'a' } })).toEqual(['matchLabels must map label keys to label values (strings of at most 63 characters)']);
    expect(problems({ matchLabels: { app: 'x'.repeat(64) } })).toEqual(['matchLabels must map label keys to label values (strings of at most 63 characters)']);
    expect(problems({ matchLabels: { app: 'no spaces!' } })).toEqual(['matchLabels must map label keys to label values (strings of at most 63 characters)']);
    expect(problems({ matchExpressions: [{ key: 'tier', operator: 'Exists', values: ['x'] }] })).toEqual(['values must be empty for Exists and DoesNotExist']);
    expect(problems({ matchExpressions: [{ key: 'tier', operator: 'In', values: [] }] })).toEqual(['values must be non-empty for In and NotIn']);
    expect(problems({ matchExpressions: [{ key: 'tier', operator: 'Near', values: ['x'] }] })).toEqual([
      'operator must be one of the following values: In, NotIn, Exists, DoesNotExist',
      'values must be empty for Exists and DoesNotExist',
    ]);
    expect(problems({ matchExpressions: [{ key: '-tier', operator: 'Exists' }] })).toEqual(['key must be a valid label key']);
  });
});
