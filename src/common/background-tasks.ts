/**
 * Work that runs outside a request: timers, watch and informer handlers, config reloads.
 *
 *   1. Nothing a request, a watch event or a file carried may end the process later: every
 *      background task runs through `guard`, which catches what it throws (or rejects), logs
 *      it with the task's name and counts it in kube_overcommit_background_errors_total{task}.
 *   2. A guarded task keeps running: a timer keeps firing, a handler keeps receiving events.
 *   3. The `task` label is one of BACKGROUND_TASKS, each created at 0 at bootstrap, so an alert
 *      can use increase() from the first scrape and the series count is fixed.
 *
 * What escapes every guard still ends the process (main.ts logs it first): after an uncaught
 * exception Node's state is undefined, and a restarted pod is a known state.
 */
import { Global, Injectable, Logger, Module } from '@nestjs/common';
import { InjectMetric, makeCounterProvider } from '@willsoto/nestjs-prometheus';
import type { Counter } from 'prom-client';

export const BACKGROUND_ERRORS = 'kube_overcommit_background_errors_total';

export const BACKGROUND_TASKS = [
  'config-reload',
  'informer-event',
  'node-events',
  'node-metrics-prune',
  'node-targets',
  'reconcile',
  'tls-reload',
  'usage-ratios',
] as const;
export type BackgroundTask = (typeof BACKGROUND_TASKS)[number];

@Injectable()
export class BackgroundTasks {
  private readonly logger = new Logger('Background');

  constructor(@InjectMetric(BACKGROUND_ERRORS) private readonly errors: Counter<string>) {
    for (const task of BACKGROUND_TASKS) this.errors.inc({ task }, 0);
  }

  /** `fn`, made safe to hand to a timer, an event emitter or a watcher (invariants 1 and 2). */
  guard<A extends unknown[]>(task: BackgroundTask, fn: (...args: A) => unknown): (...args: A) => void {
    return (...args) => {
      try {
        const result = fn(...args);
        if (result instanceof Promise) result.catch((error: unknown) => this.report(task, error));
      } catch (error) {
        this.report(task, error);
      }
    };
  }

  /** Logs and counts an error a task reports itself (an `error` event: unhandled, it would end the process). */
  report(task: BackgroundTask, error: unknown): void {
    this.errors.inc({ task });
    this.logger.error({ task, err: error }, `background task ${task} failed; it keeps running`);
  }
}

/** Global: every module with background work injects BackgroundTasks. */
@Global()
@Module({
  providers: [
    makeCounterProvider({
      name: BACKGROUND_ERRORS,
      help: `Unexpected errors in background work (timers, watch handlers, config reloads), by task (${BACKGROUND_TASKS.join(', ')}); logged, and the task keeps running.`,
      labelNames: ['task'],
    }),
    BackgroundTasks,
  ],
  exports: [BackgroundTasks],
})
export class BackgroundTasksModule {}
