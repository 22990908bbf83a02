import fastJsonPatch from 'fast-json-patch';
import http from 'node:http';
import https from 'node:https';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { kubeadmNode, nodeReview } from '../fixtures/nodes.js';
import { podReview } from '../fixtures/pods.js';
import { deploymentPod } from '../fixtures/sidecar-pods.js';
import { LEVEL, eventually, metricValue, send, startServer, type TestServer } from './harness.js';

// Every strategy has something to do: a node ratio, a default request, a sidecar without requests.
const CONFIG = `
nodes:
  defaultRatios: { cpu: 1.5 }
pods:
  defaultRequests: { cpu: 100m }
sidecars:
  templates:
    - name: logging
      containers:
        - name: log-shipper
          image: registry.example.com/obs/fluent-bit:3.2.1
`;

type Json = Record<string, any>;

function patched(review: Json, reply: { status: number; json(): any }): Json {
  expect(reply.status).toBe(200);
  const { response } = reply.json();
  expect(response.uid).toBe(review.request.uid);
  expect(response.allowed).toBe(true);
  if (!response.patch) return review.request.object;
  const patch = JSON.parse(Buffer.from(response.patch, 'base64').toString('utf8'));
  return fastJsonPatch.applyPatch(structuredClone(review.request.object), patch, true, false).newDocument;
}

const requestCpu = (pod: Json, name: string) => pod.spec.containers.find((c: Json) => c.name === name)?.resources?.requests?.cpu;

describe('webhook paths, HTTP metrics and request logs over HTTPS', () => {
  let server: TestServer;
  const post = async (path: string, review: Json) => patched(review, await send(`${server.https}${path}`, { body: JSON.stringify(review) }));
  const metric = async (name: string, labels: Record<string, string> = {}) => metricValue(await server.metrics(), name, labels) ?? 0;

  beforeAll(async () => {
    server = await startServer(CONFIG, { LOG_LEVEL: 'debug' });
  });
  afterAll(async () => {
    await server?.stop();
  });

  describe('one path per webhook entry', () => {
    it('/mutate/nodes inflates a node; the pod entries leave it alone; /mutate runs every strategy', async () => {
      expect((await post('/mutate/nodes', nodeReview(kubeadmNode()))).status.allocatable.cpu).toBe('6');
      expect((await post('/mutate', nodeReview(kubeadmNode()))).status.allocatable.cpu).toBe('6');
      for (const path of ['/mutate/pod-policy', '/mutate/sidecars'])
        expect((await post(path, nodeReview(kubeadmNode()))).status.allocatable.cpu, path).toBe('4');
    });

    it('/mutate/sidecars only injects, /mutate/pod-policy only applies the pod policy, /mutate does both: injection first', async () => {
      const pod = () => deploymentPod({ inject: 'logging' });
      const injected = await post('/mutate/sidecars', podReview(pod()));
      expect(requestCpu(injected, 'log-shipper')).toBeUndefined();
      const policed = await post('/mutate/pod-policy', podReview(pod()));
      expect(policed.spec.containers.map((c: Json) => c.name)).toEqual(['web']);
      const both = await post('/mutate', podReview(pod()));
      expect(requestCpu(both, 'log-shipper')).toBe('100m');
      // The API server calls the sidecars entry first (k8s/base/webhook.yaml): the pod-policy entry then sees the sidecar.
      expect(requestCpu(await post('/mutate/pod-policy', podReview(injected)), 'log-shipper')).toBe('100m');
    });

    it('404 for any other path under /mutate, for GET, and for the entry paths on the plain HTTP port', async () => {
      const review = JSON.stringify(nodeReview(kubeadmNode()));
      for (const path of ['/mutate/other', '/mutate/nodes/status', '/mutate/'])
        expect((await send(`${server.https}${path}`, { body: review })).status, path).toBe(404);
      expect((await send(`${server.https}/mutate/nodes`)).status).toBe(404);
      const plain = await send(`${server.http}/mutate/nodes`, { body: review });
      expect(plain.status).toBe(404);
      expect(plain.json().message).toMatch(/HTTPS only/);
    });

    it('serves an entry path with a query string', async () => {
      expect((await post('/mutate/nodes?timeout=2s', nodeReview(kubeadmNode()))).status.allocatable.cpu).toBe('6');
    });
  });

  describe('HTTP metrics: every answer counted by path and code, the whole call timed', () => {
    const counted = (path: string, code: string) => metric('kube_overcommit_admission_http_requests_total', { path, code });
    const timed = (path: string) => metric('kube_overcommit_admission_http_request_duration_seconds_count', { path });

    it('counts 200, 400, 413 and 415 answers with their code, an unknown path as `other`, and times each call', async () => {
      const before = {
        ok: await counted('/mutate/nodes', '200'),
        bad: await counted('/mutate', '400'),
        large: await counted('/mutate/pod-policy', '413'),
        type: await counted('/mutate/sidecars', '415'),
        other: await counted('other', '404'),
        timedNodes: await timed('/mutate/nodes'),
        timedMutate: await timed('/mutate'),
      };
      expect((await send(`${server.https}/mutate/nodes`, { body: JSON.stringify(nodeReview(kubeadmNode())) })).status).toBe(200);
      expect((await send(`${server.https}/mutate`, { body: '{"apiVersion": ' })).status).toBe(400);
      expect((await send(`${server.https}/mutate?x=1`, { body: JSON.stringify({ kind: 'AdmissionReview' }) })).status).toBe(400);
      const large = JSON.stringify(nodeReview(kubeadmNode({ images: 12_000 })));
      expect(large.length).toBeGreaterThan(3 * 1024 * 1024);
      expect((await send(`${server.https}/mutate/pod-policy`, { body: large })).status).toBe(413);
      const yaml = { body: JSON.stringify(nodeReview(kubeadmNode())), headers: { 'content-type': 'application/yaml' } };
      expect((await send(`${server.https}/mutate/sidecars`, yaml)).status).toBe(415);
      expect((await send(`${server.https}/mutate/made-up-${Date.now()}`, { body: '{}' })).status).toBe(404);
      // Counted when the response closes, just after the client has read it.
      await eventually(async () => (await counted('other', '404')) === before.other + 1);
      expect({
        ok: await counted('/mutate/nodes', '200'),
        bad: await counted('/mutate', '400'),
        large: await counted('/mutate/pod-policy', '413'),
        type: await counted('/mutate/sidecars', '415'),
        timedNodes: await timed('/mutate/nodes'),
        timedMutate: await timed('/mutate'),
      }).toEqual({
        ok: before.ok + 1,
        bad: before.bad + 2,
        large: before.large + 1,
        type: before.type + 1,
        timedNodes: before.timedNodes + 1,
        timedMutate: before.timedMutate + 2,
      });
      // The made-up path is not a label value: the series stay bounded.
      expect(await server.metrics()).not.toContain('path="/mutate/made-up');
    });

    it('the in-flight gauge counts a call whose body is still arriving, and returns to 0', async () => {
      const inFlight = () => metric('kube_overcommit_admission_in_flight_requests');
      await eventually(async () => (await inFlight()) === 0);
      const body = JSON.stringify(nodeReview(kubeadmNode()));
      const req = https.request(`${server.https}/mutate/nodes`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'content-length': String(body.length) },
        rejectUnauthorized: false,
      });
      const answered = new Promise<http.IncomingMessage>((resolve, reject) => {
        req.on('response', (res) => {
          res.resume();
          res.on('end', () => resolve(res));
        });
        req.on('error', reject);
      });
      req.write(body.slice(0, 100));
      await eventually(async () => (await inFlight()) === 1);
      req.end(body.slice(100));
      expect((await answered).statusCode).toBe(200);
      await eventually(async () => (await inFlight()) === 0);
    });

    it('every strategy’s error series exists at 0 before any error', async () => {
      const metrics = await server.metrics();
      for (const strategy of ['node-oversell', 'node-policy', 'status-coalescing', 'pod-policy', 'sidecar']) {
        expect(metricValue(metrics, 'kube_overcommit_admission_strategy_errors_total', { strategy }), strategy).toBe(0);
      }
    });
  });

  it('a strategy’s log lines carry the review’s uid, resource, name, namespace, user and operation', async () => {
    const review = podReview(deploymentPod({ inject: 'logging' }), { username: 'system:serviceaccount:kube-system:replicaset-controller' });
    await post('/mutate/sidecars', review);
    const line = server.logs(LEVEL.debug).find((l) => l.uid === review.request.uid && l.strategy === 'sidecar');
    expect(line).toMatchObject({
      msg: expect.stringMatching(/sidecar template "logging": injected/),
      kind: 'Pod',
      resource: 'pods',
      namespace: 'shop',
      user: 'system:serviceaccount:kube-system:replicaset-controller',
      operation: 'CREATE',
    });
    expect(server.logs(LEVEL.debug).find((l) => l.uid === review.request.uid && l.msg === 'admission decided')).toMatchObject({
      outcome: 'patched',
      resource: 'pods',
    });
  });
});
