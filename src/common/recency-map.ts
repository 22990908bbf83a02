/**
 * A map that keeps its entries in the order they were last used, least recent first, and moves
 * an entry to the back without touching the Map behind it.
 *
 * The usual way, `map.delete(key); map.set(key, value)`, allocates: V8 reallocates a Map's table
 * when a delete leaves it a quarter full, and when its deleted slots fill it. For a map held as
 * long as the process (the node gauges' export: one touch per node-status review) those tables
 * outlive young-generation collections and are promoted, and the old generation they fill brings
 * mark-compacts under load (issue 26's "Third pass": git log -p docs/performance.md). Here an
 * entry is a node of a doubly linked list, found through a Map that is only written when a key
 * comes or goes.
 *
 * Invariants:
 *  1. Iteration, `oldest()` and `keys()` follow the order of the last `set` or `touch` of each
 *     key, least recent first: the order `delete` + `set` would give a Map.
 *  2. `touch` and `set` of a present key allocate nothing.
 *
 * Written here: lru-cache (the library for recency) evicts by itself past its `max` and expires
 * entries by its TTL, while the node gauges decide both themselves: a prune at the time it is
 * given, and an eviction counted as `limit`, each removing the node's series.
 */
interface Link<K, V> {
  key: K;
  value: V;
  newer?: Link<K, V>;
  older?: Link<K, V>;
}

export class RecencyMap<K, V> {
  private readonly links = new Map<K, Link<K, V>>();
  private oldestLink?: Link<K, V>;
  private newestLink?: Link<K, V>;

  get size(): number {
    return this.links.size;
  }

  get(key: K): V | undefined {
    return this.links.get(key)?.value;
  }

  /** Sets the value and makes the key the most recent. */
  set(key: K, value: V): void {
    const link = this.links.get(key);
    if (link) {
      link.value = value;
      this.moveToNewest(link);
      return;
    }
    const added: Link<K, V> = { key, value };
    this.links.set(key, added);
    this.append(added);
  }

  /** Makes a present key the most recent; false when absent. */
  touch(key: K): boolean {
    const link = this.links.get(key);
    if (link) this.moveToNewest(link);
    return link !== undefined;
  }

  delete(key: K): boolean {
    const link = this.links.get(key);
    if (!link) return false;
    this.links.delete(key);
    this.unlink(link);
    return true;
  }

  /** The least recently set or touched entry. */
  oldest(): [K, V] | undefined {
    return this.oldestLink && [this.oldestLink.key, this.oldestLink.value];
  }

  /** Least recent first; deleting the entry just yielded is safe. */
  *[Symbol.iterator](): IterableIterator<[K, V]> {
    for (let link = this.oldestLink; link;) {
      const next = link.newer;
      yield [link.key, link.value];
      link = next;
    }
  }

  *keys(): IterableIterator<K> {
    for (const [key] of this) yield key;
  }

  private moveToNewest(link: Link<K, V>): void {
    if (link === this.newestLink) return;
    this.unlink(link);
    this.append(link);
  }

  private append(link: Link<K, V>): void {
    link.older = this.newestLink;
    link.newer = undefined;
    if (this.newestLink) this.newestLink.newer = link;
    else this.oldestLink = link;
    this.newestLink = link;
  }

  private unlink(link: Link<K, V>): void {
    if (link.older) link.older.newer = link.newer;
    else this.oldestLink = link.newer;
    if (link.newer) link.newer.older = link.older;
    else this.newestLink = link.older;
    link.older = undefined;
    link.newer = undefined;
  }
}
