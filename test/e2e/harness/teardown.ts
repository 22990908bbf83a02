import { resetConfig } from '../../support/config.js';
import type { E2eEnv } from '../../support/env.js';
import type { KubeClient } from '../../support/kube-client.js';
import { deleteNamespace } from '../../support/pods.js';
import type { SimKubelet } from '../../support/sim-kubelet.js';
import type { WebhookProcess } from '../../support/webhook.js';

/** What an e2e file started, as far as its beforeAll got. */
export interface TestFileParts {
  env?: E2eEnv;
  admin?: KubeClient;
  webhook?: WebhookProcess;
  kubelets?: readonly (SimKubelet | undefined)[];
  namespaces?: readonly (string | undefined)[];
}

/**
 * The end of an e2e file: its namespaces deleted, its kubelets checked healthy (a failure fails
 * the file) and, whatever that says, stopped with their Nodes, the webhook stopped, the config
 * back to the harness's and the client closed.
 */
export async function tearDown({ env, admin, webhook, kubelets = [], namespaces = [] }: TestFileParts): Promise<void> {
  const running = kubelets.filter((kubelet) => kubelet !== undefined);
  if (env) await Promise.all(namespaces.filter((ns) => ns !== undefined).map((ns) => deleteNamespace(env, ns).catch(() => undefined)));
  try {
    for (const kubelet of running) kubelet.assertHealthy();
  } finally {
    await Promise.all(running.map((kubelet) => kubelet.stop({ deleteNode: true })));
    await webhook?.stop();
    if (env) await resetConfig(env).catch(() => undefined);
    admin?.close();
  }
}
