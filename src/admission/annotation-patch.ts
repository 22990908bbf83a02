/**
 * The RFC 6902 operations that set or remove some of an object's annotations, given its
 * `metadata` as received:
 *
 *   1. A key wanted as a string that the annotations hold with that value, or a key wanted as
 *      null that they do not hold, gets no operation.
 *   2. A key wanted as null that they hold is removed; a key wanted as a string is added, or
 *      replaced when present (`existing: 'add'` writes `add` instead: the same effect).
 *   3. With no annotations map (absent or null), the keys to set are added as one new map,
 *      `/metadata/annotations`, or `/metadata` when there is no metadata either.
 *   4. A metadata or annotations that is there but is not an object throws (`malformed:
 *      'throw'`, the default) or is replaced by a new one (`malformed: 'overwrite'`).
 *   5. Keys are taken in the order given.
 */
import type { PatchOperation } from './admission.types.js';
import { isRecord } from '../common/is-record.js';
import { jsonPointer } from '../domain/json-pointer.js';

export interface AnnotationPatchOptions {
  existing?: 'replace' | 'add';
  malformed?: 'throw' | 'overwrite';
}

// Escaped once per key: the node patch is built at every kubelet heartbeat. Keys are the
// webhook's own annotation names, a handful, never a client's.
const paths = new Map<string, string>();
function annotationPath(key: string): string {
  let path = paths.get(key);
  if (path === undefined) paths.set(key, (path = jsonPointer(['metadata', 'annotations', key])));
  return path;
}

export function annotationPatch(metadata: unknown, wanted: Readonly<Record<string, string | null>>, options: AnnotationPatchOptions = {}): PatchOperation[] {
  const { existing = 'replace', malformed = 'throw' } = options;
  const current = isRecord(metadata) ? metadata.annotations : undefined;
  if (!isRecord(current) && current !== undefined && current !== null && malformed === 'throw') {
    if (Object.values(wanted).some((value) => value !== null)) throw new Error('metadata.annotations is not an object: cannot write our annotations');
  }
  const { ops, added } = planKeyOps(current, wanted, existing);
  if (added.length === 0) return ops;
  // fromEntries defines each key as data, `__proto__` too.
  ops.push(newAnnotationsOp(metadata, Object.fromEntries(added), malformed));
  return ops;
}

/**
 * Rules 1, 2 and 5: the operations on the annotations map `current` when it is one, key by key;
 * without one, the keys to set in a new map (`added`).
 */
function planKeyOps(
  current: unknown,
  wanted: Readonly<Record<string, string | null>>,
  existing: 'replace' | 'add',
): { ops: PatchOperation[]; added: [string, string][] } {
  const writable = isRecord(current);
  const ops: PatchOperation[] = [];
  const added: [string, string][] = [];
  for (const key in wanted) {
    const value = wanted[key];
    const present = writable && Object.hasOwn(current, key);
    if (value === null) {
      if (present) ops.push({ op: 'remove', path: annotationPath(key) });
    } else if (!present || current[key] !== value) {
      if (writable) ops.push({ op: present ? existing : 'add', path: annotationPath(key), value });
      else added.push([key, value]);
    }
  }
  return { ops, added };
}

/** Rules 3 and 4: the operation that adds `annotations` as a new map, under the metadata or as a new metadata. */
function newAnnotationsOp(metadata: unknown, annotations: Record<string, string>, malformed: 'throw' | 'overwrite'): PatchOperation {
  if (isRecord(metadata)) return { op: 'add', path: '/metadata/annotations', value: annotations };
  if (metadata === undefined || metadata === null || malformed === 'overwrite') return { op: 'add', path: '/metadata', value: { annotations } };
  throw new Error('metadata is not an object: cannot write our annotations');
}
