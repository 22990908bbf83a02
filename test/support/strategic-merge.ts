/**
 * The two-way strategic merge patch the kubelet sends for a node status update
 * (k8s.io/component-helpers/node/util PatchNodeStatus → strategicpatch.CreateTwoWayMergePatch
 * over v1.Node), for the parts of a Node a kubelet changes:
 *
 * - objects (allocatable, capacity, nodeInfo, daemonEndpoints, ...): changed keys with their new
 *   value (recursively), removed keys as null;
 * - `conditions` (patchMergeKey `type`): changed elements as `{type, <changed fields>}`, new
 *   elements whole, removed ones `{type, $patch: delete}`, plus `$setElementOrder/conditions`;
 * - `addresses`: when changed, replaced whole (`[{$patch: replace}, ...]`), as the kubelet's
 *   fixupPatchForNodeStatusAddresses does because the merge key `type` is wrong for them;
 * - any other list: replaced whole when it differs.
 */

type Json = any;

const MERGE_KEYS: Record<string, string> = { conditions: 'type', volumesAttached: 'name' };

export function deepEqual(a: Json, b: Json): boolean {
  if (a === b) return true;
  if (typeof a !== typeof b || a === null || b === null || typeof a !== 'object') return false;
  if (Array.isArray(a) !== Array.isArray(b)) return false;
  if (Array.isArray(a)) return a.length === b.length && a.every((x, i) => deepEqual(x, b[i]));
  const ka = Object.keys(a);
  const kb = Object.keys(b);
  return ka.length === kb.length && ka.every((k) => Object.prototype.hasOwnProperty.call(b, k) && deepEqual(a[k], b[k]));
}

function isObject(value: Json): value is Record<string, Json> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function diffList(oldList: Json[], newList: Json[], mergeKey: string): { items: Json[]; order: Json[] } | null {
  const oldBy = new Map(oldList.map((e) => [e[mergeKey], e]));
  const newKeys = new Set(newList.map((e) => e[mergeKey]));
  const items: Json[] = [];
  for (const element of newList) {
    const before = oldBy.get(element[mergeKey]);
    if (before === undefined) items.push(element);
    else {
      const d = diffObject(before, element);
      if (d !== null) items.push({ ...d, [mergeKey]: element[mergeKey] });
    }
  }
  for (const element of oldList) if (!newKeys.has(element[mergeKey])) items.push({ [mergeKey]: element[mergeKey], $patch: 'delete' });
  const orderChanged = oldList.map((e) => e[mergeKey]).join('\0') !== newList.map((e) => e[mergeKey]).join('\0');
  if (items.length === 0 && !orderChanged) return null;
  return { items, order: newList.map((e) => ({ [mergeKey]: e[mergeKey] })) };
}

/** The patch turning `before` into `after`, or null when they are equal. */
export function diffObject(before: Record<string, Json>, after: Record<string, Json>): Record<string, Json> | null {
  const patch: Record<string, Json> = {};
  for (const [key, value] of Object.entries(after)) {
    const old = before?.[key];
    if (deepEqual(old, value)) continue;
    if (isObject(old) && isObject(value)) {
      const d = diffObject(old, value);
      if (d !== null) patch[key] = d;
    } else if (Array.isArray(old) && Array.isArray(value) && key === 'addresses') {
      patch[key] = [{ $patch: 'replace' }, ...value];
    } else if (Array.isArray(old) && Array.isArray(value) && MERGE_KEYS[key]) {
      const d = diffList(old, value, MERGE_KEYS[key]);
      if (d !== null) {
        patch[`$setElementOrder/${key}`] = d.order;
        if (d.items.length > 0) patch[key] = d.items;
      }
    } else {
      patch[key] = value;
    }
  }
  for (const key of Object.keys(before ?? {})) if (!(key in after)) patch[key] = null;
  return Object.keys(patch).length === 0 ? null : patch;
}
