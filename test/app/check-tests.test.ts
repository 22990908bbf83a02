import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';

/** scripts/check-tests.js (run by `npm run lint`) over a throw-away tree holding one spec. */
const SCRIPT = fileURLToPath(new URL('../../scripts/check-tests.js', import.meta.url));
const dirs: string[] = [];

function check(spec: string): { status: number | null; findings: string[] } {
  const dir = mkdtempSync(join(tmpdir(), 'check-tests-'));
  dirs.push(dir);
  mkdirSync(join(dir, 'src'));
  writeFileSync(join(dir, 'src', 'a.spec.ts'), spec);
  const run = spawnSync(process.execPath, [SCRIPT], { cwd: dir, encoding: 'utf8' });
  const findings = run.stderr
    .split('\n')
    .filter((line) => line.startsWith('src/'))
    .map((line) => line.replace(/ .*retried probe of (\S+)\(\).*/, ' expect in $1').replace(/ fc\.assert\(\) without.*/, ' fc.assert without runs'));
  return { status: run.status, findings };
}

describe('scripts/check-tests.js', () => {
  afterAll(() => {
    for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
  });

  it('fails on an expect inside a retried probe and on an fc.assert without runs(), naming each place', () => {
    const { status, findings } = check(
      [
        "await waitUntil('ready', async () => { expect(await f()).toBe(1); return true; });",
        'await eventually(async () => [1].map((x) => expect(x).toBe(1)));',
        'await vi.waitFor(() => expect(gc).toHaveBeenCalled());',
        'await expect.poll(() => { expect(a).toBe(1); return a; }).toBe(1);',
        'fc.assert(fc.property(fc.nat(), () => {}));',
        'fc.assert(fc.property(fc.nat(), () => {}), { numRuns: 100 });',
        'const fixed = { numRuns: 100 };',
        'fc.assert(fc.property(fc.nat(), () => {}), fixed);',
      ].join('\n'),
    );
    expect(status).toBe(1);
    expect(findings).toEqual([
      'src/a.spec.ts:1:40 expect in waitUntil',
      'src/a.spec.ts:2:45 expect in eventually',
      'src/a.spec.ts:3:24 expect in waitFor',
      'src/a.spec.ts:4:27 expect in expect.poll',
      'src/a.spec.ts:5:1 fc.assert without runs',
      'src/a.spec.ts:6:1 fc.assert without runs',
      'src/a.spec.ts:8:1 fc.assert without runs',
    ]);
  });

  it('passes what the suite writes: probes that return what is asserted after them, runs() as it is, spread or named', () => {
    const { status, findings } = check(
      [
        "const node = await waitUntil('ready', async () => (await f()) === 1 && f());",
        'expect(node).toBe(1);',
        'await expect.poll(() => a).toBe(1);',
        'const parameters = runs(300);',
        'fc.assert(fc.property(fc.nat(), () => expect(1).toBe(1)), runs(100));',
        'fc.assert(fc.property(fc.nat(), () => {}), { ...runs(100), seed: 4 });',
        'fc.assert(fc.property(fc.nat(), () => {}), parameters);',
      ].join('\n'),
    );
    expect(findings).toEqual([]);
    expect(status).toBe(0);
  });
});
