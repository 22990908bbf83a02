import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createAdmissionServer } from './admission.server.js';
import type { AdmissionPipeline } from './admission.pipeline.js';

// The pipeline answers with what the parser gave it, so the spec sees the parsed body, and
// whether its prototype is still Object.prototype.
const echoPipeline = {
  entries: [],
  review: (body: unknown) => ({ parsed: body, plainPrototype: Object.getPrototypeOf(body) === Object.prototype }),
} as unknown as AdmissionPipeline;

describe('admission server JSON parsing', () => {
  let server: FastifyInstance;
  const post = (payload: string) => server.inject({ method: 'POST', url: '/mutate', headers: { 'content-type': 'application/json' }, payload });

  beforeAll(async () => {
    server = await createAdmissionServer(echoPipeline, { bodyLimit: 1024 * 1024 });
  });
  afterAll(() => server.close());

  it('parses a body with escapes to the same values as the plain one', async () => {
    const plain = await post('{"a":{"b":[1,"x<y"]}}');
    const escaped = await post('{"a":{"b":[1,"x\\u003cy"]}}');
    expect(plain.statusCode).toBe(200);
    expect(plain.json()).toEqual({ parsed: { a: { b: [1, 'x<y'] } }, plainPrototype: true });
    expect(escaped.json()).toEqual(plain.json());
  });

  it('keeps `__proto__` and `constructor` keys, spelt plainly or with escapes, as data: the prototype is untouched', async () => {
    for (const body of ['{"__proto__":{"allowed":false}}', '{"\\u005f_proto__":{"allowed":false}}', '{"constructor":{"prototype":{"allowed":false}}}']) {
      const reply = await post(body);
      expect(reply.statusCode, body).toBe(200);
      expect(reply.json().plainPrototype, body).toBe(true);
      expect(reply.body, body).toContain('"allowed":false');
    }
    expect(({} as Record<string, unknown>).allowed).toBeUndefined();
    expect((await post('{"ok":true}')).json()).toEqual({ parsed: { ok: true }, plainPrototype: true });
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
    expect(reply.json()).toEqual({ parsed: { a: 1 }, plainPrototype: true });
  });
});
