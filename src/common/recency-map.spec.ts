import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { Outcomes, runs } from '../../test/support/property.js';
import { RecencyMap } from './recency-map.js';

type Op = { op: 'set'; key: number; value: number } | { op: 'touch'; key: number } | { op: 'delete'; key: number } | { op: 'prune'; below: number };

const key = fc.integer({ min: 0, max: 7 });
const op: fc.Arbitrary<Op> = fc.oneof(
  fc.record({ op: fc.constant('set' as const), key, value: fc.integer() }),
  fc.record({ op: fc.constant('touch' as const), key }),
  fc.record({ op: fc.constant('delete' as const), key }),
  fc.record({ op: fc.constant('prune' as const), below: fc.integer({ min: 0, max: 8 }) }),
);

/** The model: a Map kept in recency order the usual way, delete then set. */
function applyToModel(model: Map<number, number>, step: Op): unknown {
  switch (step.op) {
    case 'set':
      model.delete(step.key);
      model.set(step.key, step.value);
      return undefined;
    case 'touch': {
      if (!model.has(step.key)) return false;
      const value = model.get(step.key)!;
      model.delete(step.key);
      model.set(step.key, value);
      return true;
    }
    case 'delete':
      return model.delete(step.key);
    case 'prune':
      for (const [k] of model) if (k < step.below) model.delete(k);
      return undefined;
  }
}

function applyToMap(map: RecencyMap<number, number>, step: Op): unknown {
  switch (step.op) {
    case 'set':
      return map.set(step.key, step.value);
    case 'touch':
      return map.touch(step.key);
    case 'delete':
      return map.delete(step.key);
    case 'prune':
      // Deleting the entry just yielded while iterating, as the gauges' prune does.
      for (const [k] of map) if (k < step.below) map.delete(k);
      return undefined;
  }
}

describe('RecencyMap', () => {
  it('keeps the order and values that delete + set give a Map, through any sequence of set, touch, delete and prune (model-based)', () => {
    // The steps that change the order or the contents (a set of a key already there moves it).
    const seen = new Outcomes('set of a present key', 'touch of a present key', 'delete of a present key', 'prune that deletes');
    fc.assert(
      fc.property(fc.array(op, { maxLength: 60 }), (steps) => {
        const model = new Map<number, number>();
        const map = new RecencyMap<number, number>();
        for (const step of steps) {
          const [present, sizeBefore] = [step.op !== 'prune' && model.has(step.key), model.size];
          expect(applyToMap(map, step)).toEqual(applyToModel(model, step));
          if (step.op === 'prune') {
            if (model.size < sizeBefore) seen.add('prune that deletes');
          } else if (present) seen.add(`${step.op} of a present key`);
          expect([...map]).toEqual([...model]);
          expect([...map.keys()]).toEqual([...model.keys()]);
          expect(map.size).toBe(model.size);
          expect(map.oldest()).toEqual(model.size ? [...model][0] : undefined);
          for (let k = 0; k <= 7; k++) expect(map.get(k)).toBe(model.get(k));
        }
      }),
      runs(1000),
    );
    seen.expectEach();
  });

  it('touches a present key without writing to the Map behind it', () => {
    const map = new RecencyMap<string, number>();
    for (const name of ['a', 'b', 'c']) map.set(name, 1);
    const links = (map as unknown as { links: Map<string, unknown> }).links;
    const writes = { set: 0, delete: 0 };
    const { set, delete: remove } = links;
    links.set = (...args) => (writes.set++, set.apply(links, args));
    links.delete = (...args) => (writes.delete++, remove.apply(links, args));
    map.touch('a');
    map.set('b', 2);
    expect(writes).toEqual({ set: 0, delete: 0 });
    expect([...map.keys()]).toEqual(['c', 'a', 'b']);
  });
});
