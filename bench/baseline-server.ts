/**
 * The admission benchmark's baseline: the limit of this stack. A bare Fastify 5 HTTPS server
 * with what the webhook's server has (same certificate, same 3 MiB body limit, same keep-alive,
 * Fastify's JSON body parser) that answers every POST /mutate "allowed", with no patch, no
 * validation, no logging and no metrics.
 *
 * env: BASELINE_PORT (default 9443), BASELINE_HOST (127.0.0.1), BASELINE_TLS_CERT_FILE,
 * BASELINE_TLS_KEY_FILE (required). Prints "listening <port>" when ready.
 */
import Fastify from 'fastify';
import { readFileSync } from 'node:fs';

const MAX_BODY_BYTES = 3 * 1024 * 1024; // src/server/edge.ts MAX_BODY_BYTES
const KEEP_ALIVE_MS = 95_000; // the default of OVERCOMMIT_KEEP_ALIVE_TIMEOUT_MS, src/server/server-limits.ts

const certFile = process.env.BASELINE_TLS_CERT_FILE;
const keyFile = process.env.BASELINE_TLS_KEY_FILE;
if (!certFile || !keyFile) throw new Error('BASELINE_TLS_CERT_FILE and BASELINE_TLS_KEY_FILE must be set');

const app = Fastify({
  https: { cert: readFileSync(certFile, 'utf8'), key: readFileSync(keyFile, 'utf8') },
  bodyLimit: MAX_BODY_BYTES,
  keepAliveTimeout: KEEP_ALIVE_MS,
  logger: false,
});

app.post('/mutate', async (request) => {
  const body = request.body as { request?: { uid?: unknown } } | null;
  return { apiVersion: 'admission.k8s.io/v1', kind: 'AdmissionReview', response: { uid: body?.request?.uid, allowed: true } };
});

const port = Number(process.env.BASELINE_PORT ?? 9443);
const address = await app.listen({ port, host: process.env.BASELINE_HOST ?? '127.0.0.1' });
console.log(`listening ${new URL(address).port}`);

for (const signal of ['SIGTERM', 'SIGINT'] as const) {
  process.on(signal, () => {
    void app.close().then(() => process.exit(0));
  });
}
