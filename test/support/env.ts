/**
 * What the e2e set-up hands to the tests (JSON: it crosses from Vitest's globalSetup to the
 * test workers through `provide`/`inject`). Everything lives under `runDir`.
 */
export interface E2eEnv {
  /** The repository root. */
  repoRoot: string;
  /** This run's folder: test/e2e/.run/<id>/ (cluster state, logs, certificates, the overlay). */
  runDir: string;
  /** Control-plane binaries (etcd, kube-apiserver, kubectl, kwok, ...). */
  binDir: string;
  /** The control plane's release, `v1.37.2` (go.mod's, or the matrix minor's: KUBE). */
  k8sVersion: string;
  /**
   * The hollow kubelet's release (kubemark in binDir): k8sVersion, or for a release without kubemark
   * (1.38) the newest pinned minor's that has one, within the kubelet's version skew (`v1.37.2`).
   */
  kubeletVersion: string;
  apiserverUrl: string;
  /** The cluster CA (it signs the API server's and the webhook's serving certificates). */
  caFile: string;
  caKeyFile: string;
  /** The CA of the client certificate kube-apiserver presents to webhooks (its admission config: cluster.sh). */
  webhookClientCaFile: string;
  /** Static admin token (group system:masters). */
  adminToken: string;
  adminKubeconfig: string;
  /** Process logs: kube-apiserver.log, kwok.log, webhook-<n>.log, ... */
  logDir: string;
  /** Pid files: `cluster.sh down` stops every process listed here whose command line mentions runDir. */
  pidDir: string;
  /** kwok manages the nodes annotated kwok.x-k8s.io/node=fake (their pods become Running). */
  kwok: { pid: number; annotation: string; taint: { key: string; value: string; effect: string } };
  webhook: WebhookEnv;
}

export interface WebhookEnv {
  /** The platform namespace and the ConfigMap, as in k8s/base. */
  namespace: string;
  configMap: string;
  /** The webhook configuration object and its entries (from k8s/base/webhook.yaml). */
  configurationName: string;
  entries: string[];
  /** The URL every entry's clientConfig now points at. */
  url: string;
  httpsPort: number;
  httpPort: number;
  /** Secret-volume-like folder: tls.crt and tls.key are symlinks through `..data`. */
  tlsDir: string;
  /** Kubeconfig with the token of ServiceAccount kube-overcommit/kube-overcommit. */
  kubeconfig: string;
  /** Folder laid out like the image's /app: dist/ (a copy of the build) and node_modules/ (production dependencies). */
  appDir: string;
}

function minorOf(version: string): number {
  const match = /^v1\.(\d+)\./.exec(version);
  if (!match) throw new Error(`not a Kubernetes version: ${version}`);
  return Number(match[1]);
}

/** The control plane's minor (37 for v1.37.2): what a test that follows an upstream change of the API server between minors branches on. */
export function kubeMinor(env: Pick<E2eEnv, 'k8sVersion'>): number {
  return minorOf(env.k8sVersion);
}

/** The hollow kubelet's minor (37 on 1.38.0-beta.0, which has no kubemark): what a test that follows a change of the kubelet branches on. */
export function kubeletMinor(env: Pick<E2eEnv, 'kubeletVersion'>): number {
  return minorOf(env.kubeletVersion);
}
