import { validateAs } from '../common/validation.js';
import { AdmissionReviewDto } from './admission-review.dto.js';
import type { AdmissionRequest } from './admission.types.js';

export class InvalidAdmissionReview extends Error {
  constructor(readonly problems: string[]) {
    super(`not an admission.k8s.io/v1 AdmissionReview: ${problems.join('; ')}`);
  }
}

// The fields AdmissionRequestDto declares.
const ENVELOPE_KEYS = ['uid', 'kind', 'resource', 'subResource', 'name', 'namespace', 'operation', 'dryRun'];
const OBJECT_KEYS = ['object', 'oldObject'] as const;

function isPlainObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/**
 * Checks the envelope of an AdmissionReview and returns its request. Only the envelope goes
 * through class-transformer: the embedded objects (a Node can be 100 KB) are checked for
 * shape and passed on as parsed, never copied.
 */
export function decodeAdmissionReview(body: unknown): AdmissionRequest {
  if (!isPlainObject(body)) throw new InvalidAdmissionReview(['body must be a JSON object']);
  const request = body.request;
  const envelope: Record<string, unknown> = { apiVersion: body.apiVersion, kind: body.kind, request };
  const problems: string[] = [];
  if (isPlainObject(request)) {
    // Validate only the fields we read; unknown request fields (userInfo, options, ...) are allowed.
    const view: Record<string, unknown> = {};
    for (const key of ENVELOPE_KEYS) if (request[key] !== undefined) view[key] = request[key];
    envelope.request = view;
    for (const key of OBJECT_KEYS) {
      if (request[key] != null && !isPlainObject(request[key])) problems.push(`request.${key}: must be an object`);
    }
  }
  const result = validateAs(AdmissionReviewDto, envelope);
  if (!result.ok) problems.unshift(...result.errors);
  if (problems.length > 0) throw new InvalidAdmissionReview(problems);
  return request as unknown as AdmissionRequest;
}
