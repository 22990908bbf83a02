import { Logger } from '@nestjs/common';
import { STATUS_CODES } from 'node:http';
import Fastify, { type FastifyInstance, type FastifyBodyParser } from 'fastify';
import { InvalidAdmissionReview } from './admission-review.decoder.js';
import type { AdmissionPipeline } from './admission.pipeline.js';

export const ADMISSION_PATH = '/mutate';

/** Whether a request target is the webhook endpoint (with or without a query string). */
export function isAdmissionTarget(url: string | undefined): boolean {
  return url === ADMISSION_PATH || (url?.startsWith(`${ADMISSION_PATH}?`) ?? false);
}

/**
 * Whether JSON text could hold a `__proto__` or `constructor` key. Without a `\\u` escape a key
 * can only be spelt literally, so substring scans decide it. "uctor" stands for "constructor":
 * V8's substring search stops at each occurrence of the pattern's first character, and "c" is
 * frequent in Kubernetes JSON where "u" is not; scanning for "constructor" cost as much as the
 * regular expressions it replaced (`npm run bench:hot-path`). A word that merely contains
 * "uctor" only costs the secure parse.
 */
export function mayHoldPoisonedKey(text: string): boolean {
  return text.includes('__proto__') || text.includes('uctor') || text.includes('\\u');
}

/**
 * Fastify's JSON parser (secure-json-parse) with a fast path. secure-json-parse runs two
 * regular expressions over the whole body after JSON.parse, to find `__proto__`/`constructor`
 * keys even when spelt with `\u` escapes: 8 µs on a 29 KB node, 26 µs on a 100 KB one, where
 * the scans below take 3 (`npm run bench:hot-path`). A body that cannot hold such a key (the
 * nodes and pods the API server sends, in practice) is parsed with JSON.parse alone; any other
 * body, and any body JSON.parse rejects, goes to Fastify's own parser, so the errors (400 for
 * poisoning, empty or invalid JSON) are Fastify's, unchanged.
 */
export function admissionJsonParser(secureParser: FastifyBodyParser<string>): FastifyBodyParser<string> {
  return function parseAdmissionJson(this: FastifyInstance, request, text, done) {
    if (mayHoldPoisonedKey(text)) return secureParser.call(this, request, text, done);
    let parsed: unknown;
    try {
      parsed = JSON.parse(text);
    } catch {
      // Empty, invalid, or led by a byte-order mark: Fastify's parser answers as it always does.
      return secureParser.call(this, request, text, done);
    }
    return done(null, parsed);
  };
}

export interface AdmissionServerOptions {
  /** DESIGN's body limit: a larger body gets 413. */
  bodyLimit: number;
}

/**
 * The webhook endpoint as its own minimal Fastify instance, beside Nest's (which serves the
 * ops endpoints on the same sockets; see app.factory.ts), in the way controller-runtime keeps
 * its webhook server apart from metrics and probes. Nest's per-request layer (its router,
 * middleware matching and seven request hooks) has nothing to add here — the pipeline decodes,
 * counts and answers — and it measured about a third of a small node's call
 * (docs/performance.md). Fastify still does the HTTP work: body limit (413), content type
 * (415), JSON parsing with prototype-poisoning protection (400; admissionJsonParser).
 */
export async function createAdmissionServer(pipeline: AdmissionPipeline, options: AdmissionServerOptions): Promise<FastifyInstance> {
  const logger = new Logger('Admission');
  const server = Fastify({ bodyLimit: options.bodyLimit });
  const secureParser = server.getDefaultJsonParser('error', 'error') as FastifyBodyParser<string>;
  server.addContentTypeParser('application/json', { parseAs: 'string' }, admissionJsonParser(secureParser));
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
