import { describe, expect, it } from 'vitest';
import { configMapRef } from './configmap.source.js';

const IN_CLUSTER = { KUBERNETES_SERVICE_HOST: '10.96.0.1' };

describe('configMapRef', () => {
  it('is OVERCOMMIT_CONFIGMAP when set, else kube-overcommit-config in the platform namespace', () => {
    expect(configMapRef({ OVERCOMMIT_CONFIGMAP: 'ops/overcommit' })).toEqual({ namespace: 'ops', name: 'overcommit', key: 'config.yaml' });
    expect(configMapRef({ ...IN_CLUSTER, POD_NAMESPACE: 'platform' })).toEqual({ namespace: 'platform', name: 'kube-overcommit-config', key: 'config.yaml' });
    expect(configMapRef({ OVERCOMMIT_CONFIGMAP: 'incomplete', POD_NAMESPACE: 'platform' }).namespace).toBe('platform');
  });
});
