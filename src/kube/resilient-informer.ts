import { Logger } from '@nestjs/common';
import { KubeConfig, ListWatch, Watch, type KubernetesListObject, type KubernetesObject } from '@kubernetes/client-node';

export interface InformerOptions {
  /** For logs: what is being watched. */
  description: string;
  labelSelector?: string;
  fieldSelector?: string;
  /** Called after every successful list (the first one makes the cache synced). */
  onListed?: () => void;
}

const FIRST_RESTART_DELAY_MS = 1_000;
const MAX_RESTART_DELAY_MS = 30_000;

/**
 * client-node's ListWatch (an informer cache) that never gives up. ListWatch re-lists on
 * 410 Gone and reconnects after its inactivity timeout, but on any other error (API server
 * down, connection refused, 403) it emits `error` and stops: here it is restarted with
 * exponential backoff. `isSynced()` turns true at the first successful list.
 */
export class ResilientInformer<T extends KubernetesObject> {
  private readonly logger = new Logger('Informer');
  readonly cache: ListWatch<T>;
  private synced = false;
  private stopped = false;
  private restartDelayMs = FIRST_RESTART_DELAY_MS;
  private restartTimer?: NodeJS.Timeout;

  constructor(
    kube: KubeConfig,
    path: string,
    list: () => Promise<KubernetesListObject<T>>,
    private readonly options: InformerOptions,
  ) {
    const listAndMark = async () => {
      const result = await list();
      this.synced = true;
      this.restartDelayMs = FIRST_RESTART_DELAY_MS;
      options.onListed?.();
      return result;
    };
    this.cache = new ListWatch(path, new Watch(kube), listAndMark, false, options.labelSelector, options.fieldSelector);
    this.cache.on('error', (error) => this.scheduleRestart(error));
  }

  isSynced(): boolean {
    return this.synced;
  }

  async start(): Promise<void> {
    this.stopped = false;
    await this.cache.start().catch((error) => this.scheduleRestart(error));
  }

  async stop(): Promise<void> {
    this.stopped = true;
    clearTimeout(this.restartTimer);
    await this.cache.stop();
  }

  private scheduleRestart(error: unknown): void {
    if (this.stopped) return;
    const delay = this.restartDelayMs;
    this.restartDelayMs = Math.min(delay * 2, MAX_RESTART_DELAY_MS);
    const message = error instanceof Error ? error.message : String(error);
    this.logger.warn(`watch of ${this.options.description} failed (${message}); retrying in ${delay} ms`);
    clearTimeout(this.restartTimer);
    this.restartTimer = setTimeout(() => void this.cache.start().catch((e) => this.scheduleRestart(e)), delay);
  }
}
