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
 * Then the pod cache as a whole, per pod: `--count` distinct pods (names and uids differ) held
 * the way client-node's ListWatch holds them (a Map per namespace) and indexed by node
 * (PodsByNode), as received (managedFields stripped: the cache before it kept CachedPods) and
 * as CachedPods. `--json FILE` writes that figure ({ bytesPerPod, bytesPerPodAsReceived }).
 *
 * Flags: --count n (2000) --runs n (5) --json FILE
 */
import { writeFileSync } from 'node:fs';
import type { KubernetesObject } from '@kubernetes/client-node';
import { cachedPod, PodsByNode } from '../src/kube/pods-by-node.js';
import { stripManagedFields } from '../src/kube/resilient-informer.js';
import type { PodLike } from '../src/domain/pod-resources.js';
import { trimCachedNode } from '../src/kube/node-cache.service.js';
import { kubeadmNode, kwokNode } from '../test/fixtures/nodes.js';
import { runningPod } from '../test/fixtures/pods.js';
import { benchMain, median, round, table } from './lib.js';

const { flags, log } = benchMain(
  {
    script: 'bench:cache-memory',
    flags: {
      count: { type: 'number', default: 2000, min: 1, integer: true },
      runs: { type: 'number', default: 5, min: 1, integer: true },
      /** Writes { count, runs, bytesPerPod, bytesPerPodAsReceived } there. */
      json: { type: 'string' },
    },
  },
  main,
);
const { count, runs } = flags;
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

/**
 * Heap bytes per pod of a pod cache holding `count` distinct pods parsed from `json` through
 * `keep`: ListWatch's Map<namespace, Map<name, object>> and the node index.
 */
function heapPerCachedPod(json: string, keep: (pod: PodLike) => PodLike): number {
  const samples: number[] = [];
  for (let run = 0; run < runs; run++) {
    gc!();
    const before = process.memoryUsage().heapUsed;
    const byNamespace = new Map<string, Map<string, PodLike>>();
    const index = new PodsByNode();
    for (let i = 0; i < count; i++) {
      const unique = json
        .replace('"POD_NAME"', `"checkout-6f8b9c7d4-${i}"`)
        .replace('"POD_UID"', `"${String(i).padStart(8, '0')}-2f6b-4c1e-9a57-0c1d2e3f4a5b"`);
      const pod = keep(JSON.parse(unique) as PodLike);
      const namespace = pod.metadata!.namespace!;
      let pods = byNamespace.get(namespace);
      if (!pods) byNamespace.set(namespace, (pods = new Map()));
      pods.set(pod.metadata!.name!, pod);
      index.upsert(pod);
    }
    gc!();
    samples.push((process.memoryUsage().heapUsed - before) / count);
    // Both read after the measurement, so neither is collected before it.
    const held = [...byNamespace.values()].reduce((sum, pods) => sum + pods.size, 0);
    if (index.size !== count || held !== count) throw new Error(`held ${held}, indexed ${index.size} pods of ${count}`);
  }
  return median(samples);
}

async function main(): Promise<void> {
  log(`heap per cached object (node ${process.version}; ${count} objects, median of ${runs} runs)\n`);
  const rows = objects.map(({ name, object, trim }) => {
    const json = JSON.stringify(object);
    const whole = heapPerObject(json, asIs);
    const trimmed = heapPerObject(json, trim);
    return [name, json.length, trim.name, round(whole, 0), round(trimmed, 0), `${round((100 * (whole - trimmed)) / whole, 0)} %`];
  });
  log(table(['object', 'JSON bytes', 'transform', 'heap B as received', 'heap B cached', 'saved'], rows));

  const podJson = JSON.stringify({ ...runningPod('checkout-1', 'node-1'), metadata: { ...runningPod('POD_NAME', 'node-1').metadata, uid: 'POD_UID' } });
  const asReceived = heapPerCachedPod(podJson, stripManagedFields as (pod: PodLike) => PodLike);
  const cached = heapPerCachedPod(podJson, cachedPod);
  log(`\nthe pod cache per pod (informer map + node index; ${count} distinct pods of the running Deployment pod, median of ${runs} runs)\n`);
  log(
    table(
      ['kept', 'heap B per pod'],
      [
        ['as received (managedFields stripped)', round(asReceived, 0)],
        ['CachedPod (identity, node, phase, requests)', round(cached, 0)],
      ],
    ),
  );
  if (flags.json)
    writeFileSync(flags.json, `${JSON.stringify({ count, runs, bytesPerPod: round(cached, 0), bytesPerPodAsReceived: round(asReceived, 0) }, null, 2)}\n`);
}
