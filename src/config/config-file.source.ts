import { Injectable, Logger, type OnApplicationShutdown, type OnModuleInit } from '@nestjs/common';
import { watch, type FSWatcher } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { basename, dirname, resolve } from 'node:path';
import { BackgroundTasks } from '../common/background-tasks.js';
import { ConfigStore } from './config.store.js';

const RELOAD_DEBOUNCE_MS = 50;
const REWATCH_DELAY_MS = 1_000;

/**
 * Watches OVERCOMMIT_CONFIG_FILE. The directory is watched, not the file: editors and
 * Kubernetes volume updates replace the file by rename, which a watch on the file misses.
 * Unchanged content is not re-applied, so a touch does not bump the generation.
 */
@Injectable()
export class ConfigFileSource implements OnModuleInit, OnApplicationShutdown {
  private readonly logger = new Logger('ConfigFile');
  private watcher?: FSWatcher;
  private debounce?: NodeJS.Timeout;
  private closed = false;
  private lastText?: string;

  constructor(
    private readonly path: string,
    private readonly store: ConfigStore,
    private readonly background: BackgroundTasks,
  ) {}

  async onModuleInit(): Promise<void> {
    await this.reload();
    this.store.markLoaded();
    this.watchDirectory();
  }

  onApplicationShutdown(): void {
    this.closed = true;
    clearTimeout(this.debounce);
    this.watcher?.close();
  }

  private watchDirectory(): void {
    const file = basename(this.path);
    this.watcher = watch(dirname(resolve(this.path)), (_event, changed) => {
      if (changed !== null && changed !== file && !changed.startsWith('..')) return;
      this.scheduleReload(RELOAD_DEBOUNCE_MS);
    });
    // A watcher that fails is closed: counted, then watched again, reading what it missed.
    this.watcher.on('error', (error) => {
      this.background.report('config-reload', error);
      this.watcher?.close();
      if (!this.closed)
        this.debounce = setTimeout(
          this.background.guard('config-reload', () => this.watchDirectory()),
          REWATCH_DELAY_MS,
        );
    });
    this.scheduleReload(0);
  }

  private scheduleReload(delayMs: number): void {
    clearTimeout(this.debounce);
    this.debounce = setTimeout(
      this.background.guard('config-reload', () => this.reload()),
      delayMs,
    );
  }

  private async reload(): Promise<void> {
    let text: string;
    try {
      text = await readFile(this.path, 'utf8');
    } catch (error) {
      this.logger.error(`cannot read config file ${this.path}: ${(error as Error).message}; keeping the config in force`);
      return;
    }
    if (text === this.lastText) return;
    this.lastText = text;
    this.store.apply(text, `file:${this.path}`);
  }
}
