import { Counter, Registry } from 'prom-client';
import { beforeEach, describe, expect, it } from 'vitest';
import { deploymentPod, mirrorPod, podReview } from '../../test/fixtures/sidecar-pods.js';
import type { AdmissionRequest } from '../admission/admission.types.js';
import { parseConfig } from '../config/config.loader.js';
import type { OvercommitConfig } from '../config/config.schema.js';
import type { NamespaceCache } from '../kube/namespace-cache.service.js';
import { SIDECAR_INJECTIONS } from './sidecar.metrics.js';
import { platformNamespace, sidecarScope } from './sidecar.scope.js';
import { SidecarStrategy } from './sidecar.strategy.js';

const parsed = parseConfig(`
sidecars:
  templates:
    - name: logging
      containers: [{ name: log-shipper, image: "fluent-bit:3.2.1" }]
`);
if (!parsed.ok) throw new Error(parsed.errors.join('\n'));
const CONFIG: OvercommitConfig = parsed.value;

function fakeCache(labels: Record<string, Record<string, string>> | undefined): NamespaceCache {
  return { labels: (ns: string) => labels?.[ns] } as unknown as NamespaceCache;
}

describe('sidecarScope', () => {
  const selector = CONFIG.sidecars.namespaceSelector;
  it('never injects in system namespaces or the platform namespace, whatever their labels', () => {
    const optedIn = { 'kube-overcommit.io/sidecars': 'enabled' };
    for (const ns of ['kube-system', 'kube-node-lease', 'kube-public', 'platform']) {
      expect(sidecarScope(ns, selector, optedIn, 'platform').inScope).toBe(false);
      expect(sidecarScope(ns, selector, undefined, 'platform').inScope).toBe(false);
    }
  });
  it('follows the selector when labels are known, and the webhook when they are not', () => {
    expect(sidecarScope('shop', selector, { 'kube-overcommit.io/sidecars': 'enabled' }, 'p')).toEqual({ inScope: true });
    expect(sidecarScope('shop', selector, { team: 'shop' }, 'p')).toMatchObject({ inScope: false, reason: expect.stringContaining('has not opted in') });
    expect(sidecarScope('shop', selector, undefined, 'p')).toEqual({ inScope: true });
  });
  it('takes the platform namespace from POD_NAMESPACE, default kube-overcommit', () => {
    expect(platformNamespace({})).toBe('kube-overcommit');
    expect(platformNamespace({ POD_NAMESPACE: 'platform' })).toBe('platform');
  });
});

describe('SidecarStrategy', () => {
  let registry: Registry;
  let counter: Counter<string>;
  const strategy = (labels?: Record<string, Record<string, string>>, env: NodeJS.ProcessEnv = {}) => new SidecarStrategy(fakeCache(labels), env, counter);
  const request = (pod: Record<string, any>, options: Parameters<typeof podReview>[1] = {}) => podReview(pod, options).request as AdmissionRequest;
  const count = async (labels: Record<string, string>) => (await counter.get()).values.find((v) => Object.entries(labels).every(([k, x]) => v.labels[k] === x))?.value ?? 0;

  beforeEach(() => {
    registry = new Registry();
    counter = new Counter({ name: SIDECAR_INJECTIONS, help: 'h', labelNames: ['template', 'outcome'], registers: [registry] });
  });

  it('leaves a pod without the annotation alone: no patch, no warning', () => {
    expect(strategy().admit(request(deploymentPod()), CONFIG)).toEqual({});
    expect(strategy().admit(request(deploymentPod({ inject: ' , ' })), CONFIG)).toEqual({});
  });

  it('injects and counts by template and outcome; an unknown template is counted without its name', async () => {
    const result = strategy().admit(request(deploymentPod({ inject: 'logging, made-up' })), CONFIG);
    expect(result.patch?.length).toBeGreaterThan(0);
    expect(result.warnings).toEqual(['kube-overcommit.io/inject: unknown sidecar template "made-up"; not injected']);
    expect(await count({ template: 'logging', outcome: 'injected' })).toBe(1);
    expect(await count({ template: '_unknown', outcome: 'unknown_template' })).toBe(1);
    expect((await counter.get()).values.some((v) => v.labels.template === 'made-up')).toBe(false);
  });

  it('does not count dry-run requests, but answers them the same', async () => {
    const result = strategy().admit(request(deploymentPod({ inject: 'logging' }), { dryRun: true }), CONFIG);
    expect(result.patch?.length).toBeGreaterThan(0);
    expect((await counter.get()).values).toEqual([]);
  });

  it('skips mirror pods silently', () => {
    expect(strategy().admit(request(mirrorPod('logging')), CONFIG)).toEqual({});
  });

  it('warns, without injecting, in a namespace that has not opted in or is excluded', () => {
    const notOptedIn = strategy({ shop: { team: 'shop' } }).admit(request(deploymentPod({ inject: 'logging' })), CONFIG);
    expect(notOptedIn).toEqual({ warnings: ['kube-overcommit.io/inject ignored: namespace "shop" has not opted in to sidecar injection (sidecars.namespaceSelector)'] });
    const own = strategy(undefined, { POD_NAMESPACE: 'platform' }).admit(request(deploymentPod({ namespace: 'platform', inject: 'logging' })), CONFIG);
    expect(own.patch).toBeUndefined();
    expect(own.warnings?.[0]).toMatch(/namespace "platform" never gets sidecars/);
    const system = strategy().admit(request(deploymentPod({ namespace: 'kube-system', inject: 'logging' })), CONFIG);
    expect(system.patch).toBeUndefined();
  });

  it('injects in an opted-in namespace, and with a config that has no sidecars section', () => {
    const optedIn = strategy({ shop: { 'kube-overcommit.io/sidecars': 'enabled' } }).admit(request(deploymentPod({ inject: 'logging' })), CONFIG);
    expect(optedIn.patch?.length).toBeGreaterThan(0);
    const noSection = parseConfig('sidecars:\n');
    if (!noSection.ok) throw new Error(noSection.errors.join());
    expect(strategy().admit(request(deploymentPod({ inject: 'logging' })), noSection.value).warnings).toEqual([
      'kube-overcommit.io/inject: unknown sidecar template "logging"; not injected',
    ]);
  });
});
