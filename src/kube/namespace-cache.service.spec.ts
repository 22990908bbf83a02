import { KubeConfig } from '@kubernetes/client-node';
import { describe, expect, it } from 'vitest';
import { IN_CLUSTER_ENV, KnownNamespaces } from '../../test/fixtures/namespaces.js';
import type { LabelSelector } from '../domain/label-selector.js';
import { NamespaceCache } from './namespace-cache.service.js';

const SELECTOR: LabelSelector = { matchLabels: { 'kube-overcommit.io/sidecars': 'enabled' } };
const OPTED_IN = { 'kube-overcommit.io/sidecars': 'enabled' };
const OUTSIDE: NodeJS.ProcessEnv = {};

describe('NamespaceCache.scope', () => {
  const cache = (known: Record<string, Record<string, string>>, env: NodeJS.ProcessEnv) => new KnownNamespaces(new Map(Object.entries(known)), env);

  it('never the system namespaces nor the platform namespace, labels known or not, in a cluster or not', () => {
    for (const env of [OUTSIDE, IN_CLUSTER_ENV]) {
      for (const namespace of ['kube-system', 'kube-node-lease', 'kube-public', 'kube-overcommit']) {
        for (const known of [{ [namespace]: OPTED_IN }, {}]) {
          const decision = cache(known, env).scope(namespace, {});
          expect(decision, `${namespace} ${JSON.stringify(known)} ${JSON.stringify(env)}`).toMatchObject({ inScope: false, unknown: false });
          expect(decision).toHaveProperty('reason', expect.stringMatching(/never in scope/));
        }
      }
    }
  });

  it('takes the platform namespace from POD_NAMESPACE; then kube-overcommit is an ordinary namespace', () => {
    const known = { platform: OPTED_IN, 'kube-overcommit': OPTED_IN };
    const platform = cache(known, { ...IN_CLUSTER_ENV, POD_NAMESPACE: 'platform' });
    expect(platform.platformNamespace).toBe('platform');
    expect(platform.scope('platform', SELECTOR)).toEqual({
      inScope: false,
      reason: `namespace "platform" is the platform's own, never in scope`,
      unknown: false,
    });
    expect(platform.scope('kube-overcommit', SELECTOR)).toEqual({ inScope: true });
    expect(cache(known, OUTSIDE).platformNamespace).toBe('kube-overcommit');
  });

  it('leaves out a pod without a namespace', () => {
    expect(cache({}, OUTSIDE).scope('', {})).toEqual({ inScope: false, reason: 'the pod has no namespace', unknown: false });
  });

  it('lets the selector decide when the labels are known, in a cluster or not', () => {
    for (const env of [OUTSIDE, IN_CLUSTER_ENV]) {
      const namespaces = cache({ shop: OPTED_IN, blog: { team: 'blog' } }, env);
      expect(namespaces.scope('shop', SELECTOR)).toEqual({ inScope: true });
      expect(namespaces.scope('blog', SELECTOR)).toEqual({ inScope: false, reason: 'namespace "blog" does not match the namespaceSelector', unknown: false });
      expect(namespaces.scope('blog', SELECTOR, 'sidecars.namespaceSelector')).toMatchObject({
        reason: 'namespace "blog" does not match sidecars.namespaceSelector',
      });
      expect(namespaces.scope('blog', { matchExpressions: [{ key: 'team', operator: 'In', values: ['blog'] }] })).toEqual({ inScope: true });
      expect(namespaces.scope('blog', {}), 'an empty selector selects every namespace').toEqual({ inScope: true });
    }
  });

  it('outside a cluster, unknown labels are in scope: the webhook entry selector decided', () => {
    expect(cache({}, OUTSIDE).scope('shop', SELECTOR)).toEqual({ inScope: true });
    expect(cache({}, { POD_NAMESPACE: 'platform' }).scope('shop', SELECTOR)).toEqual({ inScope: true });
  });

  it('in a cluster, unknown labels are out of scope and flagged unknown (the caller counts it)', () => {
    for (const selector of [SELECTOR, {}]) {
      const decision = cache({ blog: OPTED_IN }, IN_CLUSTER_ENV).scope('shop', selector);
      expect(decision).toEqual({ inScope: false, reason: expect.stringContaining('labels of namespace "shop" are not known yet'), unknown: true });
    }
    expect(cache({}, { OVERCOMMIT_KUBECONFIG: '/home/me/.kube/config', POD_NAMESPACE: 'x' }).scope('shop', SELECTOR)).toMatchObject({
      inScope: false,
      unknown: true,
    });
  });
});

describe('NamespaceCache (not started)', () => {
  it('outside a cluster is ready, knows no labels, and scopes by the webhook', () => {
    const cache = new NamespaceCache(new KubeConfig(), {});
    expect(cache.isReady()).toBe(true);
    expect(cache.labels('shop')).toBeUndefined();
    expect(cache.scope('shop', SELECTOR)).toEqual({ inScope: true });
  });

  it('in a cluster before its first list is not ready, and leaves every namespace out as unknown', () => {
    const cache = new NamespaceCache(new KubeConfig(), IN_CLUSTER_ENV);
    expect(cache.isReady()).toBe(false);
    expect(cache.labels('shop')).toBeUndefined();
    expect(cache.scope('shop', SELECTOR)).toMatchObject({ inScope: false, unknown: true });
    expect(cache.scope('kube-system', SELECTOR)).toMatchObject({ inScope: false, unknown: false });
  });
});
