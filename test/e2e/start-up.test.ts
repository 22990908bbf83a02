/**
 * The image's start: `node dist/main.js` is one bundled file (scripts/bundle.js) and its compile
 * cache is filled when the image is built (scripts/warm-compile-cache.js, run by the set-up into the
 * app folder as the Dockerfile runs it). A start in cluster mode with production dependencies only
 * must take V8's code from that cache, not compile the bundle again. Nest is in the bundle once:
 * no package left to Node loads a second copy from node_modules. What nothing here uses is not
 * loaded at start (scripts/bundle-plugins.js, src/common/fastify-schema-compilers.ts). Once ready, the webhook gives
 * start-up's memory back (src/server/heap-trim.ts), and the compile cache stays the image's.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { e2eEnv, tearDown, waitUntil, WebhookProcess, type E2eEnv } from './harness/index.js';

let env: E2eEnv;
let webhook: WebhookProcess;

beforeAll(async () => {
  env = e2eEnv();
  // Node's own trace of the compile cache: one line per module read, accepted or rejected.
  webhook = new WebhookProcess(env, { env: { NODE_DEBUG_NATIVE: 'COMPILE_CACHE' } });
  await webhook.start();
});

afterAll(() => tearDown({ env, webhook }));

describe('start-up', () => {
  it('dist/main.js is the bundle, and the next start accepts the compile cache warmed for it', () => {
    const main = join(env.webhook.appDir, 'dist', 'main.js');
    expect(readFileSync(main, 'utf8').startsWith("import { createRequire as __createRequire } from 'node:module';")).toBe(true);
    const log = readFileSync(webhook.logFile!, 'utf8');
    expect(log).toContain(`V8 code cache for ESM file://${main} was accepted`);
    expect(log).not.toContain(`V8 code cache for ESM file://${main} was rejected`);
  });

  it('loads Nest once, from the bundle: no module of @nestjs/ or rxjs is read from node_modules', () => {
    const log = readFileSync(webhook.logFile!, 'utf8');
    // The trace names every module file read, CommonJS and ESM alike: the externals show up.
    expect(log).toMatch(/V8 code cache for CommonJS .*node_modules\/fastify\//);
    expect(log).not.toMatch(/node_modules\/@nestjs\//);
    expect(log).not.toMatch(/node_modules\/rxjs\//);
  });

  it('reads neither class-validator and prom-client (bundled) nor what nothing here uses: libphonenumber-js, @opentelemetry/api, Fastify’s schema compilers', () => {
    const log = readFileSync(webhook.logFile!, 'utf8');
    expect(log).not.toMatch(/node_modules\/class-validator\//);
    expect(log).not.toMatch(/node_modules\/(libphonenumber-js|@opentelemetry\/api|prom-client)\//);
    expect(log).not.toMatch(/node_modules\/(@fastify\/ajv-compiler|ajv|@fastify\/fast-json-stringify-compiler)\//);
  });

  it('trims its heap once ready and its event loop quiet', async () => {
    const trims = await waitUntil('the start-up trim logged', () => readFileSync(webhook.logFile!, 'utf8').match(/"msg":"start-up heap trimmed in [^"]*"/g), {
      timeoutMs: 30_000,
      intervalMs: 100,
    });
    expect(trims).toHaveLength(1);
    expect(trims[0]).toMatch(/"msg":"start-up heap trimmed in \d+ ms: RSS [\d.]+ → [\d.]+ MiB"/);
  });
});
