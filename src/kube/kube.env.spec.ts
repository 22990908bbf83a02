import { describe, expect, it, vi } from 'vitest';
import { configMapRef } from '../config/configmap.source.js';
import { DEFAULT_PLATFORM_NAMESPACE, SERVICE_ACCOUNT_NAMESPACE_FILE, inCluster, platformNamespace } from './kube.env.js';

const IN_CLUSTER = { KUBERNETES_SERVICE_HOST: '10.96.0.1' };

describe('inCluster', () => {
  it('is true in a pod or with an explicit KUBECONFIG', () => {
    expect(inCluster({})).toBe(false);
    expect(inCluster(IN_CLUSTER)).toBe(true);
    expect(inCluster({ KUBECONFIG: '/home/me/.kube/config' })).toBe(true);
  });
});

describe('platformNamespace', () => {
  it('is POD_NAMESPACE when set, without reading any file', () => {
    const read = vi.fn(() => 'from-file');
    expect(platformNamespace({ POD_NAMESPACE: 'platform' }, read)).toBe('platform');
    expect(platformNamespace({ ...IN_CLUSTER, POD_NAMESPACE: 'platform' }, read)).toBe('platform');
    expect(read).not.toHaveBeenCalled();
  });

  it('in a cluster falls back to the service account namespace file, trimmed', () => {
    const read = vi.fn(() => 'ops\n');
    expect(platformNamespace(IN_CLUSTER, read)).toBe('ops');
    expect(read).toHaveBeenCalledWith(SERVICE_ACCOUNT_NAMESPACE_FILE);
  });

  it('defaults to kube-overcommit: no file, an empty file, or outside a cluster (the file is not read)', () => {
    const missing = () => {
      throw Object.assign(new Error('ENOENT'), { code: 'ENOENT' });
    };
    expect(platformNamespace(IN_CLUSTER, missing)).toBe(DEFAULT_PLATFORM_NAMESPACE);
    expect(platformNamespace(IN_CLUSTER, () => ' \n')).toBe(DEFAULT_PLATFORM_NAMESPACE);
    const read = vi.fn(() => 'ops');
    expect(platformNamespace({}, read)).toBe('kube-overcommit');
    expect(read).not.toHaveBeenCalled();
  });
});

describe('configMapRef', () => {
  it('is OVERCOMMIT_CONFIGMAP when set, else kube-overcommit-config in the platform namespace', () => {
    expect(configMapRef({ OVERCOMMIT_CONFIGMAP: 'ops/overcommit' })).toEqual({ namespace: 'ops', name: 'overcommit', key: 'config.yaml' });
    expect(configMapRef({ ...IN_CLUSTER, POD_NAMESPACE: 'platform' })).toEqual({ namespace: 'platform', name: 'kube-overcommit-config', key: 'config.yaml' });
    expect(configMapRef({ OVERCOMMIT_CONFIGMAP: 'incomplete', POD_NAMESPACE: 'platform' }).namespace).toBe('platform');
  });
});
