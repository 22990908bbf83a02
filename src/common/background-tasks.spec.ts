import { Logger } from '@nestjs/common';
import { Test } from '@nestjs/testing';
import { Registry, register } from 'prom-client';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { backgroundTasks } from '../../test/fixtures/background.js';
import { BACKGROUND_ERRORS, BACKGROUND_TASKS, BackgroundTasks, BackgroundTasksModule } from './background-tasks.js';

describe('BackgroundTasks', () => {
  beforeAll(() => Logger.overrideLogger(false));
  afterAll(() => Logger.overrideLogger(['log', 'error', 'warn', 'debug', 'verbose']));

  const errors = async (registry: Registry) =>
    Object.fromEntries((await registry.getSingleMetric(BACKGROUND_ERRORS)!.get()).values.map(({ labels, value }) => [labels.task, value]));

  it('creates every task series at 0', async () => {
    const registry = new Registry();
    backgroundTasks(registry);
    expect(await errors(registry)).toEqual(Object.fromEntries(BACKGROUND_TASKS.map((task) => [task, 0])));
  });

  it('passes arguments through and counts nothing when the task succeeds', async () => {
    const registry = new Registry();
    const seen: unknown[] = [];
    backgroundTasks(registry).guard('informer-event', (a: number, b: string) => seen.push(a, b))(1, 'x');
    expect(seen).toEqual([1, 'x']);
    expect((await errors(registry))['informer-event']).toBe(0);
  });

  it('catches a throw and a rejection, logs and counts each under its task, and the task runs again', async () => {
    const registry = new Registry();
    const background = backgroundTasks(registry);
    const logged = vi.spyOn(Logger.prototype, 'error').mockImplementation(() => {});
    let calls = 0;
    const task = background.guard('node-metrics-prune', () => {
      calls += 1;
      if (calls === 1) throw new TypeError('Cannot convert object to primitive value');
    });
    expect(() => task()).not.toThrow();
    task();
    expect(calls).toBe(2);

    const reload = background.guard('config-reload', async () => {
      throw new Error('boom');
    });
    reload();
    await new Promise((resolve) => setImmediate(resolve));
    expect(await errors(registry)).toMatchObject({ 'node-metrics-prune': 1, 'config-reload': 1, 'tls-reload': 0, 'informer-event': 0 });
    expect(logged).toHaveBeenCalledWith(
      expect.objectContaining({ task: 'config-reload', err: expect.any(Error) }),
      expect.stringMatching(/config-reload failed; it keeps running/),
    );
    logged.mockRestore();
  });

  it('a guarded timer keeps firing after a failure, and a rejection never reaches the process', async () => {
    const unhandled = vi.fn();
    process.on('unhandledRejection', unhandled);
    vi.useFakeTimers();
    try {
      const registry = new Registry();
      let ticks = 0;
      const timer = setInterval(
        backgroundTasks(registry).guard('tls-reload', async () => {
          ticks += 1;
          throw new Error(`tick ${ticks}`);
        }),
        1_000,
      );
      await vi.advanceTimersByTimeAsync(3_000);
      clearInterval(timer);
      expect(ticks).toBe(3);
      expect((await errors(registry))['tls-reload']).toBe(3);
    } finally {
      vi.useRealTimers();
    }
    await new Promise((resolve) => setImmediate(resolve));
    process.off('unhandledRejection', unhandled);
    expect(unhandled).not.toHaveBeenCalled();
  });

  it('is provided globally with its counter through Nest DI', async () => {
    register.clear();
    const moduleRef = await Test.createTestingModule({ imports: [BackgroundTasksModule] }).compile();
    expect(moduleRef.get(BackgroundTasks)).toBeInstanceOf(BackgroundTasks);
    expect(await register.metrics()).toContain(`${BACKGROUND_ERRORS}{task="node-metrics-prune"} 0`);
    await moduleRef.close();
    register.clear();
  });
});
