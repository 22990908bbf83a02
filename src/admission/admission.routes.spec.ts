import { describe, expect, it } from 'vitest';
import type { AdmissionRequest, StrategyMetadata } from './admission.types.js';
import { admissionPaths, isAdmissionTarget, OTHER, planEntryRoutes, planRoutes, readPathLabel, readRoute } from './admission.routes.js';

// The rules the three strategies register (node-oversell, pod-policy, sidecars), in their order.
const nodeOversell = {
  meta: {
    name: 'node-oversell',
    entry: 'nodes',
    rules: [
      { resource: 'nodes', subResource: '', operations: ['CREATE'] },
      { resource: 'nodes', subResource: 'status', operations: ['UPDATE'] },
    ],
  },
};
const podPolicy = {
  meta: {
    name: 'pod-policy',
    entry: 'pod-policy',
    rules: [
      { resource: 'pods', subResource: '', operations: ['CREATE'] },
      { resource: 'pods', subResource: 'binding', operations: ['CREATE'] },
      { resource: 'pods', subResource: 'resize', operations: ['UPDATE'] },
    ],
  },
};
const sidecars = { meta: { name: 'sidecars', entry: 'sidecars', rules: [{ resource: 'pods', operations: ['CREATE'] }], order: 10 } };
const table = planRoutes([nodeOversell, podPolicy, sidecars] as Array<{ meta: StrategyMetadata }>);

const review = (resource: string, subResource: string | undefined, operation: string): AdmissionRequest =>
  ({ uid: 'u', kind: { group: '', version: 'v1', kind: 'X' }, resource: { group: '', version: 'v1', resource }, subResource, operation }) as AdmissionRequest;
const route = (resource: string, subResource: string | undefined, operation: string) => {
  const { resource: label, operation: op, strategies } = readRoute(table, review(resource, subResource, operation));
  return { label, op, strategies: strategies.map((s) => s.meta.name) };
};

describe('planRoutes / readRoute', () => {
  it('routes a registered review to its strategies, in order, labelled with resource/subresource', () => {
    expect(route('nodes', 'status', 'UPDATE')).toEqual({ label: 'nodes/status', op: 'UPDATE', strategies: ['node-oversell'] });
    expect(route('nodes', undefined, 'CREATE')).toEqual({ label: 'nodes', op: 'CREATE', strategies: ['node-oversell'] });
    expect(route('nodes', '', 'CREATE')).toEqual({ label: 'nodes', op: 'CREATE', strategies: ['node-oversell'] });
    expect(route('pods', undefined, 'CREATE')).toEqual({ label: 'pods', op: 'CREATE', strategies: ['pod-policy', 'sidecars'] });
    expect(route('pods', 'binding', 'CREATE')).toEqual({ label: 'pods/binding', op: 'CREATE', strategies: ['pod-policy'] });
    expect(route('pods', 'resize', 'UPDATE')).toEqual({ label: 'pods/resize', op: 'UPDATE', strategies: ['pod-policy'] });
  });

  it('a registered resource with an operation registered elsewhere keeps both labels and reaches no strategy', () => {
    expect(route('nodes', 'status', 'CREATE')).toEqual({ label: 'nodes/status', op: 'CREATE', strategies: [] });
    expect(route('pods', undefined, 'UPDATE')).toEqual({ label: 'pods', op: 'UPDATE', strategies: [] });
  });

  it('counts anything no strategy registers as "other": label values and keys never come from the request', () => {
    expect(route('nodes', 'status', 'DELETE')).toEqual({ label: 'nodes/status', op: OTHER, strategies: [] });
    expect(route('secrets', undefined, 'CREATE')).toEqual({ label: OTHER, op: 'CREATE', strategies: [] });
    expect(route('nodes', 'proxy', 'CONNECT')).toEqual({ label: OTHER, op: OTHER, strategies: [] });
    expect(route('x'.repeat(1 << 20), undefined, 'UPDATE')).toEqual({ label: OTHER, op: 'UPDATE', strategies: [] });
    for (const hostile of ['__proto__', 'constructor', 'toString', 'hasOwnProperty']) {
      expect(route(hostile, hostile, hostile)).toEqual({ label: OTHER, op: OTHER, strategies: [] });
      expect(route('nodes', hostile, 'UPDATE')).toEqual({ label: OTHER, op: 'UPDATE', strategies: [] });
    }
  });

  it('has a fixed set of labels, known at bootstrap', () => {
    const labels = new Set<string>();
    const ops = new Set<string>();
    for (let i = 0; i < 5_000; i++) {
      const { resource, operation } = readRoute(
        table,
        review(`resource-${i}`, i % 2 ? `sub-${i}` : undefined, ['CREATE', 'UPDATE', 'DELETE', 'CONNECT', `OP${i}`][i % 5]),
      );
      labels.add(resource);
      ops.add(operation);
    }
    expect([...labels]).toEqual([OTHER]);
    expect([...ops].sort()).toEqual(['CREATE', 'UPDATE', OTHER].sort());
  });

  it('answers the same route object for the same triple (nothing allocated per review)', () => {
    expect(readRoute(table, review('nodes', 'status', 'UPDATE'))).toBe(readRoute(table, review('nodes', 'status', 'UPDATE')));
    expect(readRoute(table, review('a', undefined, 'UPDATE'))).toBe(readRoute(table, review('b', 'c', 'UPDATE')));
  });

  it('with no strategies, every review is other/other and reaches nothing', () => {
    expect(readRoute(planRoutes([]), review('nodes', 'status', 'UPDATE'))).toEqual({ resource: OTHER, operation: OTHER, strategies: [] });
  });
});

describe('planEntryRoutes', () => {
  const names = (t: typeof table, resource: string, subResource: string | undefined, operation: string) => {
    const { resource: label, operation: op, strategies } = readRoute(t, review(resource, subResource, operation));
    return { label, op, strategies: strategies.map((s) => s.meta.name) };
  };

  it('keeps the routes and labels of the whole table, with only the entry’s strategies', () => {
    const pods = planEntryRoutes(table, 'pod-policy');
    expect(names(pods, 'pods', undefined, 'CREATE')).toEqual({ label: 'pods', op: 'CREATE', strategies: ['pod-policy'] });
    expect(names(pods, 'nodes', 'status', 'UPDATE')).toEqual({ label: 'nodes/status', op: 'UPDATE', strategies: [] });
    expect(names(planEntryRoutes(table, 'sidecars'), 'pods', undefined, 'CREATE').strategies).toEqual(['sidecars']);
    expect(names(planEntryRoutes(table, 'nodes'), 'nodes', 'status', 'UPDATE').strategies).toEqual(['node-oversell']);
    expect(names(planEntryRoutes(table, 'nodes'), 'pods', 'binding', 'CREATE')).toEqual({ label: 'pods/binding', op: 'CREATE', strategies: [] });
  });
});

describe('isAdmissionTarget / readPathLabel', () => {
  const SERVED = admissionPaths(['nodes', 'pod-policy', 'sidecars']);

  it('takes /mutate and every path under it, with or without a query string; nothing else', () => {
    for (const url of ['/mutate', '/mutate?timeout=2s', '/mutate/nodes', '/mutate/pod-policy?x', '/mutate/', '/mutate/made-up'])
      expect(isAdmissionTarget(url), url).toBe(true);
    for (const url of [undefined, '', '/', '/mutatex', '/mutate-nodes', '/metrics', '/Mutate']) expect(isAdmissionTarget(url), url).toBe(false);
  });

  it('labels a served path by itself and anything else as other: the label set is fixed', () => {
    expect(['/mutate', '/mutate/nodes', '/mutate/pod-policy', '/mutate/sidecars'].map((url) => readPathLabel(url, SERVED))).toEqual([
      '/mutate',
      '/mutate/nodes',
      '/mutate/pod-policy',
      '/mutate/sidecars',
    ]);
    expect(readPathLabel('/mutate/sidecars?timeout=2s', SERVED)).toBe('/mutate/sidecars');
    for (const url of ['/mutate/', '/mutate/nodes/status', `/mutate/${'x'.repeat(1 << 16)}`, '/mutate/__proto__', '/mutate?/nodes']) {
      expect(readPathLabel(url, SERVED), url.slice(0, 40)).toBe(url === '/mutate?/nodes' ? '/mutate' : OTHER);
    }
  });
});
