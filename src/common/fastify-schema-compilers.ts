/**
 * Fastify's own schema compilers, loaded when a route first declares a schema instead of when a
 * Fastify instance is made.
 *
 * Unless `schemaController.compilersFactory` gives both factories, Fastify require()s Ajv (through
 * @fastify/ajv-compiler) and fast-json-stringify's compiler for every root instance: about 15–20 ms of
 * each start (issue 26's "Fifth pass": git log -p docs/performance.md), for compilers that no
 * route of this server uses — no route declares a schema; the admission decoder and
 * class-validator check what comes in. These factories are Fastify's own, required from where
 * Fastify resolves them at their first call.
 *
 * One difference, for a route that would declare a `headers` schema: Fastify lowercases that
 * schema's keys for its own compiler and leaves them as written for a custom one. No route here
 * declares one.
 */
import { createRequire } from 'node:module';
import type { FastifyServerOptions } from 'fastify';

type CompilersFactory = NonNullable<NonNullable<FastifyServerOptions['schemaController']>['compilersFactory']>;
type ValidatorFactory = NonNullable<CompilersFactory['buildValidator']>;
type SerializerFactory = NonNullable<CompilersFactory['buildSerializer']>;

// Written here: Fastify has no option to defer loading its compilers, only to replace them.
let fromFastify: NodeRequire | undefined;
const requireFromFastify = (id: string): unknown => {
  fromFastify ??= createRequire(createRequire(import.meta.url).resolve('fastify'));
  return fromFastify(id);
};

/** A factory that require()s the selector module `id` exports (a function making the factory) at its first call. */
function deferred<Factory>(id: string): Factory {
  let factory: ((...args: unknown[]) => unknown) | undefined;
  const build = (...args: unknown[]) => {
    factory ??= (requireFromFastify(id) as () => (...args: unknown[]) => unknown)();
    return factory(...args);
  };
  return build as Factory;
}

/** For `Fastify({ schemaController: { compilersFactory: lazySchemaCompilers } })`. */
export const lazySchemaCompilers: Required<CompilersFactory> = {
  buildValidator: deferred<ValidatorFactory>('@fastify/ajv-compiler'),
  buildSerializer: deferred<SerializerFactory>('@fastify/fast-json-stringify-compiler'),
};
