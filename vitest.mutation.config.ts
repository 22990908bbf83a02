/**
 * The Vitest config of `npm run test:mutation` (stryker.config.json): the `unit` project of
 * vitest.config.ts, as is (decorators, setup files, timeout, fast-check at its default
 * PROPERTY_RUNS), narrowed to the specs beside the code Stryker mutates, so that a mutant is
 * killed by the tests of its own folder. docs/testing.md has the command and the scores.
 */
import { configDefaults, defineConfig, type TestProjectInlineConfiguration } from 'vitest/config';
import base from './vitest.config.js';

const unit = (base.test?.projects ?? []).find(
  (project): project is TestProjectInlineConfiguration => typeof project === 'object' && 'test' in project && project.test?.name === 'unit',
);
if (unit === undefined) throw new Error('vitest.config.ts has no project named unit');

export default defineConfig({
  ...unit,
  test: {
    ...unit.test,
    include: ['src/domain/**/*.spec.ts', 'src/status-coalescing/**/*.spec.ts', 'src/node-policy/**/*.spec.ts', 'src/pod-policy/**/*.spec.ts'],
    // It drives kube-apiserver's policy plugin (test/e2e/control-plane/cel/, k8s/node-policy/), outside Stryker's sandbox.
    exclude: [...(unit.test?.exclude ?? configDefaults.exclude), 'src/node-policy/node-policy.cel.spec.ts'],
  },
});
