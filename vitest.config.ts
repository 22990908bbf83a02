import { configDefaults, defineConfig } from 'vitest/config';

// Vite's oxc transform emits the legacy decorators and design:* metadata that Nest's
// dependency injection reads (as tsc does with experimentalDecorators + emitDecoratorMetadata).
const decorators = { oxc: { decorator: { legacy: true, emitDecoratorMetadata: true } } } as const;
// A test that asserts nothing fails: it could not catch a regression.
const expect = { requireAssertions: true };

export default defineConfig({
  test: {
    projects: [
      {
        ...decorators,
        // nest-logs: Nest's logger lines are kept for assertions, not printed. fast-check (in every
        // project): FC_SEED replays a property's failure. The property tests do up to 3 s of work
        // at the default PROPERTY_RUNS on a loaded 2-core machine: past Vitest's 5 s default a
        // loaded machine would fail them.
        test: {
          name: 'unit',
          expect,
          testTimeout: 20_000,
          include: ['src/**/*.spec.ts', 'bench/*.spec.ts', 'scripts/*.spec.js'],
          environment: 'node',
          setupFiles: ['reflect-metadata', 'test/setup/nest-logs.ts', 'test/setup/fast-check.ts'],
        },
      },
      {
        ...decorators,
        test: {
          name: 'app',
          expect,
          include: ['test/app/**/*.test.ts'],
          environment: 'node',
          setupFiles: ['reflect-metadata', 'test/setup/fast-check.ts'],
          testTimeout: 20_000,
        },
      },
      {
        ...decorators,
        test: {
          name: 'e2e',
          expect,
          include: ['test/e2e/**/*.test.ts'],
          // The real node's suite runs against a node that `npm run node:up` started (project `node`).
          exclude: [...configDefaults.exclude, 'test/e2e/node/**'],
          environment: 'node',
          // Builds and starts one control plane for the whole run; tests read it with e2eEnv().
          globalSetup: ['test/e2e/harness/global-setup.ts'],
          setupFiles: ['reflect-metadata', 'test/setup/fast-check.ts'],
          testTimeout: 300_000,
          hookTimeout: 600_000,
          fileParallelism: false,
        },
      },
      {
        ...decorators,
        // `npm run test:node`: a real kubelet, containerd and the image built from the Dockerfile,
        // started by `npm run node:up` (test/e2e/node/node.sh); the suite reads its node.env.
        test: {
          name: 'node',
          expect,
          include: ['test/e2e/node/**/*.test.ts'],
          environment: 'node',
          testTimeout: 300_000,
          hookTimeout: 300_000,
          fileParallelism: false,
        },
      },
    ],
  },
});
