import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { parse, stringify } from 'yaml';
import type { E2eEnv } from './env.js';
import { adminClient, kubectl } from './kube-client.js';

/** `config.yaml` of the shipped ConfigMap (k8s/base/configmap.yaml). */
export function baseConfigYaml(env: E2eEnv): string {
  const doc = parse(readFileSync(join(env.repoRoot, 'k8s', 'base', 'configmap.yaml'), 'utf8'));
  return doc.data['config.yaml'];
}

/** A config.yaml text from an object (`{ nodes: { defaultRatios: { cpu: 1.5 } } }`). */
export function configYaml(config: unknown): string {
  return stringify(config);
}

/**
 * `kubectl apply` of the ConfigMap (kube-overcommit/kube-overcommit-config) with this
 * config.yaml — exactly what an operator does. Resolves with the new resourceVersion; pass it
 * to WebhookProcess.waitForConfig() to wait until the webhook runs with it.
 */
export async function applyConfig(env: E2eEnv, configText: string): Promise<string> {
  const manifest = {
    apiVersion: 'v1',
    kind: 'ConfigMap',
    metadata: { name: env.webhook.configMap, namespace: env.webhook.namespace },
    data: { 'config.yaml': configText },
  };
  const rv = await kubectl(env, ['apply', '-f', '-', '-o', 'jsonpath={.metadata.resourceVersion}'], { input: JSON.stringify(manifest) });
  return rv.trim();
}

/** The shipped config back. */
export function resetConfig(env: E2eEnv): Promise<string> {
  return applyConfig(env, baseConfigYaml(env));
}

/** Events about the ConfigMap (e.g. reason InvalidConfig), oldest first. */
export async function configMapEvents(env: E2eEnv, reason?: string): Promise<any[]> {
  const admin = adminClient(env);
  try {
    const list = await admin.get(`/api/v1/namespaces/${env.webhook.namespace}/events`, {
      fieldSelector: `involvedObject.kind=ConfigMap,involvedObject.name=${env.webhook.configMap}${reason ? `,reason=${reason}` : ''}`,
    });
    return (list.items ?? []).sort((a: any, b: any) => String(a.metadata.creationTimestamp).localeCompare(String(b.metadata.creationTimestamp)));
  } finally {
    admin.close();
  }
}
