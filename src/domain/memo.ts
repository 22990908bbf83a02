/**
 * A small bounded memo for the admission hot path: a node's quantities, ratios and our own
 * annotations repeat at every status update (every 10 s per node). Emptied when full, which
 * is cheap and good enough for a working set that is a few entries per node. Full means
 * `limit` entries or, since string keys come from request bodies, `maxKeyChars` characters of
 * keys in all (a key longer than that is computed every time): memory stays bounded whatever
 * the keys are. Only for immutable values: a memoised value is shared by every caller.
 */
export class Memo<K, V> {
  private readonly map = new Map<K, V>();
  private keyChars = 0;

  constructor(
    private readonly limit: number,
    private readonly maxKeyChars = limit * 512,
  ) {}

  get(key: K, compute: (key: K) => V): V {
    let value = this.map.get(key);
    if (value === undefined && !this.map.has(key)) {
      value = compute(key);
      const chars = typeof key === 'string' ? key.length : 0;
      if (chars > this.maxKeyChars) return value;
      if (this.map.size >= this.limit || this.keyChars + chars > this.maxKeyChars) {
        this.map.clear();
        this.keyChars = 0;
      }
      this.map.set(key, value);
      this.keyChars += chars;
    }
    return value as V;
  }
}
