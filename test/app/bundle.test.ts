/**
 * scripts/bundle-plugins.js, which change what `node dist/main.js` loads at start-up and nothing
 * else: a module bundled with them, as scripts/bundle.js bundles the server, gives the answers it
 * gives unbundled, and loads libphonenumber-js, @opentelemetry/api and Node's own undici only when
 * something uses them.
 */
import { execFileSync } from 'node:child_process';
import { mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { build, type Plugin } from 'esbuild';
import { afterAll, describe, expect, it } from 'vitest';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
// Inside the repository, so that the bundle's external packages resolve from its node_modules.
const WORK = join(ROOT, 'node_modules', '.cache', 'bundle-test');

// What the module reports: whether libphonenumber-js was loaded before and after a phone-number
// check, the check's verdicts; whether @opentelemetry/api was loaded before and after prom-client
// collected a metric with exemplars, and that metric; a value read from node:http, and whether Node
// loaded its undici.
const ENTRY = `
import { STATUS_CODES } from 'node:http';
import { isPhoneNumber } from 'class-validator';
import { Registry, collectDefaultMetrics } from 'prom-client';
const loaded = (name) => Object.keys(require.cache).some((file) => file.includes('/' + name + '/'));
const phoneNumbers = [loaded('libphonenumber-js')];
const verdicts = [isPhoneNumber('+14155552671'), isPhoneNumber('+1 555'), isPhoneNumber('0612345678', 'NL')];
phoneNumbers.push(loaded('libphonenumber-js'));
const registry = new Registry(Registry.OPENMETRICS_CONTENT_TYPE);
collectDefaultMetrics({ register: registry, enableExemplars: true });
const openTelemetry = [loaded('@opentelemetry/api')];
const metrics = await registry.metrics();
openTelemetry.push(loaded('@opentelemetry/api'));
const undici = process.moduleLoadList.some((name) => name.includes('undici'));
console.log(JSON.stringify({
  phoneNumbers, verdicts, openTelemetry, cpuCounted: metrics.includes('process_cpu_user_seconds_total'), notFound: STATUS_CODES[404], undici,
}));
`;

afterAll(() => rmSync(WORK, { recursive: true, force: true }));

describe('the bundle plugins', () => {
  it('load libphonenumber-js and @opentelemetry/api at their first use and never Node’s undici, with the same answers', async () => {
    const plugins = (await import(pathToFileURL(join(ROOT, 'scripts', 'bundle-plugins.js')).href)) as Record<string, Plugin> & { requireBanner: string };
    mkdirSync(WORK, { recursive: true });
    writeFileSync(join(WORK, 'entry.mjs'), ENTRY);
    const outfile = join(WORK, 'bundle.mjs');
    await build({
      entryPoints: [join(WORK, 'entry.mjs')],
      outfile,
      bundle: true,
      platform: 'node',
      format: 'esm',
      target: 'node24',
      plugins: [plugins.builtinsByRequire!, plugins.lazyModules!],
      banner: { js: plugins.requireBanner },
      logLevel: 'silent',
    });
    expect(readFileSync(outfile, 'utf8')).not.toMatch(/from\s*"node:http"/);
    const report = JSON.parse(execFileSync(process.execPath, [outfile], { encoding: 'utf8' })) as Record<string, unknown>;
    expect(report).toEqual({
      phoneNumbers: [false, true],
      verdicts: [true, false, true],
      openTelemetry: [false, true],
      cpuCounted: true,
      notFound: 'Not Found',
      undici: false,
    });
  });
});
