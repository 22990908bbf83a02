// Two rules of the test suite that ESLint has no rule for, run by `npm run lint`:
//
// 1. No `expect(` inside a retried probe (the callback of waitUntil, eventually, vi.waitFor,
//    vi.waitUntil, expect.poll). A probe that throws is "not yet": an invariant checked there is
//    retried until it happens to hold, and a terminal bad state becomes a timeout. A probe
//    collects what it sees and returns whether it is done; the test asserts afterwards.
// 2. Every `fc.assert(` takes its parameters from `runs(base)` (test/support/property.ts), as
//    `fc.assert(property, runs(200))`, `{ ...runs(200), other }`, or a constant of the file set to
//    `runs(200)`, so PROPERTY_RUNS scales every property and none runs a fixed, forgotten number
//    of cases.
//
// Prints `file:line:column message` for each finding and exits 1 if there is one.
import { globSync, readFileSync } from 'node:fs';
import ts from 'typescript';

const FILES = ['src/**/*.ts', 'test/**/*.ts', 'bench/**/*.ts'];
const IGNORED = /(^|\/)(node_modules|\.run|\.bin)\//;
/** Callees whose function arguments are retried until they return (or stop throwing). */
const PROBES = new Set(['waitUntil', 'eventually', 'waitFor', 'expect.poll']);

/** `waitUntil`, `vi.waitFor` → `waitFor`, `expect.poll`; undefined for any other callee. */
function probeName(callee) {
  if (ts.isIdentifier(callee)) return PROBES.has(callee.text) ? callee.text : undefined;
  if (!ts.isPropertyAccessExpression(callee)) return undefined;
  const name = callee.name.text;
  if (ts.isIdentifier(callee.expression) && PROBES.has(`${callee.expression.text}.${name}`)) return `${callee.expression.text}.${name}`;
  return PROBES.has(name) && ts.isIdentifier(callee.expression) && callee.expression.text === 'vi' ? name : undefined;
}

const isExpectCall = (node) => ts.isCallExpression(node) && ts.isIdentifier(node.expression) && node.expression.text === 'expect';
const isRunsCall = (node) => node !== undefined && ts.isCallExpression(node) && ts.isIdentifier(node.expression) && node.expression.text === 'runs';
const isFcAssert = (node) =>
  ts.isPropertyAccessExpression(node.expression) &&
  ts.isIdentifier(node.expression.expression) &&
  node.expression.expression.text === 'fc' &&
  node.expression.name.text === 'assert';

/** `runs(n)`, a constant set to it (`runsConstants`: their names), or an object literal that spreads `runs(n)`. */
function takesRuns(parameters, runsConstants) {
  if (isRunsCall(parameters)) return true;
  if (parameters !== undefined && ts.isIdentifier(parameters)) return runsConstants.has(parameters.text);
  return (
    parameters !== undefined &&
    ts.isObjectLiteralExpression(parameters) &&
    parameters.properties.some((p) => ts.isSpreadAssignment(p) && isRunsCall(p.expression))
  );
}

function check(file) {
  const source = ts.createSourceFile(file, readFileSync(file, 'utf8'), ts.ScriptTarget.Latest, true);
  const findings = [];
  const report = (node, message) => {
    const { line, character } = source.getLineAndCharacterOfPosition(node.getStart(source));
    findings.push(`${file}:${line + 1}:${character + 1} ${message}`);
  };
  const runsConstants = new Set();
  const collect = (node) => {
    if (ts.isVariableDeclaration(node) && ts.isIdentifier(node.name) && isRunsCall(node.initializer)) runsConstants.add(node.name.text);
    ts.forEachChild(node, collect);
  };
  collect(source);
  const visit = (node, probe) => {
    if (probe !== undefined && isExpectCall(node))
      report(node, `expect() inside the retried probe of ${probe}(): collect what the probe sees, assert after it`);
    if (ts.isCallExpression(node)) {
      if (isFcAssert(node) && !takesRuns(node.arguments[1], runsConstants))
        report(node, 'fc.assert() without runs(base) as its parameters (test/support/property.ts)');
      const name = probeName(node.expression);
      if (name !== undefined) {
        visit(node.expression, probe);
        for (const argument of node.arguments) visit(argument, ts.isFunctionLike(argument) ? name : probe);
        return;
      }
    }
    ts.forEachChild(node, (child) => visit(child, probe));
  };
  visit(source, undefined);
  return findings;
}

const files = globSync(FILES).filter((file) => !IGNORED.test(file));
const findings = files.sort().flatMap(check);
for (const finding of findings) console.error(finding);
if (findings.length > 0) {
  console.error(`check-tests: ${findings.length} finding(s) in ${files.length} files (scripts/check-tests.js says why)`);
  process.exit(1);
}
console.log(`check-tests: ${files.length} files, no expect() in a retried probe, every fc.assert() takes runs()`);
