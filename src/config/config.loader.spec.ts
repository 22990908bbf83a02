import { describe, expect, it } from 'vitest';
import { DEFAULT_CONFIG, parseConfig } from './config.loader.js';

describe('parseConfig', () => {
  it('accepts the documented example and freezes it', () => {
    const result = parseConfig(`
nodes:
  defaultRatios: { cpu: 1.5, memory: 1 }
  pools:
    - name: batch
      nodeSelector: { matchLabels: { node-pool: batch } }
      ratios: { cpu: 3, memory: 1.2 }
`);
    expect(result.ok).toBe(true);
    if (!result.ok) return;
    expect(result.value.nodes.defaultRatios.cpu).toBe(1.5);
    expect(result.value.nodes.pools[0].ratios.memory).toBe(1.2);
    expect(Object.isFrozen(result.value.nodes.pools[0].ratios)).toBe(true);
  });

  it('treats an empty document as the defaults', () => {
    const result = parseConfig('');
    expect(result).toEqual({ ok: true, value: DEFAULT_CONFIG });
  });

  it('names every bad field by its path', () => {
    const result = parseConfig(`
nodes:
  defaultRatios: { cpu: 0.5, gpu: 2 }
  pools:
    - name: Bad_Name
      nodeSelector: { matchExpressions: [{ key: zone, operator: In }] }
      ratios: { memory: 11 }
`);
    expect(result.ok).toBe(false);
    if (result.ok) return;
    const text = result.errors.join('\n');
    expect(text).toMatch(/nodes\.defaultRatios\.cpu: cpu must not be less than 1/);
    expect(text).toMatch(/nodes\.defaultRatios\.gpu: property gpu should not exist/);
    expect(text).toMatch(/nodes\.pools\[0\]\.name: name must be a DNS label/);
    expect(text).toMatch(/nodes\.pools\[0\]\.nodeSelector\.matchExpressions\[0\]\.values: values must be non-empty/);
    expect(text).toMatch(/nodes\.pools\[0\]\.ratios\.memory: memory must not be greater than 10/);
  });

  it('reports YAML syntax errors and non-numeric ratios', () => {
    const syntax = parseConfig('nodes: [unclosed');
    expect(syntax.ok).toBe(false);
    if (!syntax.ok) expect(syntax.errors[0]).toMatch(/^\(yaml\): /);
    const type = parseConfig('nodes: { defaultRatios: { cpu: "1.5" } }');
    expect(type.ok).toBe(false);
    if (!type.ok) expect(type.errors.join()).toMatch(/nodes\.defaultRatios\.cpu: cpu must be a number/);
  });

  it('rejects unknown top-level keys, duplicate pool names and values on Exists', () => {
    const result = parseConfig(`
nodez: {}
nodes:
  pools:
    - { name: a, nodeSelector: {}, ratios: {} }
    - { name: a, nodeSelector: { matchExpressions: [{ key: x, operator: Exists, values: [y] }] }, ratios: {} }
`);
    expect(result.ok).toBe(false);
    if (result.ok) return;
    const text = result.errors.join('\n');
    expect(text).toMatch(/nodez: property nodez should not exist/);
    expect(text).toMatch(/nodes\.pools: pool names must be unique/);
    expect(text).toMatch(/values must be empty for Exists and DoesNotExist/);
  });
});
