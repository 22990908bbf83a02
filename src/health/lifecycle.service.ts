import { Injectable } from '@nestjs/common';
import { readEnvInteger } from '../common/env-integer.js';

/**
 * How long readiness reports "draining" before the servers close, so that endpoints drop this
 * pod and the API server stops sending to it: OVERCOMMIT_SHUTDOWN_DELAY_MS, else 5 s in a
 * cluster and none outside one, where no Service routes to the process (Ctrl-C stops at once).
 */
export function readShutdownDelayMs(env: NodeJS.ProcessEnv): number {
  return readEnvInteger(env, 'OVERCOMMIT_SHUTDOWN_DELAY_MS', { fallback: env.KUBERNETES_SERVICE_HOST ? 5_000 : 0 });
}

/** Set once SIGTERM arrives: readiness fails so endpoints drop us before the server closes. */
@Injectable()
export class LifecycleService {
  private draining = false;
  private readonly drainListeners: (() => void)[] = [];

  startDraining(): void {
    if (this.draining) return;
    this.draining = true;
    for (const listener of this.drainListeners) listener();
  }

  /** Runs `listener` when draining starts (the servers' drain, server-drain.ts). */
  onDraining(listener: () => void): void {
    this.drainListeners.push(listener);
  }

  isDraining(): boolean {
    return this.draining;
  }
}
