import { readFileSync } from 'node:fs';

/** The environment the app was started with (tests start apps with their own). */
export const KUBE_ENV = Symbol('KUBE_ENV');

/**
 * Where the API client's configuration comes from. A kubeconfig is used only when named by
 * OVERCOMMIT_KUBECONFIG: a developer's KUBECONFIG, set for kubectl, must not turn a local run
 * into one that watches whatever cluster it points at.
 */
export type KubeConfigSource = { kind: 'kubeconfig'; path: string } | { kind: 'service-account' } | { kind: 'none' };

export function kubeConfigSource(env: NodeJS.ProcessEnv): KubeConfigSource {
  if (env.OVERCOMMIT_KUBECONFIG) return { kind: 'kubeconfig', path: env.OVERCOMMIT_KUBECONFIG };
  if (env.KUBERNETES_SERVICE_HOST) return { kind: 'service-account' };
  return { kind: 'none' };
}

/** Running against an API server: in a pod (service account) or with OVERCOMMIT_KUBECONFIG. */
export function inCluster(env: NodeJS.ProcessEnv): boolean {
  return kubeConfigSource(env).kind !== 'none';
}

/** The startup line saying which API server, if any, this process talks to, and why. */
export function describeKubeConfigSource(source: KubeConfigSource, server: string | undefined, env: NodeJS.ProcessEnv): string {
  switch (source.kind) {
    case 'kubeconfig':
      return `API server ${server ?? '(none in the current context)'}, from OVERCOMMIT_KUBECONFIG=${source.path}`;
    case 'service-account':
      return `API server ${server ?? '(unknown)'}, from the pod's service account`;
    case 'none':
      return (
        'no cluster (neither KUBERNETES_SERVICE_HOST nor OVERCOMMIT_KUBECONFIG is set): config from OVERCOMMIT_CONFIG_FILE or the built-in defaults' +
        (env.KUBECONFIG ? '; KUBECONFIG is ignored, set OVERCOMMIT_KUBECONFIG to use a kubeconfig' : '')
      );
  }
}

/** Namespaces no pod strategy ever touches, whatever their labels say (nor the platform's own). */
export const NEVER_NAMESPACES: readonly string[] = ['kube-system', 'kube-node-lease', 'kube-public'];

export const DEFAULT_PLATFORM_NAMESPACE = 'kube-overcommit';

export const SERVICE_ACCOUNT_NAMESPACE_FILE = '/var/run/secrets/kubernetes.io/serviceaccount/namespace';

/**
 * The platform's own namespace: POD_NAMESPACE (the Deployment sets it from the downward API);
 * else, in a cluster, the namespace of the pod's service account; else `kube-overcommit`.
 * The service-account file is not read outside a cluster: it would not be ours.
 */
export function platformNamespace(env: NodeJS.ProcessEnv, readFile: (path: string) => string = (path) => readFileSync(path, 'utf8')): string {
  if (env.POD_NAMESPACE) return env.POD_NAMESPACE;
  if (inCluster(env)) {
    try {
      const namespace = readFile(SERVICE_ACCOUNT_NAMESPACE_FILE).trim();
      if (namespace) return namespace;
    } catch {
      // no service account mounted (OVERCOMMIT_KUBECONFIG from outside the cluster)
    }
  }
  return DEFAULT_PLATFORM_NAMESPACE;
}
