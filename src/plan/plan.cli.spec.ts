import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { PLAN_USAGE, readPlanArgs, runCli } from './plan.cli.js';

async function run(argv: string[]): Promise<{ code: number; out: string; err: string }> {
  let out = '';
  let err = '';
  const code = await runCli(
    argv,
    (text) => (out += text),
    (text) => (err += text),
  );
  return { code, out, err };
}

describe('kube-overcommit plan command line', () => {
  it('reads the options', () => {
    expect(readPlanArgs(['--config', 'c.yaml', '--pod-size', 'cpu=500m', '-o', 'json', '--configmap', 'ns/cm', '--context', 'prod'])).toEqual({
      config: 'c.yaml',
      configmap: 'ns/cm',
      podSize: { cpu: 500n },
      context: 'prod',
      output: 'json',
    });
    expect(readPlanArgs([])).toMatchObject({ output: 'table', podSize: null });
    expect(readPlanArgs(['-h'])).toBe('help');
  });

  it('exits 2 with the reason and the usage on a bad command line, 0 on help', async () => {
    expect(await run(['plan', '-o', 'yaml'])).toEqual({ code: 2, out: '', err: expect.stringContaining('--output must be table or json, got "yaml"') });
    expect((await run(['plan', '--pod-size', 'gpu=1'])).err).toMatch(/pod size "gpu=1"/);
    expect((await run(['plan', '--configmap', 'just-a-name'])).err).toMatch(/--configmap must be <namespace>\/<name>/);
    expect((await run(['plan', '--colour'])).code).toBe(2);
    expect((await run(['apply'])).err).toMatch(/^unknown command "apply"/);
    expect((await run([])).code).toBe(2);
    expect(await run(['--help'])).toEqual({ code: 0, out: PLAN_USAGE, err: '' });
  });

  it('exits 1 naming every bad field of a --config file, before any cluster access', async () => {
    const file = join(mkdtempSync(join(tmpdir(), 'plan-cli-')), 'config.yaml');
    writeFileSync(file, 'nodes:\n  defaultMode: maybe\n');
    const { code, err } = await run(['plan', '--config', file]);
    expect(code).toBe(1);
    expect(err).toContain('nodes.defaultMode: defaultMode must be one of enforce, shadow');
  });
});
