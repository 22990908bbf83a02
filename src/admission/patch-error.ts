import fastJsonPatch, { type Operation } from 'fast-json-patch';

type Container = Record<string, unknown> | unknown[];

const isContainer = (value: unknown): value is Container => typeof value === 'object' && value !== null;

/**
 * Why `patch` does not apply to `document` (fast-json-patch's error), or undefined when it
 * applies. `document` is never modified.
 *
 * fast-json-patch's own `validate` deep-clones the whole document first (JSON round trip): for
 * a node review, every heartbeat, that is about what parsing the body costs. Written by hand
 * because no library trial-applies without a full copy: each operation gets a copy of only the
 * containers along its path (and `from`), then fast-json-patch applies it to that copy with its
 * validation on, so what applies is decided by the library's own rules.
 */
export function patchError(document: unknown, patch: readonly Operation[]): Error | undefined {
  const applied = applyToCopy(document, patch);
  return 'error' in applied ? applied.error : undefined;
}

/**
 * `patch` applied to a copy of `document` that shares every container the patch does not go
 * through (so no depth of nesting elsewhere costs anything), or why it does not apply.
 * `document` is never modified.
 */
export function applyToCopy(document: unknown, patch: readonly Operation[]): { document: unknown } | { error: Error } {
  const copies = new Set<unknown>();
  let root = isContainer(document) ? copyOf(document, copies) : document;
  try {
    for (const [index, operation] of patch.entries()) {
      // The library's CommonJS build (what Node loads) is not strict: setting a key on a string
      // root would silently do nothing.
      if (!isContainer(root) && operation.path !== '') {
        throw new fastJsonPatch.JsonPatchError('Cannot perform operation at the desired path', 'OPERATION_PATH_UNRESOLVABLE', index, operation, root);
      }
      copyAlong(root, operation.path, copies);
      if ('from' in operation) {
        const fromParent = copyAlong(root, operation.from, copies);
        // A move removes `from` before it adds at `path`: the elements after it shift, so `path`
        // can then go through containers below from's parent that it did not go through before.
        if (operation.op === 'move') copyBelow(fromParent, copies);
      }
      root = fastJsonPatch.applyOperation(root, operation, true, true).newDocument;
    }
    return { document: root };
  } catch (error) {
    return { error: error instanceof Error ? error : new Error(String(error)) };
  }
}

function copyOf(container: Container, copies: Set<unknown>): Container {
  // Object.assign rather than a spread: V8 makes a spread copy slow to add keys to (about 2 µs a
  // key), and adding our annotations is what a node patch does. Object.assign would set a key
  // "__proto__" as the copy's prototype, so such a (rare) object is spread.
  let copy: Container;
  if (Array.isArray(container)) copy = container.slice();
  else copy = Object.hasOwn(container, '__proto__') ? { ...container } : Object.assign({}, container);
  copies.add(copy);
  return copy;
}

/**
 * Replaces every container the pointer goes through (its parent chain) by a copy of its own;
 * returns the pointer's parent when the whole chain resolves.
 */
function copyAlong(root: unknown, pointer: unknown, copies: Set<unknown>): unknown {
  if (typeof pointer !== 'string') return undefined;
  const tokens = pointer.split('/');
  let parent = root;
  // tokens[0] is the empty string before the first "/"; the last token is what the operation changes.
  for (let i = 1; i < tokens.length - 1; i++) {
    if (!isContainer(parent)) return undefined;
    const token = fastJsonPatch.unescapePathComponent(tokens[i]);
    if (!Object.prototype.hasOwnProperty.call(parent, token)) return undefined;
    const child = ownCopy(parent, token, copies);
    if (child === undefined) return undefined;
    parent = child;
  }
  return parent;
}

/** Replaces every container below `container` by a copy of its own. */
function copyBelow(container: unknown, copies: Set<unknown>): void {
  if (!isContainer(container)) return;
  for (const key of Object.keys(container)) copyBelow(ownCopy(container, key, copies), copies);
}

/** The container at `parent[key]`, replaced by a copy of its own unless it is one already. */
function ownCopy(parent: Container, key: string, copies: Set<unknown>): Container | undefined {
  let child = (parent as Record<string, unknown>)[key];
  if (!isContainer(child)) return undefined;
  if (!copies.has(child)) {
    child = copyOf(child, copies);
    // An own key "__proto__" stays a data property: never the prototype setter.
    if (key === '__proto__') Object.defineProperty(parent, key, { value: child, writable: true, enumerable: true, configurable: true });
    else (parent as Record<string, unknown>)[key] = child;
  }
  return child as Container;
}
