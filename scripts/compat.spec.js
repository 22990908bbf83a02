// The rules of `npm run test:compat` that keep docs/compatibility.md honest (scripts/compat.js).
import { describe, expect, it } from 'vitest';
import { areaOf, refuseRecord, refuseStart, renderTable, requiredKubernetes, skippedTests, tallyAreas, treeState, withTable, withoutPaths } from './compat.js';

const COMMIT = 'a'.repeat(40);
const OTHER = 'b'.repeat(40);
const clean = { commit: COMMIT, changes: [] };

/** A fake `git`: answers rev-parse and status from the given values. */
const fakeGit =
  (commit, status) =>
  (...args) =>
    args[0] === 'rev-parse' ? commit : args[0] === 'status' ? status : '';

const report = {
  testResults: [
    {
      name: '/repo/test/e2e/node-policy.test.ts',
      status: 'passed',
      assertionResults: [
        { fullName: 'an API server without MutatingAdmissionPolicy v1 the webhook alone serves', status: 'passed' },
        { fullName: 'the node-status policy (1.36+: MutatingAdmissionPolicy v1) steady state', status: 'skipped' },
      ],
    },
    {
      name: '/repo/test/e2e/pod-policy.test.ts',
      status: 'failed',
      assertionResults: [
        { fullName: 'pod policy the cap refuses a binding', status: 'passed' },
        { fullName: 'pod policy defaults', status: 'failed' },
      ],
    },
    { name: '/repo/test/e2e/resize.test.ts', status: 'failed', assertionResults: [] },
  ],
};

describe('the tree a run starts on', () => {
  it('reads HEAD and every change, untracked files included', () => {
    const calls = [];
    const git = (...args) => {
      calls.push(args.join(' '));
      return fakeGit(COMMIT, ' M src/a.ts\n?? test/e2e/new.test.ts')(...args);
    };
    expect(treeState(git)).toEqual({ commit: COMMIT, changes: [' M src/a.ts', '?? test/e2e/new.test.ts'] });
    expect(calls).toContain('status --porcelain --untracked-files=normal');
    expect(treeState(fakeGit(COMMIT, ''))).toEqual(clean);
  });

  it('refuses a tree with changes, naming them and the way out; allows a clean tree, and a dirty one only when asked', () => {
    expect(refuseStart(clean)).toBeUndefined();
    const dirty = { commit: COMMIT, changes: [' M src/a.ts', '?? x.ts'] };
    const message = refuseStart(dirty);
    expect(message).toMatch(/refusing to run: the tree has uncommitted changes/);
    expect(message).toContain(' M src/a.ts');
    expect(message).toContain('?? x.ts');
    expect(message).toContain('--allow-dirty');
    expect(refuseStart(dirty, { allowDirty: true })).toBeUndefined();
    const many = { commit: COMMIT, changes: Array.from({ length: 13 }, (_, i) => ` M f${i}`) };
    expect(refuseStart(many)).toContain('and 3 more');
  });
});

describe('recording a finished run', () => {
  it('records a run that started and ended on one clean commit', () => {
    expect(refuseRecord(clean, { commit: COMMIT, changes: [] })).toBeUndefined();
  });

  it('refuses when HEAD moved during the run, naming both commits', () => {
    expect(refuseRecord(clean, { commit: OTHER, changes: [] })).toBe(
      'compat: not recorded: HEAD moved during the run (aaaaaaa at the start, bbbbbbb at the end), so no one commit ran',
    );
  });

  it('refuses when the tree changed during the run, and a run that started dirty', () => {
    expect(refuseRecord(clean, { commit: COMMIT, changes: [' M src/b.ts'] })).toMatch(/tree changed during the run \( M src\/b\.ts\)/);
    expect(refuseRecord({ commit: COMMIT, changes: [' M src/a.ts'] }, { commit: COMMIT, changes: [' M src/a.ts'] })).toMatch(/--allow-dirty/);
  });

  it('ignores only the results this script wrote for an earlier minor of the same run', () => {
    const end = { commit: COMMIT, changes: [' M test/e2e/compat-results.json', ' M docs/compatibility.md', ' M src/c.ts'] };
    const mine = ['test/e2e/compat-results.json', 'docs/compatibility.md'];
    expect(withoutPaths(end, mine).changes).toEqual([' M src/c.ts']);
    expect(refuseRecord(clean, withoutPaths(end, mine))).toMatch(/tree changed/);
    expect(refuseRecord(clean, withoutPaths({ commit: COMMIT, changes: end.changes.slice(0, 2) }, mine))).toBeUndefined();
  });
});

describe('areas and skips', () => {
  it('gives the node-status policy and the upgrade an area of their own', () => {
    expect(areaOf('node-policy', 'one behaviour, two engines the same sequence')).toBe('node-status policy');
    expect(areaOf('pod-policy', 'pod policy the cap refuses')).toBe('cap');
    expect(areaOf('pod-policy', 'pod policy defaults')).toBe('pod policy');
    expect(areaOf('upgrade', 'upgrade 1.35 → 1.36 under a running webhook and kubelet')).toBe('upgrade to the next minor');
    expect(areaOf('no-such-file', 'x')).toBe('other');
  });

  it('tallies passed and failed per area (a skip is neither), and a file that failed before its tests as one failure', () => {
    expect(tallyAreas(report)).toEqual({
      'node-status policy': { passed: 1, failed: 0 },
      cap: { passed: 1, failed: 0 },
      'pod policy': { passed: 0, failed: 1 },
      'in-place resize': { passed: 0, failed: 1 },
    });
  });

  it('lists the skipped tests by file and full name (where the reason is written)', () => {
    expect(skippedTests(report)).toEqual(['node-policy: the node-status policy (1.36+: MutatingAdmissionPolicy v1) steady state']);
  });

  it('reads a pre-release pin as well as a release', () => {
    expect(requiredKubernetes('require (\n\tk8s.io/client-go v0.38.0-beta.0\n\tk8s.io/kubernetes v1.38.0-beta.0\n)')).toBe('v1.38.0-beta.0');
    expect(requiredKubernetes('require (\n\tk8s.io/kubernetes v1.32.13\n)')).toBe('v1.32.13');
    expect(requiredKubernetes('replace k8s.io/api => k8s.io/api v0.32.13')).toBeUndefined();
  });
});

describe('the table', () => {
  const pins = [{ minor: '1.37' }, { minor: '1.36' }, { minor: '1.32' }];
  const run = (extra) => ({
    version: 'v1.37.2',
    date: '2026-12-06T20:00:00Z',
    minutes: 12.5,
    commit: 'aaaaaaa',
    files: 'all',
    passed: 3,
    failed: 0,
    skipped: 0,
    exitCode: 0,
    areas: { 'node-status policy': { passed: 3, failed: 0 } },
    ...extra,
  });

  it('makes a column only of a result recorded clean', () => {
    const table = renderTable(
      {
        1.37: run({ clean: true }),
        1.36: run({ version: 'v1.36.3', commit: 'd5598fb (with uncommitted changes)' }),
        1.32: run({ version: 'v1.32.13', clean: true, files: ['resize'], skipped: 1, skippedTests: ['resize: (1.33+: pods/resize) x'] }),
      },
      pins,
    );
    expect(table).toContain('| Kubernetes | **1.37** | **1.32** |');
    expect(table).not.toContain('1.36');
    expect(table).not.toContain('uncommitted');
    expect(table).toContain('| result | passed: 3 of 3 | passed (subset): 3 of 3, 1 skipped |');
    expect(table).toContain('| kubelet | v1.37.2 | v1.32.13 |');
    expect(table).toContain('| node-status policy | 3 passed | 3 passed |');
    expect(table).toContain('1.32: a subset ran (resize).');
    expect(table).toContain('- resize: (1.33+: pods/resize) x');
  });

  it('names the kubelet of a release that has none of its own', () => {
    const table = renderTable({ 1.38: run({ clean: true, version: 'v1.38.0-beta.0', kubelet: 'v1.37.2' }), 1.37: run({ clean: true, kubelet: 'v1.37.2' }) }, [
      { minor: '1.38' },
      ...pins,
    ]);
    expect(table).toContain('| kubelet | kubemark v1.37.2, 1.38 has none | v1.37.2 |');
  });

  it('calls a run with a failure, a non-zero exit or nothing passed failed', () => {
    const table = renderTable({ 1.37: run({ clean: true, failed: 1, areas: { cap: { passed: 2, failed: 1 } } }) }, pins);
    expect(table).toContain('| result | **failed**: 3 of 4 |');
    expect(table).toContain('| cap | **1 failed** of 3 |');
    expect(renderTable({ 1.37: run({ clean: true, exitCode: 1 }) }, pins)).toContain('**failed**');
    expect(renderTable({ 1.37: run({ clean: true, passed: 0, areas: {} }) }, pins)).toContain('**failed**: 0 of 0');
  });

  it('replaces only the generated block of the page', () => {
    const table = renderTable({ 1.37: run({ clean: true }) }, pins);
    const doc = `intro\n${renderTable({}, pins)}\noutro\n`;
    const next = withTable(doc, table);
    expect(next.startsWith('intro\n')).toBe(true);
    expect(next.endsWith('\noutro\n')).toBe(true);
    expect(next).toContain('**1.37**');
    expect(() => withTable('no block', table)).toThrow(/no .* block/);
  });
});
