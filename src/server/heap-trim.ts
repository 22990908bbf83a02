/**
 * Giving back the memory start-up used, once the replica is ready.
 *
 * Start-up allocates far more than it keeps (the Kubernetes client's generated models, Nest's
 * module graph, the config's validation), and most of it survives a scavenge or two, so V8 grows
 * the young generation towards the Deployment's `--max-semi-space-size` and keeps those pages
 * committed: an idle replica held about 21 MiB of young generation with 5 MiB of it in use
 * (docs/adr/0010-start-up-heap-trim.md; issue 26's "Third pass": git log -p docs/performance.md).
 * V8's memory reducer gives it back only after seconds of idleness, and a webhook that answers a
 * heartbeat every few seconds is never idle that long.
 *
 * Invariants:
 *  1. One last-resort major collection (V8's CollectAllAvailableGarbage: reduce-memory mode,
 *     which also shrinks the young generation to its initial size and uncommits the rest), run
 *     once, at the first look (every 100 ms) that finds the replica ready and its event loop
 *     quiet, and never again: under load the young generation grows back to what the node
 *     reviews need. Quiet is busy less than 10 % of the time since the previous look: the
 *     collection stops the process for 40–50 ms, and a request that arrived right after the
 *     replica started listening would wait for it. After `giveUpMs` without both, it runs anyway.
 *  2. Nothing more. Reduce-memory mode leaves the old generation's allocation limit just above
 *     what is live; with 16 MiB semi-spaces that brought on a mark-compact every 160 ms under
 *     load, and a regular collection ran after this one to set the limit as at any idle moment
 *     (20 ms more). With the Deployment's 8 MiB semi-spaces no such storm follows the trim, with
 *     or without the memory limit, and the regular collection was 12 ms of every start for
 *     nothing (docs/performance.md, "The young generation").
 *  3. No flag is needed: V8's `gc()` is the process's own under `--expose-gc`, else it is taken
 *     from a context created while that flag is set for that moment only (exposedGc), so that
 *     no other context gets a `gc` global. Node's compile cache is keyed by the flags Node
 *     started with, so the image's warmed cache stays valid (the spec checks that a cache
 *     written after a trim is accepted at the next start); `--expose-gc` in NODE_OPTIONS would
 *     key it apart from the cache the image warmed without it.
 *  4. A failure here never stops the server: the collection is an optimisation.
 *
 * Written here: it is one call to V8's `gc()` with the options V8 accepts, and the flag set
 * and put back around one context's creation.
 */
import { performance } from 'node:perf_hooks';
import { memoryUsage } from 'node:process';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';

/** V8's `gc()` with options (the function `--expose-gc` installs). */
export type ExposedGc = (options: { type: 'major'; execution: 'sync'; flavor?: 'last-resort' }) => void;

/** What one trim did: how long its collection took and the RSS around it. */
export interface HeapTrim {
  ms: number;
  rssBeforeMiB: number;
  rssAfterMiB: number;
}

const MIB = 1024 * 1024;
const toMiB = (bytes: number) => Math.round((bytes / MIB) * 10) / 10;

/** V8's `gc()` for this process (invariant 3); `globalThis.gc` stays as it was. */
export function exposedGc(): ExposedGc {
  const own = (globalThis as { gc?: ExposedGc }).gc;
  if (typeof own === 'function') return own;
  setFlagsFromString('--expose-gc');
  try {
    return runInNewContext('gc') as ExposedGc;
  } finally {
    setFlagsFromString('--no-expose-gc');
  }
}

/** Runs the last-resort collection (invariants 1 and 2). */
export function trimHeap(gc: ExposedGc = exposedGc()): HeapTrim {
  const rssBefore = memoryUsage.rss();
  const start = performance.now();
  gc({ type: 'major', execution: 'sync', flavor: 'last-resort' });
  return { ms: Math.round(performance.now() - start), rssBeforeMiB: toMiB(rssBefore), rssAfterMiB: toMiB(memoryUsage.rss()) };
}

export interface TrimWhenReadyOptions {
  /** The readiness `/readyz` reports (certificate, config loaded, namespaces listed). */
  isReady: () => boolean | Promise<boolean>;
  /** Told what the trim did, or why it failed. */
  report: (outcome: HeapTrim | Error) => void;
  /** V8's gc (default: exposedGc()). */
  gc?: () => ExposedGc;
  /** How often readiness is looked at. */
  pollMs?: number;
  /** After this long not ready (or never quiet), trims anyway: what start-up left is garbage by then. */
  giveUpMs?: number;
  /** The share of the time the event loop was busy since the last call (default: Node's event loop utilization). */
  busy?: () => number;
}

/** Busy less than this share of the time since the last look: quiet enough for the collection's pause. */
const QUIET_BELOW = 0.1;

/** The event loop's utilization since the previous call (the first: since this was made). */
function loopBusy(): () => number {
  let since = performance.eventLoopUtilization();
  return () => {
    const now = performance.eventLoopUtilization();
    const { utilization } = performance.eventLoopUtilization(now, since);
    since = now;
    return utilization;
  };
}

/**
 * Trims once (invariants 1–4): at the first look that finds the replica ready and the event loop
 * quiet, or after `giveUpMs`. Returns a cancel function (shutdown before the trim).
 */
export function trimHeapWhenReady(options: TrimWhenReadyOptions): () => void {
  const pollMs = options.pollMs ?? 100;
  const deadline = performance.now() + (options.giveUpMs ?? 60_000);
  let timer: NodeJS.Timeout | undefined;
  let cancelled = false;
  const busy = options.busy ?? loopBusy();
  const look = async () => {
    const ready = await Promise.resolve(options.isReady()).catch(() => false);
    if (cancelled) return;
    // Read at every look, so that each reading covers the time since the previous one.
    const quiet = busy() < QUIET_BELOW;
    if (!(ready && quiet) && performance.now() < deadline) {
      timer = setTimeout(() => void look(), pollMs).unref();
      return;
    }
    try {
      options.report(trimHeap((options.gc ?? exposedGc)()));
    } catch (error) {
      options.report(error instanceof Error ? error : new Error(String(error)));
    }
  };
  timer = setTimeout(() => void look(), 0).unref();
  return () => {
    cancelled = true;
    clearTimeout(timer);
  };
}
