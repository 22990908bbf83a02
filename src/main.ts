import 'reflect-metadata';
import { Logger } from 'nestjs-pino';
import { createApp } from './app.factory.js';
import { LifecycleService } from './health/lifecycle.service.js';

const port = (name: string, fallback: number) => {
  const value = Number(process.env[name] ?? fallback);
  if (!Number.isInteger(value) || value < 0 || value > 65535) throw new Error(`${name} must be a port number, got ${process.env[name]}`);
  return value;
};

/**
 * How long readiness reports "draining" before the servers close, so that endpoints drop this
 * pod and the API server stops sending to it. In-flight calls then finish on close. Outside a
 * cluster no Service routes to this process, so Ctrl-C stops it at once.
 */
const DRAIN_MS = Number(process.env.OVERCOMMIT_SHUTDOWN_DELAY_MS || (process.env.KUBERNETES_SERVICE_HOST ? 5_000 : 0));

const PORT_VARIABLES = ['OVERCOMMIT_HTTPS_PORT', 'OVERCOMMIT_HTTP_PORT'] as const;

/**
 * The last resort for an error that escaped every guard (src/common/background-tasks.ts).
 * Logged, not handled: a handler for uncaughtException or unhandledRejection would keep a
 * process whose state Node documents as undefined serving admissions; exiting (code 1, Node's
 * default for both, unhandled rejections included) lets the kubelet restart a known state
 * while the other replica serves. The monitor hook only observes, so the default stays.
 */
process.on('uncaughtExceptionMonitor', (error, origin) => {
  const err = error instanceof Error ? { type: error.name, message: error.message, stack: error.stack } : { message: String(error) };
  console.error(JSON.stringify({ level: 60, time: Date.now(), origin, err, msg: `kube-overcommit is exiting on an uncaught ${origin}: ${err.message}` }));
});

async function main(): Promise<void> {
  const ports = { OVERCOMMIT_HTTPS_PORT: port('OVERCOMMIT_HTTPS_PORT', 8443), OVERCOMMIT_HTTP_PORT: port('OVERCOMMIT_HTTP_PORT', 8080) };
  const running = await createApp({ httpsPort: ports.OVERCOMMIT_HTTPS_PORT, httpPort: ports.OVERCOMMIT_HTTP_PORT }).catch(
    (error: NodeJS.ErrnoException & { port?: number }) => {
      const variable = PORT_VARIABLES.find((name) => ports[name] === error.port);
      if (error.code !== 'EADDRINUSE' || !variable) throw error;
      throw new Error(
        `port ${error.port} is already in use (another kube-overcommit running?): stop that process, or set ${variable} to a free port`,
      );
    },
  );
  const logger = running.app.get(Logger);
  logger.log(`serving https :${running.httpsPort} (admission, ops), http :${running.httpPort} (ops)`, 'Main');
  let stopping = false;
  const stop = (signal: string) => {
    if (stopping) return;
    stopping = true;
    running.app.get(LifecycleService).startDraining();
    logger.log(`${signal}: draining for ${DRAIN_MS} ms, then closing`, 'Main');
    setTimeout(() => {
      void running.close().then(
        () => process.exit(0),
        (error) => {
          logger.error(error, 'Main');
          process.exit(1);
        },
      );
    }, DRAIN_MS);
  };
  process.on('SIGTERM', () => stop('SIGTERM'));
  process.on('SIGINT', () => stop('SIGINT'));
}

main().catch((error) => {
  console.error(JSON.stringify({ level: 60, time: Date.now(), msg: `kube-overcommit failed to start: ${error?.message ?? error}` }));
  process.exit(1);
});
