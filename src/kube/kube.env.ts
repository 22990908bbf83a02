/** The environment the app was started with (tests start apps with their own). */
export const KUBE_ENV = Symbol('KUBE_ENV');

/** Running against an API server: in a pod (service account) or with an explicit KUBECONFIG. */
export function inCluster(env: NodeJS.ProcessEnv): boolean {
  return Boolean(env.KUBERNETES_SERVICE_HOST || env.KUBECONFIG);
}
