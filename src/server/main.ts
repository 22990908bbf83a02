// First: refuses an older Node in one line before the Kubernetes client loads.
import './node-version.js';
import 'reflect-metadata';
import { Logger } from 'nestjs-pino';
import { createApp, portInUse } from './app.factory.js';
import { readEnvInteger } from '../common/env-integer.js';
import { HealthController } from '../health/health.controller.js';
import { LifecycleService, readShutdownDelayMs } from '../health/lifecycle.service.js';
import { trimHeapWhenReady } from './heap-trim.js';
import { createRootLogger } from './logging.js';

const port = (name: string, fallback: number) => readEnvInteger(process.env, name, { fallback, max: 65535, expected: 'a port number' });

const rootLogger = createRootLogger(process.env);

/**
 * The last resort for an error that escaped every guard (src/common/background-tasks.ts).
 * Logged, not handled: a handler for uncaughtException or unhandledRejection would keep a
 * process whose state Node documents as undefined serving admissions; exiting (code 1, Node's
 * default for both, unhandled rejections included) lets the kubelet restart a known state
 * while the other replica serves. The monitor hook only observes, so the default stays.
 */
process.on('uncaughtExceptionMonitor', (error, origin) => {
  const message = error instanceof Error ? error.message : String(error);
  rootLogger.fatal({ context: 'Main', origin, err: error }, `kube-overcommit is exiting on an uncaught ${origin}: ${message}`);
});

async function main(): Promise<void> {
  const drainMs = readShutdownDelayMs(process.env);
  const ports = { OVERCOMMIT_HTTPS_PORT: port('OVERCOMMIT_HTTPS_PORT', 8443), OVERCOMMIT_HTTP_PORT: port('OVERCOMMIT_HTTP_PORT', 8080) };
  const running = await createApp({ logger: rootLogger, httpsPort: ports.OVERCOMMIT_HTTPS_PORT, httpPort: ports.OVERCOMMIT_HTTP_PORT }).catch((error) => {
    throw portInUse(error, ports) ?? error;
  });
  const logger = running.app.get(Logger);
  logger.log(`serving https :${running.httpsPort} (admission, ops), http :${running.httpPort} (ops)`, 'Main');
  // Start-up's garbage and young generation given back once /readyz says ready (heap-trim.ts).
  const cancelTrim = trimHeapWhenReady({
    isReady: () =>
      running.app
        .get(HealthController)
        .readiness()
        .then(() => true),
    report: (outcome) =>
      outcome instanceof Error
        ? logger.warn(`start-up heap trim failed: ${outcome.message}`, 'Main')
        : logger.log(`start-up heap trimmed in ${outcome.ms} ms: RSS ${outcome.rssBeforeMiB} → ${outcome.rssAfterMiB} MiB`, 'Main'),
  });
  let stopping = false;
  const stop = (signal: string) => {
    if (stopping) return;
    stopping = true;
    cancelTrim();
    running.app.get(LifecycleService).startDraining();
    logger.log(`${signal}: draining for ${drainMs} ms, then closing`, 'Main');
    setTimeout(() => {
      void running.close().then(
        () => process.exit(0),
        (error) => {
          logger.error(error, 'Main');
          process.exit(1);
        },
      );
    }, drainMs);
  };
  process.on('SIGTERM', () => stop('SIGTERM'));
  process.on('SIGINT', () => stop('SIGINT'));
}

main().catch((error) => {
  rootLogger.fatal({ context: 'Main' }, `kube-overcommit failed to start: ${error?.message ?? error}`);
  process.exit(1);
});
