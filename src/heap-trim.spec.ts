import { execFileSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { describe, expect, it, vi } from 'vitest';
import { type ExposedGc, trimHeap, trimHeapWhenReady } from './heap-trim.js';

const LAST_RESORT = { type: 'major', execution: 'sync', flavor: 'last-resort' };

describe('trimHeap', () => {
  it('runs one last-resort major collection and reports its time and the RSS around it', () => {
    const gc = vi.fn<ExposedGc>();
    const trim = trimHeap(gc);
    expect(gc).toHaveBeenCalledTimes(1);
    expect(gc).toHaveBeenCalledWith(LAST_RESORT);
    expect(trim!.ms).toBeGreaterThanOrEqual(0);
    expect(trim!.rssBeforeMiB).toBeGreaterThan(0);
    expect(trim!.rssAfterMiB).toBeGreaterThan(0);
  });

  it('does nothing without --expose-gc (no gc to call)', () => {
    expect(trimHeap(undefined)).toBeUndefined();
  });

  it("gives the young generation back to the OS in a real Node with --expose-gc (V8's flavor option)", () => {
    // Node 24 strips the types of heap-trim.ts, which imports nothing of ours.
    const module = fileURLToPath(new URL('./heap-trim.ts', import.meta.url));
    const script = `
      import v8 from 'node:v8';
      const { trimHeap } = await import(${JSON.stringify(module)});
      const young = () => v8.getHeapSpaceStatistics().find((s) => s.space_name === 'new_space').physical_space_size;
      const kept = [];
      for (let i = 0; i < 400000; i++) kept.push({ i, s: 'x' + i });
      const before = young();
      kept.length = 0;
      trimHeap();
      console.log(JSON.stringify({ before, after: young() }));`;
    const output = execFileSync(process.execPath, ['--max-semi-space-size=16', '--expose-gc', '--input-type=module', '-e', script], { encoding: 'utf8' });
    const { before, after } = JSON.parse(output) as { before: number; after: number };
    expect(before).toBeGreaterThan(4 * 2 ** 20);
    expect(after).toBeLessThan(before / 4);
  });
});

describe('trimHeapWhenReady', () => {
  const settle = () => new Promise((resolve) => setTimeout(resolve, 30));

  it('trims once, at the first look that finds the replica ready', async () => {
    const gc = vi.fn<ExposedGc>();
    const report = vi.fn();
    let looks = 0;
    trimHeapWhenReady({ gc, report, pollMs: 1, isReady: () => ++looks >= 3 });
    await vi.waitFor(() => expect(report).toHaveBeenCalledTimes(1));
    expect(looks).toBe(3);
    expect(gc).toHaveBeenCalledTimes(1);
    await settle();
    expect(gc).toHaveBeenCalledTimes(1);
  });

  it('waits on an asynchronous readiness, a rejected one counting as not ready', async () => {
    const gc = vi.fn<ExposedGc>();
    const report = vi.fn();
    let looks = 0;
    trimHeapWhenReady({ gc, report, pollMs: 1, isReady: () => (++looks < 2 ? Promise.reject(new Error('down')) : Promise.resolve(true)) });
    await vi.waitFor(() => expect(gc).toHaveBeenCalledTimes(1));
    expect(looks).toBe(2);
  });

  it('trims anyway once giveUpMs has passed without readiness', async () => {
    const gc = vi.fn<ExposedGc>();
    trimHeapWhenReady({ gc, report: () => {}, pollMs: 1, giveUpMs: 20, isReady: () => false });
    await vi.waitFor(() => expect(gc).toHaveBeenCalledTimes(1));
  });

  it('never trims once cancelled (shutdown first)', async () => {
    const gc = vi.fn<ExposedGc>();
    const cancel = trimHeapWhenReady({ gc, report: () => {}, pollMs: 1, isReady: () => false });
    cancel();
    await settle();
    expect(gc).not.toHaveBeenCalled();
  });

  it('reports a failing collection and does not throw (the server keeps serving)', async () => {
    const report = vi.fn();
    const gc: ExposedGc = () => {
      throw new Error('no heap');
    };
    trimHeapWhenReady({ gc, report, isReady: () => true });
    await vi.waitFor(() => expect(report).toHaveBeenCalledWith(expect.objectContaining({ message: 'no heap' })));
  });

  it('does nothing without gc', async () => {
    const report = vi.fn();
    trimHeapWhenReady({ gc: undefined, report, isReady: () => true });
    await settle();
    expect(report).not.toHaveBeenCalled();
  });
});
