/**
 * The e2e stage for a script outside Vitest (`npm run demo`, the cluster benchmarks): set up as
 * for the tests (setup.ts), what the script started stopped before the control plane goes, and
 * everything torn down at the end, on failure and on Ctrl-C. A successful run deletes its run
 * folder (unless `keep`); a failed one keeps its logs.
 *
 *   runOnStage('demo', log, false, async ({ env, onTearDown }) => {
 *     const webhook = new WebhookProcess(env);
 *     onTearDown(() => webhook.stop());
 *     await webhook.start();
 *     ...
 *     return true;                      // every check passed: exit status 0
 *   });
 */
import type { E2eEnv } from './env.js';
import type { Log } from './process.js';
import { setUpE2e, tearDownE2e } from './setup.js';

/** The e2e stage a script runs on. */
export interface Stage {
  env: E2eEnv;
  /** Registers something to stop before the control plane goes (run in reverse order). */
  onTearDown(cleanup: () => Promise<void> | void): void;
  /**
   * Stops what was registered, then the control plane (`cluster.sh down`); idempotent. Removes
   * the run folder after a success (unless --keep), only its bulky parts (etcd data, the app
   * copy) after a failure, so that its logs stay.
   */
  tearDown(success?: boolean): Promise<void>;
}

/**
 * Brings up the e2e control plane (build if needed, cluster.sh up, kwok, k8s/base through the
 * overlay, webhook certificate and token) and registers a tear-down on SIGINT and SIGTERM.
 */
export async function bringUp(name: string, log: Log, keep: boolean): Promise<Stage> {
  let runDir: string | undefined;
  let done: Promise<void> | undefined;
  const cleanups: Array<() => Promise<void> | void> = [];
  const tearDown = (success = false) => {
    done ??= (async () => {
      for (const cleanup of cleanups.reverse())
        await Promise.resolve()
          .then(cleanup)
          .catch((e) => log(`cleanup: ${e}`));
      if (runDir) await tearDownE2e({ runDir }, { remove: keep ? 'nothing' : success ? 'all' : 'bulky', log });
    })();
    return done;
  };
  for (const signal of ['SIGINT', 'SIGTERM'] as const) {
    process.once(signal, () => {
      log(`${signal}: stopping everything`);
      void tearDown().finally(() => process.exit(130));
    });
  }
  try {
    const env = await setUpE2e({ name, build: 'if-needed', log: (l) => log(`  ${l}`), onRunDir: (dir) => (runDir = dir) });
    return { env, tearDown, onTearDown: (cleanup) => void cleanups.push(cleanup) };
  } catch (error) {
    runDir = undefined; // setUpE2e cleans up after itself
    throw error;
  }
}

/**
 * A script's whole run on the stage: brings it up, runs `script` on it (true: every check
 * passed; a throw is logged as a failure), tears the stage down and answers the exit status,
 * 0 or 1 (a bench's main, benchMain of bench/lib.ts, exits with it).
 */
export async function onStage(name: string, log: Log, keep: boolean, script: (stage: Stage) => Promise<boolean>): Promise<number> {
  const stage = await bringUp(name, log, keep);
  let passed = false;
  try {
    passed = await script(stage);
  } catch (error) {
    log(`FAILED: ${(error as Error).stack ?? error}`);
  } finally {
    await stage.tearDown(passed);
  }
  if (passed) log('done; nothing left running');
  return passed ? 0 : 1;
}

/** onStage, then exits with its status (1 when the stage could not be brought up). */
export function runOnStage(name: string, log: Log, keep: boolean, script: (stage: Stage) => Promise<boolean>): void {
  onStage(name, log, keep, script).then(
    (code) => process.exit(code),
    (error) => {
      console.error(error);
      process.exit(1);
    },
  );
}
