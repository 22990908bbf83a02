/**
 * RFC 6901 JSON Pointer helpers for building RFC 6902 JSON Patch paths.
 *
 * A reference token escapes `~` as `~0` and `/` as `~1`, in that order, so that a label or
 * annotation key such as `kube-overcommit.io/pool` becomes `kube-overcommit.io~1pool`.
 */
import { Memo } from './memo.js';

/** The same few keys (our annotations, a node's resources) are escaped at every heartbeat. */
const escaped = new Memo<string, string>(4_096);
const escapeToken = (token: string): string => token.replace(/~/g, '~0').replace(/\//g, '~1');

/** Escapes one reference token: `a/b~c` → `a~1b~0c`. */
export function escapeJsonPointer(token: string): string {
  return token.includes('~') || token.includes('/') ? escaped.get(token, escapeToken) : token;
}

/** A pointer from raw (unescaped) tokens: `jsonPointer(['metadata', 'annotations', 'a/b'])` → `/metadata/annotations/a~1b`. */
export function jsonPointer(tokens: readonly string[]): string {
  return tokens.map((token) => `/${escapeJsonPointer(token)}`).join('');
}
