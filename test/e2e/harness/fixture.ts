import type { E2eEnv } from '../../support/env.js';
import { adminClient, type KubeClient } from '../../support/kube-client.js';
import { WebhookProcess, type WebhookOptions } from '../../support/webhook.js';
import { e2eEnv } from './context.js';

export interface WebhookFixture {
  env: E2eEnv;
  admin: KubeClient;
  webhook: WebhookProcess;
}

/**
 * What most files' beforeAll makes first: the run's environment, an admin client and a webhook
 * process, not started yet, so that a start that fails still leaves them to the file's afterAll.
 */
export function webhookFixture(options?: WebhookOptions): WebhookFixture {
  const env = e2eEnv();
  return { env, admin: adminClient(env), webhook: new WebhookProcess(env, options) };
}
