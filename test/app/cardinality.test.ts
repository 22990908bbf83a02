import https from 'node:https';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { kubeadmNode, nodeReview } from '../fixtures/nodes.js';
import { Metrics } from '../support/metrics.js';
import { metricValue, send, startServer, type TestServer } from './harness.js';

const CONFIG = 'nodes:\n  defaultRatios: { cpu: 1.5 }\n';
const MAX_NODES = 100;

/** The label sets of one metric's series in a scrape (histograms: one name per line kind, e.g. `_count`). */
const series = (scrape: string, name: string) =>
  Metrics.parse(scrape)
    .find(name)
    .map((sample) => sample.labels);

describe('metric cardinality stays bounded whatever the reviews carry', () => {
  let server: TestServer;
  const agent = new https.Agent({ keepAlive: true, maxSockets: 16 });

  beforeAll(async () => {
    server = await startServer(CONFIG, { OVERCOMMIT_NODE_METRICS_MAX_NODES: String(MAX_NODES) });
  });
  afterAll(async () => {
    agent.destroy();
    await server?.stop();
  });

  /** Posts every review, 16 at a time; each must be answered 200 (a review we do not handle is admitted). */
  async function sendAll(reviews: Iterable<unknown>): Promise<void> {
    const queue = [...reviews];
    const worker = async () => {
      for (let review = queue.pop(); review !== undefined; review = queue.pop()) {
        const reply = await send(`${server.https}/mutate`, { body: JSON.stringify(review), agent });
        expect(reply.status, reply.text.slice(0, 200)).toBe(200);
      }
    };
    await Promise.all(Array.from({ length: 16 }, worker));
  }

  it('thousands of distinct resource, subresource, operation and node names add no series beyond the known ones', async () => {
    const review = (i: number, resource: string, subResource?: string) => {
      const r = nodeReview(kubeadmNode({ name: `node-${i}` }));
      r.request.resource.resource = resource;
      if (subResource === undefined) delete r.request.subResource;
      else r.request.subResource = subResource;
      r.request.operation = ['CREATE', 'UPDATE', 'DELETE', 'CONNECT'][i % 4];
      return r;
    };
    await sendAll(Array.from({ length: 2_000 }, (_, i) => review(i, `resource-${i}`, i % 2 ? `sub-${i}` : undefined)));
    await sendAll(Array.from({ length: 10 }, (_, i) => review(i, `${i}${'r'.repeat(1 << 20)}`))); // 1 MiB resource names
    await sendAll(Array.from({ length: 2_000 }, (_, i) => nodeReview(kubeadmNode({ name: `node-${i}` }))));
    // Nodes we do handle but with a status subresource and an operation nobody registers.
    await sendAll(Array.from({ length: 200 }, (_, i) => review(i, 'nodes', `status-${i}`)));

    const scrape = await server.metrics();
    const requests = series(scrape, 'kube_overcommit_admission_requests_total');
    expect(new Set(requests.map((s) => s.resource))).toEqual(new Set(['other', 'nodes/status']));
    expect(new Set(requests.map((s) => s.operation))).toEqual(new Set(['CREATE', 'UPDATE', 'other']));
    const other = requests.filter((s) => s.resource === 'other');
    const counted = (labels: Record<string, string>) => metricValue(scrape, 'kube_overcommit_admission_requests_total', labels) ?? 0;
    expect(other.reduce((sum, labels) => sum + counted(labels), 0)).toBe(2_210);
    expect(counted({ resource: 'nodes/status', operation: 'UPDATE', outcome: 'patched' })).toBe(2_000);
    expect(new Set(series(scrape, 'kube_overcommit_admission_duration_seconds_count').map((s) => s.resource))).toEqual(new Set(['other', 'nodes/status']));

    // The per-node gauges hold the last MAX_NODES nodes admitted; the rest were dropped, counted.
    const raw = series(scrape, 'kube_overcommit_node_allocatable_raw');
    expect(raw).toHaveLength(MAX_NODES * 4);
    expect(series(scrape, 'kube_overcommit_node_ratio')).toHaveLength(MAX_NODES * 4);
    expect(metricValue(scrape, 'kube_overcommit_node_metrics_dropped_total', { reason: 'limit' })).toBe(2_000 - MAX_NODES);
    expect(metricValue(scrape, 'kube_overcommit_node_metrics_dropped_total', { reason: 'silent' })).toBe(0);
    expect(metricValue(scrape, 'kube_overcommit_background_errors_total', { task: 'node-metrics-prune' })).toBe(0);

    // A scrape the size of a quiet replica's, not megabytes.
    expect(Buffer.byteLength(scrape)).toBeLessThan(200_000);

    // And the server still serves a node it has not seen.
    const good = await server.mutate(nodeReview(kubeadmNode({ name: 'after-the-flood' })));
    expect(good.json().response.patch).toBeDefined();
  }, 120_000);
});
