import { describe, expect, it, vi } from 'vitest';
import {
  DEFAULT_PLATFORM_NAMESPACE,
  SERVICE_ACCOUNT_NAMESPACE_FILE,
  describeKubeConfigSource,
  inCluster,
  kubeConfigSource,
  platformNamespace,
} from './kube.env.js';

const IN_CLUSTER = { KUBERNETES_SERVICE_HOST: '10.96.0.1' };

describe('inCluster', () => {
  it('is true in a pod or with OVERCOMMIT_KUBECONFIG, never for a KUBECONFIG alone', () => {
    expect(inCluster({})).toBe(false);
    expect(inCluster(IN_CLUSTER)).toBe(true);
    expect(inCluster({ OVERCOMMIT_KUBECONFIG: '/home/me/.kube/config' })).toBe(true);
    expect(inCluster({ KUBECONFIG: '/home/me/.kube/config' })).toBe(false);
  });
});

describe('kubeConfigSource and its startup line', () => {
  it('OVERCOMMIT_KUBECONFIG wins, even in a pod, and the line names the server and the file', () => {
    const source = kubeConfigSource({ ...IN_CLUSTER, OVERCOMMIT_KUBECONFIG: '/tmp/dev.kubeconfig' });
    expect(source).toEqual({ kind: 'kubeconfig', path: '/tmp/dev.kubeconfig' });
    expect(describeKubeConfigSource(source, 'https://10.0.0.5:6443', {})).toBe(
      'API server https://10.0.0.5:6443, from OVERCOMMIT_KUBECONFIG=/tmp/dev.kubeconfig',
    );
  });

  it('in a pod: the service account, and its server', () => {
    const source = kubeConfigSource(IN_CLUSTER);
    expect(source).toEqual({ kind: 'service-account' });
    expect(describeKubeConfigSource(source, 'https://10.96.0.1:443', IN_CLUSTER)).toBe("API server https://10.96.0.1:443, from the pod's service account");
  });

  it('outside a cluster: no API server, and a KUBECONFIG set for kubectl is named as ignored', () => {
    const env = { KUBECONFIG: '/home/me/.kube/config' };
    expect(kubeConfigSource(env)).toEqual({ kind: 'none' });
    expect(describeKubeConfigSource({ kind: 'none' }, undefined, env)).toMatch(
      /^no cluster .*; KUBECONFIG is ignored, set OVERCOMMIT_KUBECONFIG to use a kubeconfig$/,
    );
    expect(describeKubeConfigSource({ kind: 'none' }, undefined, {})).not.toContain('KUBECONFIG is ignored');
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
