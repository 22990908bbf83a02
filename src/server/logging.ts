import { createRequire } from 'node:module';
import { pino, type DestinationStream, type Logger } from 'pino';

/**
 * The process's one pino logger. Nest's logs (nestjs-pino), the boot lines written before Nest
 * starts and main's last word on a failed start all go through it, so every line has one
 * format: JSON, one object a line, for log collectors; readable lines when stdout is a
 * terminal and pino-pretty (a dev dependency, never in the image) is installed.
 */
export function createRootLogger(env: NodeJS.ProcessEnv, destination?: DestinationStream): Logger {
  const level = env.LOG_LEVEL ?? 'info';
  if (destination) return pino({ level }, destination);
  const target = prettyTarget(process.stdout.isTTY === true, canResolve);
  if (!target) return pino({ level });
  const options = { translateTime: 'SYS:HH:MM:ss.l', ignore: 'pid,hostname,context', messageFormat: '{if context}[{context}] {end}{msg}' };
  return pino({ level, transport: { target, options } });
}

/** `pino-pretty` on a terminal where it is installed; else undefined (JSON). */
export function prettyTarget(isTerminal: boolean, resolvable: (module: string) => boolean): string | undefined {
  return isTerminal && resolvable('pino-pretty') ? 'pino-pretty' : undefined;
}

function canResolve(module: string): boolean {
  try {
    createRequire(import.meta.url).resolve(module);
    return true;
  } catch {
    return false;
  }
}

/** The two-method log the TLS loader takes, on a logger, with Nest's `context` field. */
export function contextLog(logger: Logger, context: string): { info(message: string): void; warn(message: string): void } {
  const child = logger.child({ context });
  return { info: (message) => child.info(message), warn: (message) => child.warn(message) };
}
