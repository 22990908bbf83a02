import { describe, expect, it } from 'vitest';
import { DEFAULT_CONFIG, parseConfig } from './overcommit.config.js';

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

  it('defaults nodes.reconcile to on at 100 nodes a second, and names a bad value by its path', () => {
    const defaults = parseConfig('nodes: {}');
    expect(defaults.ok && defaults.value.nodes.reconcile).toEqual({ enabled: true, maxNodesPerSecond: 100 });
    const set = parseConfig('nodes: { reconcile: { enabled: false, maxNodesPerSecond: 1000 } }');
    expect(set.ok && set.value.nodes.reconcile).toEqual({ enabled: false, maxNodesPerSecond: 1000 });
    for (const bad of ['0', '1001', '2.5', '"100"']) {
      const result = parseConfig(`nodes: { reconcile: { maxNodesPerSecond: ${bad} } }`);
      expect(result.ok, bad).toBe(false);
      if (!result.ok) expect(result.errors.join()).toMatch(/nodes\.reconcile\.maxNodesPerSecond: maxNodesPerSecond must be an integer from 1 to 1000/);
    }
    const unknown = parseConfig('nodes: { reconcile: { enabled: "yes", rate: 5 } }');
    expect(unknown.ok).toBe(false);
    if (!unknown.ok) {
      expect(unknown.errors.join('\n')).toMatch(/nodes\.reconcile\.enabled: enabled must be a boolean value/);
      expect(unknown.errors.join('\n')).toMatch(/nodes\.reconcile\.rate: property rate should not exist/);
    }
  });

  it('reports YAML syntax errors and non-numeric ratios', () => {
    const syntax = parseConfig('nodes: [unclosed');
    expect(syntax.ok).toBe(false);
    if (!syntax.ok) expect(syntax.errors[0]).toMatch(/^\(yaml\): /);
    const type = parseConfig('nodes: { defaultRatios: { cpu: "1.5" } }');
    expect(type.ok).toBe(false);
    if (!type.ok) expect(type.errors.join()).toMatch(/nodes\.defaultRatios\.cpu: cpu must be a number/);
  });

  it("reads a pool's exclusiveCpus as a boolean, and rejects anything else", () => {
    const ok = parseConfig('nodes: { pools: [{ name: a, nodeSelector: {}, ratios: { cpu: 2 }, exclusiveCpus: true }] }');
    expect(ok.ok && ok.value.nodes?.pools[0].exclusiveCpus).toBe(true);
    const bad = parseConfig('nodes: { pools: [{ name: a, nodeSelector: {}, ratios: {}, exclusiveCpus: "yes" }] }');
    expect(bad.ok).toBe(false);
    if (!bad.ok) expect(bad.errors.join()).toMatch(/nodes\.pools\[0\]\.exclusiveCpus: exclusiveCpus must be a boolean value/);
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

describe('parseConfig with keys named like Object.prototype members', () => {
  const KEYS = ['constructor', 'toString', 'hasOwnProperty', 'valueOf'];

  it('keeps them as label keys in every selector, exactly as written', () => {
    const labels = Object.fromEntries(KEYS.map((key, i) => [key, `v${i}`]));
    const selector = `{ matchLabels: ${JSON.stringify(labels)}, matchExpressions: [{ key: constructor, operator: Exists }] }`;
    const result = parseConfig(`
nodes:
  pools: [{ name: a, nodeSelector: ${selector}, ratios: { cpu: 2 } }]
pods: { namespaceSelector: ${selector} }
sidecars: { namespaceSelector: ${selector} }
`);
    expect(result.ok, JSON.stringify(result)).toBe(true);
    if (!result.ok) return;
    for (const selected of [result.value.nodes.pools[0].nodeSelector, result.value.pods.namespaceSelector, result.value.sidecars.namespaceSelector]) {
      expect(Object.entries(selected.matchLabels!)).toEqual(Object.entries(labels));
      expect(selected.matchExpressions![0].key).toBe('constructor');
    }
  });

  it('keeps them in sidecar templates, exactly as written', () => {
    const result = parseConfig(`
sidecars:
  templates:
    - name: csi
      volumes: [{ name: data, csi: { driver: csi.example.com, volumeAttributes: { constructor: x, toString: y, __proto__: z } } }]
`);
    expect(result.ok, JSON.stringify(result)).toBe(true);
    if (!result.ok) return;
    const attributes = result.value.sidecars.templates[0].volumes![0].csi.volumeAttributes;
    expect(Object.entries(attributes)).toEqual([
      ['constructor', 'x'],
      ['toString', 'y'],
      ['__proto__', 'z'],
    ]);
  });

  it('rejects them, by path, where the schema declares fixed fields', () => {
    for (const key of [...KEYS, '__proto__']) {
      const result = parseConfig(
        `${key}: 1\nnodes: { ${key}: 1, defaultRatios: { ${key}: 2 }, pools: [{ name: a, nodeSelector: { ${key}: {} }, ratios: {} }] }\n`,
      );
      expect(result.ok, key).toBe(false);
      if (result.ok) continue;
      for (const path of [key, `nodes.${key}`, `nodes.defaultRatios.${key}`, `nodes.pools[0].nodeSelector.${key}`]) {
        expect(result.errors, key).toContain(`${path}: property ${key} should not exist`);
      }
    }
  });

  it('rejects a value nested deeper than the schema, and one deeper than the stack, without throwing', () => {
    const deep = (depth: number) => `${'['.repeat(depth)}1${']'.repeat(depth)}`;
    const inRatio = parseConfig(`nodes: { defaultRatios: { cpu: ${deep(500)} } }`);
    expect(inRatio.ok).toBe(false);
    if (!inRatio.ok) expect(inRatio.errors.every((line) => line.startsWith('nodes.defaultRatios.cpu: cpu must '))).toBe(true);
    for (const depth of [500, 5_000]) {
      const inTemplate = parseConfig(`sidecars: { templates: [{ name: t, containers: [{ name: c, image: i, args: ${deep(depth)} }] }] }`);
      expect(inTemplate.ok, String(depth)).toBe(false);
    }
  });

  it('lists at most 20 problems and counts the rest', () => {
    const result = parseConfig(`nodes: { ${Array.from({ length: 1_000 }, (_, i) => `k${i}: 1`).join(', ')} }`);
    expect(result.ok).toBe(false);
    if (result.ok) return;
    expect(result.errors).toHaveLength(21);
    expect(result.errors[0]).toBe('nodes.k0: property k0 should not exist');
    expect(result.errors[20]).toBe('... and 980 more problems');
  });
});
