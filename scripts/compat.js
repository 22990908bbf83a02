// `npm run test:compat -- --kube 1.35` (or `--kube all`): the end-to-end suite on one Kubernetes
// minor, or on every minor this project pins, and docs/compatibility.md rewritten from the results.
//
// Each minor is pinned by its own module file in test/e2e/control-plane/ (go.mod for the newest,
// versions/<minor>.mod/.sum for the others, written by pin.sh) and built by build.sh into its own
// folder (test/e2e/.bin/ for the newest, test/e2e/.bin/v<minor>/ for the others; stamped, so a second
// run does not rebuild). The e2e harness reads KUBE and BIN_DIR from the environment this script sets.
//
//   --kube <minor|all>   which minor (default: go.mod's, the newest)
//   --files a,b          only these test/e2e files (a subset: its rows say which files ran)
//   --no-record          run, but leave docs/compatibility.md and its results file alone
//   --allow-dirty        run on a tree with changes (development only): implies --no-record
//
// A matrix that cannot lie: the commit is read when the run starts, a tree with any change (staged,
// unstaged or untracked; ignored files aside) is refused before anything runs, and a result is
// recorded only when HEAD is still that commit and the tree still clean when the run ends — else it
// is printed and refused. So every recorded column names the one commit whose files ran.
// COMPAT_ALLOW_DIRTY=1 is the same as --allow-dirty.
//
// Results are kept per minor in test/e2e/compat-results.json (the run's date, commit, Kubernetes
// version, the hollow kubelet's version, each area's passed/failed counts and the names of the tests
// skipped); the table in
// docs/compatibility.md (between its compat:begin and compat:end comments) is generated from that
// file alone, from the results marked clean (recorded under the rules above), so a run of one minor
// keeps the other minors' rows, and the prose around the table is the doc's own.
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { basename, dirname, join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..');
const CONTROL_PLANE = join(ROOT, 'test/e2e/control-plane');
const RESULTS = join(ROOT, 'test/e2e/compat-results.json');
const DOC = join(ROOT, 'docs/compatibility.md');

/**
 * The areas of the table, each the e2e tests that prove it: a file, and where one file proves
 * several areas, a pattern on the test's full name. The first matching area wins; a test in no
 * area counts under "other".
 */
export const AREAS = [
  { area: 'node inflation', files: ['node-oversell', 'readme-example', 'prototype-keys', 'plan'] },
  { area: 'floor across a kubelet restart', files: ['hollow-kubelet', 'commitment-floor'] },
  { area: 'in-place resize', files: ['resize'] },
  { area: 'coalescing', files: ['status-coalescing', 'two-replicas'] },
  // MutatingAdmissionPolicy v1 (1.36+); below it, the file's one test proves the webhook serves alone.
  { area: 'node-status policy', files: ['node-policy'] },
  { area: 'cap', files: ['pod-policy'], name: /\bcap\b|pod-level/i },
  { area: 'pod policy', files: ['pod-policy'] },
  { area: 'sidecars', files: ['sidecar'] },
  { area: 'certificates', files: ['certificates', 'client-certificate'] },
  { area: 'usage-aware', files: ['usage-aware', 'hot-nodes'] },
  { area: 'reconciler', files: ['reconciler'] },
  { area: 'install and operations', files: ['manifests', 'chart', 'monitoring', 'start-up', 'drain'] },
  // A cluster of its own moved from the run's minor to the next one (upgrade.test.ts's pairs).
  { area: 'upgrade to the next minor', files: ['upgrade'] },
];

/** The area of one test: its file's base name (without .test.ts) and its full name. */
export function areaOf(file, fullName) {
  for (const { area, files, name } of AREAS) {
    if (files.includes(file) && (name === undefined || name.test(fullName))) return area;
  }
  return 'other';
}

/** `v1.37.2` (or `v1.38.0-beta.0`) from a module file's text: its require of k8s.io/kubernetes. */
export function requiredKubernetes(modText) {
  const match = /^\s*k8s\.io\/kubernetes (v\d+\.\d+\.\d+(?:-[0-9A-Za-z.]+)?)\s*$/m.exec(modText);
  return match?.[1];
}

function pinnedVersion(modFile) {
  const version = requiredKubernetes(readFileSync(modFile, 'utf8'));
  if (!version) throw new Error(`${modFile}: no k8s.io/kubernetes requirement`);
  return version;
}

const minorOf = (version) => version.replace(/^v(\d+\.\d+)\..*$/, '$1');

/** Every pinned minor, newest first: go.mod's (the default: the newest GA), and versions/<minor>.mod (a pre-release may be newer). */
export function pinnedMinors() {
  const newest = pinnedVersion(join(CONTROL_PLANE, 'go.mod'));
  const pins = [{ minor: minorOf(newest), version: newest, binDir: join(ROOT, 'test/e2e/.bin'), default: true }];
  for (const file of readdirSync(join(CONTROL_PLANE, 'versions')).filter((f) => f.endsWith('.mod'))) {
    const minor = basename(file, '.mod');
    pins.push({ minor, version: pinnedVersion(join(CONTROL_PLANE, 'versions', file)), binDir: join(ROOT, 'test/e2e/.bin', `v${minor}`) });
  }
  const order = (m) => m.split('.').map(Number);
  return pins.sort((a, b) => order(b.minor)[1] - order(a.minor)[1]);
}

/** Counts per area from Vitest's JSON report. */
export function tallyAreas(report) {
  const areas = {};
  for (const file of report.testResults) {
    const name = basename(file.name).replace(/\.test\.ts$/, '');
    for (const test of file.assertionResults) {
      const area = areaOf(name, test.fullName);
      const counts = (areas[area] ??= { passed: 0, failed: 0 });
      if (test.status === 'passed') counts.passed++;
      else if (test.status === 'failed') counts.failed++;
    }
    // A file that failed before its tests ran (a set-up error) counts as one failure of its areas.
    if (file.assertionResults.length === 0 && file.status === 'failed') (areas[areaOf(name, '')] ??= { passed: 0, failed: 0 }).failed++;
  }
  return areas;
}

/** The full names of the tests a report skipped (their names say why: `describe.runIf(...)('... 1.36+ ...')`). */
export function skippedTests(report) {
  const skipped = [];
  for (const file of report.testResults) {
    const name = basename(file.name).replace(/\.test\.ts$/, '');
    for (const test of file.assertionResults) {
      if (test.status === 'skipped' || test.status === 'pending' || test.status === 'todo') skipped.push(`${name}: ${test.fullName}`);
    }
  }
  return skipped;
}

function git(...args) {
  const r = spawnSync('git', args, { cwd: ROOT, encoding: 'utf8' });
  if (r.status !== 0) throw new Error(`git ${args.join(' ')}: ${r.stderr.trim() || `exit ${r.status}`}`);
  // Only the end: a porcelain line starts with its status columns, a space among them.
  return r.stdout.trimEnd();
}

/** The tree a run sees: HEAD's full commit and `git status --porcelain` lines (untracked files included, ignored ones not). */
export function treeState(gitCommand = git) {
  const status = gitCommand('status', '--porcelain', '--untracked-files=normal');
  return { commit: gitCommand('rev-parse', 'HEAD'), changes: status ? status.split('\n') : [] };
}

/** Why a run may not start on this tree (undefined: it may): a tree with changes is refused unless allowDirty. */
export function refuseStart(start, { allowDirty = false } = {}) {
  if (start.changes.length === 0 || allowDirty) return undefined;
  const shown = start.changes.slice(0, 10).join('\n  ');
  const more = start.changes.length > 10 ? `\n  ... and ${start.changes.length - 10} more` : '';
  return (
    `compat: refusing to run: the tree has uncommitted changes, so no commit names what would run:\n  ${shown}${more}\n` +
    'Commit them (or run from a clean `git worktree add /tmp/wt <commit>`); for a development run that records nothing, pass --allow-dirty.'
  );
}

/** A tree state without the changes to `paths` (relative to the root): the results this script itself wrote for an earlier minor of the run. */
export function withoutPaths(state, paths) {
  return { ...state, changes: state.changes.filter((line) => !paths.includes(line.slice(3))) };
}

/** Why a finished run may not be recorded (undefined: it may): only a run that started and ended on one clean commit is. */
export function refuseRecord(start, end) {
  if (start.changes.length > 0) return 'compat: not recorded: the run started on a tree with uncommitted changes (--allow-dirty)';
  if (end.commit !== start.commit)
    return `compat: not recorded: HEAD moved during the run (${start.commit.slice(0, 7)} at the start, ${end.commit.slice(0, 7)} at the end), so no one commit ran`;
  if (end.changes.length > 0)
    return `compat: not recorded: the tree changed during the run (${end.changes.slice(0, 5).join('; ')}), so ${start.commit.slice(0, 7)} is not what ran`;
  return undefined;
}

/**
 * The release of the hollow kubelet in a minor's binaries (`kubemark --version`): the minor's own, or
 * for a release without kubemark (1.38) the newest older pinned minor's (build.sh).
 */
function kubeletVersion(binDir) {
  const r = spawnSync(join(binDir, 'kubemark'), ['--version'], { encoding: 'utf8' });
  return r.status === 0 ? r.stdout.trim().split(/\s+/)[1] : undefined;
}

function runMinor(pin, files, start) {
  const dir = mkdtempSync(join(tmpdir(), 'compat-'));
  const report = join(dir, 'e2e.json');
  const env = { ...process.env, KUBE: pin.minor, BIN_DIR: pin.binDir };
  console.log(`compat: Kubernetes ${pin.version} (binaries in ${pin.binDir})`);
  const started = new Date();
  const vitest = spawnSync(
    'npx',
    ['vitest', 'run', '--project', 'e2e', '--reporter=default', '--reporter=json', `--outputFile.json=${report}`, ...files.map((f) => `test/e2e/${f}.test.ts`)],
    { cwd: ROOT, env, stdio: 'inherit' },
  );
  const result = existsSync(report) ? JSON.parse(readFileSync(report, 'utf8')) : undefined;
  rmSync(dir, { recursive: true, force: true });
  return {
    version: pin.version,
    kubelet: kubeletVersion(pin.binDir),
    date: started.toISOString().replace(/\.\d+Z$/, 'Z'),
    minutes: Math.round((Date.now() - started.getTime()) / 6000) / 10,
    // The commit read when the run started; `clean` is set only when the record is allowed (main).
    commit: start.commit.slice(0, 7),
    files: files.length > 0 ? files : 'all',
    passed: result?.numPassedTests ?? 0,
    failed: result?.numFailedTests ?? 0,
    // Tests of a feature this minor does not serve (the node-status policy before 1.36, ...): skipped, never counted as passed.
    skipped: (result?.numPendingTests ?? 0) + (result?.numTodoTests ?? 0),
    skippedTests: result ? skippedTests(result) : [],
    exitCode: vitest.status,
    areas: result ? tallyAreas(result) : {},
  };
}

const BEGIN = '<!-- compat:begin: generated by `npm run test:compat` from test/e2e/compat-results.json -->';
const END = '<!-- compat:end -->';

/**
 * The table of docs/compatibility.md from the recorded results: a column per minor (newest first), a
 * row per area. Only results recorded clean (one commit, start to end, no changes) make a column.
 */
export function renderTable(results, pins) {
  const runs = pins.filter((p) => results[p.minor]?.clean === true).map((p) => ({ ...results[p.minor], minor: p.minor }));
  const cell = (counts) =>
    counts === undefined ? '–' : counts.failed > 0 ? `**${counts.failed} failed** of ${counts.passed + counts.failed}` : `${counts.passed} passed`;
  const verdict = (r) => (r.failed === 0 && r.exitCode === 0 && r.passed > 0 ? (r.files === 'all' ? 'passed' : 'passed (subset)') : '**failed**');
  const row = (label, of) => `| ${label} | ${runs.map(of).join(' | ')} |`;
  return [
    BEGIN,
    row('Kubernetes', (r) => `**${r.minor}**`),
    `| --- | ${runs.map(() => '---').join(' | ')} |`,
    row('release', (r) => r.version),
    // Results recorded before the kubelet was: build.sh built every minor's kubemark from that minor's own module then.
    row('kubelet', (r) => ((r.kubelet ?? r.version) === r.version ? r.version : `kubemark ${r.kubelet}, ${r.minor} has none`)),
    row('result', (r) => `${verdict(r)}: ${r.passed} of ${r.passed + r.failed}${r.skipped ? `, ${r.skipped} skipped` : ''}`),
    ...[...new Set(AREAS.map((a) => a.area)), 'other'].map((area) => row(area, (r) => cell(r.areas[area]))),
    row('run (UTC)', (r) => r.date.replace('T', ' ').replace(/:\d\dZ$/, '')),
    row('commit', (r) => r.commit),
    row('minutes', (r) => String(r.minutes)),
    ...runs.filter((r) => r.files !== 'all').map((r) => `\n${r.minor}: a subset ran (${r.files.join(', ')}).`),
    ...runs
      .filter((r) => r.skippedTests?.length)
      .map((r) => `\n${r.minor} skipped (why: "Skipped on a minor, and why" below):\n${r.skippedTests.map((t) => `- ${t}`).join('\n')}`),
    END,
  ].join('\n');
}

/** docs/compatibility.md with its generated table replaced; the prose around it is kept. */
export function withTable(doc, table) {
  const start = doc.indexOf(BEGIN);
  const end = doc.indexOf(END);
  if (start < 0 || end < start) throw new Error(`docs/compatibility.md: no ${BEGIN} ... ${END} block to replace`);
  return doc.slice(0, start) + table + doc.slice(end + END.length);
}

/** Writes one minor's clean result, and the table from every recorded result. */
function record(minor, result, pins) {
  // Read at the end of each run, not at the start: runs of other minors may have recorded meanwhile.
  const results = existsSync(RESULTS) ? JSON.parse(readFileSync(RESULTS, 'utf8')) : {};
  results[minor] = { ...result, clean: true };
  writeFileSync(RESULTS, JSON.stringify(results, null, 2) + '\n');
  writeFileSync(DOC, withTable(readFileSync(DOC, 'utf8'), renderTable(results, pins)));
}

/** The command line: the pins to run, the files, and whether to record. Exits 2 on an unknown minor. */
function options() {
  const { values } = parseArgs({
    options: { kube: { type: 'string' }, files: { type: 'string' }, 'no-record': { type: 'boolean' }, 'allow-dirty': { type: 'boolean' } },
  });
  const pins = pinnedMinors();
  const defaultMinor = pins.find((p) => p.default).minor;
  const wanted = values.kube === 'all' ? pins : pins.filter((p) => p.minor === (values.kube ?? defaultMinor));
  if (wanted.length === 0) {
    console.error(`compat: no pinned minor ${values.kube} (pinned: ${pins.map((p) => p.minor).join(', ')}; pin another with test/e2e/control-plane/pin.sh)`);
    process.exit(2);
  }
  const files = values.files ? values.files.split(',').map((f) => f.trim().replace(/\.test\.ts$/, '')) : [];
  const allowDirty = values['allow-dirty'] === true || process.env.COMPAT_ALLOW_DIRTY === '1';
  return { pins, wanted, files, allowDirty, record: !values['no-record'] && !allowDirty };
}

function main() {
  const { pins, wanted, files, allowDirty, record: recording } = options();
  // Read before anything runs (the harness builds the product from this tree at the start).
  const start = treeState();
  const refused = refuseStart(start, { allowDirty });
  if (refused) {
    console.error(refused);
    process.exit(2);
  }
  let failed = false;
  let unrecorded = false;
  let recorded = false;
  for (const pin of wanted) {
    const result = runMinor(pin, files, start);
    failed ||= result.failed > 0 || result.exitCode !== 0 || result.passed === 0;
    console.log(
      `compat: ${pin.version}: ${result.passed} passed, ${result.failed} failed, ${result.skipped} skipped in ${result.minutes} min (commit ${result.commit})`,
    );
    if (!recording) continue;
    // --kube all: what this run recorded for the minors before is not a change to what runs.
    const notRecorded = refuseRecord(start, withoutPaths(treeState(), recorded ? [relative(ROOT, RESULTS), relative(ROOT, DOC)] : []));
    if (notRecorded) console.error(notRecorded);
    else record(pin.minor, result, pins);
    unrecorded ||= notRecorded !== undefined;
    recorded ||= notRecorded === undefined;
  }
  process.exit(failed ? 1 : unrecorded ? 3 : 0);
}

if (process.argv[1] === fileURLToPath(import.meta.url)) main();
