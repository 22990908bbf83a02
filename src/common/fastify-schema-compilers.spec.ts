import Fastify from 'fastify';
import { afterEach, describe, expect, it } from 'vitest';
import { lazySchemaCompilers } from './fastify-schema-compilers.js';

describe('lazySchemaCompilers', () => {
  const servers: ReturnType<typeof Fastify>[] = [];
  afterEach(async () => {
    await Promise.all(servers.splice(0).map((server) => server.close()));
  });

  const withSchemas = async (schemaController?: { compilersFactory: typeof lazySchemaCompilers }) => {
    const server = Fastify(schemaController ? { schemaController } : {});
    servers.push(server);
    server.post(
      '/',
      {
        schema: {
          body: { type: 'object', required: ['n'], properties: { n: { type: 'integer', minimum: 1 } } },
          response: { 200: { type: 'object', properties: { twice: { type: 'integer' } } } },
        },
      },
      (request) => ({ twice: (request.body as { n: number }).n * 2, dropped: 'not in the response schema' }),
    );
    await server.ready();
    const answer = async (body: unknown) => {
      const response = await server.inject({ method: 'POST', url: '/', payload: body as object });
      return { status: response.statusCode, body: response.json<Record<string, unknown>>() };
    };
    return Promise.all([answer({ n: 3 }), answer({ n: 0 }), answer({}), answer({ n: 'x' })]);
  };

  it('validates and serializes a route’s schemas as Fastify’s own compilers do', async () => {
    const lazy = await withSchemas({ compilersFactory: lazySchemaCompilers });
    const own = await withSchemas();
    expect(lazy).toEqual(own);
    expect(lazy[0]).toEqual({ status: 200, body: { twice: 6 } });
    expect(lazy.slice(1).map((answer) => answer.status)).toEqual([400, 400, 400]);
    expect(lazy[1]?.body.message).toBe('body/n must be >= 1');
  });
});
