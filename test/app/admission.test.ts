import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { kubeadmNode, kwokNode, nodeReview } from '../fixtures/nodes.js';
import { LEVEL, admitted, eventually, metricValue, send, startServer, type TestServer } from './harness.js';

const CONFIG = `
nodes:
  defaultRatios: { cpu: 1.5, memory: 1 }
  pools:
    - name: batch
      nodeSelector: { matchLabels: { node-pool: batch } }
      ratios: { cpu: 3, memory: 1.2 }
`;

// resource.Quantity's serialised form.
const QUANTITY = /^[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+|[numkMGTPE]|[KMGTPE]i)?$/;

const applyResponse = (review: any, body: any) => admitted(review, body).object;

function expectValidQuantities(node: any) {
  for (const field of ['allocatable', 'capacity']) {
    for (const [resource, value] of Object.entries(node.status[field] ?? {})) {
      expect(value, `${field}.${resource}`).toMatch(QUANTITY);
    }
  }
}

describe('POST /mutate over HTTPS', () => {
  let server: TestServer;
  beforeAll(async () => {
    server = await startServer(CONFIG);
  });
  afterAll(async () => {
    await server?.stop();
  });

  it('inflates a kubeadm node status update by the default ratios and records raw values', async () => {
    const review = nodeReview(kubeadmNode());
    const reply = await server.mutate(review);
    expect(reply.status).toBe(200);
    const node = applyResponse(review, reply.json());
    expectValidQuantities(node);
    expect(node.status.allocatable.cpu).toMatch(/^(6|6000m)$/);
    expect(node.status.allocatable.memory).toBe('16290832Ki');
    expect(node.status.capacity).toEqual(review.request.object.status.capacity);
    expect(node.status.allocatable['hugepages-2Mi']).toBe('0');
    const raw = JSON.parse(node.metadata.annotations['kube-overcommit.io/allocatable-raw']);
    expect(JSON.stringify(raw)).toContain('"cpu":"4"');
    expect(JSON.parse(node.metadata.annotations['kube-overcommit.io/ratios'])).toEqual({ cpu: 1.5 });
    // The other annotations survive.
    expect(node.metadata.annotations['node.alpha.kubernetes.io/ttl']).toBe('0');
  });

  it('is idempotent: our own output, sent back (reinvocation, third-party writers), is unchanged', async () => {
    const first = nodeReview(kubeadmNode());
    const inflated = applyResponse(first, (await server.mutate(first)).json());
    const again = nodeReview(inflated);
    const reply = (await server.mutate(again)).json();
    expect(reply.response.patch).toBeUndefined();
    expect(reply.response.allowed).toBe(true);
  });

  it('uses the first matching pool, on a kwok node at CREATE', async () => {
    const review = nodeReview(kwokNode({ labels: { 'node-pool': 'batch' } }), { operation: 'CREATE' });
    const node = applyResponse(review, (await server.mutate(review)).json());
    expectValidQuantities(node);
    expect(node.status.allocatable.cpu).toMatch(/^(96|96000m)$/);
    expect(node.status.allocatable.memory).toBe(String(Math.floor(256 * 1024 ** 3 * 1.2)));
    expect(node.metadata.annotations['kube-overcommit.io/pool']).toBe('batch');
  });

  it('handles millicore allocatable exactly', async () => {
    const review = nodeReview(kubeadmNode({ allocatable: { cpu: '3900m', memory: '7Gi', pods: '110' }, capacity: { cpu: '4', memory: '8Gi', pods: '110' } }));
    const node = applyResponse(review, (await server.mutate(review)).json());
    expectValidQuantities(node);
    expect(node.status.allocatable.cpu).toBe('5850m');
    expect(node.status.capacity.cpu).toBe('4');
  });

  it('leaves opted-out nodes and other resources alone', async () => {
    const review = nodeReview(kubeadmNode({ labels: { 'kube-overcommit.io/disabled': 'true' } }));
    const reply = (await server.mutate(review)).json();
    expect(reply.response.allowed).toBe(true);
    expect(reply.response.patch).toBeUndefined();
    const pods = nodeReview(kubeadmNode());
    pods.request.resource.resource = 'configmaps';
    pods.request.subResource = undefined;
    const other = (await server.mutate(pods)).json();
    expect(other.response).toEqual({ uid: pods.request.uid, allowed: true });
  });

  it('fails open when a strategy throws, and counts it', async () => {
    const review = nodeReview(kubeadmNode({ allocatable: { cpu: 'not-a-quantity', memory: '1Gi' } }));
    const counts = (metrics: string) => [
      metricValue(metrics, 'kube_overcommit_admission_strategy_errors_total', { strategy: 'node-oversell' }) ?? 0,
      metricValue(metrics, 'kube_overcommit_admission_requests_total', { resource: 'nodes/status', operation: 'UPDATE', outcome: 'error' }) ?? 0,
    ];
    const [errorsBefore, requestsBefore] = counts(await server.metrics());
    const reply = await server.mutate(review);
    expect(reply.status).toBe(200);
    expect(reply.json().response).toEqual({ uid: review.request.uid, allowed: true });
    expect(counts(await server.metrics())).toEqual([errorsBefore! + 1, requestsBefore! + 1]);
    const failure = server.logs(LEVEL.error).find((line) => line.uid === review.request.uid);
    expect(failure).toMatchObject({ msg: 'strategy node-oversell failed; admitting unchanged', err: { type: 'QuantityFormatError' } });
  });

  describe('bad input gets a clear error and the server keeps serving', () => {
    it('400 for a body that is not JSON', async () => {
      const reply = await send(`${server.https}/mutate`, { body: '{"apiVersion": ' });
      expect(reply.status).toBe(400);
      expect(reply.json().message).toMatch(/JSON/i);
    });

    it('400 naming each problem for JSON that is not an AdmissionReview v1', async () => {
      const reply = await send(`${server.https}/mutate`, {
        body: JSON.stringify({ apiVersion: 'admission.k8s.io/v1beta1', kind: 'AdmissionReview', request: { kind: {}, operation: 'PATCH', object: [] } }),
      });
      expect(reply.status).toBe(400);
      const body = reply.json();
      const problems = body.problems.join('\n');
      expect(problems).toMatch(/apiVersion/);
      expect(problems).toMatch(/request\.uid/);
      expect(problems).toMatch(/request\.operation/);
      expect(problems).toMatch(/request\.resource/);
      expect(problems).toMatch(/request\.object: must be an object/);
      expect(body.message).toMatch(/not an admission\.k8s\.io\/v1 AdmissionReview/);
    });

    it('400 for an empty body, an array and a missing request', async () => {
      for (const body of ['[]', '"text"', JSON.stringify({ apiVersion: 'admission.k8s.io/v1', kind: 'AdmissionReview' })]) {
        const reply = await send(`${server.https}/mutate`, { body });
        expect(reply.status, body).toBe(400);
      }
    });

    it('400 naming the missing fields for a body whose `__proto__` key tries prototype poisoning: it is parsed as data', async () => {
      const reply = await send(`${server.https}/mutate`, { body: '{"apiVersion":"admission.k8s.io/v1","__proto__":{"kind":"AdmissionReview"}}' });
      expect(reply.status).toBe(400);
      expect(reply.json().problems.join('\n')).toMatch(/^kind: /m);
      expect(reply.json().problems.join('\n')).toMatch(/^request: /m);
    });

    it('415 for a body that is not declared JSON, and 404 for GET /mutate', async () => {
      const review = JSON.stringify(nodeReview(kubeadmNode()));
      const reply = await send(`${server.https}/mutate`, { body: review, headers: { 'content-type': 'application/yaml' } });
      expect(reply.status).toBe(415);
      expect(reply.json()).toMatchObject({ statusCode: 415, error: 'Unsupported Media Type' });
      expect((await send(`${server.https}/mutate`)).status).toBe(404);
    });

    it('413 for a body over 3 MiB', async () => {
      const node = kubeadmNode({ images: 12_000 });
      const body = JSON.stringify(nodeReview(node));
      expect(body.length).toBeGreaterThan(3 * 1024 * 1024);
      const reply = await send(`${server.https}/mutate`, { body });
      expect(reply.status).toBe(413);
      expect(reply.json().message).toMatch(/too large/i);
    });

    it('404 for /mutate on the plain HTTP port', async () => {
      const reply = await send(`${server.http}/mutate`, { body: JSON.stringify(nodeReview(kubeadmNode())) });
      expect(reply.status).toBe(404);
      expect(reply.json().message).toMatch(/HTTPS only/);
    });

    it('still serves a good request afterwards', async () => {
      const review = nodeReview(kubeadmNode());
      const reply = await server.mutate(review);
      expect(reply.status).toBe(200);
      expect(reply.json().response.patch).toBeDefined();
    });
  });

  it('serves the ops endpoints on both ports', async () => {
    for (const base of [server.https, server.http]) {
      expect((await send(`${base}/healthz`)).status).toBe(200);
      const ready = await send(`${base}/readyz`);
      expect(ready.status).toBe(200);
      expect(ready.json().details.config.status).toBe('up');
      const metrics = await send(`${base}/metrics`);
      expect(metrics.status).toBe(200);
      expect(metrics.text).toContain('kube_overcommit_admission_duration_seconds_bucket');
      expect(metrics.text).toContain('process_cpu_seconds_total');
    }
  });

  it('records per-node raw and overcommitted allocatable', async () => {
    await server.mutate(nodeReview(kubeadmNode({ name: 'metrics-node' })));
    const metrics = await server.metrics();
    expect(metricValue(metrics, 'kube_overcommit_node_allocatable_raw', { node: 'metrics-node', resource: 'cpu' })).toBe(4);
    expect(metricValue(metrics, 'kube_overcommit_node_allocatable_overcommitted', { node: 'metrics-node', resource: 'cpu' })).toBe(6);
  });
});

describe('config file reloads', () => {
  let server: TestServer;
  beforeAll(async () => {
    server = await startServer('nodes: { defaultRatios: { cpu: 2 } }');
  });
  afterAll(async () => {
    await server?.stop();
  });

  const cpuAfterMutate = async () => {
    const review = nodeReview(kubeadmNode());
    return applyResponse(review, (await server.mutate(review)).json()).status.allocatable.cpu;
  };

  it('applies an edit to the next review, and keeps the last good config on an invalid edit', async () => {
    expect(await cpuAfterMutate()).toMatch(/^(8|8000m)$/);
    expect(metricValue(await server.metrics(), 'kube_overcommit_config_generation')).toBe(1);

    server.writeConfig('nodes: { defaultRatios: { cpu: 1.25 } }');
    await eventually(async () => /^(5|5000m)$/.test(await cpuAfterMutate()));
    let metrics = await server.metrics();
    expect(metricValue(metrics, 'kube_overcommit_config_generation')).toBe(2);
    expect(metricValue(metrics, 'kube_overcommit_config_reloads_total', { result: 'success' })).toBe(2);

    server.writeConfig('nodes: { defaultRatios: { cpu: 25, gpu: 2 } }');
    metrics = await eventually(async () => {
      const text = await server.metrics();
      return metricValue(text, 'kube_overcommit_config_reloads_total', { result: 'failure' }) === 1 && text;
    });
    expect(metricValue(metrics, 'kube_overcommit_config_generation')).toBe(2);
    expect(server.logs(LEVEL.error).map((line) => line.errors)).toContainEqual([
      'nodes.defaultRatios.gpu: property gpu should not exist',
      'nodes.defaultRatios.cpu: cpu must not be greater than 10',
    ]);
    expect(await cpuAfterMutate()).toMatch(/^(5|5000m)$/);
    expect((await send(`${server.https}/readyz`)).status).toBe(200);
  });
});
