import { describe, expect, it } from 'vitest';
import { matchesLabelSelector } from './label-selector.js';

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
