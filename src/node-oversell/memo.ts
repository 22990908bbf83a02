/**
 * A small bounded memo for the admission hot path: a node's quantities, ratios and our own
 * annotations repeat at every status update (every 10 s per node). Emptied when full, which
 * is cheap and good enough for a working set that is a few entries per node. Only for
 * immutable values: a memoised value is shared by every caller.
 */
export class Memo<K, V> {
  private readonly map = new Map<K, V>();

  constructor(private readonly limit: number) {}

  get(key: K, compute: (key: K) => V): V {
    let value = this.map.get(key);
    if (value === undefined && !this.map.has(key)) {
      value = compute(key);
      if (this.map.size >= this.limit) this.map.clear();
      this.map.set(key, value);
    }
    return value as V;
  }
}
