import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { kubeadmNode, nodeReview } from '../fixtures/nodes.js';
import { admitted, eventually, metricValue, startServer, type TestServer } from './harness.js';

const CONFIG = `
nodes:
  defaultRatios: { cpu: 1.5 }
  coalesceStatusWrites: true
  statusReportPeriod: 5m
`;

/** The kubelet's node with its heartbeats (and its managedFields entry) at `time`. */
function kubeletAt(time: string): any {
  const node = kubeadmNode();
  for (const condition of node.status.conditions) condition.lastHeartbeatTime = time;
  node.metadata.managedFields[0].time = time;
  return node;
}

describe('nodes.coalesceStatusWrites over HTTPS', () => {
  let server: TestServer;
  let stored: any;
  beforeAll(async () => {
    server = await startServer(CONFIG);
    const first = nodeReview(kubeletAt('2026-11-22T10:00:00Z'));
    stored = admitted(first, (await server.mutate(first)).json()).object;
  });
  afterAll(async () => {
    await server?.stop();
  });

  it('answers a heartbeat-only kubelet update with the stored conditions, inflated, and counts it', async () => {
    const review = nodeReview(kubeletAt('2026-11-22T10:00:10Z'), { oldObject: stored });
    const node = admitted(review, (await server.mutate(review)).json()).object;
    expect(node.status.conditions).toEqual(stored.status.conditions);
    expect(node.status.allocatable).toEqual(stored.status.allocatable);
    expect(node.metadata.annotations).toEqual(stored.metadata.annotations);
    expect(metricValue(await server.metrics(), 'kube_overcommit_status_writes_total', { decision: 'coalesced', reason: 'heartbeat' })).toBe(1);
  });

  it('lets a report through once the stored heartbeats are statusReportPeriod old, and any other writer always', async () => {
    const report = nodeReview(kubeletAt('2026-11-22T10:05:00Z'), { oldObject: stored });
    expect(admitted(report, (await server.mutate(report)).json()).object.status.conditions[0].lastHeartbeatTime).toBe('2026-11-22T10:05:00Z');
    const other = nodeReview(kubeletAt('2026-11-22T10:00:10Z'), { oldObject: stored, username: 'system:serviceaccount:kube-system:node-controller' });
    expect(admitted(other, (await server.mutate(other)).json()).object.status.conditions[0].lastHeartbeatTime).toBe('2026-11-22T10:00:10Z');
    const metrics = await server.metrics();
    expect(metricValue(metrics, 'kube_overcommit_status_writes_total', { decision: 'passed', reason: 'report-due' })).toBe(1);
    expect(metricValue(metrics, 'kube_overcommit_status_writes_total', { decision: 'passed', reason: 'other-writer' })).toBe(1);
  });

  it('passes a node in shadow mode, which keeps the annotations of its last enforced write', async () => {
    server.writeConfig(CONFIG.replace('coalesceStatusWrites: true', 'coalesceStatusWrites: true\n  defaultMode: shadow'));
    await eventually(async () => {
      const review = nodeReview(kubeletAt('2026-11-22T10:00:30Z'), { oldObject: stored });
      return admitted(review, (await server.mutate(review)).json()).object.status.conditions[0].lastHeartbeatTime === '2026-11-22T10:00:30Z';
    });
    // The shadow config in force: one more write, counted once as passed, not inflated.
    const notInflated = async () =>
      metricValue(await server.metrics(), 'kube_overcommit_status_writes_total', { decision: 'passed', reason: 'not-inflated' }) ?? 0;
    const before = await notInflated();
    const review = nodeReview(kubeletAt('2026-11-22T10:00:35Z'), { oldObject: stored });
    expect(admitted(review, (await server.mutate(review)).json()).object.status.conditions[0].lastHeartbeatTime).toBe('2026-11-22T10:00:35Z');
    expect(await notInflated()).toBe(before + 1);
    server.writeConfig(CONFIG);
    await eventually(async () => {
      const review = nodeReview(kubeletAt('2026-11-22T10:00:40Z'), { oldObject: stored });
      return (
        admitted(review, (await server.mutate(review)).json()).object.status.conditions[0].lastHeartbeatTime === stored.status.conditions[0].lastHeartbeatTime
      );
    });
  });

  it('rejects a statusReportPeriod that is not a duration from 1s to 1h, keeping the last good config', async () => {
    const failures = async () => metricValue(await server.metrics(), 'kube_overcommit_config_reloads_total', { result: 'failure' }) ?? 0;
    const before = await failures();
    server.writeConfig(CONFIG.replace('statusReportPeriod: 5m', 'statusReportPeriod: 5 minutes'));
    await eventually(async () => (await failures()) > before);
    const review = nodeReview(kubeletAt('2026-11-22T10:00:20Z'), { oldObject: stored });
    expect(admitted(review, (await server.mutate(review)).json()).object.status.conditions).toEqual(stored.status.conditions);
  });
});
