// Fills Node's compile cache (NODE_COMPILE_CACHE) for dist/main.js: starts the server on its
// built-in defaults (no cluster, a generated certificate), waits until /healthz answers, stops it
// with SIGTERM and checks that the cache was written. The Dockerfile runs it once, as the user the
// container runs as (Node keeps the cache per user, readable by that user only), so that every
// start of the image reads V8's compiled code instead of compiling the bundle again (a shorter
// time from spawn to the first answered review, and less memory: docs/adr/0002-bundled-dist-main.md).
// The e2e set-up and the benchmarks warm their own cache the same way.
//
// Usage: NODE_COMPILE_CACHE=<dir> node scripts/warm-compile-cache.js [app dir, default .]
import { spawn } from 'node:child_process';
import { readdirSync, statSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';

const cacheDir = process.env.NODE_COMPILE_CACHE;
if (!cacheDir) throw new Error('warm-compile-cache: set NODE_COMPILE_CACHE to the cache directory');
const appDir = resolve(process.argv[2] ?? '.');
const httpsPort = process.env.WARM_HTTPS_PORT ?? '18443';
const httpPort = process.env.WARM_HTTP_PORT ?? '18080';

const env = { ...process.env, OVERCOMMIT_HTTPS_PORT: httpsPort, OVERCOMMIT_HTTP_PORT: httpPort, OVERCOMMIT_SHUTDOWN_DELAY_MS: '0', LOG_LEVEL: 'warn' };
// The built-in defaults: no cluster to reach while an image builds.
delete env.KUBERNETES_SERVICE_HOST;
delete env.OVERCOMMIT_KUBECONFIG;
const server = spawn(process.execPath, [join(appDir, 'dist', 'main.js')], { cwd: appDir, stdio: ['ignore', 'ignore', 'inherit'], env });
const exited = new Promise((done) => server.once('exit', (code, signal) => done({ code, signal })));

const deadline = Date.now() + 120_000;
for (;;) {
  const ready = await fetch(`http://127.0.0.1:${httpPort}/healthz`).then(
    (response) => response.ok,
    () => false,
  );
  if (ready) break;
  if (server.exitCode !== null || Date.now() > deadline) {
    server.kill('SIGKILL');
    throw new Error(`warm-compile-cache: dist/main.js did not answer /healthz on :${httpPort} (exit ${server.exitCode})`);
  }
  await sleep(50);
}
server.kill('SIGTERM');
const { code, signal } = await exited;
if (code !== 0) throw new Error(`warm-compile-cache: dist/main.js exited with ${code ?? signal} after SIGTERM`);

// Node writes the cache as it exits, into a folder named after its version, architecture and user.
const files = readdirSync(cacheDir, { recursive: true, withFileTypes: true }).filter((entry) => entry.isFile());
const bytes = files.reduce((sum, entry) => sum + statSync(join(entry.parentPath, entry.name)).size, 0);
if (files.length === 0) throw new Error(`warm-compile-cache: nothing was written to ${cacheDir}`);
console.log(`warm-compile-cache: ${files.length} entries, ${(bytes / 2 ** 20).toFixed(1)} MiB in ${cacheDir}`);
