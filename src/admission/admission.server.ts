import { Logger } from '@nestjs/common';
import { STATUS_CODES } from 'node:http';
import Fastify, { type FastifyInstance } from 'fastify';
import { InvalidAdmissionReview } from './admission-review.decoder.js';
import type { AdmissionPipeline } from './admission.pipeline.js';

export const ADMISSION_PATH = '/mutate';

/** Whether a request target is the webhook endpoint (with or without a query string). */
export function isAdmissionTarget(url: string | undefined): boolean {
  return url === ADMISSION_PATH || (url?.startsWith(`${ADMISSION_PATH}?`) ?? false);
}

export interface AdmissionServerOptions {
  /** The largest body accepted (docs/architecture.md, "A request's path"): a larger one gets 413. */
  bodyLimit: number;
}

/**
 * The webhook endpoint as its own minimal Fastify instance, beside Nest's (which serves the
 * ops endpoints on the same sockets; see app.factory.ts), in the way controller-runtime keeps
 * its webhook server apart from metrics and probes. Nest's per-request layer (its router,
 * middleware matching and seven request hooks) has nothing to add here — the pipeline decodes,
 * counts and answers — and it measured about a third of a small node's call
 * (docs/performance.md). Fastify still does the HTTP work: body limit (413), content type
 * (415), JSON parsing (400 for an empty or invalid body).
 */
export async function createAdmissionServer(pipeline: AdmissionPipeline, options: AdmissionServerOptions): Promise<FastifyInstance> {
  const logger = new Logger('Admission');
  // JSON.parse keeps a `__proto__` key as an own data property, never as the prototype, and
  // nothing here assigns client keys into other objects: so `__proto__` and `constructor` keys,
  // legal in a Pod's maps, are parsed as data instead of refused (secure-json-parse's 'ignore').
  const server = Fastify({ bodyLimit: options.bodyLimit, onProtoPoisoning: 'ignore', onConstructorPoisoning: 'ignore' });
  server.post(ADMISSION_PATH, (request, reply) => {
    try {
      return pipeline.review(request.body);
    } catch (error) {
      if (!(error instanceof InvalidAdmissionReview)) throw error;
      return reply.code(400).send({ statusCode: 400, error: 'Bad Request', message: error.message, problems: error.problems });
    }
  });
  server.setErrorHandler((error: Error & { statusCode?: number }, _request, reply) => {
    const statusCode = error.statusCode !== undefined && error.statusCode >= 400 ? error.statusCode : 500;
    if (statusCode >= 500) logger.error({ err: error }, 'admission request failed');
    return reply.code(statusCode).send({ statusCode, error: STATUS_CODES[statusCode], message: error.message });
  });
  await server.ready();
  return server;
}
