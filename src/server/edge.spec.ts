import http from 'node:http';
import https from 'node:https';
import { Counter } from 'prom-client';
import { afterEach, describe, expect, it, vi } from 'vitest';
import type { AdmissionHttpMetrics } from '../admission/admission.metrics.js';
import { AdmissionEdge, type EdgeHandlers } from './edge.js';
import { readServerLimits } from './server-limits.js';
import { generateSelfSigned } from '../tls/tls-material.js';

interface Answer {
  status: number;
  body: string;
}

function call(url: string, options: https.RequestOptions & { body?: string } = {}): Promise<Answer> {
  const client = url.startsWith('https:') ? https : http;
  return new Promise((resolve, reject) => {
    const req = client.request(url, { method: options.body ? 'POST' : 'GET', rejectUnauthorized: false, ...options }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => (body += chunk));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
    });
    req.on('error', reject);
    req.end(options.body);
  });
}

const answered = (name: string) => (_req: http.IncomingMessage, res: http.ServerResponse) => res.end(name);

describe('AdmissionEdge', () => {
  let edge: AdmissionEdge | undefined;
  afterEach(async () => {
    edge?.drain.start();
    await edge?.drain.close();
    edge = undefined;
  });

  async function serve(env: NodeJS.ProcessEnv = {}) {
    const refused = new Counter({ name: 'refused', help: 'test', labelNames: ['reason'], registers: [] });
    const track = vi.fn();
    const handlers: EdgeHandlers = {
      admission: answered('admission'),
      ops: answered('ops'),
      refused,
      admissionHttp: { track } as unknown as AdmissionHttpMetrics,
    };
    edge = new AdmissionEdge({ limits: readServerLimits(env), tls: await generateSelfSigned() });
    const ports = await edge.serve(handlers, { httpsPort: 0, httpPort: 0, host: '127.0.0.1' });
    const refusals = async () => Object.fromEntries((await refused.get()).values.map((v) => [v.labels.reason, v.value]));
    return { https: `https://127.0.0.1:${ports.httpsPort}`, http: `http://127.0.0.1:${ports.httpPort}`, track, refusals };
  }

  it('HTTPS: the webhook paths go to the admission server, counted at arrival; the rest to the ops endpoints', async () => {
    const { https: base, track } = await serve();
    expect(await call(`${base}/mutate/nodes`, { body: '{}' })).toEqual({ status: 200, body: 'admission' });
    expect(await call(`${base}/mutate?timeout=10s`, { body: '{}' })).toEqual({ status: 200, body: 'admission' });
    expect(await call(`${base}/readyz`)).toEqual({ status: 200, body: 'ops' });
    expect(track).toHaveBeenCalledTimes(2);
  });

  it('plain HTTP: the ops endpoints only; /mutate and its paths answer 404', async () => {
    const { http: base, track } = await serve();
    expect(await call(`${base}/metrics`)).toEqual({ status: 200, body: 'ops' });
    for (const path of ['/mutate', '/mutate/pod-policy']) {
      const answer = await call(`${base}${path}`, { body: '{}' });
      expect(answer.status, path).toBe(404);
      expect(JSON.parse(answer.body).message).toBe('/mutate is served over HTTPS only');
    }
    expect(track).not.toHaveBeenCalled();
  });

  it('a body past the bytes in flight gets 503 before it is read, counted as body-bytes; the budget is released after', async () => {
    const { https: base, refusals } = await serve({ OVERCOMMIT_MAX_BODY_BYTES_IN_FLIGHT: '10' });
    const refused = await call(`${base}/mutate`, { body: 'x'.repeat(11) });
    expect(refused.status).toBe(503);
    expect(JSON.parse(refused.body).message).toBe('too many request bodies in flight (over 10 bytes); retry');
    expect(await refusals()).toEqual({ 'body-bytes': 1 });
    for (let i = 0; i < 3; i++) expect(await call(`${base}/mutate`, { body: 'x'.repeat(10) })).toEqual({ status: 200, body: 'admission' });
  });
});
