/**
 * Unit specs run Nest classes without an app, so their `new Logger(...)` would print through
 * Nest's console logger. Here every line is kept instead (cleared before each test): a green
 * run prints only the runner's output, and a spec asserts on the lines it provokes.
 */
import { Logger, type LogLevel } from '@nestjs/common';
import { beforeEach } from 'vitest';

export interface NestLogLine {
  level: LogLevel;
  message: unknown;
  context?: string;
}

const lines: NestLogLine[] = [];
const keep =
  (level: LogLevel) =>
  (message: unknown, ...rest: unknown[]) =>
    void lines.push({ level, message, context: typeof rest.at(-1) === 'string' ? (rest.at(-1) as string) : undefined });

Logger.overrideLogger({ log: keep('log'), error: keep('error'), warn: keep('warn'), debug: keep('debug'), verbose: keep('verbose'), fatal: keep('fatal') });
beforeEach(() => {
  lines.length = 0;
});

/** The lines logged so far in this test. */
export function nestLogs(level?: LogLevel): NestLogLine[] {
  return level ? lines.filter((line) => line.level === level) : [...lines];
}
