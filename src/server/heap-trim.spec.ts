import { execFileSync, spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it, vi } from 'vitest';
import { type ExposedGc, exposedGc, trimHeap, trimHeapWhenReady } from './heap-trim.js';

const LAST_RESORT = { type: 'major', execution: 'sync', flavor: 'last-resort' };

describe('trimHeap', () => {
  it('runs one last-resort major collection and reports its time and the RSS around it', () => {
    const gc = vi.fn<ExposedGc>();
    const trim = trimHeap(gc);
    expect(gc.mock.calls).toEqual([[LAST_RESORT]]);
    expect(trim!.ms).toBeGreaterThanOrEqual(0);
    expect(trim!.rssBeforeMiB).toBeGreaterThan(0);
    expect(trim!.rssAfterMiB).toBeGreaterThan(0);
  });

  it("takes V8's gc without leaving it on the global object", () => {
    const hadGc = 'gc' in globalThis;
    expect(typeof exposedGc()).toBe('function');
    expect('gc' in globalThis).toBe(hadGc);
  });
});

// Node 24 strips the types of heap-trim.ts, which imports nothing of ours.
const HEAP_TRIM = fileURLToPath(new URL('./heap-trim.ts', import.meta.url));

describe('trimHeap in a real Node, without --expose-gc', () => {
  it("gives the young generation back to the OS (V8's last-resort flavor)", () => {
    const script = `
      import v8 from 'node:v8';
      const { trimHeap } = await import(${JSON.stringify(HEAP_TRIM)});
      const young = () => v8.getHeapSpaceStatistics().find((s) => s.space_name === 'new_space').physical_space_size;
      const kept = [];
      for (let i = 0; i < 400000; i++) kept.push({ i, s: 'x' + i });
      const before = young();
      kept.length = 0;
      trimHeap();
      console.log(JSON.stringify({ before, after: young(), gcLeft: typeof globalThis.gc }));`;
    const output = execFileSync(process.execPath, ['--max-semi-space-size=16', '--input-type=module', '-e', script], { encoding: 'utf8' });
    const { before, after, gcLeft } = JSON.parse(output) as { before: number; after: number; gcLeft: string };
    expect(before).toBeGreaterThan(4 * 2 ** 20);
    expect(after).toBeLessThan(before / 4);
    expect(gcLeft).toBe('undefined');
  });

  it("leaves V8's flags as they were: the compile cache written after a trim is accepted at the next start", () => {
    const dir = mkdtempSync(join(tmpdir(), 'heap-trim-'));
    try {
      writeFileSync(join(dir, 'module.mjs'), 'export const answer = 42;\n');
      writeFileSync(
        join(dir, 'main.mjs'),
        `import { answer } from './module.mjs';\nconst { trimHeap } = await import(${JSON.stringify(HEAP_TRIM)});\ntrimHeap();\nconsole.log(answer);\n`,
      );
      // Node's trace of the compile cache, on stderr: one line per module read.
      const start = () =>
        spawnSync(process.execPath, [join(dir, 'main.mjs')], {
          encoding: 'utf8',
          env: { ...process.env, NODE_OPTIONS: '', NODE_COMPILE_CACHE: join(dir, 'cache'), NODE_DEBUG_NATIVE: 'COMPILE_CACHE' },
        });
      expect(start().stdout).toBe('42\n');
      const second = start().stderr;
      expect(second).toContain(`V8 code cache for ESM file://${join(dir, 'module.mjs')} was accepted`);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe('trimHeapWhenReady', () => {
  /**
   * Resolves once a second trimmer, never ready, has looked `looks` times at pollMs 1: the timers
   * of the trimmer under test had as long to fire. What it did not do by then, it does not do.
   */
  const afterLooks = async (looks: number) => {
    let seen = 0;
    const cancel = trimHeapWhenReady({
      gc: () => () => {},
      report: () => {},
      pollMs: 1,
      isReady: () => {
        seen += 1;
        return false;
      },
    });
    await vi.waitUntil(() => seen >= looks);
    cancel();
  };
  /** Waits for the first call of `mock`, then lets it settle: the test asserts how many calls there were. */
  const called = async (mock: { mock: { calls: unknown[] } }) => {
    await vi.waitUntil(() => mock.mock.calls.length > 0);
    await afterLooks(5);
  };

  it('trims once, at the first look that finds the replica ready', async () => {
    const gc = vi.fn<ExposedGc>();
    const report = vi.fn();
    let looks = 0;
    trimHeapWhenReady({ gc: () => gc, report, pollMs: 1, busy: () => 0, isReady: () => ++looks >= 3 });
    await called(report);
    expect(report).toHaveBeenCalledTimes(1);
    expect(looks).toBe(3);
    expect(gc).toHaveBeenCalledTimes(1);
  });

  it('waits on an asynchronous readiness, a rejected one counting as not ready', async () => {
    const gc = vi.fn<ExposedGc>();
    const report = vi.fn();
    let looks = 0;
    trimHeapWhenReady({
      gc: () => gc,
      report,
      pollMs: 1,
      busy: () => 0,
      isReady: () => (++looks < 2 ? Promise.reject(new Error('down')) : Promise.resolve(true)),
    });
    await called(gc);
    expect(gc).toHaveBeenCalledTimes(1);
    expect(looks).toBe(2);
  });

  it('waits for a look that finds the event loop quiet (busy under 10 % since the previous look)', async () => {
    const gc = vi.fn<ExposedGc>();
    const readings = [1, 0.5, 0.1, 0.09, 0];
    let looks = 0;
    trimHeapWhenReady({ gc: () => gc, report: () => {}, pollMs: 1, busy: () => readings[looks++], isReady: () => true });
    await called(gc);
    expect(gc).toHaveBeenCalledTimes(1);
    expect(looks).toBe(4);
  });

  it('measures the event loop by default: a loop kept busy delays the trim until it is quiet', async () => {
    const gc = vi.fn<ExposedGc>();
    const started = performance.now();
    let trimmedAt = 0;
    gc.mockImplementation(() => void (trimmedAt = performance.now()));
    trimHeapWhenReady({ gc: () => gc, report: () => {}, pollMs: 10, isReady: () => true });
    // Busy for 150 ms in 5 ms slices: every look in that time finds the loop busy.
    for (let slice = 0; slice < 30; slice++) {
      const until = performance.now() + 5;
      while (performance.now() < until);
      await new Promise((resolve) => setImmediate(resolve));
    }
    await called(gc);
    expect(gc).toHaveBeenCalledTimes(1);
    expect(trimmedAt - started).toBeGreaterThanOrEqual(150);
  });

  it('trims anyway once giveUpMs has passed with the event loop never quiet', async () => {
    const gc = vi.fn<ExposedGc>();
    trimHeapWhenReady({ gc: () => gc, report: () => {}, pollMs: 1, giveUpMs: 20, busy: () => 1, isReady: () => true });
    await called(gc);
    expect(gc).toHaveBeenCalledTimes(1);
  });

  it('trims anyway once giveUpMs has passed without readiness', async () => {
    const gc = vi.fn<ExposedGc>();
    trimHeapWhenReady({ gc: () => gc, report: () => {}, pollMs: 1, giveUpMs: 20, isReady: () => false });
    await called(gc);
    expect(gc).toHaveBeenCalledTimes(1);
  });

  it('never trims once cancelled (shutdown first)', async () => {
    const gc = vi.fn<ExposedGc>();
    let looks = 0;
    const cancel = trimHeapWhenReady({
      gc: () => gc,
      report: () => {},
      pollMs: 1,
      giveUpMs: 0,
      isReady: () => {
        looks += 1;
        return true;
      },
    });
    cancel();
    await afterLooks(5);
    expect(looks).toBe(0);
    expect(gc).not.toHaveBeenCalled();
  });

  it('reports a failing collection and does not throw (the server keeps serving)', async () => {
    const report = vi.fn();
    const gc: ExposedGc = () => {
      throw new Error('no heap');
    };
    trimHeapWhenReady({ gc: () => gc, report, busy: () => 0, isReady: () => true });
    await called(report);
    expect(report).toHaveBeenCalledTimes(1);
    expect(report).toHaveBeenCalledWith(expect.objectContaining({ message: 'no heap' }));
  });
});
