/**
 * The node-status policy's component (k8s/node-policy, docs/adr/0006-node-policy.md) installed on
 * a cluster of the harness from its files as shipped: the policy and its bindings, the shard
 * ConfigMaps and their ValidatingAdmissionPolicy, the Lease and RBAC (moved to the harness's
 * platform namespace), and the matchConditions its patch adds to the webhook's nodes entry. The
 * e2e test and bench:cluster share it.
 *
 *   const installed = await installNodePolicy(env, admin);
 *   ...
 *   await installed.uninstall();
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { parse, parseAllDocuments } from 'yaml';
import { nodesWebhookName } from './apiserver.js';
import type { E2eEnv } from './env.js';
import type { KubeClient } from './kube-client.js';

const ADMISSION_API = '/apis/admissionregistration.k8s.io/v1';

/** The MutatingAdmissionPolicy's name (k8s/node-policy/policy.yaml): its metrics' `policy` label. */
export const NODE_POLICY = 'kube-overcommit-nodes';

/** The component's objects and the matchConditions its patch adds to the nodes entry. */
export function nodePolicyComponent(repoRoot: string): { objects: any[]; matchConditions: any[] } {
  const dir = join(repoRoot, 'k8s', 'node-policy');
  const objects = ['policy.yaml', 'targets.yaml'].flatMap((file) =>
    parseAllDocuments(readFileSync(join(dir, file), 'utf8'))
      .map((doc) => doc.toJS())
      .filter(Boolean),
  );
  const kustomization = parse(readFileSync(join(dir, 'kustomization.yaml'), 'utf8'));
  const ops = parse(kustomization.patches[0].patch);
  return { objects, matchConditions: ops.find((op: any) => op.op === 'add').value };
}

/** Where an object of the component is created (its kind's plural, in the platform's namespace when namespaced). */
function collectionPath(object: any, namespace: string): string {
  const [group, version] = object.apiVersion.includes('/') ? object.apiVersion.split('/') : ['', object.apiVersion];
  const kind = object.kind.toLowerCase();
  const plural = kind.endsWith('y') ? `${kind.slice(0, -1)}ies` : `${kind}s`;
  return `${group ? `/apis/${group}/${version}` : `/api/${version}`}${object.metadata.namespace ? `/namespaces/${namespace}` : ''}/${plural}`;
}

export async function installNodePolicy(env: E2eEnv, admin: KubeClient): Promise<{ uninstall(): Promise<void> }> {
  const namespace = env.webhook.namespace;
  const { objects, matchConditions } = nodePolicyComponent(env.repoRoot);
  const created: string[] = [];
  for (const object of objects) {
    if (object.metadata.namespace) object.metadata.namespace = namespace;
    for (const subject of object.subjects ?? []) if (subject.namespace) subject.namespace = namespace;
    if (object.spec?.paramRef) object.spec.paramRef.namespace = namespace;
    for (const expression of object.kind === 'ValidatingAdmissionPolicyBinding' ? object.spec.matchResources.namespaceSelector.matchExpressions : [])
      expression.values = [namespace];
    const path = collectionPath(object, namespace);
    await admin.post(path, object);
    created.push(`${path}/${object.metadata.name}`);
  }
  const configurationPath = `${ADMISSION_API}/mutatingwebhookconfigurations/${env.webhook.configurationName}`;
  const entry = (await admin.get(configurationPath)).webhooks.findIndex((w: any) => w.name === nodesWebhookName(env));
  await admin.patch(configurationPath, [{ op: 'add', path: `/webhooks/${entry}/matchConditions`, value: matchConditions }], 'json');
  return {
    async uninstall() {
      for (const path of created.reverse()) await admin.delete(path).catch(() => undefined);
      await admin.patch(configurationPath, [{ op: 'remove', path: `/webhooks/${entry}/matchConditions` }], 'json').catch(() => undefined);
    },
  };
}
