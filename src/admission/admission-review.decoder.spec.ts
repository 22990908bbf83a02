import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { kubeadmNode, nodeReview } from '../../test/fixtures/nodes.js';
import { Outcomes, runs } from '../../test/support/property.js';
import { decodeAdmissionReview, envelopeProblems, InvalidAdmissionReview, isWellFormedReview } from './admission-review.decoder.js';

const dtoAccepts = (body: Record<string, any>) => envelopeProblems(body).length === 0;

const fieldValues = fc.oneof(
  fc.constant(undefined),
  fc.constant(null),
  fc.constant(''),
  fc.string({ maxLength: 3 }),
  fc.integer(),
  fc.boolean(),
  // Fresh objects each time: a shared one would let two edits build a cycle JSON can't have.
  fc.constant(null).map(() => ({})),
  fc.constant(null).map(() => []),
  fc.constantFrom('CREATE', 'UPDATE', 'PATCH', 'admission.k8s.io/v1', 'AdmissionReview', 'nodes'),
);

const REQUEST_FIELDS = ['uid', 'kind', 'resource', 'subResource', 'name', 'namespace', 'operation', 'dryRun', 'object', 'oldObject'];

describe('decodeAdmissionReview', () => {
  it('accepts a real review through the fast path and returns its request untouched', () => {
    const review = nodeReview(kubeadmNode());
    expect(isWellFormedReview(review)).toBe(true);
    expect(decodeAdmissionReview(review)).toBe(review.request);
  });

  it('fast path and class-validator agree on every envelope (property)', () => {
    const base = nodeReview(kubeadmNode({ images: 1 }));
    const seen = new Outcomes('well-formed', 'malformed');
    fc.assert(
      fc.property(
        fc.array(
          fc.tuple(
            fc.constantFrom(
              'apiVersion',
              'kind',
              ...REQUEST_FIELDS.map((f) => `request.${f}`),
              'request.kind.kind',
              'request.kind.group',
              'request.resource.resource',
              'request.resource.version',
            ),
            fieldValues,
          ),
          { maxLength: 3 },
        ),
        (edits) => {
          const body = structuredClone(base);
          for (const [path, value] of edits) {
            const keys = path.split('.');
            let target: any = body;
            for (const key of keys.slice(0, -1)) target = typeof target?.[key] === 'object' && target[key] !== null ? target[key] : undefined;
            if (target === undefined || Array.isArray(target)) continue;
            if (value === undefined) delete target[keys.at(-1)!];
            else target[keys.at(-1)!] = value;
          }
          const wellFormed = isWellFormedReview(body);
          expect(wellFormed).toBe(dtoAccepts(body));
          seen.add(wellFormed ? 'well-formed' : 'malformed');
        },
      ),
      runs(2000),
    );
    // Up to three edits of a valid review: about two in three break it (64-65 % over three seeds).
    seen.expectShare('well-formed', 0.15);
    seen.expectShare('malformed', 0.4);
  });

  it('names every problem of a bad envelope', () => {
    expect(() => decodeAdmissionReview({ apiVersion: 'v1', kind: 'AdmissionReview', request: { uid: '', operation: 'PATCH' } })).toThrow(
      InvalidAdmissionReview,
    );
    try {
      decodeAdmissionReview({ apiVersion: 'v1', kind: 'AdmissionReview', request: { uid: '', operation: 'PATCH' } });
    } catch (error) {
      const problems = (error as InvalidAdmissionReview).problems.join('\n');
      for (const field of ['apiVersion', 'request.uid', 'request.operation', 'request.kind', 'request.resource']) expect(problems).toContain(field);
    }
  });
});
