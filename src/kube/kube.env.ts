import { readFileSync } from 'node:fs';

/** The environment the app was started with (tests start apps with their own). */
export const KUBE_ENV = Symbol('KUBE_ENV');

/** Running against an API server: in a pod (service account) or with an explicit KUBECONFIG. */
export function inCluster(env: NodeJS.ProcessEnv): boolean {
  return Boolean(env.KUBERNETES_SERVICE_HOST || env.KUBECONFIG);
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
      // no service account mounted (KUBECONFIG from outside the cluster)
    }
  }
  return DEFAULT_PLATFORM_NAMESPACE;
}
