import { setTimeout as sleep } from 'node:timers/promises';

export interface WaitOptions {
  /** Give up after this long (default 30 s). */
  timeoutMs?: number;
  /** Pause between probes (default 250 ms). */
  intervalMs?: number;
  /** Extra context appended to the timeout message (e.g. the current state of the objects). */
  describe?: () => unknown;
}

/**
 * Thrown by a probe for a state the wait cannot outlast (a pod Failed, a process exited):
 * waitUntil stops and rethrows it at once, instead of retrying until the timeout.
 */
export class TerminalStateError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'TerminalStateError';
  }
}

/** Thrown by waitUntil on timeout; `last` is the last value or error the probe produced. */
export class WaitTimeoutError extends Error {
  constructor(
    message: string,
    readonly last: unknown,
  ) {
    super(message);
    this.name = 'WaitTimeoutError';
  }
}

function show(value: unknown): string {
  if (value instanceof Error) return `${value.name}: ${value.message}`;
  if (typeof value === 'string') return value;
  try {
    const text = JSON.stringify(value, (_k, v) => (typeof v === 'bigint' ? v.toString() : v));
    return text === undefined ? String(value) : text;
  } catch {
    return String(value);
  }
}

/**
 * Polls `probe` until it returns a truthy value, which is returned. A probe that throws (an API
 * error) or returns a falsy value is "not yet"; one that throws a TerminalStateError ends the
 * wait at once with it. On timeout the error names `what`, the time waited, the last value or
 * error, and `describe()`'s output.
 *
 * A probe holds no assertion (scripts/check-tests.js): an invariant checked there would be
 * retried until it happens to hold. It returns what the test asserts after the wait, or
 * records what it saw on the way:
 *
 *   const node = await waitUntil('node-0 inflated', async () => {
 *     const n = await admin.getNode('node-0');
 *     if (n.metadata.deletionTimestamp) throw new TerminalStateError('node-0 is being deleted');
 *     return n.status.allocatable.cpu === '6' && n;
 *   }, { timeoutMs: 15_000 });
 *   expect(node.status.capacity.cpu).toBe('4');
 */
export async function waitUntil<T>(what: string, probe: () => T | Promise<T>, options: WaitOptions = {}): Promise<NonNullable<T>> {
  const timeoutMs = options.timeoutMs ?? 30_000;
  const intervalMs = options.intervalMs ?? 250;
  const start = Date.now();
  let last: unknown;
  for (;;) {
    try {
      const value = await probe();
      if (value) return value as NonNullable<T>;
      last = value;
    } catch (error) {
      if (error instanceof TerminalStateError) throw error;
      last = error;
    }
    const elapsed = Date.now() - start;
    if (elapsed >= timeoutMs) {
      let context = '';
      if (options.describe) {
        try {
          context = `\n  state: ${show(await options.describe())}`;
        } catch (error) {
          context = `\n  state: (describe failed: ${show(error)})`;
        }
      }
      throw new WaitTimeoutError(`timed out after ${(elapsed / 1000).toFixed(1)}s waiting for ${what}\n  last: ${show(last)}${context}`, last);
    }
    await sleep(Math.min(intervalMs, Math.max(0, timeoutMs - elapsed)));
  }
}
