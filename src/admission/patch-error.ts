import fastJsonPatch, { type Operation } from 'fast-json-patch';
import { Memo } from '../domain/memo.js';

type Container = Record<string, unknown> | unknown[];

const isContainer = (value: unknown): value is Container => typeof value === 'object' && value !== null;

/**
 * Why `patch` does not apply to `document` (fast-json-patch's error), or undefined when it
 * applies. `document` is never modified.
 *
 * fast-json-patch's own `validate` deep-clones the whole document first (JSON round trip): for
 * a node review, every heartbeat, a second pass over the body ("Every patch is checked against
 * `request.object`", 2026-11-23: git log -p docs/performance.md). Written by hand
 * because no library trial-applies without a full copy: each operation gets a copy of only the
 * containers along its path (and `from`), then fast-json-patch applies it to that copy with its
 * validation on, so what applies is decided by the library's own rules.
 */
export function patchError(document: unknown, patch: readonly Operation[]): Error | undefined {
  if (appliesAsIs(document, patch)) return undefined;
  const applied = applyEach(document, patch);
  return 'error' in applied ? applied.error : undefined;
}

/**
 * `patch` applied to `document` itself, when appliesAsIs says it certainly applies: true. False
 * otherwise, with `document` untouched (nothing is set before every operation is checked). For a
 * document nobody else holds: the pipeline's own parse of a request body.
 */
export function applyInPlace(document: unknown, patch: readonly Operation[]): boolean {
  if (!appliesAsIs(document, patch)) return false;
  for (const operation of patch) {
    const tokens = pointerTokens(operation.path);
    let parent = document as Record<string, unknown>;
    for (let i = 1; i < tokens.length - 1; i++) parent = parent[tokens[i]] as Record<string, unknown>;
    parent[tokens[tokens.length - 1]] = (operation as { value: string }).value;
  }
  return true;
}

/**
 * `patch` applied to a copy of `document` that shares every container the patch does not go
 * through (so no depth of nesting elsewhere costs anything), or why it does not apply.
 * `document` is never modified.
 */
export function applyToCopy(document: unknown, patch: readonly Operation[]): { document: unknown } | { error: Error } {
  if (!appliesAsIs(document, patch)) return applyEach(document, patch);
  // Each operation sets one key of a container that no other one changes or goes through
  // (appliesAsIs): what fast-json-patch's add and replace do there, on copies of its path.
  const copies = new Set<unknown>();
  const root = copyOf(document as Container, copies);
  for (const operation of patch) {
    const parent = copyAlong(root, operation.path, copies) as Record<string, unknown>;
    const tokens = pointerTokens(operation.path);
    parent[tokens[tokens.length - 1]] = (operation as { value: string }).value;
  }
  return { document: root };
}

/** Keys fast-json-patch bans or treats apart (`__proto__`, `constructor/prototype`): never decided by appliesAsIs. */
const GUARDED_KEYS = new Set(['__proto__', 'constructor', 'prototype']);

/**
 * True when the patch certainly applies, decided without a copy: every operation is an `add` or
 * a `replace` of a string, at a path whose parents are the document's own objects (no arrays),
 * a `replace` only of an own key, and no operation's path is another's or leads through it. Each
 * operation then only sets a key of a container no other operation changes or goes through, so
 * they apply in any order, and fast-json-patch's rules (an `add` needs its parent, a `replace`
 * the key) hold for each. This is what a node patch is at every heartbeat (a few allocatable
 * values and annotations); anything else — false — is tried on a copy, operation by operation,
 * so false never means that the patch does not apply.
 */
function appliesAsIs(document: unknown, patch: readonly Operation[]): boolean {
  const paths: (readonly string[])[] = [];
  for (const operation of patch) {
    if ((operation.op !== 'add' && operation.op !== 'replace') || typeof operation.value !== 'string') return false;
    if (typeof operation.path !== 'string' || !operation.path.startsWith('/')) return false;
    const tokens = pointerTokens(operation.path);
    if (!goesThroughOwnObjects(document, operation.op, tokens)) return false;
    for (const other of paths) if (leadsThrough(other, tokens) || leadsThrough(tokens, other)) return false;
    paths.push(tokens);
  }
  return true;
}

/**
 * Whether the path of `tokens` (pointerTokens) leads through the document's own objects only,
 * none of them an array nor a guarded key, to a key an `add` may set or a `replace` finds
 * present.
 */
function goesThroughOwnObjects(document: unknown, op: 'add' | 'replace', tokens: readonly string[]): boolean {
  let parent = document;
  for (let i = 1; i < tokens.length; i++) {
    if (!isContainer(parent) || Array.isArray(parent)) return false;
    const token = tokens[i];
    if (GUARDED_KEYS.has(token)) return false;
    const present = Object.hasOwn(parent, token);
    if (i < tokens.length - 1) {
      if (!present) return false;
      parent = parent[token];
    } else if (op === 'replace' && (!present || parent[token] === undefined)) return false;
  }
  return true;
}

/** Whether the path `path` (unescaped tokens) is `prefix` or goes through it. */
function leadsThrough(path: readonly string[], prefix: readonly string[]): boolean {
  if (prefix.length > path.length) return false;
  for (let i = 0; i < prefix.length; i++) if (path[i] !== prefix[i]) return false;
  return true;
}

/** The patch applied operation by operation by fast-json-patch, each on copies of the containers along its paths. */
function applyEach(document: unknown, patch: readonly Operation[]): { document: unknown } | { error: Error } {
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
  // Object.assign rather than a spread: V8 makes a spread copy slow to add keys to (measured in
  // docs/performance.md), and adding our annotations is what a node patch does. Object.assign would set a key
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
  const tokens = pointerTokens(pointer);
  let parent = root;
  // The last token is what the operation changes.
  for (let i = 1; i < tokens.length - 1; i++) {
    if (!isContainer(parent)) return undefined;
    const token = tokens[i];
    if (!Object.prototype.hasOwnProperty.call(parent, token)) return undefined;
    const child = ownCopy(parent, token, copies);
    if (child === undefined) return undefined;
    parent = child;
  }
  return parent;
}

/** Our annotations' keys ("kube-overcommit.io~1ratios") come back in every node patch. */
const unescaped = new Memo<string, string>(4_096);

/** A JSON Pointer token's key, unescaped as fast-json-patch does it (only a token with a "~" needs it). */
const unescapeToken = (token: string): string => (token.includes('~') ? unescaped.get(token, fastJsonPatch.unescapePathComponent) : token);

/**
 * The paths of a node patch come back at every heartbeat: each pointer is split and unescaped
 * once. Shared, so read-only. tokens[0] is the empty string before the first "/".
 */
const splitPointers = new Memo<string, readonly string[]>(4_096);
const splitPointer = (pointer: string): readonly string[] => pointer.split('/').map((token, i) => (i === 0 ? token : unescapeToken(token)));
const pointerTokens = (pointer: string): readonly string[] => splitPointers.get(pointer, splitPointer);

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
