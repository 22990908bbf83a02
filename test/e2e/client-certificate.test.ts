/**
 * OVERCOMMIT_CLIENT_CA_FILE against the real kube-apiserver: cluster.sh starts it with an
 * AdmissionConfiguration whose WebhookAdmissionConfiguration kubeconfig makes it present a
 * client certificate (from its own CA, env.webhookClientCaFile) to every webhook. The webhook
 * trusts that CA only: the API server's calls succeed, anyone else gets 401 from /mutate, and
 * the ops endpoints stay open to probes without a certificate.
 */
import { readFileSync } from 'node:fs';
import https from 'node:https';
import { join } from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import {
  adminClient,
  apiserverMetrics,
  applyConfig,
  claimNodeNames,
  configYaml,
  createCa,
  e2eEnv,
  getNode,
  nodesWebhookName,
  resetConfig,
  SimKubelet,
  webhookCallCounts,
  WebhookProcess,
} from './harness/index.js';

const env = e2eEnv();
const admin = adminClient(env);
const webhook = new WebhookProcess(env, { env: { OVERCOMMIT_CLIENT_CA_FILE: env.webhookClientCaFile } });

beforeAll(() => webhook.start());
afterAll(async () => {
  await webhook.stop();
  await resetConfig(env);
  admin.close();
});

function post(path: string, options: https.RequestOptions = {}): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = https.request(
      {
        host: '127.0.0.1',
        port: env.webhook.httpsPort,
        path,
        method: path === '/mutate' ? 'POST' : 'GET',
        rejectUnauthorized: false,
        agent: false,
        ...options,
      },
      (res) => {
        let body = '';
        res.on('data', (chunk) => (body += chunk));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
      },
    );
    req.on('error', reject);
    req.end(path === '/mutate' ? JSON.stringify({ apiVersion: 'admission.k8s.io/v1', kind: 'AdmissionReview' }) : undefined);
  });
}

it("the real API server's calls, with its client certificate, are answered; other callers get 401", async () => {
  await webhook.waitForConfig(await applyConfig(env, configYaml({ nodes: { defaultRatios: { cpu: 2 } } })));
  const name = nodesWebhookName(env);
  const before = webhookCallCounts(await apiserverMetrics(env), name);

  const [node] = claimNodeNames(env, 'sim-node', 1);
  const kubelet = await SimKubelet.start(env, { name: node!, capacity: { cpu: '4', memory: '8Gi', pods: '110' }, updateFrequencyMs: 1_000 });
  try {
    await kubelet.waitForPatches(2);
    expect((await getNode(admin, node!)).allocatable.cpu).toBe('8');
    kubelet.assertHealthy();
  } finally {
    await kubelet.stop({ deleteNode: true });
  }
  const after = webhookCallCounts(await apiserverMetrics(env), name);
  expect(after.ok).toBeGreaterThan(before.ok);
  expect(after.failOpen, 'calls that failed open').toBe(before.failOpen);
  expect(after.notOk, 'calls answered other than 200').toBe(before.notOk);

  // No certificate, and a certificate from a CA the webhook does not trust: refused.
  const none = await post('/mutate');
  expect(none.status).toBe(401);
  expect(JSON.parse(none.body).message).toContain(`a client certificate issued by the CA in ${env.webhookClientCaFile} is required`);
  const otherCa = await createCa(join(env.runDir, 'client-certificate-test', 'other-ca'), 'not-the-apiserver');
  const stranger = await post('/mutate', { cert: readFileSync(otherCa.certFile), key: readFileSync(otherCa.keyFile) });
  expect(stranger.status).toBe(401);

  // Probes and scrapes need no certificate.
  expect((await post('/readyz')).status).toBe(200);
  expect((await post('/metrics')).status).toBe(200);
});
