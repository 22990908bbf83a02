/**
 * Heap per object held by the pod-policy caches, as received and as the caches keep them
 * (`npm run bench:cache-memory`): each object is JSON-parsed the way a watch event arrives,
 * `--count` copies are held, and the V8 heap is measured after a full GC (node --expose-gc),
 * the median of `--runs` runs. Prints a table; nothing is written.
 *
 * Objects: the fixture Nodes of bench:admission (kwok, kubeadm with 50 images, 100 long
 * images) through trimCachedNode, and a running Deployment pod through stripManagedFields.
 * The fixtures carry one managedFields entry each; real objects usually carry several, so the
 * figures understate what stripping managedFields saves.
 *
 * Flags: --count n (2000) --runs n (5)
 */
import { parseArgs } from 'node:util';
import type { KubernetesObject } from '@kubernetes/client-node';
import { stripManagedFields } from '../src/kube/resilient-informer.js';
import { trimCachedNode } from '../src/pod-policy/pod-facts.service.js';
import { kubeadmNode, kwokNode } from '../test/fixtures/nodes.js';
import { runningPod } from '../test/fixtures/pods.js';
import { median, round, table } from './lib.js';

const { values: flags } = parseArgs({ options: { count: { type: 'string' }, runs: { type: 'string' } } });
const count = Number(flags.count ?? 2000);
const runs = Number(flags.runs ?? 5);
const gc = (globalThis as { gc?: () => void }).gc;
if (!gc) throw new Error('run with node --expose-gc (npm run bench:cache-memory does)');

/** Heap bytes per object for `count` objects parsed from `json` and passed through `keep`. */
function heapPerObject(json: string, keep: (object: KubernetesObject) => KubernetesObject): number {
  const samples: number[] = [];
  for (let run = 0; run < runs; run++) {
    gc!();
    const before = process.memoryUsage().heapUsed;
    const held = new Array<KubernetesObject>(count);
    for (let i = 0; i < count; i++) held[i] = keep(JSON.parse(json) as KubernetesObject);
    gc!();
    samples.push((process.memoryUsage().heapUsed - before) / count);
    held.length = 0;
  }
  return median(samples);
}

const asIs = (object: KubernetesObject) => object;
type Transform = (object: KubernetesObject) => KubernetesObject;
const trimNode = trimCachedNode as Transform;
const objects: { name: string; object: unknown; trim: Transform }[] = [
  { name: 'kwok node', object: kwokNode(), trim: trimNode },
  { name: 'kubeadm node, 50 images', object: kubeadmNode(), trim: trimNode },
  { name: 'node, 100 images of 180 chars', object: kubeadmNode({ images: 100, imageNameLength: 180 }), trim: trimNode },
  { name: 'running Deployment pod', object: runningPod('checkout-1', 'node-1'), trim: stripManagedFields },
];

console.log(`heap per cached object (node ${process.version}; ${count} objects, median of ${runs} runs)\n`);
const rows = objects.map(({ name, object, trim }) => {
  const json = JSON.stringify(object);
  const whole = heapPerObject(json, asIs);
  const trimmed = heapPerObject(json, trim);
  return [name, json.length, trim.name, round(whole, 0), round(trimmed, 0), `${round((100 * (whole - trimmed)) / whole, 0)} %`];
});
console.log(table(['object', 'JSON bytes', 'transform', 'heap B as received', 'heap B cached', 'saved'], rows));
