/**
 * The image's start: `node dist/main.js` is one bundled file (scripts/bundle.js) and its compile
 * cache is filled when the image is built (scripts/warm-compile-cache.js, run by the set-up into the
 * app folder as the Dockerfile runs it). A start in cluster mode with production dependencies only
 * must take V8's code from that cache, not compile the bundle again.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { e2eEnv, tearDown, WebhookProcess, type E2eEnv } from './harness/index.js';

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
});
