import { Injectable, Logger, Module } from '@nestjs/common';
import { Test, type TestingModule } from '@nestjs/testing';
import fastJsonPatch from 'fast-json-patch';
import { register } from 'prom-client';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { TestConfigModule } from '../../test/fixtures/config-module.js';
import { kubeadmNode, nodeReview } from '../../test/fixtures/nodes.js';
import { BackgroundTasksModule } from '../common/background-tasks.js';
import { ConfigStore } from '../config/config.store.js';
import { KubeModule } from '../kube/kube.module.js';
import { NodeOversellModule } from '../node-oversell/node-oversell.module.js';
import { AdmissionStrategyProvider } from './admission-strategy.decorator.js';
import { AdmissionModule } from './admission.module.js';
import { AdmissionPipeline } from './admission.pipeline.js';
import { STRATEGY_ERRORS } from './admission.metrics.js';
import type { AdmissionRequest, AdmissionStrategy, PatchOperation, StrategyResult } from './admission.types.js';

type Json = Record<string, any>;

/** Test strategies on a resource of their own: each returns the patch the request's object asks for. */
const patchFrom = (request: AdmissionRequest, key: string): StrategyResult => {
  const patch = request.object?.spec?.[key] as PatchOperation[] | undefined;
  return patch ? { patch } : {};
};
const RULES = [{ resource: 'widgets', subResource: '', operations: ['CREATE' as const] }];

@Injectable()
@AdmissionStrategyProvider({ name: 'first', rules: RULES, order: 1 })
class FirstStrategy implements AdmissionStrategy {
  admit = (request: AdmissionRequest) => patchFrom(request, 'first');
}

@Injectable()
@AdmissionStrategyProvider({ name: 'last', rules: RULES, order: 2 })
class LastStrategy implements AdmissionStrategy {
  admit = (request: AdmissionRequest) => patchFrom(request, 'last');
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
    operation: 'CREATE',
    object: { apiVersion: 'example.com/v1', kind: 'Widget', metadata: { name: 'w', labels: ['not', 'a', 'map'] }, spec },
  },
});

const decodePatch = (response: Json): PatchOperation[] | undefined =>
  response.patch === undefined ? undefined : JSON.parse(Buffer.from(response.patch, 'base64').toString('utf8'));

describe('AdmissionPipeline', () => {
  let moduleRef: TestingModule;
  let pipeline: AdmissionPipeline;
  const errors = async (strategy: string) =>
    (await register.getSingleMetric(STRATEGY_ERRORS)!.get()).values.find((v) => v.labels.strategy === strategy)?.value ?? 0;

  beforeAll(async () => {
    moduleRef = await Test.createTestingModule({ imports: [TestConfigModule, KubeModule.forRoot({}), BackgroundTasksModule, AdmissionModule, NodeOversellModule, WidgetStrategiesModule] }).compile();
    await moduleRef.init();
    pipeline = moduleRef.get(AdmissionPipeline);
    const applied = moduleRef.get(ConfigStore).apply('nodes:\n  defaultRatios: { cpu: 1.5 }\n', 'test');
    expect(applied.ok).toBe(true);
  });
  afterAll(async () => {
    await moduleRef.close();
    register.clear();
  });

  const ADD_LABEL: PatchOperation[] = [{ op: 'add', path: '/metadata/labels/team', value: 'a' }]; // labels is an array here
  const ADD_ANNOTATION: PatchOperation[] = [{ op: 'add', path: '/metadata/annotations', value: { team: 'a' } }];

  it('drops the last strategy’s patch when it does not apply to request.object: admitted unchanged, counted, logged', async () => {
    const logged = vi.spyOn(Logger.prototype, 'error').mockImplementation(() => undefined);
    try {
      const before = await errors('last');
      const review = widgetReview({ last: ADD_LABEL });
      const { response } = pipeline.review(review);
      expect(response).toEqual({ uid: review.request.uid, allowed: true });
      expect(await errors('last')).toBe(before + 1);
      expect(logged).toHaveBeenCalledWith(expect.objectContaining({ strategy: 'last', uid: review.request.uid }), expect.stringMatching(/does not apply; dropped/));
    } finally {
      logged.mockRestore();
    }
  });

  it('keeps the patches that apply, each tried on the object as the earlier strategies left it', async () => {
    vi.spyOn(Logger.prototype, 'error').mockImplementationOnce(() => undefined);
    const dropLast = widgetReview({ first: ADD_ANNOTATION, last: ADD_LABEL });
    expect(decodePatch(pipeline.review(dropLast).response)).toEqual(ADD_ANNOTATION);

    vi.spyOn(Logger.prototype, 'error').mockImplementationOnce(() => undefined);
    const dropFirst = widgetReview({ first: ADD_LABEL, last: ADD_ANNOTATION });
    expect(decodePatch(pipeline.review(dropFirst).response)).toEqual(ADD_ANNOTATION);

    // The last strategy's patch relies on the first one's: it applies after it, so both are kept.
    const chained = widgetReview({ first: ADD_ANNOTATION, last: [{ op: 'add', path: '/metadata/annotations/size', value: 'm' }] });
    const patch = decodePatch(pipeline.review(chained).response)!;
    expect(patch).toHaveLength(2);
    expect(fastJsonPatch.applyPatch(structuredClone(chained.request.object), patch, true, false).newDocument.metadata.annotations).toEqual({ team: 'a', size: 'm' });
  });

  it('keeps an earlier strategy’s patch on an object nested thousands of levels deep (tried on a copy of the path only)', () => {
    const logged = vi.spyOn(Logger.prototype, 'error').mockImplementation(() => undefined);
    logged.mockClear();
    try {
      const deep = JSON.parse(`${'{"a":'.repeat(10_000)}1${'}'.repeat(10_000)}`);
      const review = widgetReview({ first: ADD_ANNOTATION, last: [{ op: 'add', path: '/metadata/annotations/size', value: 'm' }], deep });
      expect(decodePatch(pipeline.review(review).response)).toEqual([...ADD_ANNOTATION, { op: 'add', path: '/metadata/annotations/size', value: 'm' }]);
      expect(logged).not.toHaveBeenCalled();
    } finally {
      logged.mockRestore();
    }
  });

  it.each([
    ['metadata.annotations is an array', (node: Json) => (node.metadata.annotations = ['x'])],
    ['metadata is a string', (node: Json) => (node.metadata = 'worker-1')],
  ])('a node-status review whose %s: admitted unchanged, counted as a node-oversell error', async (_, shape) => {
    const logged = vi.spyOn(Logger.prototype, 'error').mockImplementation(() => undefined);
    try {
      const before = await errors('node-oversell');
      const node = kubeadmNode();
      shape(node);
      const { response } = pipeline.review(nodeReview(node));
      expect(response.allowed).toBe(true);
      expect(response.patch).toBeUndefined();
      expect(await errors('node-oversell')).toBe(before + 1);
    } finally {
      logged.mockRestore();
    }
  });

  it('patches a well-formed node-status review (the control)', () => {
    const review = nodeReview(kubeadmNode());
    const patch = decodePatch(pipeline.review(review).response)!;
    expect(fastJsonPatch.applyPatch(structuredClone(review.request.object), patch, true, false).newDocument.status.allocatable.cpu).toBe('6');
  });
});
