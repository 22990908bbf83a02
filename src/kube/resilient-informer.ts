import { Logger } from '@nestjs/common';
import { KubeConfig, ListWatch, Watch, type KubernetesListObject, type KubernetesObject } from '@kubernetes/client-node';
import { describeApiError } from './api-error.js';

export interface InformerOptions<T extends KubernetesObject> {
  /** For logs: what is being watched. */
  description: string;
  labelSelector?: string;
  fieldSelector?: string;
  /** Called after every successful list (the first one makes the cache synced). */
  onListed?: () => void;
  /**
   * Applied to every object before the cache holds it (list items and watch events), as
   * client-go's SetTransform: drop what nothing here reads. Default: stripManagedFields.
   */
  transform?: (object: T) => T;
}

/**
 * client-go's TransformStripManagedFields: server-side apply's field ownership is often the
 * larger part of an object, and nothing here reads it.
 */
export function stripManagedFields<T extends KubernetesObject>(object: T): T {
  if (object.metadata?.managedFields) delete object.metadata.managedFields;
  return object;
}

/**
 * client-node's Watch, with the object of each ADDED/MODIFIED/DELETED event passed through
 * `transform` before ListWatch sees it. client-node's ListWatch has no transform hook of its
 * own, and this is its one way in for watch events (list results are transformed in listFn).
 * While `stopped()` answers true no watch is opened: ListWatch (client-node 2.0) opens its watch
 * after awaiting its list, without checking again whether it was stopped meanwhile, and that
 * watch would stay open, unowned, after stop().
 */
export class TransformingWatch<T extends KubernetesObject> extends Watch {
  constructor(
    kube: KubeConfig,
    private readonly transform: (object: T) => T,
    private readonly stopped: () => boolean = () => false,
  ) {
    super(kube);
  }

  override async watch(...[path, queryParams, callback, done]: Parameters<Watch['watch']>): ReturnType<Watch['watch']> {
    if (this.stopped()) return new AbortController();
    const transformed: typeof callback = (phase, object, watchObject) =>
      callback(phase, phase === 'ADDED' || phase === 'MODIFIED' || phase === 'DELETED' ? this.transform(object) : object, watchObject);
    return super.watch(path, queryParams, transformed, done);
  }
}

/** Items per LIST request, as client-go's reflector pages its lists. */
export const LIST_PAGE_SIZE = 500;

/** The paging options of one LIST request (`_continue` is client-node's name for `continue`). */
export interface ListPage {
  limit: number;
  _continue?: string;
}

const FIRST_RESTART_DELAY_MS = 1_000;
const MAX_RESTART_DELAY_MS = 30_000;

/**
 * client-node's ListWatch (an informer cache) that never gives up. ListWatch re-lists on
 * 410 Gone and reconnects after its inactivity timeout, but on any other error (API server
 * down, connection refused, 403) it emits `error` and stops: here it is restarted with
 * exponential backoff. `isSynced()` turns true at the first successful list. Objects enter the
 * cache through `transform` (managedFields stripped by default).
 *
 * The list is paged, LIST_PAGE_SIZE items a request (the API server serves every page from the
 * first one's snapshot), and each page is transformed before the next is fetched: a whole large
 * collection in one response (a large cluster's pods, docs/performance.md section 9) is received,
 * parsed and deserialised at once, beyond the pod's memory limit. A `list` that ignores the page options lists
 * in one request. A continue token that expires mid-list (410) fails the list, and the restart
 * lists again from the first page.
 */
export class ResilientInformer<T extends KubernetesObject> {
  private readonly logger = new Logger('Informer');
  readonly cache: ListWatch<T>;
  private synced = false;
  private stopped = false;
  private restartDelayMs = FIRST_RESTART_DELAY_MS;
  private restartTimer?: NodeJS.Timeout;
  private readonly server?: string;

  constructor(
    kube: KubeConfig,
    path: string,
    list: (page: ListPage) => Promise<KubernetesListObject<T>>,
    private readonly options: InformerOptions<T>,
  ) {
    this.server = kube.getCurrentCluster()?.server;
    const transform = options.transform ?? stripManagedFields;
    const listAndMark = async () => {
      const items: T[] = [];
      let result = await list({ limit: LIST_PAGE_SIZE });
      for (;;) {
        for (const item of result.items) items.push(transform(item));
        const next = result.metadata?._continue;
        if (!next) break;
        result = await list({ limit: LIST_PAGE_SIZE, _continue: next });
      }
      result.items = items;
      this.synced = true;
      this.restartDelayMs = FIRST_RESTART_DELAY_MS;
      options.onListed?.();
      return result;
    };
    this.cache = new ListWatch(
      path,
      new TransformingWatch(kube, transform, () => this.stopped),
      listAndMark,
      false,
      options.labelSelector,
      options.fieldSelector,
    );
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
    this.logger.warn(`watch of ${this.options.description} failed (${describeApiError(error, this.server)}); retrying in ${delay} ms`);
    clearTimeout(this.restartTimer);
    this.restartTimer = setTimeout(() => void this.cache.start().catch((e) => this.scheduleRestart(e)), delay);
  }
}
