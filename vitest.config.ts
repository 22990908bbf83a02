import swc from 'unplugin-swc';
import { defineConfig } from 'vitest/config';

// SWC emits the legacy decorators and design:* metadata that Nest's dependency injection reads.
const decorators = swc.vite({ module: { type: 'es6' }, jsc: { target: 'es2022' } });

export default defineConfig({
  test: {
    projects: [
      { plugins: [decorators], test: { name: 'unit', include: ['src/**/*.spec.ts'], environment: 'node', setupFiles: ['reflect-metadata'] } },
      {
        plugins: [decorators],
        test: { name: 'app', include: ['test/app/**/*.test.ts'], environment: 'node', setupFiles: ['reflect-metadata'], testTimeout: 20_000 },
      },
      {
        plugins: [decorators],
        test: {
          name: 'e2e',
          include: ['test/e2e/**/*.test.ts'],
          environment: 'node',
          // Builds and starts one control plane for the whole run; tests read it with e2eEnv().
          globalSetup: ['test/e2e/harness/global-setup.ts'],
          setupFiles: ['reflect-metadata'],
          testTimeout: 300_000,
          hookTimeout: 600_000,
          fileParallelism: false,
        },
      },
    ],
  },
});
