/**
 * Vitest globalSetup of the `e2e` project (vitest.config.ts): one control plane for the whole
 * run, shared by every e2e test file; the tests get it with `e2eEnv()` (context.ts).
 * Teardown stops everything and deletes the bulky parts of the run folder (etcd data, the app
 * copy); its logs stay until a later run prunes it (the newest 8 are kept). E2E_KEEP=1 keeps
 * the etcd data and the app copy too.
 */
import type { TestProject } from 'vitest/node';
import type {} from './context.js'; // the ProvidedContext declaration
import { clusterDown, setUpE2e, tearDownE2e } from '../../support/setup.js';

const log = (message: string) => process.stderr.write(`e2e: ${message}\n`);

export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  const t0 = Date.now();
  const env = await setUpE2e({ log }); // on failure it has already stopped what it started
  log(`set-up took ${((Date.now() - t0) / 1000).toFixed(1)}s`);
  let tornDown = false;
  // If Vitest dies without running the teardown, still leave nothing running.
  const onExit = () => {
    if (!tornDown) clusterDown(env.runDir);
  };
  process.once('exit', onExit);
  project.provide('e2e', env);
  return async () => {
    tornDown = true;
    process.off('exit', onExit);
    await tearDownE2e(env, { log, remove: process.env.E2E_KEEP ? 'nothing' : 'bulky' });
  };
}
