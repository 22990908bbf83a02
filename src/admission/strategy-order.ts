/**
 * The order the admission strategies run in on one request, lowest first: a later strategy sees
 * the object as the earlier ones patched it. node-oversell declares none (0): it runs first.
 */
export const STRATEGY_ORDER = {
  /** After node-oversell: counts the calls the node-status policy could have served, on the object inflated. */
  'node-policy': 5,
  /** After node-oversell on the same nodes/status requests, so it sees the object inflated. */
  'status-coalescing': 10,
  /** Before pod-policy: injected containers get its default requests and count toward its node cap. */
  sidecar: 10,
  'pod-policy': 20,
} as const;
