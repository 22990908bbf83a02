import { isRecord } from '../common/is-record.js';
import { validateAs } from '../common/validation.js';
import { AdmissionReviewDto } from './admission-review.dto.js';
import { OPERATIONS, type AdmissionRequest } from './admission.types.js';

export class InvalidAdmissionReview extends Error {
  constructor(readonly problems: string[]) {
    super(`not an admission.k8s.io/v1 AdmissionReview: ${problems.join('; ')}`);
  }
}

// The fields AdmissionRequestDto declares.
const ENVELOPE_KEYS = ['uid', 'kind', 'resource', 'subResource', 'name', 'namespace', 'operation', 'dryRun'];
const OBJECT_KEYS = ['object', 'oldObject'] as const;

const isString = (value: unknown): value is string => typeof value === 'string';
const isNonEmptyString = (value: unknown) => isString(value) && value.length > 0;
// As class-validator's @IsOptional: null counts as absent.
const isOptional = (value: unknown, check: (v: unknown) => boolean) => value == null || check(value);

/**
 * The same rules as AdmissionReviewDto, written out: validating through the DTO cost more than
 * the JSON parse of a small review (docs/performance.md, docs/adr/0003). A well-formed
 * review — every call the API server makes — takes this path; anything else goes through the
 * DTO, which names the problems. A spec checks that the two agree on every declared field. A key
 * that `kind` or `resource` does not declare is ignored here, as the API server's decoder ignores
 * unknown fields, and named by the DTO only in an envelope bad for another reason: enumerating
 * a hostile object's keys is a cost on the scale of parsing it (docs/performance.md, section 6).
 */
export function isWellFormedReview(body: Record<string, unknown>): boolean {
  const request = body.request;
  if (body.apiVersion !== 'admission.k8s.io/v1' || body.kind !== 'AdmissionReview' || !isRecord(request)) return false;
  return (
    isNonEmptyString(request.uid) &&
    isGroupVersion(request.kind, 'kind') &&
    isGroupVersion(request.resource, 'resource') &&
    isOptional(request.subResource, isString) &&
    isOptional(request.name, isString) &&
    isOptional(request.namespace, isString) &&
    (OPERATIONS as readonly unknown[]).includes(request.operation) &&
    isOptional(request.dryRun, (v) => typeof v === 'boolean') &&
    OBJECT_KEYS.every((key) => request[key] == null || isRecord(request[key]))
  );
}

/** `request.kind` or `request.resource` as AdmissionReviewDto declares it: group and version strings, and a non-empty `kind` or `resource`. */
function isGroupVersion(value: unknown, name: 'kind' | 'resource'): boolean {
  return isRecord(value) && isString(value.group) && isString(value.version) && isNonEmptyString(value[name]);
}

/** Every problem with the envelope, by path, from AdmissionReviewDto: empty when it is valid. */
export function envelopeProblems(body: Record<string, unknown>): string[] {
  const request = body.request;
  const envelope: Record<string, unknown> = { apiVersion: body.apiVersion, kind: body.kind, request };
  const problems: string[] = [];
  if (isRecord(request)) {
    // Validate only the fields we read; unknown request fields (userInfo, options, ...) are allowed.
    const view: Record<string, unknown> = {};
    for (const key of ENVELOPE_KEYS) if (request[key] !== undefined) view[key] = request[key];
    envelope.request = view;
    for (const key of OBJECT_KEYS) {
      if (request[key] != null && !isRecord(request[key])) problems.push(`request.${key}: must be an object`);
    }
  }
  const result = validateAs(AdmissionReviewDto, envelope);
  if (!result.ok) problems.unshift(...result.errors);
  return problems;
}

/**
 * Checks the envelope of an AdmissionReview and returns its request. The embedded objects
 * (a Node can be 100 KB) are checked for shape and passed on as parsed, never copied.
 */
export function decodeAdmissionReview(body: unknown): AdmissionRequest {
  if (!isRecord(body)) throw new InvalidAdmissionReview(['body must be a JSON object']);
  if (isWellFormedReview(body)) return body.request as AdmissionRequest;
  const problems = envelopeProblems(body);
  // The fast path is stricter than the DTO only if they disagree; the spec keeps them equal.
  if (problems.length === 0) return body.request as AdmissionRequest;
  throw new InvalidAdmissionReview(problems);
}
