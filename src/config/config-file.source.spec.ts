import { Logger } from '@nestjs/common';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Counter, Gauge, Registry } from 'prom-client';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { backgroundTasks } from '../../test/fixtures/background.js';
import { BACKGROUND_ERRORS } from '../common/background-tasks.js';
import { ConfigFileSource } from './config-file.source.js';
import { ConfigStore } from './config.store.js';
import { OVERCOMMIT_CONFIG } from '../overcommit.config.js';

const until = (check: () => boolean) => vi.waitUntil(check, { timeout: 5_000, interval: 20 });

describe('ConfigFileSource', () => {
  beforeAll(() => Logger.overrideLogger(false));
  afterAll(() => Logger.overrideLogger(['log', 'error', 'warn', 'debug', 'verbose']));

  it('a watcher that fails is counted and watched again, and picks up the edit made meanwhile', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'config-file-source-'));
    const path = join(dir, 'config.yaml');
    writeFileSync(path, 'nodes:\n  defaultRatios: { cpu: 1.5 }\n');
    const registry = new Registry();
    const store = new ConfigStore(
      new Counter({ name: 'reloads', help: 'h', labelNames: ['result'], registers: [] }),
      new Gauge({ name: 'generation', help: 'h', registers: [] }),
      OVERCOMMIT_CONFIG,
    );
    const source = new ConfigFileSource(path, store, backgroundTasks(registry));
    try {
      await source.onModuleInit();
      expect(store.snapshot().generation).toBe(1);

      const watcher = (source as unknown as { watcher: import('node:fs').FSWatcher }).watcher;
      watcher.emit('error', Object.assign(new Error('EMFILE: too many open files, watch'), { code: 'EMFILE' }));
      writeFileSync(path, 'nodes:\n  defaultRatios: { cpu: 2 }\n'); // while nothing watches
      const errors = (await registry.getSingleMetric(BACKGROUND_ERRORS)!.get()).values.find((v) => v.labels.task === 'config-reload');
      expect(errors?.value).toBe(1);

      await until(() => store.snapshot().generation === 2);
      expect(store.snapshot().config.nodes?.defaultRatios?.cpu).toBe(2);
      writeFileSync(path, 'nodes:\n  defaultRatios: { cpu: 3 }\n'); // and watched again
      await until(() => store.snapshot().generation === 3);
    } finally {
      source.onApplicationShutdown();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
