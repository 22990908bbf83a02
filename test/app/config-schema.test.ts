import { readFileSync } from 'node:fs';
import { Ajv } from 'ajv';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { parse, stringify } from 'yaml';
import { CONFIG_SCHEMA_FILE, configSchema, render, VALUES_SCHEMA_FILE, valuesSchema, WEBHOOK_ONLY } from '../../scripts/config-schema.js';
import { parseConfig } from '../../src/overcommit.config.js';
import { Outcomes, runs } from '../support/property.js';

const schema = configSchema();
const validate = new Ajv({ allErrors: true, strict: false }).compile(schema);

/** The webhook's verdict (the ConfigMap watcher parses config.yaml text) and the schema's, on one config. */
function verdicts(config: unknown): { webhook: boolean; schema: boolean; errors: string[] } {
  const parsed = parseConfig(stringify(config));
  return { webhook: parsed.ok, schema: validate(config) as boolean, errors: parsed.ok ? [] : parsed.errors };
}

describe('config.schema.json: generated from the classes the webhook validates with', () => {
  it('the committed config.schema.json and values.schema.json are what `npm run schema` writes', () => {
    expect(readFileSync(CONFIG_SCHEMA_FILE, 'utf8'), 'run `npm run schema`').toBe(render(schema));
    const values = readFileSync(VALUES_SCHEMA_FILE, 'utf8');
    expect(values, 'run `npm run schema`').toBe(render(valuesSchema(JSON.parse(values))));
  });

  it('the shipped configs pass both: examples/config.yaml (with its modeline), the ConfigMap, the chart default', () => {
    const example = readFileSync('examples/config.yaml', 'utf8');
    expect(example.split('\n')[0]).toBe('# yaml-language-server: $schema=../config.schema.json');
    const configMap = parse(readFileSync('k8s/base/configmap.yaml', 'utf8')).data['config.yaml'];
    const chart = parse(readFileSync('charts/kube-overcommit/values.yaml', 'utf8')).config;
    for (const config of [parse(example), parse(configMap), chart]) expect(verdicts(config)).toMatchObject({ webhook: true, schema: true });
  });

  const same: Array<[string, unknown, boolean]> = [
    ['empty', {}, true],
    [
      'ratios and a pool',
      { nodes: { defaultRatios: { cpu: 1.5 }, pools: [{ name: 'batch', nodeSelector: { matchLabels: { pool: 'batch' } }, ratios: { cpu: 3 } }] } },
      true,
    ],
    ['cpu: 50 (above the ratio maximum of 10)', { nodes: { defaultRatios: { cpu: 50 } } }, false],
    ['cpu: 0.5 (below 1)', { nodes: { defaultRatios: { cpu: 0.5 } } }, false],
    ['cpu as a string', { nodes: { defaultRatios: { cpu: '2' } } }, false],
    ['a misspelt key at the root', { node: { defaultRatios: { cpu: 2 } } }, false],
    ['a misspelt key in a section', { nodes: { defaultRatio: { cpu: 2 } } }, false],
    ['an unknown resource', { nodes: { defaultRatios: { gpu: 2 } } }, false],
    ['a pool without ratios', { nodes: { pools: [{ name: 'a', nodeSelector: {} }] } }, false],
    ['a pool name that is not a DNS label', { nodes: { pools: [{ name: 'Batch_1', nodeSelector: {}, ratios: {} }] } }, false],
    ['an unknown mode', { nodes: { defaultMode: 'dry-run' } }, false],
    ['pools as an object', { nodes: { pools: { name: 'a' } } }, false],
    ['In without values', { nodes: { pools: [{ name: 'a', nodeSelector: { matchExpressions: [{ key: 'a', operator: 'In' }] }, ratios: {} }] } }, false],
    [
      'Exists with values',
      { nodes: { pools: [{ name: 'a', nodeSelector: { matchExpressions: [{ key: 'a', operator: 'Exists', values: ['x'] }] }, ratios: {} }] } },
      false,
    ],
    ['a label value with a space', { pods: { namespaceSelector: { matchLabels: { team: 'a b' } } } }, false],
    ['null where a default applies', { nodes: { defaultRatios: { cpu: null }, reconcile: null }, pods: null }, true],
    ['sidecars without a namespaceSelector (its default)', { sidecars: { templates: [{ name: 'proxy', env: [{ name: 'A', value: 'b' }] }] } }, true],
    ['a sidecar template with nothing in it', { sidecars: { templates: [{ name: 'proxy' }] } }, false],
    ['maxNodesPerSecond 0', { nodes: { reconcile: { maxNodesPerSecond: 0 } } }, false],
    ['a cap mode', { pods: { cap: { mode: 'deny' } } }, true],
    ['a percentage above 100', { pods: { limitToRequest: { memoryRequestPercent: 150 } } }, false],
    ['a request quantity', { pods: { defaultRequests: { cpu: '100m', memory: '128Mi' } } }, true],
    ['a request quantity with a bad unit', { pods: { defaultRequests: { memory: '128MB' } } }, false],
    ['a statusReportPeriod with a bad unit', { nodes: { statusReportPeriod: '5 minutes' } }, false],
  ];
  it.each(same)('same verdict: %s', (_, config, ok) => {
    expect(verdicts(config)).toMatchObject({ webhook: ok, schema: ok });
  });

  it('docs/config-schema.md lists every check only the webhook makes', () => {
    const doc = readFileSync('docs/config-schema.md', 'utf8').split('\n');
    for (const check of WEBHOOK_ONLY) expect(doc).toContain(`- ${check}`);
  });

  // What only the webhook checks (WEBHOOK_ONLY, docs/config-schema.md): the schema lets these through.
  const webhookOnly: Array<[string, unknown]> = [
    ['duplicate pool names', { nodes: { pools: [1, 2].map(() => ({ name: 'a', nodeSelector: {}, ratios: {} })) } }],
    ['a usage interval longer than its window', { nodes: { defaultUsage: { window: '1m', interval: '2m' } } }],
    ['a coolThreshold not below its hotThreshold', { nodes: { defaultUsage: { hotAction: 'full', coolThreshold: { cpu: 0.9 } } } }],
    ['a statusReportPeriod above 1h', { nodes: { statusReportPeriod: '2h' } }],
    ['a request of zero', { pods: { defaultRequests: { cpu: '0' } } }],
    ['a sidecar container without an image', { sidecars: { templates: [{ name: 'proxy', containers: [{ name: 'proxy' }] }] } }],
  ];
  it.each(webhookOnly)('only the webhook rejects: %s', (_, config) => {
    expect(verdicts(config)).toMatchObject({ webhook: false, schema: true });
  });

  it('agree on random configs within what the schema states (property)', () => {
    const anyScalar = fc.oneof(
      fc.constant(null),
      fc.boolean(),
      fc.string({ maxLength: 4 }),
      fc.integer({ min: -5, max: 2000 }),
      fc.double({ min: -1, max: 20, noNaN: true }),
    );
    const maybe = <T>(arb: fc.Arbitrary<T>) => fc.oneof({ weight: 3, arbitrary: arb }, { weight: 1, arbitrary: anyScalar });
    const ratio = maybe(fc.double({ min: 0, max: 12, noNaN: true }));
    const ratios = maybe(fc.record({ cpu: ratio, memory: ratio, pods: ratio, bogus: ratio }, { requiredKeys: [] }));
    const labelKey = fc.constantFrom('pool', 'example.com/team', 'Bad Key', '');
    const selector = maybe(
      fc.record(
        {
          matchLabels: maybe(fc.dictionary(labelKey, fc.constantFrom('a', 'b-1', 'no spaces!', ''), { maxKeys: 2 })),
          matchExpressions: maybe(
            fc.array(
              fc.record(
                {
                  key: labelKey,
                  operator: fc.constantFrom('In', 'NotIn', 'Exists', 'DoesNotExist', 'Near'),
                  values: maybe(fc.array(fc.constantFrom('x', 'y'), { maxLength: 2 })),
                },
                { requiredKeys: ['key'] },
              ),
              { maxLength: 2 },
            ),
          ),
        },
        { requiredKeys: [] },
      ),
    );
    const mode = maybe(fc.constantFrom('enforce', 'shadow', 'dry-run'));
    // Pool names are unique by construction: uniqueness is the webhook's alone (WEBHOOK_ONLY).
    const pools = maybe(
      fc
        .array(fc.record({ name: fc.constantFrom('p', 'Bad_Name', ''), nodeSelector: selector, ratios, mode }, { requiredKeys: [] }), { maxLength: 3 })
        .map((list) => list.map((pool, i) => (typeof pool.name === 'string' ? { ...pool, name: pool.name + (pool.name ? i : '') } : pool))),
    );
    const config = fc.record(
      {
        nodes: maybe(
          fc.record(
            {
              defaultMode: mode,
              defaultRatios: ratios,
              pools,
              commitmentFloor: maybe(fc.boolean()),
              coalesceStatusWrites: maybe(fc.boolean()),
              reconcile: maybe(fc.record({ enabled: maybe(fc.boolean()), maxNodesPerSecond: maybe(fc.integer({ min: -1, max: 1200 })) }, { requiredKeys: [] })),
              unknown: fc.constant(1),
            },
            { requiredKeys: [] },
          ),
        ),
        pods: maybe(
          fc.record(
            {
              namespaceSelector: selector,
              cap: maybe(fc.record({ mode: fc.constantFrom('off', 'deny', 'warn', 'block') }, { requiredKeys: [] })),
              limitToRequest: maybe(fc.record({ memoryRequestPercent: maybe(fc.integer({ min: 0, max: 120 })) }, { requiredKeys: [] })),
            },
            { requiredKeys: [] },
          ),
        ),
      },
      { requiredKeys: [] },
    );
    const seen = new Outcomes('accepted', 'rejected');
    fc.assert(
      fc.property(config, (c) => {
        const v = verdicts(c);
        expect(v.schema, `webhook: ${v.webhook ? 'accepted' : v.errors.join('; ')}`).toBe(v.webhook);
        seen.add(v.webhook ? 'accepted' : 'rejected');
      }),
      runs(600),
    );
    // Most drawn configs hold a bad value somewhere: about 6 % are accepted (two seeds).
    seen.expectShare('accepted', 0.02);
    seen.expectShare('rejected', 0.5);
  });
});
