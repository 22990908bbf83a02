import { inject } from 'vitest';
import type { E2eEnv } from '../../support/env.js';

declare module 'vitest' {
  export interface ProvidedContext {
    e2e: E2eEnv;
  }
}

/** The environment globalSetup brought up (see env.ts). Call it inside a test file. */
export function e2eEnv(): E2eEnv {
  const env = inject('e2e');
  if (!env) throw new Error('no e2e environment: run through the `e2e` Vitest project (npm run test:e2e), whose globalSetup provides it');
  return env;
}
