/**
 * The e2e harness, for test files (see test/e2e/README.md). Plain-Node modules — usable outside
 * Vitest, as demo.ts does — plus e2eEnv() (context.ts), which reads what globalSetup provided.
 */
export * from '../../support/apiserver.js';
export * from '../../support/config.js';
export * from './context.js';
export * from './fixture.js';
export * from '../../support/env.js';
export * from '../../support/hollow-kubelet.js';
export * from '../../support/kube-client.js';
export * from '../../support/kubelet-admission.js';
export * from '../../support/metrics.js';
export * from '../../support/nodes.js';
export * from '../../support/node-policy.js';
export * from '../../support/pods.js';
export * from '../../support/quantity.js';
export * from '../../support/sim-kubelet.js';
export * from './teardown.js';
export * from '../../support/tls.js';
export * from '../../support/wait.js';
export * from '../../support/webhook.js';
export * from '../../support/metrics-server.js';
