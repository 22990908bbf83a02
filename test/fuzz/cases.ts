/**
 * The fuzzer's inputs, shared by `npm run fuzz` (bench/fuzz.ts) and its sample in `npm test`
 * (test/app/fuzz.test.ts).
 *
 * A case is generated as a plan — plain data that fast-check can shrink — and only then built
 * into the bytes sent:
 *
 *   - a review plan starts from a real AdmissionReview (node status updates and creates, an
 *     inflated node carrying our annotations, pod creates with and without sidecars, a binding,
 *     a mirror pod, pod-level resources, an update, an unrelated resource) and applies one to
 *     four mutations, each at a field that matters to a strategy or at any field of the review;
 *   - a bytes plan is garbage, broken JSON or JSON that is not an object, under one of several
 *     content types.
 *
 * Case i of seed s is the i-th value fast-check draws for that seed (`caseAt`), so one case
 * replays without the others, and fast-check can shrink a failing plan to a minimal one.
 */
import fc from 'fast-check';
import { kubeadmNode, kwokNode, nodeReview } from '../fixtures/nodes.js';
import { bindingReview, container, deploymentPod, mirrorPod, podReview } from '../fixtures/pods.js';
import { deploymentPod as sidecarPod } from '../fixtures/sidecar-pods.js';

type Json = any;
type Path = (string | number)[];

/**
 * The config the fuzzed server runs with: every strategy on. Outside a cluster every namespace
 * is in scope for pod policies and sidecars, and the cap fails open (no node cache).
 */
export const FUZZ_CONFIG = `
nodes:
  defaultRatios: { cpu: 1.5, memory: 1.25, ephemeral-storage: 1, pods: 2 }
  pools:
    - name: batch
      nodeSelector: { matchLabels: { node-pool: batch } }
      ratios: { cpu: 3, memory: 1.1 }
pods:
  namespaceSelector: {}
  defaultRequests: { cpu: 100m, memory: 128Mi }
  limitToRequest: { memoryRequestPercent: 50, cpuLimitPerGiBPercent: 200, cpuRequestPercent: 25 }
  cap: { mode: deny }
sidecars:
  namespaceSelector: {}
  templates:
    - name: mesh
      initContainers:
        - { name: mesh-proxy, image: "mesh/proxy:1", restartPolicy: Always, resources: { requests: { cpu: 50m }, limits: { memory: 256Mi } } }
      volumes: [{ name: mesh-certs, emptyDir: {} }]
      env: [{ name: HTTP_PROXY, value: "http://127.0.0.1:15001" }]
    - name: logging
      containers: [{ name: log-shipper, image: "obs/fluent-bit:3", volumeMounts: [{ name: app-logs, mountPath: /var/log/app }] }]
      volumes: [{ name: app-logs, emptyDir: {} }]
`;

const UID = 'f0220000-0000-4000-8000-000000000001';
const RAW = 'kube-overcommit.io/allocatable-raw';
const RATIOS = 'kube-overcommit.io/ratios';
const OUR_ANNOTATIONS = [
  RAW,
  RATIOS,
  'kube-overcommit.io/pool',
  'kube-overcommit.io/original-resources',
  'kube-overcommit.io/inject',
  'kube-overcommit.io/injected',
];
const RESOURCES = ['cpu', 'memory', 'ephemeral-storage', 'pods'];

// ---------------------------------------------------------------------------------------------
// The real reviews mutations start from

/** A kwok node as the webhook leaves it under FUZZ_CONFIG: inflated, with our record. */
function inflatedKwokNode(): Json {
  const raw = { cpu: '32', memory: '256Gi', pods: '110' };
  return kwokNode({
    allocatable: { cpu: '48', memory: '320Gi', pods: '220' },
    annotations: { [RAW]: JSON.stringify({ allocatable: raw, capacity: raw }), [RATIOS]: JSON.stringify({ cpu: 1.5, memory: 1.25, pods: 2 }) },
  });
}

function podLevelResourcesPod(): Json {
  const pod = deploymentPod({ containers: [container('app'), container('helper')], initContainers: null });
  pod.spec.resources = { requests: { cpu: '600m', memory: '1Gi' }, limits: { cpu: '2', memory: '2Gi' } };
  return pod;
}

interface Base {
  name: string;
  review: () => Json;
  /** Fields a strategy reads, where mutations land half the time. */
  focus: Path[];
}

const ENVELOPE: Path[] = [
  ['request'],
  ['request', 'uid'],
  ['request', 'kind'],
  ['request', 'kind', 'kind'],
  ['request', 'resource'],
  ['request', 'resource', 'resource'],
  ['request', 'subResource'],
  ['request', 'operation'],
  ['request', 'name'],
  ['request', 'namespace'],
  ['request', 'dryRun'],
  ['request', 'oldObject'],
  ['apiVersion'],
  ['kind'],
];
const NODE_FOCUS: Path[] = [
  ...ENVELOPE,
  ...['object', 'oldObject'].flatMap((side): Path[] => [
    ['request', side, 'metadata'],
    ['request', side, 'metadata', 'name'],
    ['request', side, 'metadata', 'labels'],
    ['request', side, 'metadata', 'annotations'],
    ['request', side, 'status'],
    ['request', side, 'status', 'allocatable'],
    ['request', side, 'status', 'capacity'],
    ...RESOURCES.flatMap((r): Path[] => [
      ['request', side, 'status', 'allocatable', r],
      ['request', side, 'status', 'capacity', r],
    ]),
  ]),
];
const POD_FOCUS: Path[] = [
  ...ENVELOPE,
  ...[
    ['metadata'],
    ['metadata', 'name'],
    ['metadata', 'namespace'],
    ['metadata', 'annotations'],
    ['metadata', 'labels'],
    ['spec'],
    ['spec', 'nodeName'],
    ['spec', 'containers'],
    ['spec', 'initContainers'],
    ['spec', 'volumes'],
    ['spec', 'overhead'],
    ['spec', 'resources'],
    ['spec', 'resources', 'requests', 'cpu'],
    ['spec', 'containers', 0],
    ['spec', 'containers', 0, 'name'],
    ['spec', 'containers', 0, 'env'],
    ['spec', 'containers', 0, 'volumeMounts'],
    ['spec', 'containers', 0, 'resources'],
    ['spec', 'containers', 0, 'resources', 'requests'],
    ['spec', 'containers', 0, 'resources', 'limits'],
    ['spec', 'containers', 0, 'resources', 'requests', 'cpu'],
    ['spec', 'containers', 0, 'resources', 'requests', 'memory'],
    ['spec', 'containers', 0, 'resources', 'limits', 'cpu'],
    ['spec', 'containers', 0, 'resources', 'limits', 'memory'],
    ['spec', 'initContainers', 0, 'resources', 'limits', 'cpu'],
    ['spec', 'initContainers', 1, 'restartPolicy'],
    ['spec', 'initContainers', 1, 'name'],
  ].map((path): Path => ['request', 'object', ...path]),
];
const BINDING_FOCUS: Path[] = [
  ...ENVELOPE,
  ['request', 'object', 'target'],
  ['request', 'object', 'target', 'name'],
  ['request', 'object', 'metadata', 'name'],
];

export const BASES: Base[] = [
  { name: 'kwok-node-status', review: () => nodeReview(kwokNode(), { uid: UID }), focus: NODE_FOCUS },
  { name: 'kubeadm-node-status', review: () => nodeReview(kubeadmNode({ images: 3 }), { uid: UID }), focus: NODE_FOCUS },
  { name: 'batch-node-create', review: () => nodeReview(kwokNode({ labels: { 'node-pool': 'batch' } }), { uid: UID, operation: 'CREATE' }), focus: NODE_FOCUS },
  { name: 'inflated-node-status', review: () => nodeReview(inflatedKwokNode(), { uid: UID }), focus: NODE_FOCUS },
  { name: 'inflated-node-raw-old', review: () => nodeReview(kwokNode(), { uid: UID, oldObject: inflatedKwokNode() }), focus: NODE_FOCUS },
  { name: 'pod-create', review: () => podReview(deploymentPod(), { uid: UID }), focus: POD_FOCUS },
  { name: 'sidecar-pod-create', review: () => podReview(sidecarPod({ inject: 'mesh,logging' }), { uid: UID }), focus: POD_FOCUS },
  { name: 'pod-level-resources', review: () => podReview(podLevelResourcesPod(), { uid: UID }), focus: POD_FOCUS },
  { name: 'pod-on-node', review: () => podReview(deploymentPod({ nodeName: 'worker-1' }), { uid: UID }), focus: POD_FOCUS },
  { name: 'mirror-pod', review: () => podReview(mirrorPod({ namespace: 'shop' }), { uid: UID }), focus: POD_FOCUS },
  { name: 'pod-update', review: () => podReview(deploymentPod(), { uid: UID, operation: 'UPDATE' }), focus: POD_FOCUS },
  { name: 'pod-binding', review: () => bindingReview('shop', 'checkout-6f8b9c7d4-x2x9z', 'worker-1', { uid: UID }), focus: BINDING_FOCUS },
  {
    name: 'configmap-create',
    review: () => {
      const review = podReview(deploymentPod(), { uid: UID });
      review.request.kind = { group: '', version: 'v1', kind: 'ConfigMap' };
      review.request.resource = { group: '', version: 'v1', resource: 'configmaps' };
      review.request.object = { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'x', namespace: 'shop' }, data: { a: 'b' } };
      return review;
    },
    focus: ENVELOPE,
  },
];

// ---------------------------------------------------------------------------------------------
// Values

/** JSON text spliced in as is: numbers JSON.stringify cannot write, deep nesting, wide objects. */
class RawJson {
  constructor(readonly text: string) {}
}

/** Extra members an object is written with, after or before its own: duplicate keys. */
const DUPLICATES = Symbol('duplicates');
interface Duplicate {
  key: string;
  value: Json;
  first: boolean;
}

const scalar = fc.oneof(
  fc.constantFrom<Json>(null, true, false, 0, -1, 1, 1.5, -0.5, 2 ** 53 + 2, 1e308, -1e308, 5e-324, '', '0', 'true', 'null', '[]', '{}'),
  fc.integer(),
  fc.double({ noNaN: true, noDefaultInfinity: true }),
  fc.string({ maxLength: 12 }),
);
const jsonValue: fc.Arbitrary<Json> = fc.oneof(
  { weight: 3, arbitrary: scalar },
  fc.constantFrom<Json>([], {}, [null], [[]], { '': '' }),
  fc.array(scalar, { maxLength: 4 }),
  fc.dictionary(fc.string({ maxLength: 8 }), scalar, { maxKeys: 4 }),
);

const EXOTIC_QUANTITIES = [
  '1e400',
  '-1e400',
  '1e-400',
  '-1',
  '-0',
  '0',
  '0.0000001',
  '9Ei',
  '8Ei',
  '1.5.5',
  '',
  ' ',
  ' 4',
  '4 ',
  '+4',
  '1e3',
  '1E3',
  '1e-3',
  '1e+3',
  '1e',
  'e3',
  '.5',
  '5.',
  '0.5m',
  '1n',
  '1u',
  '1m',
  '4000m',
  '4001m',
  '999999999Ei',
  '0x10',
  'NaN',
  'Infinity',
  '-Infinity',
  '1Ki',
  '1k',
  '1K',
  '1ki',
  '1KiB',
  '3.99999999999999999999',
  '١٢',
  '４',
  '1\u00004',
  '12345678901234567890123456789012345678901234567890',
  '0.000000000000000000001',
  '1Mi ',
  '1.5Gi',
  '-1Gi',
  '2147483648',
  '9223372036854775808',
];
const SUFFIXES = ['', 'm', 'n', 'u', 'k', 'M', 'G', 'T', 'P', 'E', 'Ki', 'Mi', 'Gi', 'Ti', 'Pi', 'Ei', 'e3', 'e-3', 'E18', 'e400'];
const quantity = fc.oneof(
  fc.constantFrom(...EXOTIC_QUANTITIES),
  fc
    .tuple(
      fc.constantFrom('', '-', '+'),
      fc.stringMatching(/^\d{1,25}$/),
      fc.option(fc.stringMatching(/^\d{0,12}$/), { nil: undefined }),
      fc.constantFrom(...SUFFIXES),
    )
    .map(([sign, whole, fraction, suffix]) => `${sign}${whole}${fraction === undefined ? '' : `.${fraction}`}${suffix}`),
);
const RAW_NUMBERS = ['1e400', '-1e400', '1e-400', '-0', '0.0000001', '123456789012345678901234567890', '9007199254740993', '1.5e308', '0e0', '1E+2'];
const HOSTILE_KEYS = ['__proto__', 'constructor', 'prototype', 'toString', 'hasOwnProperty', 'valueOf', '__defineGetter__', 'isPrototypeOf', 'then'];
const hostileText = fc.oneof(
  fc.string({ unit: 'binary', maxLength: 40 }),
  fc.string({ unit: 'grapheme', maxLength: 40 }),
  fc.constantFrom('\u0000', '\ud800', '\udfff', '\u202e', '../../etc', '\\', '"', 'a\nb', '%s%n', '${x}', '\ufeff'),
);
const forgedResources = fc.dictionary(fc.constantFrom(...RESOURCES, 'nvidia.com/gpu', '__proto__', ''), fc.oneof(quantity, scalar), { maxKeys: 5 });
/** Values for our own annotations: what a forger, a buggy writer or garbage could leave there. */
const hostileAnnotation = fc.oneof(
  fc.record({ allocatable: forgedResources, capacity: forgedResources }).map((record) => JSON.stringify(record)),
  fc
    .dictionary(
      fc.constantFrom(...RESOURCES, 'gpu'),
      fc.oneof(fc.double({ noNaN: true, noDefaultInfinity: true }), fc.integer({ min: -5, max: 20 }), fc.constantFrom<Json>('1.5', null, [], {})),
      { maxKeys: 4 },
    )
    .map((ratios) => JSON.stringify(ratios)),
  fc
    .dictionary(
      fc.constantFrom('checkout', 'migrate', 'log-shipper', 'app', '__proto__'),
      fc.record({ requests: forgedResources, limits: forgedResources }, { requiredKeys: [] }),
      { maxKeys: 3 },
    )
    .map((original) => JSON.stringify(original)),
  fc.json({ maxDepth: 3 }),
  fc.constantFrom(
    '',
    'null',
    '[]',
    '{}',
    '"x"',
    '1',
    '{',
    '{"allocatable":null}',
    '{"allocatable":[],"capacity":{}}',
    '{"allocatable":{"cpu":1}}',
    '{"cpu":1e400}',
    '{"cpu":-1}',
    '{"__proto__":{"cpu":3}}',
    '{"constructor":{"prototype":{"cpu":3}}}',
    '{"cpu":1.5,"cpu":3}',
    '[[[[[[[[[[[[[[[[[[[[]]]]]]]]]]]]]]]]]]]]',
    'mesh',
    'mesh,logging,mesh',
    'nope',
    ' , ,',
    'mesh,',
    'MESH',
    'logging, mesh',
  ),
  hostileText,
);

// ---------------------------------------------------------------------------------------------
// Mutations

type Op =
  | { op: 'delete' }
  | { op: 'null' }
  | { op: 'swap'; value: Json }
  | { op: 'quantity'; value: string }
  | { op: 'number'; raw: string }
  | { op: 'text'; value: string }
  | { op: 'long'; char: string; length: number }
  | { op: 'deep'; depth: number; open: string }
  | { op: 'wide'; keys: number; array: boolean }
  | { op: 'hostileKey'; key: string; value: Json; wrap: boolean }
  | { op: 'duplicate'; value: Json; first: boolean }
  | { op: 'annotation'; side: 'object' | 'oldObject'; name: string; value: string }
  | { op: 'oldObject'; base: number; drop: boolean };

interface Mutation {
  /** An index into the base's focus paths, or null: any field of the review (`pick`). */
  focus: number | null;
  pick: number;
  change: Op;
}

const op: fc.Arbitrary<Op> = fc.oneof(
  { weight: 3, arbitrary: fc.constant<Op>({ op: 'delete' }) },
  { weight: 2, arbitrary: fc.constant<Op>({ op: 'null' }) },
  { weight: 4, arbitrary: jsonValue.map((value): Op => ({ op: 'swap', value })) },
  { weight: 6, arbitrary: quantity.map((value): Op => ({ op: 'quantity', value })) },
  { weight: 2, arbitrary: fc.constantFrom(...RAW_NUMBERS).map((raw): Op => ({ op: 'number', raw })) },
  { weight: 2, arbitrary: hostileText.map((value): Op => ({ op: 'text', value })) },
  {
    weight: 1,
    arbitrary: fc
      .tuple(
        fc.constantFrom('x', 'é', '😀', '\u0000', '"'),
        fc.oneof({ weight: 20, arbitrary: fc.integer({ min: 64, max: 70_000 }) }, fc.integer({ min: 1_000_000, max: 3_300_000 })),
      )
      .map(([char, length]): Op => ({ op: 'long', char, length })),
  },
  {
    weight: 1,
    arbitrary: fc
      .tuple(fc.oneof({ weight: 10, arbitrary: fc.integer({ min: 2, max: 200 }) }, fc.integer({ min: 200, max: 6_000 })), fc.constantFrom('[', '{"a":'))
      .map(([depth, open]): Op => ({ op: 'deep', depth, open })),
  },
  {
    weight: 1,
    arbitrary: fc
      .tuple(fc.oneof({ weight: 20, arbitrary: fc.integer({ min: 2, max: 300 }) }, fc.integer({ min: 300, max: 20_000 })), fc.boolean())
      .map(([keys, array]): Op => ({ op: 'wide', keys, array })),
  },
  {
    weight: 3,
    arbitrary: fc.tuple(fc.constantFrom(...HOSTILE_KEYS), jsonValue, fc.boolean()).map(([key, value, wrap]): Op => ({ op: 'hostileKey', key, value, wrap })),
  },
  { weight: 2, arbitrary: fc.tuple(jsonValue, fc.boolean()).map(([value, first]): Op => ({ op: 'duplicate', value, first })) },
  {
    weight: 5,
    arbitrary: fc
      .tuple(fc.constantFrom<'object' | 'oldObject'>('object', 'object', 'oldObject'), fc.constantFrom(...OUR_ANNOTATIONS), hostileAnnotation)
      .map(([side, name, value]): Op => ({ op: 'annotation', side, name, value })),
  },
  { weight: 2, arbitrary: fc.tuple(fc.nat({ max: BASES.length - 1 }), fc.boolean()).map(([base, drop]): Op => ({ op: 'oldObject', base, drop })) },
);

const mutation: fc.Arbitrary<Mutation> = fc.record({ focus: fc.option(fc.nat(), { nil: null }), pick: fc.nat(), change: op });

const CONTENT_TYPES = [
  'application/json',
  'application/json; charset=utf-8',
  'application/JSON',
  'application/json;charset=UTF-8',
  'text/plain',
  'application/x-www-form-urlencoded',
  'application/yaml',
  'application/vnd.kubernetes.protobuf',
  'multipart/form-data; boundary=x',
  'application/json; charset=utf-16',
  'application/json; charset=latin1',
  'application/merge-patch+json',
  'application/octet-stream',
  '*/*',
  'json',
  '',
];

export type Plan =
  | { kind: 'review'; base: number; mutations: Mutation[]; contentType: string | null }
  | { kind: 'bytes'; bytes: number[]; contentType: string | null }
  | { kind: 'truncated'; base: number; keep: number; contentType: string | null }
  | { kind: 'notObject'; value: Json; contentType: string | null };

const contentType = fc.oneof({ weight: 12, arbitrary: fc.constant('application/json') }, fc.constantFrom(...CONTENT_TYPES), fc.constant(null));

export const planArbitrary: fc.Arbitrary<Plan> = fc.oneof(
  {
    weight: 18,
    arbitrary: fc.record({
      kind: fc.constant('review' as const),
      base: fc.nat({ max: BASES.length - 1 }),
      mutations: fc.array(mutation, { minLength: 1, maxLength: 4 }),
      contentType: fc.oneof({ weight: 20, arbitrary: fc.constant('application/json') }, contentType),
    }),
  },
  {
    weight: 1,
    arbitrary: fc.record({
      kind: fc.constant('bytes' as const),
      bytes: fc.oneof(
        fc.array(fc.nat({ max: 255 }), { maxLength: 512 }),
        fc.array(fc.constantFrom(0x7b, 0x7d, 0x5b, 0x5d, 0x22, 0x3a, 0x2c, 0x5c, 0x61, 0x31, 0xef, 0xbb, 0xbf, 0x00), { maxLength: 512 }),
      ),
      contentType,
    }),
  },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('truncated' as const), base: fc.nat({ max: BASES.length - 1 }), keep: fc.nat(), contentType }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('notObject' as const), value: fc.oneof(scalar, fc.array(jsonValue, { maxLength: 3 })), contentType }) },
);

// ---------------------------------------------------------------------------------------------
// Building a case

export interface FuzzCase {
  /** What was done, for reports: `kwok-node-status: quantity request.object.status.capacity.memory = "-1"`. */
  description: string;
  contentType: string | null;
  body: Buffer;
  /**
   * Whether the body survives JSON.parse and JSON.stringify unchanged in meaning: not when it
   * holds a number beyond a double (`1e400` parses to Infinity, written back as null).
   */
  reserialises: boolean;
}

const isContainer = (value: unknown): value is Record<string, Json> => typeof value === 'object' && value !== null && !(value instanceof RawJson);

function setMember(parent: Record<string, Json>, key: string | number, value: Json): void {
  // defineProperty: a key named __proto__ must become data, not the object's prototype.
  Object.defineProperty(parent, key, { value, enumerable: true, writable: true, configurable: true });
}

/** Every path to a member of the review, in document order (the root excluded). */
function allPaths(value: Json, prefix: Path = [], out: Path[] = []): Path[] {
  if (!isContainer(value)) return out;
  for (const key of Array.isArray(value) ? value.keys() : Object.keys(value)) {
    const path = [...prefix, key];
    out.push(path);
    allPaths((value as Json)[key], path, out);
  }
  return out;
}

/** The parent and key a path names, stopping at the first missing member (which is then created). */
function locate(root: Json, path: Path): { parent: Record<string, Json>; key: string | number } | undefined {
  let parent = root;
  for (let i = 0; i < path.length - 1; i++) {
    const next = parent[path[i]];
    if (!isContainer(next)) return isContainer(parent) ? { parent, key: path[i] } : undefined;
    parent = next;
  }
  return isContainer(parent) ? { parent, key: path[path.length - 1] } : undefined;
}

const pathText = (path: Path) => path.join('.');
const excerpt = (value: unknown) => {
  const text = value instanceof RawJson ? value.text : (JSON.stringify(value) ?? 'undefined');
  return text.length > 60 ? `${text.slice(0, 60)}… (${text.length} chars)` : text;
};

/** The value an op writes. Plan values are fast-check's, shared between cases: the review gets copies. */
function replacement(change: Op): Json {
  switch (change.op) {
    case 'null':
      return null;
    case 'swap':
      return structuredClone(change.value);
    case 'quantity':
    case 'text':
      return change.value;
    case 'number':
      return new RawJson(change.raw);
    case 'long':
      // length is in bytes of JSON text, so that the largest stay near the body limit.
      return change.char.repeat(Math.ceil(change.length / (Buffer.byteLength(JSON.stringify(change.char)) - 2)));
    case 'deep':
      return new RawJson(
        change.open === '[' ? '['.repeat(change.depth) + ']'.repeat(change.depth) : `${change.open.repeat(change.depth)}1${'}'.repeat(change.depth)}`,
      );
    case 'wide':
      return new RawJson(
        change.array
          ? `[${Array.from({ length: change.keys }, (_, i) => i).join(',')}]`
          : `{${Array.from({ length: change.keys }, (_, i) => `"k${i}":${i}`).join(',')}}`,
      );
    default:
      throw new Error(`no replacement value for ${change.op}`);
  }
}

function applyMutation(review: Json, base: Base, mutation: Mutation): string {
  const { change } = mutation;
  if (change.op === 'annotation') {
    const object = review.request?.[change.side];
    if (!isContainer(object)) return `annotation ${change.name} on ${change.side}: no ${change.side}`;
    if (!isContainer(object.metadata)) setMember(object, 'metadata', {});
    if (!isContainer(object.metadata.annotations) || Array.isArray(object.metadata.annotations)) setMember(object.metadata, 'annotations', {});
    setMember(object.metadata.annotations, change.name, change.value);
    return `annotation ${change.side}.metadata.annotations[${change.name}] = ${excerpt(change.value)}`;
  }
  if (change.op === 'oldObject') {
    if (!isContainer(review.request)) return 'oldObject: no request';
    const other = BASES[change.base].review().request.object;
    if (change.drop) delete review.request.oldObject;
    else setMember(review.request, 'oldObject', other);
    return change.drop ? 'oldObject removed' : `oldObject = ${BASES[change.base].name}'s object`;
  }
  const paths = mutation.focus === null ? allPaths(review) : base.focus;
  if (paths.length === 0) return `${change.op}: nothing to mutate`;
  const path = mutation.focus === null ? paths[mutation.pick % paths.length] : base.focus[mutation.focus % base.focus.length];
  const at = locate(review, path);
  if (!at) return `${change.op} at ${pathText(path)}: unreachable`;
  const { parent, key } = at;
  const where = pathText(path);
  switch (change.op) {
    case 'delete':
      if (Array.isArray(parent) && typeof key === 'number') parent.splice(key, 1);
      else delete (parent as Json)[key];
      return `delete ${where}`;
    case 'hostileKey': {
      // wrap: the field becomes an object holding the key (`"uid": {"constructor": 1}`).
      if (change.wrap) parent[key] = {};
      const target = isContainer(parent[key]) && !Array.isArray(parent[key]) ? parent[key] : parent;
      if (Array.isArray(target)) return `hostileKey at ${where}: an array`;
      setMember(target, change.key, structuredClone(change.value));
      return `key ${JSON.stringify(change.key)} = ${excerpt(change.value)} in ${target === parent ? pathText(path.slice(0, -1)) || '(root)' : where}`;
    }
    case 'duplicate': {
      if (Array.isArray(parent)) return `duplicate at ${where}: in an array`;
      const duplicates: Duplicate[] = ((parent as Json)[DUPLICATES] ??= []);
      duplicates.push({ key: String(key), value: structuredClone(change.value), first: change.first });
      return `duplicate key ${where} = ${excerpt(change.value)} ${change.first ? 'before' : 'after'} the original`;
    }
    default: {
      const value = replacement(change);
      if (Array.isArray(parent) && typeof key === 'string') return `${change.op} at ${where}: not an index`;
      setMember(parent, key, value);
      return `${change.op} ${where} = ${excerpt(value)}`;
    }
  }
}

/** JSON text of a value with RawJson spliced in and duplicate members written (JSON.stringify can do neither). */
export function toJsonText(value: Json): string {
  if (value instanceof RawJson) return value.text;
  if (!isContainer(value)) return JSON.stringify(value) ?? 'null';
  if (Array.isArray(value)) return `[${value.map(toJsonText).join(',')}]`;
  const duplicates: Duplicate[] = (value as Json)[DUPLICATES] ?? [];
  const member = (key: string, member: Json) => `${JSON.stringify(key)}:${toJsonText(member)}`;
  return `{${[
    ...duplicates.filter((d) => d.first).map((d) => member(d.key, d.value)),
    ...Object.keys(value).map((key) => member(key, value[key])),
    ...duplicates.filter((d) => !d.first).map((d) => member(d.key, d.value)),
  ].join(',')}}`;
}

export function buildCase(plan: Plan): FuzzCase {
  switch (plan.kind) {
    case 'review': {
      const base = BASES[plan.base];
      // Through JSON: the fixtures give an UPDATE's object and oldObject as one shared object,
      // which structuredClone would keep shared.
      const review = JSON.parse(JSON.stringify(base.review()));
      const steps = plan.mutations.map((m) => applyMutation(review, base, m));
      const reserialises = plan.mutations.every(({ change }) => change.op !== 'number' || Number.isFinite(Number(change.raw)));
      return { description: `${base.name}: ${steps.join('; ')}`, contentType: plan.contentType, body: Buffer.from(toJsonText(review)), reserialises };
    }
    case 'bytes':
      return { description: `${plan.bytes.length} bytes of garbage`, contentType: plan.contentType, body: Buffer.from(plan.bytes), reserialises: true };
    case 'truncated': {
      const text = JSON.stringify(BASES[plan.base].review());
      const keep = plan.keep % text.length;
      return {
        description: `${BASES[plan.base].name} cut after ${keep} of ${text.length} bytes`,
        contentType: plan.contentType,
        body: Buffer.from(text.slice(0, keep)),
        reserialises: true,
      };
    }
    case 'notObject':
      return {
        description: `a body that is not an object: ${excerpt(plan.value)}`,
        contentType: plan.contentType,
        body: Buffer.from(toJsonText(plan.value)),
        reserialises: true,
      };
  }
}

/** The plans of cases `from` … `from + count - 1` of a seed, as fc.assert would draw them. */
export function plansAt(seed: number, from: number, count: number): Plan[] {
  return fc.sample(planArbitrary, { seed, path: String(from), numRuns: count });
}

/** Case `index` of a seed. */
export function caseAt(seed: number, index: number): FuzzCase {
  return buildCase(plansAt(seed, index, 1)[0]);
}
