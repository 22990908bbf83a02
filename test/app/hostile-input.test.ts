import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { kubeadmNode, nodeReview } from '../fixtures/nodes.js';
import { container, deploymentPod, podReview } from '../fixtures/pods.js';
import { decodePatch, eventually, metricValue, send, startServer, type TestServer } from './harness.js';

// Bodies a hostile client (or a buggy one) can send: each must get a 4xx with a JSON error, or
// a well-formed answer, quickly, and leave the server serving everyone else.
const CONFIG = `
nodes:
  defaultRatios: { cpu: 1.5 }
pods:
  namespaceSelector: {}
  defaultRequests: { cpu: 100m, memory: 128Mi }
  limitToRequest: { memoryRequestPercent: 50 }
`;

const post = (server: TestServer, body: string) => send(`${server.https}/mutate`, { body });

/** `{"a":{"a":...1...}}`, `depth` levels deep, written as text (JSON.stringify would recurse). */
const nested = (depth: number) => `${'{"a":'.repeat(depth)}1${'}'.repeat(depth)}`;
const nestedArrays = (depth: number) => `${'['.repeat(depth)}1${']'.repeat(depth)}`;

function reviewWith(path: 'kind' | 'resource' | 'uid', valueJson: string): string {
  const review = nodeReview(kubeadmNode());
  const marker = '"__MARKER__"';
  review.request[path] = '__MARKER__';
  return JSON.stringify(review).replace(marker, valueJson);
}

describe('hostile and unusual bodies on /mutate', () => {
  let server: TestServer;
  beforeAll(async () => {
    server = await startServer(CONFIG);
  });
  afterAll(async () => {
    await server?.stop();
  });

  it('400 with a JSON error for an envelope field nested 2,000 levels deep', async () => {
    for (const path of ['kind', 'resource', 'uid'] as const) {
      for (const value of [nested(2_000), nestedArrays(2_000)]) {
        const reply = await post(server, reviewWith(path, value));
        expect(reply.status, path).toBe(400);
        expect(reply.json().problems.join('\n'), path).toContain(`request.${path}`);
      }
    }
  });

  it('400 naming the field for a bad envelope object keyed `constructor`, `__proto__` or `toString`; beside a valid kind such a key is ignored, as the API server ignores unknown fields', async () => {
    for (const key of ['constructor', '__proto__', 'toString']) {
      for (const kind of [`{"${key}":"x"}`, `{"${key}":{"prototype":{}},"group":1}`]) {
        const reply = await post(server, reviewWith('kind', kind));
        expect(reply.status, kind).toBe(400);
        expect(reply.json().problems, kind).toContain(`request.kind.${key}: property ${key} should not exist`);
      }
      const valid = await post(server, reviewWith('kind', `{"${key}":{"prototype":{}},"group":"","version":"v1","kind":"Node"}`));
      expect(valid.status, key).toBe(200);
      expect(valid.json().response.allowed, key).toBe(true);
    }
  });

  it('fails open for a pod whose container resources hold a field nested 5,000 levels deep', async () => {
    // log-shipper sets no requests: the policy gives it defaults, written into its requests beside what they hold.
    const review = podReview(deploymentPod());
    review.request.object.spec.initContainers[1].resources = { requests: { extra: '__MARKER__' } };
    const errors = async () => metricValue(await server.metrics(), 'kube_overcommit_admission_strategy_errors_total', { strategy: 'pod-policy' }) ?? 0;
    const before = await errors();
    const reply = await post(server, JSON.stringify(review).replace('"__MARKER__"', nested(5_000)));
    expect(reply.status).toBe(200);
    expect(reply.json().response).toMatchObject({ uid: review.request.uid, allowed: true });
    expect(reply.json().response.patch).toBeUndefined();
    expect(await errors()).toBe(before + 1);
  });

  it('answers a pod whose map holds a `__proto__` or `constructor` key exactly as the same pod without it', async () => {
    const pod = (attributes: Record<string, string>) => {
      const p = deploymentPod();
      p.spec.containers.push(container('plain'));
      p.spec.volumes.push({ name: 'csi', csi: { driver: 'csi.example.com', volumeAttributes: attributes } });
      return podReview(p);
    };
    const plain = await server.mutate(pod({ tier: 'x' }));
    expect(plain.status).toBe(200);
    const expected = decodePatch(plain.json());
    expect(expected.length).toBeGreaterThan(0);
    for (const key of ['__proto__', 'constructor']) {
      const text = JSON.stringify(pod({ tier: 'x' })).replace('"tier":"x"', `"tier":"x","${key}":"x"`);
      const reply = await post(server, text);
      expect(reply.status, key).toBe(200);
      expect(decodePatch(reply.json()), key).toEqual(expected);
    }
  });

  it('rejects an envelope field with 100,000 keys in time linear in its size, with a bounded error list, and keeps others waiting no longer', async () => {
    const withKeys = (count: number) => reviewWith('kind', `{${Array.from({ length: count }, (_, i) => `"k${i}":1`).join(',')}}`);
    /** The fastest of three rejections of `body`, in ms: the least disturbed by the rest of the machine. */
    const fastest = async (body: string) => {
      const times: number[] = [];
      for (let i = 0; i < 3; i++) {
        const started = performance.now();
        expect((await post(server, body)).status).toBe(400);
        times.push(performance.now() - started);
      }
      return Math.min(...times);
    };
    const [small, large] = [withKeys(10_000), withKeys(100_000)];
    const bad = post(server, large);
    const good = server.mutate(nodeReview(kubeadmNode()));
    const [badReply, goodReply] = await Promise.all([bad, good]);
    expect(badReply.status).toBe(400);
    expect(badReply.text.length).toBeLessThan(4_096);
    expect(badReply.json().problems.at(-1)).toMatch(/and \d+ more problems/);
    expect(goodReply.status).toBe(200);
    // Ten times the keys: about ten times the time (linear); the quadratic error list this replaced
    // took a hundred times (7 s for 100,000 keys).
    const [largeMs, smallMs] = [await fastest(large), await fastest(small)];
    expect(largeMs / smallMs, `${largeMs.toFixed(1)} ms for 100,000 keys, ${smallMs.toFixed(1)} ms for 10,000`).toBeLessThan(30);
  });

  it('still serves a good request afterwards', async () => {
    const reply = await server.mutate(nodeReview(kubeadmNode()));
    expect(reply.status).toBe(200);
    expect(decodePatch(reply.json()).length).toBeGreaterThan(0);
  });
});

describe('a config with label keys that name Object.prototype members', () => {
  let server: TestServer;
  beforeAll(async () => {
    server = await startServer('nodes: { pools: [{ name: ctor, nodeSelector: { matchLabels: { valueOf: v } }, ratios: { cpu: 1.5 } }] }\n');
  });
  afterAll(async () => {
    await server?.stop();
  });

  const labelled = (labels: Record<string, string>) => {
    const node = kubeadmNode();
    Object.assign(node.metadata.labels, labels);
    return nodeReview(node);
  };
  const cpu = async (labels: Record<string, string>) => {
    const patch = decodePatch((await server.mutate(labelled(labels))).json());
    return (patch.find((op) => op.path === '/status/allocatable/cpu') as { value?: unknown } | undefined)?.value;
  };

  const generation = () => server.metrics().then((text) => metricValue(text, 'kube_overcommit_config_generation'));

  it('is applied at start', async () => {
    expect(await generation()).toBe(1);
    expect(await cpu({ valueOf: 'v' })).toBe('6');
    expect(await cpu({})).toBeUndefined();
  });

  it('is applied on a live reload, and selects nodes by those keys as the API server would', async () => {
    const before = await generation();
    server.writeConfig(`
nodes:
  pools:
    - name: ctor
      nodeSelector: { matchLabels: { constructor: x, toString: y } }
      ratios: { cpu: 2 }
    - name: own
      nodeSelector: { matchExpressions: [{ key: hasOwnProperty, operator: Exists }] }
      ratios: { cpu: 3 }
`);
    await eventually(async () => (await generation())! > before!);
    expect(await cpu({ constructor: 'x', toString: 'y' })).toBe('8');
    expect(await cpu({ constructor: 'x' })).toBeUndefined();
    expect(await cpu({ hasOwnProperty: '' })).toBe('12');
    expect(await cpu({})).toBeUndefined();
  });
});
