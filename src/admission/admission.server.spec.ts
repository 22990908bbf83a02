import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createAdmissionServer, mayHoldPoisonedKey } from './admission.server.js';
import type { AdmissionPipeline } from './admission.pipeline.js';

// The pipeline answers with what the parser gave it, so the spec sees the parsed body.
const echoPipeline = { review: (body: unknown) => ({ parsed: body }) } as unknown as AdmissionPipeline;

describe('mayHoldPoisonedKey', () => {
  it('is false for JSON that spells neither key and has no \\u escape', () => {
    expect(mayHoldPoisonedKey('{"metadata":{"name":"proto-node","labels":{"constructed":"yes"}}}')).toBe(false);
  });

  it('is true for a literal key, and for any \\u escape (which could spell one)', () => {
    expect(mayHoldPoisonedKey('{"__proto__":{}}')).toBe(true);
    expect(mayHoldPoisonedKey('{"constructor":{"prototype":{}}}')).toBe(true);
    expect(mayHoldPoisonedKey('{"\\u005f_proto__":{}}')).toBe(true);
    expect(mayHoldPoisonedKey('{"note":"a \\u003c b"}')).toBe(true);
  });
});

describe('admission server JSON parsing', () => {
  let server: FastifyInstance;
  const post = (payload: string) => server.inject({ method: 'POST', url: '/mutate', headers: { 'content-type': 'application/json' }, payload });

  beforeAll(async () => {
    server = await createAdmissionServer(echoPipeline, { bodyLimit: 1024 * 1024 });
  });
  afterAll(() => server.close());

  it('parses a plain body (the fast path) and one with escapes (Fastify’s parser) to the same values', async () => {
    const plain = await post('{"a":{"b":[1,"x<y"]}}');
    const escaped = await post('{"a":{"b":[1,"x\\u003cy"]}}');
    expect(plain.statusCode).toBe(200);
    expect(plain.json()).toEqual({ parsed: { a: { b: [1, 'x<y'] } } });
    expect(escaped.json()).toEqual(plain.json());
  });

  it('answers 400 to prototype poisoning, spelt plainly or with escapes, and keeps serving', async () => {
    for (const body of ['{"__proto__":{"allowed":false}}', '{"\\u005f_proto__":{"allowed":false}}', '{"constructor":{"prototype":{"allowed":false}}}']) {
      const reply = await post(body);
      expect(reply.statusCode, body).toBe(400);
      expect(reply.json().message, body).toMatch(/not valid JSON/i);
    }
    expect((await post('{"ok":true}')).json()).toEqual({ parsed: { ok: true } });
  });

  it('gives Fastify’s own errors for an empty body and for invalid JSON', async () => {
    const empty = await post('');
    expect(empty.statusCode).toBe(400);
    expect(empty.json().message).toMatch(/empty/i);
    const invalid = await post('{"a":');
    expect(invalid.statusCode).toBe(400);
    expect(invalid.json().message).toMatch(/not valid JSON/i);
  });

  it('accepts a body with a byte-order mark, as Fastify does', async () => {
    const reply = await post('\uFEFF{"a":1}');
    expect(reply.statusCode).toBe(200);
    expect(reply.json()).toEqual({ parsed: { a: 1 } });
  });
});
