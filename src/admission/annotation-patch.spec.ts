import fastJsonPatch from 'fast-json-patch';
import { describe, expect, it } from 'vitest';
import { annotationPatch } from './annotation-patch.js';

const A = 'kube-overcommit.io/a';
const B = 'kube-overcommit.io/b';
const apply = (object: object, ops: ReturnType<typeof annotationPatch>) => fastJsonPatch.applyPatch(structuredClone(object), ops, true, false).newDocument;

describe('annotationPatch', () => {
  it('adds, replaces and removes keys of an annotations map, in the order given, and leaves the rest', () => {
    const object = { metadata: { annotations: { [A]: 'old', [B]: 'x', other: 'kept' } } };
    const ops = annotationPatch(object.metadata, { [A]: 'new', [B]: null, 'kube-overcommit.io/c': 'c' });
    expect(ops).toEqual([
      { op: 'replace', path: '/metadata/annotations/kube-overcommit.io~1a', value: 'new' },
      { op: 'remove', path: '/metadata/annotations/kube-overcommit.io~1b' },
      { op: 'add', path: '/metadata/annotations/kube-overcommit.io~1c', value: 'c' },
    ]);
    expect(apply(object, ops)).toEqual({ metadata: { annotations: { [A]: 'new', other: 'kept', 'kube-overcommit.io/c': 'c' } } });
  });

  it('writes nothing for a key that already holds its value, or that is absent and wanted absent', () => {
    expect(annotationPatch({ annotations: { [A]: 'same' } }, { [A]: 'same', [B]: null })).toEqual([]);
    expect(annotationPatch({}, { [B]: null })).toEqual([]);
  });

  it('writes `add` for a present key when asked: the same effect as `replace`', () => {
    const object = { metadata: { annotations: { [A]: 'old' } } };
    const ops = annotationPatch(object.metadata, { [A]: 'new' }, { existing: 'add' });
    expect(ops).toEqual([{ op: 'add', path: '/metadata/annotations/kube-overcommit.io~1a', value: 'new' }]);
    expect(apply(object, ops)).toEqual({ metadata: { annotations: { [A]: 'new' } } });
  });

  it('adds the keys to set as one new map when there is none, or a new metadata when there is none either', () => {
    expect(annotationPatch({ name: 'n' }, { [A]: 'a', [B]: 'b' })).toEqual([{ op: 'add', path: '/metadata/annotations', value: { [A]: 'a', [B]: 'b' } }]);
    expect(annotationPatch({ annotations: null }, { [A]: 'a', [B]: null })).toEqual([{ op: 'add', path: '/metadata/annotations', value: { [A]: 'a' } }]);
    expect(annotationPatch(undefined, { [A]: 'a' })).toEqual([{ op: 'add', path: '/metadata', value: { annotations: { [A]: 'a' } } }]);
    expect(apply({ kind: 'Pod' }, annotationPatch(undefined, { [A]: 'a' }))).toEqual({ kind: 'Pod', metadata: { annotations: { [A]: 'a' } } });
  });

  it('throws on a metadata or annotations that is not an object, or replaces it when asked', () => {
    expect(() => annotationPatch({ annotations: 'x' }, { [A]: 'a' })).toThrow('metadata.annotations is not an object: cannot write our annotations');
    expect(() => annotationPatch(['x'], { [A]: 'a' })).toThrow('metadata is not an object: cannot write our annotations');
    // Nothing to write: nothing to throw about.
    expect(annotationPatch({ annotations: 'x' }, { [A]: null })).toEqual([]);
    expect(annotationPatch({ annotations: ['x'] }, { [A]: 'a' }, { malformed: 'overwrite' })).toEqual([
      { op: 'add', path: '/metadata/annotations', value: { [A]: 'a' } },
    ]);
    expect(annotationPatch('x', { [A]: 'a' }, { malformed: 'overwrite' })).toEqual([{ op: 'add', path: '/metadata', value: { annotations: { [A]: 'a' } } }]);
    expect(apply({ metadata: 'x' }, annotationPatch('x', { [A]: 'a' }, { malformed: 'overwrite' }))).toEqual({ metadata: { annotations: { [A]: 'a' } } });
  });

  it('keeps a key named __proto__ as data', () => {
    const metadata = JSON.parse('{"annotations":{"__proto__":"old"}}');
    expect(annotationPatch(metadata, JSON.parse('{"__proto__":"new"}'))).toEqual([{ op: 'replace', path: '/metadata/annotations/__proto__', value: 'new' }]);
    const [added] = annotationPatch({}, JSON.parse('{"__proto__":"new"}'));
    expect(Object.keys(added.op === 'add' ? added.value : {})).toEqual(['__proto__']);
  });
});
