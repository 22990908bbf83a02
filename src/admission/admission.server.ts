import { Logger } from '@nestjs/common';
import { STATUS_CODES } from 'node:http';
import Fastify, { type FastifyInstance } from 'fastify';
import { lazySchemaCompilers } from '../common/fastify-schema-compilers.js';
import { InvalidAdmissionReview } from './admission-review.decoder.js';
import type { AdmissionPipeline } from './admission.pipeline.js';
import { ADMISSION_PATH, entryPath } from './admission.routes.js';
import type { WebhookEntry } from './admission.types.js';

export interface AdmissionServerOptions {
  /** The largest body accepted (docs/architecture.md, "A request's path"): a larger one gets 413. */
  bodyLimit: number;
}

/**
 * The webhook endpoint as its own minimal Fastify instance, beside Nest's (which serves the
 * ops endpoints on the same sockets; see edge.ts), in the way controller-runtime keeps
 * its webhook server apart from metrics and probes. Nest's per-request layer (its router,
 * middleware matching and seven request hooks) has nothing to add here — the pipeline decodes,
 * counts and answers — and it was a large share of a small node's call
 * (docs/performance.md, docs/adr/0001). Fastify still does the HTTP work: body limit (413), content type
 * (415), JSON parsing (400 for an empty or invalid body), and 404 for a path under /mutate that
 * is not served. `/mutate` runs every strategy; each webhook entry's path, only its own.
 */
export async function createAdmissionServer(pipeline: AdmissionPipeline, options: AdmissionServerOptions): Promise<FastifyInstance> {
  const logger = new Logger('Admission');
  // JSON.parse keeps a `__proto__` key as an own data property, never as the prototype, and
  // nothing here assigns client keys into other objects: so `__proto__` and `constructor` keys,
  // legal in a Pod's maps, are parsed as data instead of refused (secure-json-parse's 'ignore').
  const server = Fastify({
    bodyLimit: options.bodyLimit,
    onProtoPoisoning: 'ignore',
    onConstructorPoisoning: 'ignore',
    schemaController: { compilersFactory: lazySchemaCompilers },
  });
  const route = (path: string, entry?: WebhookEntry) =>
    server.post(path, (request, reply) => {
      try {
        // The body was parsed for this request alone: the pipeline may change it (review's ownBody).
        return pipeline.review(request.body, entry, true);
      } catch (error) {
        if (!(error instanceof InvalidAdmissionReview)) throw error;
        return reply.code(400).send({ statusCode: 400, error: 'Bad Request', message: error.message, problems: error.problems });
      }
    });
  route(ADMISSION_PATH);
  for (const entry of pipeline.entries) route(entryPath(entry), entry);
  server.setErrorHandler((error: Error & { statusCode?: number }, _request, reply) => {
    const statusCode = error.statusCode !== undefined && error.statusCode >= 400 ? error.statusCode : 500;
    if (statusCode >= 500) logger.error({ err: error }, 'admission request failed');
    return reply.code(statusCode).send({ statusCode, error: STATUS_CODES[statusCode], message: error.message });
  });
  await server.ready();
  return server;
}
