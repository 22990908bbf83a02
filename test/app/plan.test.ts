import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { kubeadmNode, nodeReview } from '../fixtures/nodes.js';
import { eventually, metricValue, send, startServer, type TestServer } from './harness.js';

const SHADOW = `
nodes:
  defaultRatios: { cpu: 1.5 }
  defaultMode: shadow
`;

describe('shadow mode and GET /plan over HTTP', () => {
  let server: TestServer;
  beforeAll(async () => {
    server = await startServer(SHADOW);
  });
  afterAll(async () => {
    await server?.stop();
  });

  it('patches nothing in shadow, and exports the planned value', async () => {
    const review = nodeReview(kubeadmNode());
    const reply = await server.mutate(review);
    expect(reply.status).toBe(200);
    expect(reply.json().response.allowed).toBe(true);
    expect(reply.json().response.patch).toBeUndefined();
    const name = review.request.object.metadata.name;
    const planned = await eventually(async () =>
      metricValue(await server.metrics(), 'kube_overcommit_node_allocatable_overcommitted', { node: name, resource: 'cpu' }),
    );
    expect(planned).toBe(6);
  });

  it('answers /plan on both ports: 503 outside a cluster, 400 on a bad pod size', async () => {
    for (const base of [server.http, server.https]) {
      const plan = await send(`${base}/plan`);
      expect(plan.status).toBe(503);
      expect(plan.json().message).toMatch(/not in a cluster/);
      const bad = await send(`${base}/plan?podSize=gpu=1`);
      expect(bad.status).toBe(400);
      expect(bad.json().message).toMatch(/pod size "gpu=1"/);
    }
  });

  it('keeps the last good config on a bad mode', async () => {
    server.writeConfig('nodes:\n  defaultMode: sometimes\n');
    await eventually(async () => (metricValue(await server.metrics(), 'kube_overcommit_config_reloads_total', { result: 'failure' }) ?? 0) > 0);
    const reply = await server.mutate(nodeReview(kubeadmNode()));
    expect(reply.json().response.patch).toBeUndefined();
  });
});
