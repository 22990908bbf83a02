import fastJsonPatch from 'fast-json-patch';
import { Counter, Registry } from 'prom-client';
import { beforeEach, describe, expect, it } from 'vitest';
import { IN_CLUSTER_ENV, KnownNamespaces } from '../../test/fixtures/namespaces.js';
import { capturedLog, quietLog } from '../../test/fixtures/request-log.js';
import { podReview } from '../../test/fixtures/pods.js';
import { deploymentPod, mirrorPod } from '../../test/fixtures/sidecar-pods.js';
import type { AdmissionRequest } from '../admission/admission.types.js';
import { parseConfig, type OvercommitConfig } from '../overcommit.config.js';
import { SIDECAR_CACHE_UNSYNCED, SIDECAR_INJECTIONS } from './sidecar.metrics.js';
import { SidecarStrategy } from './sidecar.strategy.js';

const parsed = parseConfig(`
sidecars:
  templates:
    - name: logging
      containers: [{ name: log-shipper, image: "fluent-bit:3.2.1" }]
`);
if (!parsed.ok) throw new Error(parsed.errors.join('\n'));
const CONFIG: OvercommitConfig = parsed.value;

const OPTED_IN = { 'kube-overcommit.io/sidecars': 'enabled' };

/** The pod's container names once `result`'s patch, if any, is applied: the logging template adds log-shipper last. */
const containersAfter = (pod: Record<string, any>, result: { patch?: fastJsonPatch.Operation[] }) =>
  (fastJsonPatch.applyPatch(structuredClone(pod), result.patch ?? [], true, false).newDocument as any).spec.containers.map((c: any) => c.name);
const withShipper = (pod: Record<string, any>) => [...pod.spec.containers.map((c: any) => c.name), 'log-shipper'];

describe('SidecarStrategy', () => {
  let registry: Registry;
  let counter: Counter<string>;
  let unsynced: Counter<string>;
  /** Namespace labels known to the cache (none by default); `env` {}: outside a cluster. */
  const strategy = (labels: Record<string, Record<string, string>> = {}, env: NodeJS.ProcessEnv = {}) =>
    new SidecarStrategy(new KnownNamespaces(new Map(Object.entries(labels)), env), counter, unsynced);
  const request = (pod: Record<string, any>, options: Parameters<typeof podReview>[1] = {}) => podReview(pod, options).request as AdmissionRequest;
  const count = async (labels: Record<string, string>) =>
    (await counter.get()).values.find((v) => Object.entries(labels).every(([k, x]) => v.labels[k] === x))?.value ?? 0;
  const unsyncedCount = async () => (await unsynced.get()).values.find((v) => v.labels.cache === 'namespaces')?.value ?? 0;

  beforeEach(() => {
    registry = new Registry();
    counter = new Counter({ name: SIDECAR_INJECTIONS, help: 'h', labelNames: ['template', 'outcome'], registers: [registry] });
    unsynced = new Counter({ name: SIDECAR_CACHE_UNSYNCED, help: 'h', labelNames: ['cache'], registers: [registry] });
  });

  it('leaves a pod without the annotation alone: no patch, no warning', () => {
    expect(strategy().admit(request(deploymentPod()), CONFIG, quietLog)).toEqual({});
    expect(strategy().admit(request(deploymentPod({ inject: ' , ' })), CONFIG, quietLog)).toEqual({});
  });

  it('injects and counts by template and outcome; an unknown template is counted without its name', async () => {
    const pod = deploymentPod({ inject: 'logging, made-up' });
    const result = strategy().admit(request(pod), CONFIG, quietLog);
    expect(containersAfter(pod, result)).toEqual(withShipper(pod));
    expect(result.warnings).toEqual(['kube-overcommit.io/inject: unknown sidecar template "made-up"; not injected']);
    expect(await count({ template: 'logging', outcome: 'injected' })).toBe(1);
    expect(await count({ template: '_unknown', outcome: 'unknown_template' })).toBe(1);
    expect((await counter.get()).values.some((v) => v.labels.template === 'made-up')).toBe(false);
  });

  it('does not count dry-run requests, but answers them the same', async () => {
    const pod = deploymentPod({ inject: 'logging' });
    const result = strategy().admit(request(pod, { dryRun: true }), CONFIG, quietLog);
    expect(containersAfter(pod, result)).toEqual(withShipper(pod));
    expect((await counter.get()).values).toEqual([]);
  });

  it('skips mirror pods silently', () => {
    expect(strategy().admit(request(mirrorPod('logging')), CONFIG, quietLog)).toEqual({});
  });

  it('warns, without injecting, in a namespace that has not opted in, in a cluster or not', async () => {
    for (const env of [{}, IN_CLUSTER_ENV]) {
      const notOptedIn = strategy({ shop: { team: 'shop' } }, env).admit(request(deploymentPod({ inject: 'logging' })), CONFIG, quietLog);
      expect(notOptedIn).toEqual({ warnings: ['kube-overcommit.io/inject ignored: namespace "shop" does not match sidecars.namespaceSelector'] });
    }
    expect(await unsyncedCount()).toBe(0);
    expect((await counter.get()).values).toEqual([]);
  });

  it('never injects in the system namespaces or its own, even opted in, in a cluster or not', async () => {
    for (const env of [{}, IN_CLUSTER_ENV]) {
      for (const namespace of ['kube-system', 'kube-node-lease', 'kube-public', 'kube-overcommit']) {
        const result = strategy({ [namespace]: OPTED_IN }, env).admit(request(deploymentPod({ namespace, inject: 'logging' })), CONFIG, quietLog);
        expect(result.patch, namespace).toBeUndefined();
        expect(result.warnings?.[0]).toMatch(
          new RegExp(`^kube-overcommit.io/inject ignored: namespace "${namespace}" is (a system namespace|the platform's own), never in scope$`),
        );
      }
    }
    const custom = (env: NodeJS.ProcessEnv) => strategy({ platform: OPTED_IN, 'kube-overcommit': OPTED_IN }, env);
    const own = custom({ POD_NAMESPACE: 'platform' }).admit(request(deploymentPod({ namespace: 'platform', inject: 'logging' })), CONFIG, quietLog);
    expect(own).toEqual({ warnings: [`kube-overcommit.io/inject ignored: namespace "platform" is the platform's own, never in scope`] });
    const defaultOwn = deploymentPod({ namespace: 'kube-overcommit', inject: 'logging' });
    const notOurs = custom({ ...IN_CLUSTER_ENV, POD_NAMESPACE: 'platform' }).admit(request(defaultOwn), CONFIG, quietLog);
    expect(containersAfter(defaultOwn, notOurs)).toEqual(withShipper(defaultOwn));
    expect(await unsyncedCount()).toBe(0);
  });

  it('outside a cluster, injects where the labels are unknown: the webhook entry selector decided', () => {
    const pod = deploymentPod({ inject: 'logging' });
    expect(containersAfter(pod, strategy({}, {}).admit(request(pod), CONFIG, quietLog))).toEqual(withShipper(pod));
  });

  it('in a cluster, does not inject where the labels are unknown (another entry may have called): warns and counts', async () => {
    const unknown = strategy({ blog: OPTED_IN }, IN_CLUSTER_ENV);
    const review = request(deploymentPod({ inject: 'logging' }));
    const { log, lines } = capturedLog(review);
    const result = unknown.admit(review, CONFIG, log);
    expect(result.patch).toBeUndefined();
    expect(result.warnings).toEqual([expect.stringMatching(/^kube-overcommit.io\/inject ignored: the labels of namespace "shop" are not known yet/)]);
    // The line carries the review's fields: it can be tied to its request.
    expect(lines).toEqual([
      expect.objectContaining({
        level: 40,
        msg: expect.stringMatching(/^shop\/web-.*: kube-overcommit.io\/inject ignored: the labels/),
        uid: review.uid,
        kind: 'Pod',
        resource: 'pods',
        namespace: 'shop',
        user: 'system:serviceaccount:kube-system:replicaset-controller',
        operation: 'CREATE',
      }),
    ]);
    expect(await unsyncedCount()).toBe(1);
    expect((await counter.get()).values).toEqual([]);
    unknown.admit(request(deploymentPod({ inject: 'logging' }), { dryRun: true }), CONFIG, quietLog);
    expect(await unsyncedCount()).toBe(1);
    // Once known and opted in, injected.
    const pod = deploymentPod({ inject: 'logging' });
    expect(containersAfter(pod, strategy({ shop: OPTED_IN }, IN_CLUSTER_ENV).admit(request(pod), CONFIG, quietLog))).toEqual(withShipper(pod));
  });

  it('injects in an opted-in namespace, and with a config that has no sidecars section', () => {
    const pod = deploymentPod({ inject: 'logging' });
    const optedIn = strategy({ shop: OPTED_IN }).admit(request(pod), CONFIG, quietLog);
    expect(containersAfter(pod, optedIn)).toEqual(withShipper(pod));
    const noSection = parseConfig('sidecars:\n');
    if (!noSection.ok) throw new Error(noSection.errors.join());
    expect(strategy().admit(request(deploymentPod({ inject: 'logging' })), noSection.value, quietLog).warnings).toEqual([
      'kube-overcommit.io/inject: unknown sidecar template "logging"; not injected',
    ]);
  });
});
