import type { E2eEnv } from './env.js';
import { adminClient } from './kube-client.js';
import { Metrics, not } from './metrics.js';

/** kube-apiserver's /metrics (as admin). */
export async function apiserverMetrics(env: E2eEnv): Promise<Metrics> {
  const admin = adminClient(env);
  try {
    return Metrics.parse(await admin.text('/metrics'));
  } finally {
    admin.close();
  }
}

/** What the API server counted for one webhook entry (e.g. `nodes.kube-overcommit.io`), admit calls. */
export interface WebhookCallCounts {
  /** apiserver_admission_webhook_request_total with code 200. */
  ok: number;
  /** apiserver_admission_webhook_request_total with any other code (0 = the call failed before an HTTP answer, e.g. refused). */
  notOk: number;
  /** apiserver_admission_webhook_fail_open_count: calls that failed and were ignored (failurePolicy Ignore). */
  failOpen: number;
  /** apiserver_admission_webhook_rejection_count: calls that failed or rejected, by error type. */
  rejections: number;
}

export function webhookCallCounts(metrics: Metrics, webhook: string): WebhookCallCounts {
  return {
    ok: metrics.sum('apiserver_admission_webhook_request_total', { name: webhook, type: 'admit', code: '200' }),
    notOk: metrics.sum('apiserver_admission_webhook_request_total', { name: webhook, type: 'admit', code: not('200') }),
    failOpen: metrics.sum('apiserver_admission_webhook_fail_open_count', { name: webhook, type: 'admit' }),
    rejections: metrics.sum('apiserver_admission_webhook_rejection_count', { name: webhook, type: 'admit' }),
  };
}

/**
 * Where the harness points a webhook entry (`<entry>.kube-overcommit.io`): its own path under
 * env.webhook.url (`…/mutate/<entry>`), as k8s/base/webhook.yaml serves it on the Service.
 */
export function entryUrl(env: E2eEnv, entryName: string): string {
  return `${env.webhook.url}/${entryName.slice(0, entryName.indexOf('.'))}`;
}

/** The MutatingWebhookConfiguration entry that handles nodes (k8s/base/webhook.yaml). */
export function nodesWebhookName(env: E2eEnv): string {
  const name = env.webhook.entries.find((e) => e.startsWith('nodes.'));
  if (!name) throw new Error(`no nodes.* entry among ${env.webhook.entries.join(', ')}`);
  return name;
}
