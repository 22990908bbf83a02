import { Injectable, Module } from '@nestjs/common';
import { Test, type TestingModule } from '@nestjs/testing';
import fastJsonPatch from 'fast-json-patch';
import { LoggerModule } from 'nestjs-pino';
import { pino } from 'pino';
import { register } from 'prom-client';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { TestConfigModule } from '../../test/fixtures/config-module.js';
import { kubeadmNode, nodeReview } from '../../test/fixtures/nodes.js';
import { BackgroundTasksModule } from '../common/background-tasks.js';
import type { OvercommitConfig } from '../overcommit.config.js';
import { ConfigStore } from '../config/config.store.js';
import { KubeModule } from '../kube/kube.module.js';
import { NodeOversellModule } from '../node-oversell/node-oversell.module.js';
import { UsageModule } from '../usage/usage.module.js';
import { StatusCoalescingModule } from '../status-coalescing/status-coalescing.module.js';
import { InvalidAdmissionReview } from './admission-review.decoder.js';
import { AdmissionStrategyProvider } from './admission-strategy.decorator.js';
import { AdmissionModule } from './admission.module.js';
import { AdmissionPipeline } from './admission.pipeline.js';
import { ADMISSION_DURATION, ADMISSION_REQUESTS, STRATEGY_ERRORS } from './admission.metrics.js';
import type { AdmissionRequest, AdmissionStrategy, PatchOperation, StrategyResult } from './admission.types.js';
import type { RequestLog } from './request-log.js';

type Json = Record<string, any>;

/**
 * Test strategies on a resource of their own, each doing what the request's object asks of it
 * under its key in `spec`: an array is its patch; an object may also ask it to warn, deny, throw
 * or log a line.
 */
const act = (request: AdmissionRequest, key: string, log: RequestLog): StrategyResult => {
  const asked = request.object?.spec?.[key] as
    PatchOperation[] | { patch?: PatchOperation[]; warnings?: string[]; deny?: StrategyResult['deny']; throws?: string; log?: string } | undefined;
  if (asked === undefined) return {};
  if (Array.isArray(asked)) return { patch: asked };
  if (asked.log) log.info(asked.log);
  if (asked.throws) throw new Error(asked.throws);
  return {
    ...(asked.patch ? { patch: asked.patch } : {}),
    ...(asked.warnings ? { warnings: asked.warnings } : {}),
    ...(asked.deny ? { deny: asked.deny } : {}),
  };
};
const RULES = [{ resource: 'widgets', subResource: '', operations: ['CREATE' as const] }];
/** What LastStrategy.isActive answers. */
let lastActive = true;

@Injectable()
@AdmissionStrategyProvider({ name: 'first', entry: 'sidecars', rules: RULES, order: 1 })
class FirstStrategy implements AdmissionStrategy {
  admit = (request: AdmissionRequest, _config: OvercommitConfig, log: RequestLog) => act(request, 'first', log);
}

@Injectable()
@AdmissionStrategyProvider({ name: 'last', entry: 'pod-policy', rules: RULES, order: 2 })
class LastStrategy implements AdmissionStrategy {
  admit = (request: AdmissionRequest, _config: OvercommitConfig, log: RequestLog) => act(request, 'last', log);
  isActive = () => lastActive;
}

@Module({ providers: [FirstStrategy, LastStrategy] })
class WidgetStrategiesModule {}

const widgetReview = (spec: Json): Json => ({
  apiVersion: 'admission.k8s.io/v1',
  kind: 'AdmissionReview',
  request: {
    uid: '0b6d3c36-0000-4000-8000-000000000001',
    kind: { group: 'example.com', version: 'v1', kind: 'Widget' },
    resource: { group: 'example.com', version: 'v1', resource: 'widgets' },
    name: 'w',
    namespace: 'shop',
    operation: 'CREATE',
    userInfo: { username: 'jane', groups: ['system:authenticated'] },
    object: { apiVersion: 'example.com/v1', kind: 'Widget', metadata: { name: 'w', labels: ['not', 'a', 'map'] }, spec },
  },
});

const decodePatch = (response: Json): PatchOperation[] | undefined =>
  response.patch === undefined ? undefined : JSON.parse(Buffer.from(response.patch, 'base64').toString('utf8'));

/** Every line the pipeline's pino root logger wrote, parsed. */
const lines: Json[] = [];
const rootLogger = pino({ level: 'debug' }, { write: (line: string) => void lines.push(JSON.parse(line)) });

describe('AdmissionPipeline', () => {
  let moduleRef: TestingModule;
  let pipeline: AdmissionPipeline;
  const series = async (metric: string, labels: Record<string, string>) =>
    (await register.getSingleMetric(metric)!.get()).values.find((v) => Object.entries(labels).every(([k, x]) => v.labels[k] === x))?.value;
  const errors = async (strategy: string) => (await series(STRATEGY_ERRORS, { strategy })) ?? 0;
  const errorLines = () => lines.filter((line) => line.level === 50);

  beforeAll(async () => {
    moduleRef = await Test.createTestingModule({
      imports: [
        LoggerModule.forRoot({ pinoHttp: { logger: rootLogger } }),
        TestConfigModule,
        KubeModule.forRoot({}),
        BackgroundTasksModule,
        AdmissionModule,
        UsageModule,
        NodeOversellModule,
        StatusCoalescingModule,
        WidgetStrategiesModule,
      ],
    }).compile();
    await moduleRef.init();
    pipeline = moduleRef.get(AdmissionPipeline);
    const applied = moduleRef.get(ConfigStore).apply('nodes:\n  defaultRatios: { cpu: 1.5 }\n', 'test');
    expect(applied.ok).toBe(true);
  });
  afterAll(async () => {
    await moduleRef.close();
    register.clear();
  });
  beforeEach(() => {
    lines.length = 0;
  });

  const ADD_LABEL: PatchOperation[] = [{ op: 'add', path: '/metadata/labels/team', value: 'a' }]; // labels is an array here
  const ADD_ANNOTATION: PatchOperation[] = [{ op: 'add', path: '/metadata/annotations', value: { team: 'a' } }];
  const ADD_SIZE: PatchOperation[] = [{ op: 'add', path: '/metadata/annotations/size', value: 'm' }];
  const REQUEST_FIELDS = {
    uid: '0b6d3c36-0000-4000-8000-000000000001',
    kind: 'Widget',
    resource: 'widgets',
    name: 'w',
    namespace: 'shop',
    user: 'jane',
    operation: 'CREATE',
  };

  it('creates every strategy’s error series at 0 at bootstrap', async () => {
    for (const strategy of ['first', 'last', 'node-oversell', 'status-coalescing']) expect(await series(STRATEGY_ERRORS, { strategy }), strategy).toBeDefined();
  });

  it('refuses a body that is not an AdmissionReview v1, counted as resource and operation `unknown`', async () => {
    const before = (await series(ADMISSION_REQUESTS, { resource: 'unknown', operation: 'unknown', outcome: 'error' })) ?? 0;
    expect(() => pipeline.review({ kind: 'AdmissionReview' })).toThrow(InvalidAdmissionReview);
    expect(() => pipeline.review('not an object')).toThrow(/body must be a JSON object/);
    expect(await series(ADMISSION_REQUESTS, { resource: 'unknown', operation: 'unknown', outcome: 'error' })).toBe(before + 2);
  });

  it('admits a review that no strategy handles unchanged, counted under `other`', async () => {
    const review = widgetReview({ first: ADD_ANNOTATION });
    review.request.resource.resource = 'gadgets';
    const before = (await series(ADMISSION_REQUESTS, { resource: 'other', operation: 'CREATE', outcome: 'unchanged' })) ?? 0;
    expect(pipeline.review(review).response).toEqual({ uid: review.request.uid, allowed: true });
    expect(await series(ADMISSION_REQUESTS, { resource: 'other', operation: 'CREATE', outcome: 'unchanged' })).toBe(before + 1);
  });

  it('counts each review by outcome and times it by resource', async () => {
    const outcome = async (name: string) => (await series(ADMISSION_REQUESTS, { resource: 'widgets', operation: 'CREATE', outcome: name })) ?? 0;
    const before = { patched: await outcome('patched'), unchanged: await outcome('unchanged'), denied: await outcome('denied') };
    const timed = async () =>
      (await register.getSingleMetric(ADMISSION_DURATION)!.get()).values.find(
        (v) => (v as { metricName?: string }).metricName?.endsWith('_count') && v.labels.resource === 'widgets',
      )?.value ?? 0;
    const observed = await timed();
    pipeline.review(widgetReview({ first: ADD_ANNOTATION }));
    pipeline.review(widgetReview({}));
    pipeline.review(widgetReview({ last: { deny: { message: 'no' } } }));
    expect({ patched: await outcome('patched'), unchanged: await outcome('unchanged'), denied: await outcome('denied') }).toEqual({
      patched: before.patched + 1,
      unchanged: before.unchanged + 1,
      denied: before.denied + 1,
    });
    expect(await timed()).toBe(observed + 3);
  });

  it('merges the strategies’ patches and warnings, in strategy order', () => {
    const review = widgetReview({ first: { patch: ADD_ANNOTATION, warnings: ['from first'] }, last: { patch: ADD_SIZE, warnings: ['from last'] } });
    const { response } = pipeline.review(review);
    expect(response).toMatchObject({ uid: review.request.uid, allowed: true, patchType: 'JSONPatch', warnings: ['from first', 'from last'] });
    expect(decodePatch(response)).toEqual([...ADD_ANNOTATION, ...ADD_SIZE]);
  });

  it('a denial answers allowed: false with its code (403 by default) and the warnings so far, without any patch', () => {
    const review = widgetReview({ first: { patch: ADD_ANNOTATION, warnings: ['from first'] }, last: { deny: { message: 'over the cap' } } });
    expect(pipeline.review(review).response).toEqual({
      uid: review.request.uid,
      allowed: false,
      status: { code: 403, message: 'over the cap' },
      warnings: ['from first'],
    });
    const coded = widgetReview({ first: { deny: { message: 'too large', code: 422 } }, last: ADD_SIZE });
    expect(pipeline.review(coded).response).toEqual({ uid: coded.request.uid, allowed: false, status: { code: 422, message: 'too large' } });
  });

  it('a strategy that throws is dropped (fail open): the others still apply, counted and logged with the review’s fields', async () => {
    const before = await errors('first');
    const review = widgetReview({ first: { throws: 'boom' }, last: ADD_ANNOTATION });
    expect(decodePatch(pipeline.review(review).response)).toEqual(ADD_ANNOTATION);
    expect(await errors('first')).toBe(before + 1);
    expect(errorLines()).toEqual([
      expect.objectContaining({
        ...REQUEST_FIELDS,
        strategy: 'first',
        msg: 'strategy first failed; admitting unchanged',
        err: expect.objectContaining({ message: 'boom' }),
      }),
    ]);
    const alone = widgetReview({ last: { throws: 'boom' } });
    const erred = (await series(ADMISSION_REQUESTS, { resource: 'widgets', operation: 'CREATE', outcome: 'error' })) ?? 0;
    expect(pipeline.review(alone).response).toEqual({ uid: alone.request.uid, allowed: true });
    expect(await series(ADMISSION_REQUESTS, { resource: 'widgets', operation: 'CREATE', outcome: 'error' })).toBe(erred + 1);
  });

  it('hands each strategy the review’s logger: its lines carry uid, kind, resource, name, namespace, user, operation and its name', () => {
    pipeline.review(widgetReview({ first: { log: 'looked at it' } }));
    expect(lines.find((line) => line.msg === 'looked at it')).toMatchObject({ ...REQUEST_FIELDS, strategy: 'first', level: 30 });
    // The pipeline's own line per decision, at debug.
    expect(lines.find((line) => line.msg === 'admission decided')).toMatchObject({ ...REQUEST_FIELDS, outcome: 'unchanged', patchOps: 0, level: 20 });
  });

  it('a webhook entry runs only its own strategies; without one, every strategy runs', () => {
    const review = widgetReview({ first: ADD_ANNOTATION, last: [{ op: 'add', path: '/metadata/annotations', value: { size: 'm' } }] });
    expect(decodePatch(pipeline.review(review, 'sidecars').response)).toEqual(ADD_ANNOTATION);
    expect(decodePatch(pipeline.review(review, 'pod-policy').response)).toEqual([{ op: 'add', path: '/metadata/annotations', value: { size: 'm' } }]);
    expect(pipeline.review(review, 'nodes').response).toEqual({ uid: review.request.uid, allowed: true });
    expect(decodePatch(pipeline.review(review).response)).toHaveLength(2);
    // A node review on the pod-policy entry reaches no strategy.
    const node = nodeReview(kubeadmNode());
    expect(pipeline.review(node, 'pod-policy').response).toEqual({ uid: node.request.uid, allowed: true });
    expect(decodePatch(pipeline.review(node, 'nodes').response)).toBeDefined();
  });

  it('drops the last strategy’s patch when it does not apply to request.object: admitted unchanged, counted, logged', async () => {
    const before = await errors('last');
    const review = widgetReview({ last: ADD_LABEL });
    const { response } = pipeline.review(review);
    expect(response).toEqual({ uid: review.request.uid, allowed: true });
    expect(await errors('last')).toBe(before + 1);
    expect(errorLines()).toEqual([expect.objectContaining({ ...REQUEST_FIELDS, strategy: 'last', msg: expect.stringMatching(/does not apply; dropped/) })]);
  });

  it('keeps the patches that apply, each tried on the object as the earlier strategies left it', () => {
    const dropLast = widgetReview({ first: ADD_ANNOTATION, last: ADD_LABEL });
    expect(decodePatch(pipeline.review(dropLast).response)).toEqual(ADD_ANNOTATION);

    const dropFirst = widgetReview({ first: ADD_LABEL, last: ADD_ANNOTATION });
    expect(decodePatch(pipeline.review(dropFirst).response)).toEqual(ADD_ANNOTATION);
    expect(errorLines().map((line) => line.strategy)).toEqual(['last', 'first']);

    // The last strategy's patch relies on the first one's: it applies after it, so both are kept.
    const chained = widgetReview({ first: ADD_ANNOTATION, last: ADD_SIZE });
    const patch = decodePatch(pipeline.review(chained).response)!;
    expect(patch).toHaveLength(2);
    expect(fastJsonPatch.applyPatch(structuredClone(chained.request.object), patch, true, false).newDocument.metadata.annotations).toEqual({
      team: 'a',
      size: 'm',
    });
  });

  it('changes the body only when it is the review’s own (ownBody), and then only by a patch that certainly applies', () => {
    const ADD_COLOR: PatchOperation[] = [{ op: 'add', path: '/spec/color', value: 'red' }];
    const TEST_COLOR: PatchOperation[] = [{ op: 'test', path: '/spec/color', value: 'red' }];
    // The last strategy's test holds only on the object as the first strategy left it.
    const shared = widgetReview({ first: ADD_COLOR, last: TEST_COLOR });
    const before = structuredClone(shared);
    expect(decodePatch(pipeline.review(shared).response)).toEqual([...ADD_COLOR, ...TEST_COLOR]);
    expect(shared).toEqual(before);

    const owned = widgetReview({ first: ADD_COLOR, last: TEST_COLOR });
    expect(decodePatch(pipeline.review(owned, undefined, true).response)).toEqual([...ADD_COLOR, ...TEST_COLOR]);
    expect(owned.request.object.spec.color).toBe('red');

    // An object value is not certainly applied as is: tried on a copy, the body stays as it was.
    const ownedObjectValue = widgetReview({ first: ADD_ANNOTATION, last: ADD_SIZE });
    const unchanged = structuredClone(ownedObjectValue);
    expect(decodePatch(pipeline.review(ownedObjectValue, undefined, true).response)).toEqual([...ADD_ANNOTATION, ...ADD_SIZE]);
    expect(ownedObjectValue).toEqual(unchanged);
  });

  it('does not run a strategy that is not active under the config, and keeps the earlier patch', async () => {
    const before = await errors('last');
    lastActive = false;
    try {
      const review = widgetReview({ first: ADD_ANNOTATION, last: { throws: 'ran while inactive' } });
      expect(decodePatch(pipeline.review(review).response)).toEqual(ADD_ANNOTATION);
    } finally {
      lastActive = true;
    }
    expect(await errors('last')).toBe(before);
    expect(errorLines()).toEqual([]);
  });

  it('keeps an earlier strategy’s patch on an object nested thousands of levels deep (tried on a copy of the path only)', () => {
    const deep = JSON.parse(`${'{"a":'.repeat(10_000)}1${'}'.repeat(10_000)}`);
    const review = widgetReview({ first: ADD_ANNOTATION, last: ADD_SIZE, deep });
    expect(decodePatch(pipeline.review(review).response)).toEqual([...ADD_ANNOTATION, ...ADD_SIZE]);
    expect(errorLines()).toEqual([]);
  });

  it.each([
    ['metadata.annotations is an array', (node: Json) => (node.metadata.annotations = ['x'])],
    ['metadata is a string', (node: Json) => (node.metadata = 'worker-1')],
  ])('a node-status review whose %s: admitted unchanged, counted as a node-oversell error', async (_, shape) => {
    const before = await errors('node-oversell');
    const node = kubeadmNode();
    shape(node);
    const { response } = pipeline.review(nodeReview(node));
    expect(response.allowed).toBe(true);
    expect(response.patch).toBeUndefined();
    expect(await errors('node-oversell')).toBe(before + 1);
    expect(errorLines()).toHaveLength(1);
  });

  it('patches a well-formed node-status review (the control)', () => {
    const review = nodeReview(kubeadmNode());
    const patch = decodePatch(pipeline.review(review).response)!;
    expect(fastJsonPatch.applyPatch(structuredClone(review.request.object), patch, true, false).newDocument.status.allocatable.cpu).toBe('6');
  });
});
