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
import type { PatchOperation } from '../admission/admission.types.js';
import { isRecord } from './is-record.js';
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
  const ops: PatchOperation[] = [];
  const current = isRecord(metadata) ? metadata.annotations : undefined;
  const writable = isRecord(current);
  if (!writable && current !== undefined && current !== null && malformed === 'throw') {
    if (Object.values(wanted).some((value) => value !== null)) throw new Error('metadata.annotations is not an object: cannot write our annotations');
  }
  const added: [string, string][] = [];
  for (const [key, value] of Object.entries(wanted)) {
    const present = writable && Object.hasOwn(current, key);
    if (value === null) {
      if (present) ops.push({ op: 'remove', path: annotationPath(key) });
    } else if (!present || current[key] !== value) {
      if (writable) ops.push({ op: present ? existing : 'add', path: annotationPath(key), value });
      else added.push([key, value]);
    }
  }
  if (added.length === 0) return ops;
  // fromEntries defines each key as data, `__proto__` too.
  const annotations = Object.fromEntries(added);
  if (isRecord(metadata)) ops.push({ op: 'add', path: '/metadata/annotations', value: annotations });
  else if (metadata === undefined || metadata === null || malformed === 'overwrite') ops.push({ op: 'add', path: '/metadata', value: { annotations } });
  else throw new Error('metadata is not an object: cannot write our annotations');
  return ops;
}
