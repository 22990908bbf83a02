import { Counter } from 'prom-client';
import { describe, expect, it } from 'vitest';
import type { AdmissionRequest } from '../admission/admission.types.js';
import { POLICY_SERVABLE_METRIC, PolicyServableStrategy, PolicyServableTally } from './node-policy.strategy.js';

describe('PolicyServableStrategy', () => {
  const stored = {
    metadata: { name: 'n', annotations: { 'kube-overcommit.io/ratios': '{"cpu":1.5}' } },
    status: { allocatable: { cpu: '6' }, capacity: { cpu: '4' }, conditions: [{ type: 'Ready', lastHeartbeatTime: 't1' }] },
  };
  const heartbeat = (extra: Partial<AdmissionRequest> = {}) =>
    ({
      name: 'n',
      userInfo: { username: 'system:node:n' },
      object: { ...stored, status: { ...stored.status, conditions: [{ type: 'Ready', lastHeartbeatTime: 't2' }] } },
      oldObject: stored,
      ...extra,
    }) as AdmissionRequest;

  it('counts, and never patches, a kubelet write the policy could have served; not a dry run, not another writer’s', async () => {
    const tally = new PolicyServableTally();
    const strategy = new PolicyServableStrategy(tally);
    expect(strategy.admit(heartbeat())).toEqual({});
    expect(strategy.admit(heartbeat())).toEqual({});
    expect(strategy.admit(heartbeat({ dryRun: true }))).toEqual({});
    expect(strategy.admit(heartbeat({ userInfo: { username: 'system:node:m' } }))).toEqual({});
    const counter = new Counter({ name: POLICY_SERVABLE_METRIC, help: 'h', labelNames: [], registers: [] });
    tally.flushInto(counter);
    expect((await counter.get()).values).toEqual([{ value: 2, labels: {} }]);
    expect(POLICY_SERVABLE_METRIC).toBe('kube_overcommit_node_policy_servable_calls_total');
  });
});
