/**
 * The e2e harness, for test files (see test/e2e/README.md). Plain-Node modules — usable outside
 * Vitest, as demo.ts does — plus e2eEnv() (context.ts), which reads what globalSetup provided.
 */
export * from './apiserver.js';
export * from './config.js';
export * from './context.js';
export * from './env.js';
export * from './hollow-kubelet.js';
export * from './kube-client.js';
export * from './kubelet-admission.js';
export * from './metrics.js';
export * from './nodes.js';
export * from './pods.js';
export * from './quantity.js';
export * from './sim-kubelet.js';
export * from './teardown.js';
export * from './tls.js';
export * from './wait.js';
export * from './webhook.js';
export * from './metrics-server.js';
