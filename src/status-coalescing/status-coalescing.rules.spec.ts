import fc from 'fast-check';
import fastJsonPatch from 'fast-json-patch';
import { isDeepStrictEqual } from 'node:util';
import { describe, expect, it } from 'vitest';
import { parseDuration } from '../common/duration.js';
import { formatResourceQuantity, parseResourceQuantity } from '../domain/quantity.js';
import { planNodeStatus, RATIOS_ANNOTATION, resolveNodePolicy } from '../domain/node-rules/node-oversell.rules.js';
import { nodeStatusPatch } from '../node-oversell/node-oversell.strategy.js';
import { heartbeatsFresh, planStatusCoalescing, type StatusUpdateRequest } from './status-coalescing.rules.js';
import { Outcomes, runs } from '../../test/support/property.js';

const { applyPatch } = fastJsonPatch;
type Json = Record<string, any>;

const REPORT_PERIOD_MS = 5 * 60_000;
const NAME = 'worker-1';
/** worker-1's window: the report period less its fixed share of up to 10 % (pinned by domain/node-rules/coalescing-window.spec.ts). */
const WINDOW_MS = 298_000;
const KUBELET = { username: `system:node:${NAME}`, groups: ['system:nodes', 'system:authenticated'] };
const NODES = {
  defaultRatios: { cpu: 1.5, memory: 1.2 },
  pools: [],
  defaultMode: 'enforce' as const,
  commitmentFloor: false,
  coalesceStatusWrites: true,
  statusReportPeriod: '5m',
  reconcile: { enabled: true, maxNodesPerSecond: 100 },
};
const T0 = Date.parse('2026-11-23T18:00:00Z');

function time(ms: number): string {
  return new Date(ms).toISOString().replace(/\.\d{3}Z$/, 'Z');
}

const CONDITIONS = ['MemoryPressure', 'DiskPressure', 'PIDPressure', 'Ready'];

/** What a kubelet reports, raw: its machine and its conditions with heartbeats at `at`. */
interface KubeletView {
  at: number;
  cpu: string;
  address: string;
  ready: boolean;
}

function kubeletNode(view: KubeletView, transitions: Record<string, number>): Json {
  return {
    apiVersion: 'v1',
    kind: 'Node',
    metadata: {
      name: NAME,
      uid: '6a1f7d52-1f6e-4b55-9a3c-0d7f8c1e2b3a',
      resourceVersion: '1000',
      labels: { 'kubernetes.io/hostname': NAME },
      annotations: { 'node.alpha.kubernetes.io/ttl': '0' },
      managedFields: [
        { manager: 'kubelet', operation: 'Update', subresource: 'status', time: time(view.at), fieldsType: 'FieldsV1', fieldsV1: { 'f:status': {} } },
      ],
    },
    spec: {},
    status: {
      addresses: [
        { type: 'InternalIP', address: view.address },
        { type: 'Hostname', address: NAME },
      ],
      capacity: { cpu: view.cpu, memory: '16420464Ki', pods: '110' },
      allocatable: { cpu: view.cpu, memory: '16318064Ki', pods: '110' },
      conditions: CONDITIONS.map((type) => ({
        type,
        status: type === 'Ready' ? (view.ready ? 'True' : 'False') : 'False',
        lastHeartbeatTime: time(view.at),
        lastTransitionTime: time(transitions[type] ?? T0),
        reason: type === 'Ready' && !view.ready ? 'KubeletNotReady' : `Kubelet${type}`,
        message: 'as the kubelet says',
      })),
      nodeInfo: { kubeletVersion: 'v1.34.10' },
    },
  };
}

/** The Node as NodeOversellStrategy leaves it (inflated, our annotations). */
function inflated(node: Json): Json {
  const plan = planNodeStatus(node, resolveNodePolicy(node.metadata.labels, NODES))!;
  return applyPatch(structuredClone(node), nodeStatusPatch(node, plan), true, false).newDocument;
}

/** One update through both strategies' rules; returns the object the API server would store. */
function admit(object: Json, stored: Json, userInfo = KUBELET): { plan: ReturnType<typeof planStatusCoalescing>; toStore: Json } {
  const request: StatusUpdateRequest = { name: NAME, userInfo, object, oldObject: stored };
  const plan = planStatusCoalescing(request, REPORT_PERIOD_MS);
  const toStore = plan.decision === 'coalesced' ? applyPatch(structuredClone(object), plan.patch, true, false).newDocument : object;
  return { plan, toStore };
}

/** What kube-apiserver compares before writing: managedFields times are reverted to the stored ones. */
function withoutFieldTimes(node: Json): Json {
  const copy = structuredClone(node);
  for (const entry of copy.metadata.managedFields ?? []) delete entry.time;
  return copy;
}

/** A stored inflated node whose heartbeats are at T0. */
function storedAt(view: Partial<KubeletView> = {}): Json {
  return inflated(kubeletNode({ at: T0, cpu: '4', address: '172.18.0.3', ready: true, ...view }, {}));
}

/**
 * Rule 3 as first written, the model the rules' in-place comparison must agree with: copies of
 * both nodes without what the rule sets aside, quantities respelled canonically, compared by
 * isDeepStrictEqual. Returns the reason rule 3 gives, or undefined when it lets the update on.
 */
function modelRule3(node: Json, stored: Json): 'condition-changed' | 'status-changed' | undefined {
  const isObject = (v: unknown): v is Json => typeof v === 'object' && v !== null && !Array.isArray(v);
  // The conditions as the node holds them, each object one without its heartbeat.
  const conditionsOf = (n: Json): unknown =>
    Array.isArray(n.status?.conditions)
      ? n.status.conditions.map((c: unknown) => (isObject(c) ? { ...c, lastHeartbeatTime: undefined } : c))
      : n.status?.conditions;
  const canonicalList = (list: unknown): unknown => {
    if (!isObject(list)) return list;
    const out: Json = { ...list };
    for (const resource of ['cpu', 'memory', 'ephemeral-storage', 'pods'])
      if (typeof out[resource] === 'string' || typeof out[resource] === 'number')
        out[resource] = formatResourceQuantity(resource, parseResourceQuantity(resource, out[resource]));
    return out;
  };
  const comparable = (n: Json, withConditions: boolean): Json => {
    const metadata = { ...n.metadata };
    if (Array.isArray(metadata.managedFields))
      metadata.managedFields = metadata.managedFields.map((entry: unknown) => (isObject(entry) ? { ...entry, time: undefined } : entry));
    const status: Json = { ...n.status };
    for (const list of ['allocatable', 'capacity']) if (list in status) status[list] = canonicalList(status[list]);
    if (withConditions) status.conditions = conditionsOf(n);
    else delete status.conditions;
    return { ...n, metadata, status };
  };
  if (!isDeepStrictEqual(comparable(node, true).status.conditions, comparable(stored, true).status.conditions)) return 'condition-changed';
  if (!isDeepStrictEqual(comparable(node, false), comparable(stored, false))) return 'status-changed';
  return undefined;
}

/**
 * What a 1.37 kubelet reports beyond what kubeletNode() has, and what an administrator may add:
 * the fields the rules do not model (docs/status-coalescing.md, "What is compared").
 */
function kubelet137Node(view: KubeletView, maintenance: boolean): Json {
  const node = kubeletNode(view, {});
  node.status.declaredFeatures = [
    'RestartAllContainersOnContainerExits',
    'InPlacePodLevelResourcesVerticalScaling',
    'ExtendWebSocketsToKubelet',
    'InPlacePodVerticalScalingInitContainers',
  ];
  node.status.features = { supplementalGroupsPolicy: true };
  node.status.runtimeHandlers = [{ name: 'runc', features: { recursiveReadOnlyMounts: true, userNamespaces: true } }];
  node.status.daemonEndpoints = { kubeletEndpoint: { Port: 10250 } };
  node.status.images = [{ names: ['registry.k8s.io/pause:3.10'], sizeBytes: 320368 }];
  node.status.nodeInfo = { kubeletVersion: 'v1.37.2', kernelVersion: '6.8.0-45-generic', swap: { capacity: 0 } };
  // A node lifecycle condition (1.37) that an administrator set without a heartbeat: the API server sends it as null.
  if (maintenance)
    node.status.conditions.push({
      type: 'MaintenancePlanned',
      status: 'True',
      lastHeartbeatTime: null,
      lastTransitionTime: time(T0 - 3_600_000),
      reason: 'KernelUpgrade',
      message: 'planned by the platform team',
    });
  return node;
}

/** Every part of the node but the managed allocatable and our annotations: what node oversell must leave as it is. */
function outsideOurs(node: Json): Json {
  const copy = structuredClone(node);
  for (const resource of ['cpu', 'memory', 'ephemeral-storage', 'pods']) delete copy.status?.allocatable?.[resource];
  for (const key of Object.keys(copy.metadata?.annotations ?? {})) if (key.startsWith('kube-overcommit.io/')) delete copy.metadata.annotations[key];
  return copy;
}

const futureName = fc.stringMatching(/^[A-Z][A-Za-z0-9]{0,8}$/);
const futureKey = futureName.map((name) => `future${name}`);
const anyIndex = fc.nat({ max: 1_000 });
/** Any JSON value as a JSON document carries it (fc.jsonValue() makes -0, which JSON writes as 0). */
const jsonValue = fc.jsonValue().map((value) => JSON.parse(JSON.stringify(value)));

/** A change of one part of a node that the rules do not model; each always changes the node it is applied to. */
const UNMODELLED_CHANGES = {
  'status key added': fc.tuple(futureKey, jsonValue).map(
    ([key, value]) =>
      (n: Json) =>
        (n.status[key] = value),
  ),
  'top-level key added': fc.tuple(futureKey, jsonValue).map(
    ([key, value]) =>
      (n: Json) =>
        (n[key] = value),
  ),
  'metadata or spec key added': fc.tuple(fc.constantFrom('metadata', 'spec'), futureKey, jsonValue).map(
    ([part, key, value]) =>
      (n: Json) =>
        (n[part][key] = value),
  ),
  'nested key added': fc
    .tuple(fc.constantFrom('nodeInfo', 'features', 'daemonEndpoints', 'runtimeHandlers', 'images', 'addresses', 'conditions'), anyIndex, futureKey, jsonValue)
    .map(([field, index, key, value]) => (n: Json) => {
      const part = n.status[field];
      const target = Array.isArray(part) ? part[index % part.length] : part;
      // JSON has keys on objects only: an item another change made an array (or null, a string) takes none.
      if (typeof target !== 'object' || target === null || Array.isArray(target)) throw new Error(`${field} item is not an object`);
      target[key] = value;
    }),
  'condition type added': fc
    .tuple(futureName, fc.constantFrom('True', 'False', 'Unknown'), anyIndex, fc.boolean())
    .map(([name, status, index, withHeartbeat]) => (n: Json) => {
      const conditions: Json[] = n.status.conditions;
      const heartbeat = withHeartbeat ? conditions[0]!.lastHeartbeatTime : null;
      const condition = { type: `Future${name}`, status, lastHeartbeatTime: heartbeat, lastTransitionTime: time(T0), reason: 'Future', message: '' };
      conditions.splice(index % (conditions.length + 1), 0, condition);
    }),
  'condition item not an object': fc.tuple(fc.oneof(fc.constant(null), fc.string(), fc.integer(), fc.array(jsonValue, { maxLength: 2 })), anyIndex).map(
    ([item, index]) =>
      (n: Json) =>
        n.status.conditions.splice(index % (n.status.conditions.length + 1), 0, item),
  ),
  'declaredFeatures changed': fc
    .constantFrom<Array<(features: string[]) => string[] | undefined>>(
      (f) => [...f, 'UserNamespacesHostNetworkSupport'],
      (f) => f.slice(1),
      (f) => [...f].reverse(),
      () => [],
      () => undefined,
    )
    .map((change) => (n: Json) => {
      const features = change(n.status.declaredFeatures);
      if (features === undefined) delete n.status.declaredFeatures;
      else n.status.declaredFeatures = features;
    }),
  'nodeInfo changed': fc.tuple(fc.constantFrom('kubeletVersion', 'kernelVersion', 'containerRuntimeVersion'), fc.string({ minLength: 1 })).map(
    ([key, value]) =>
      (n: Json) =>
        (n.status.nodeInfo[key] = `${n.status.nodeInfo[key] ?? ''}${value}`),
  ),
  'images changed': fc.tuple(fc.constantFrom('added', 'size', 'removed'), fc.nat()).map(([how, size]) => (n: Json) => {
    if (how === 'added') n.status.images.push({ names: [`registry.example/app:${size}`], sizeBytes: size });
    else if (how === 'size') n.status.images[0].sizeBytes += size + 1;
    else n.status.images.pop();
  }),
  'addresses changed': fc.tuple(fc.boolean(), fc.ipV4()).map(([added, ip]) => (n: Json) => {
    if (added) n.status.addresses.push({ type: 'ExternalIP', address: ip });
    else n.status.addresses.reverse();
  }),
  'status field removed': fc
    .constantFrom('declaredFeatures', 'features', 'runtimeHandlers', 'daemonEndpoints', 'images', 'nodeInfo', 'addresses')
    .map((field) => (n: Json) => delete n.status[field]),
} satisfies Record<string, fc.Arbitrary<(node: Json) => void>>;
type UnmodelledChange = keyof typeof UNMODELLED_CHANGES;

/** A node's resource list, when it is still an object (JSON has no keys on arrays). */
function list(node: Json, name: 'allocatable' | 'capacity'): Json {
  const value = node.status[name];
  if (typeof value !== 'object' || value === null || Array.isArray(value)) throw new Error(`${name} is not an object`);
  return value;
}

/** Applies the edits in turn; an edit whose part an earlier one removed is left out. */
function applyEdits(node: Json, edits: readonly string[]): void {
  for (const edit of edits) {
    try {
      EDITS[edit](node);
    } catch {
      // The part it edits is gone.
    }
  }
}

/** Edits of one side of an update, each a way two nodes can differ or look alike (rule 3). */
const EDITS: Record<string, (node: Json) => void> = {
  cpuInMillis: (n) => (list(n, 'allocatable').cpu = `${Number.parseFloat(list(n, 'allocatable').cpu) * 1000}m`),
  cpuAsNumber: (n) => (list(n, 'capacity').cpu = Number.parseFloat(list(n, 'capacity').cpu)),
  memoryInBytes: (n) => (list(n, 'capacity').memory = `${parseResourceQuantity('memory', list(n, 'capacity').memory)}`),
  cpuChanged: (n) => (list(n, 'allocatable').cpu = '7'),
  cpuUnreadable: (n) => (list(n, 'capacity').cpu = 'four'),
  extendedResource: (n) => (list(n, 'allocatable')['example.com/gpu'] = '1'),
  capacityArray: (n) => (n.status.capacity = ['4']),
  capacityGone: (n) => delete n.status.capacity,
  fieldTime: (n) => (n.metadata.managedFields[0].time = '2026-11-23T19:00:00Z'),
  fieldTimeGone: (n) => delete n.metadata.managedFields[0].time,
  fieldOwned: (n) => (n.metadata.managedFields[0].fieldsV1 = { 'f:status': { 'f:images': {} } }),
  fieldEntryAdded: (n) => n.metadata.managedFields.push({ manager: 'kubectl', operation: 'Update', time: '2026-11-23T19:00:00Z' }),
  fieldEntryText: (n) => (n.metadata.managedFields[0] = 'kubelet'),
  fieldsNotList: (n) => (n.metadata.managedFields = { kubelet: {} }),
  heartbeat: (n) => (n.status.conditions[0].lastHeartbeatTime = '2026-11-23T19:00:00Z'),
  conditionMessage: (n) => (n.status.conditions[1].message = 'another word'),
  conditionText: (n) => (n.status.conditions[2] = 'Ready'),
  conditionNull: (n) => n.status.conditions.push(null),
  heartbeatNull: (n) => (n.status.conditions[3].lastHeartbeatTime = null),
  declaredFeatures: (n) => (n.status.declaredFeatures = ['ExtendWebSocketsToKubelet']),
  conditionsGone: (n) => delete n.status.conditions,
  label: (n) => (n.metadata.labels.team = 'a'),
  metadataGone: (n) => delete n.metadata,
  metadataEmpty: (n) => (n.metadata = {}),
  statusKey: (n) => (n.status.images = []),
  negativeZero: (n) => (n.status.nodeInfo.zero = -0),
  zero: (n) => (n.status.nodeInfo.zero = 0),
  undefinedKey: (n) => (n.spec.taints = undefined),
  topLevelKey: (n) => (n.extra = { a: [1] }),
};

describe('planStatusCoalescing', () => {
  it('coalesces a heartbeat-only update of its own kubelet: the object to store is the stored one but for managedFields times', () => {
    const stored = storedAt();
    const { plan, toStore } = admit(inflated(kubeletNode({ at: T0 + 10_000, cpu: '4', address: '172.18.0.3', ready: true }, {})), stored);
    expect(plan).toMatchObject({ decision: 'coalesced', reason: 'heartbeat' });
    expect(withoutFieldTimes(toStore)).toEqual(withoutFieldTimes(stored));
    expect(toStore.metadata.managedFields[0].time).not.toBe(stored.metadata.managedFields[0].time);
  });

  it('coalesces the stored object itself sent back (reinvocation) without a patch: idempotent', () => {
    const stored = storedAt();
    expect(admit(structuredClone(stored), stored).plan).toEqual({ decision: 'coalesced', reason: 'heartbeat', patch: [] });
  });

  it('passes a Ready=False transition, a capacity change, an address change, and heartbeats a window old', () => {
    const stored = storedAt();
    const at = T0 + 10_000;
    const cases: Array<[Partial<KubeletView>, string]> = [
      [{ ready: false }, 'condition-changed'],
      [{ cpu: '8' }, 'status-changed'],
      [{ address: '172.18.0.9' }, 'status-changed'],
      [{ at: T0 + WINDOW_MS }, 'report-due'],
      [{ at: T0 - 1_000 }, 'report-due'],
    ];
    for (const [change, reason] of cases) {
      const object = inflated(kubeletNode({ at, cpu: '4', address: '172.18.0.3', ready: true, ...change }, {}));
      expect(admit(object, stored).plan, JSON.stringify(change)).toEqual({ decision: 'passed', reason });
    }
  });

  it('passes any writer but the node itself, a node not inflated or in shadow mode, and an update without a stored object', () => {
    const stored = storedAt();
    const object = inflated(kubeletNode({ at: T0 + 10_000, cpu: '4', address: '172.18.0.3', ready: true }, {}));
    expect(admit(object, stored, { username: 'system:node:worker-2', groups: [] }).plan.reason).toBe('other-writer');
    expect(admit(object, stored, { username: 'system:serviceaccount:kube-system:node-controller', groups: [] }).plan.reason).toBe('other-writer');
    const raw = kubeletNode({ at: T0 + 10_000, cpu: '4', address: '172.18.0.3', ready: true }, {});
    expect(raw.metadata.annotations[RATIOS_ANNOTATION]).toBeUndefined();
    expect(admit(raw, stored).plan.reason).toBe('not-inflated');
    expect(planStatusCoalescing({ name: NAME, userInfo: KUBELET, object, oldObject: stored }, REPORT_PERIOD_MS, false).reason).toBe('not-inflated');
    expect(planStatusCoalescing({ name: NAME, userInfo: KUBELET, object }, REPORT_PERIOD_MS).reason).toBe('no-stored-object');
  });

  it('compares quantities by value: "4000m" stored as "4" is no change', () => {
    const stored = storedAt();
    const object = inflated(kubeletNode({ at: T0 + 10_000, cpu: '4', address: '172.18.0.3', ready: true }, {}));
    object.status.capacity.cpu = '4000m';
    expect(admit(object, stored).plan.decision).toBe('coalesced');
  });

  it('passes an update that changes which fields a manager owns', () => {
    const stored = storedAt();
    const object = inflated(kubeletNode({ at: T0 + 10_000, cpu: '4', address: '172.18.0.3', ready: true }, {}));
    object.metadata.managedFields[0].fieldsV1 = { 'f:status': { 'f:images': {} } };
    expect(admit(object, stored).plan).toEqual({ decision: 'passed', reason: 'status-changed' });
  });

  it('property: a write that changes anything the rules do not model (new keys at any depth, a new condition type, declaredFeatures, nodeInfo, images, addresses) is stored as written, with any heartbeat-only change; inflation leaves those parts as they are', () => {
    const seen = new Outcomes<UnmodelledChange | 'stored side'>(...(Object.keys(UNMODELLED_CHANGES) as UnmodelledChange[]), 'stored side');
    const change = fc.oneof(...Object.entries(UNMODELLED_CHANGES).map(([name, edit]) => edit.map((apply) => ({ name: name as UnmodelledChange, apply }))));
    const windowSeconds = WINDOW_MS / 1_000;
    fc.assert(
      fc.property(
        fc.array(change, { minLength: 1, maxLength: 3 }),
        fc.boolean(),
        fc.boolean(),
        // Heartbeat-only: each condition's heartbeat moved by less than the window, the writer's managedFields time anything.
        fc.array(fc.integer({ min: 0, max: windowSeconds - 1 }), { minLength: 5, maxLength: 5 }),
        fc.date({ min: new Date(T0), max: new Date(T0 + 86_400_000), noInvalidDate: true }),
        (changes, onStoredSide, maintenance, heartbeatSeconds, fieldTime) => {
          const view: KubeletView = { at: T0, cpu: '4', address: '172.18.0.3', ready: true };
          const stored = inflated(kubelet137Node(view, maintenance));
          const write = kubelet137Node(view, maintenance);
          write.status.conditions.forEach((condition: Json, i: number) => {
            if (condition.lastHeartbeatTime !== null) condition.lastHeartbeatTime = time(T0 + heartbeatSeconds[i]! * 1_000);
          });
          write.metadata.managedFields[0].time = time(fieldTime.getTime());
          // Without the changes the write is heartbeat-only: coalesced.
          expect(admit(inflated(write), stored).plan.decision).toBe('coalesced');

          const changed = onStoredSide ? stored : write;
          const before = structuredClone(changed);
          // The classes whose change was made: applied (its part still there) and the node differing after it.
          const made: UnmodelledChange[] = [];
          for (const { name, apply } of changes) {
            const step = structuredClone(changed);
            try {
              apply(changed);
            } catch {
              // The part it changes is gone (an earlier change removed it).
            }
            if (!isDeepStrictEqual(changed, step)) made.push(name);
          }
          const object = inflated(write);
          // Node oversell changed nothing but the managed allocatable and our annotations.
          expect(outsideOurs(object)).toEqual(outsideOurs(write));
          const { plan, toStore } = admit(object, stored);
          if (isDeepStrictEqual(changed, before)) {
            // The changes undid each other (an address list reversed twice): heartbeat-only again.
            expect(plan.decision).toBe('coalesced');
            return;
          }
          for (const name of made) seen.add(name);
          if (onStoredSide) seen.add('stored side');
          expect(plan).toMatchObject({ decision: 'passed' });
          expect(['condition-changed', 'status-changed']).toContain(plan.reason);
          expect(toStore).toBe(object);
        },
      ),
      runs(500),
    );
    // Shares of all the outcomes counted (about 1.9 per case): each class about 7 %, the stored side about 20 %.
    for (const name of Object.keys(UNMODELLED_CHANGES) as UnmodelledChange[]) seen.expectShare(name, 0.03);
    seen.expectShare('stored side', 0.12);
  });

  it('a condition an administrator set without a heartbeat (null) does not stop coalescing; a heartbeat the kubelet drops does', () => {
    const view: KubeletView = { at: T0, cpu: '4', address: '172.18.0.3', ready: true };
    const stored = inflated(kubelet137Node(view, true));
    const write = inflated(kubelet137Node({ ...view, at: T0 + 10_000 }, true));
    expect(write.status.conditions.at(-1)).toMatchObject({ type: 'MaintenancePlanned', lastHeartbeatTime: null });
    expect(admit(write, stored).plan).toMatchObject({ decision: 'coalesced', reason: 'heartbeat' });
    const dropped = structuredClone(write);
    dropped.status.conditions[3].lastHeartbeatTime = null;
    expect(admit(dropped, stored).plan).toEqual({ decision: 'passed', reason: 'report-due' });
  });

  it('heartbeatsFresh: a condition absent from the stored object is never fresh', () => {
    expect(heartbeatsFresh([{ type: 'Ready', lastHeartbeatTime: time(T0) }], [], WINDOW_MS)).toBe(false);
    expect(heartbeatsFresh([{ type: 'Ready', lastHeartbeatTime: 'yesterday' }], [{ type: 'Ready', lastHeartbeatTime: time(T0) }], WINDOW_MS)).toBe(false);
  });

  it('property: over random kubelet update sequences, a condition, capacity or address change or a report due always passes, anything else leaves the stored object as it was', () => {
    const step = fc.record({
      // Whole seconds, as heartbeat times are.
      afterMs: fc.integer({ min: 0, max: 40 }).map((seconds) => seconds * 1_000),
      change: fc.constantFrom('none', 'none', 'none', 'ready', 'cpu', 'address'),
    });
    fc.assert(
      fc.property(fc.array(step, { minLength: 1, maxLength: 60 }), (steps) => {
        let view: KubeletView = { at: T0, cpu: '4', address: '172.18.0.3', ready: true };
        const transitions: Record<string, number> = {};
        let stored = inflated(kubeletNode(view, transitions));
        let storedHeartbeat = T0;
        let lastStoredWrite = T0;
        for (const { afterMs, change } of steps) {
          view = { ...view, at: view.at + afterMs };
          if (change === 'ready') {
            view.ready = !view.ready;
            transitions.Ready = view.at;
          } else if (change === 'cpu') view.cpu = view.cpu === '4' ? '8' : '4';
          else if (change === 'address') view.address = view.address === '172.18.0.3' ? '172.18.0.4' : '172.18.0.3';
          const before = structuredClone(stored);
          const { plan, toStore } = admit(inflated(kubeletNode(view, transitions)), stored);
          const mustPass = change !== 'none' || view.at - storedHeartbeat >= WINDOW_MS;
          expect(plan.decision).toBe(mustPass ? 'passed' : 'coalesced');
          if (plan.decision === 'coalesced') expect(withoutFieldTimes(toStore)).toEqual(withoutFieldTimes(before));
          else {
            storedHeartbeat = view.at;
            lastStoredWrite = view.at;
          }
          if (plan.decision === 'passed') stored = toStore;
          // Heartbeats in the stored object advance at least once per window plus one update.
          expect(view.at - lastStoredWrite).toBeLessThan(WINDOW_MS + 40_001);
        }
      }),
      runs(300),
    );
  });

  it('property: rule 3 gives the verdict of its model (copies compared by isDeepStrictEqual) on any edits of either side, and fails alike on an unreadable quantity', () => {
    const edits = (maxLength: number) => fc.array(fc.constantFrom(...Object.keys(EDITS)), { maxLength });
    fc.assert(
      // Edits made to both sides, then to one side only: most pairs differ in one place or none.
      // storedRatios: the stored node's ratios annotation as the update's, another, absent, or no annotations at all.
      fc.property(
        edits(3),
        edits(1),
        edits(1),
        fc.boolean(),
        fc.constantFrom('same', 'same', 'other', 'absent', 'none'),
        (bothEdits, objectEdits, storedEdits, sameHeartbeats, storedRatios) => {
          const stored = storedAt();
          const object = sameHeartbeats
            ? structuredClone(stored)
            : inflated(kubeletNode({ at: T0 + 10_000, cpu: '4', address: '172.18.0.3', ready: true }, {}));
          for (const [node, oneSide] of [
            [object, objectEdits],
            [stored, storedEdits],
          ] as const) {
            applyEdits(node, [...bothEdits, ...oneSide]);
            // The guards before rule 3 stay met: the name and the annotation, alike on both sides.
            node.metadata = { ...node.metadata, name: NAME, annotations: { ...node.metadata?.annotations, [RATIOS_ANNOTATION]: '{}' } };
          }
          if (storedRatios === 'other') stored.metadata.annotations[RATIOS_ANNOTATION] = '{"cpu":2}';
          if (storedRatios === 'absent') delete stored.metadata.annotations[RATIOS_ANNOTATION];
          if (storedRatios === 'none') delete stored.metadata.annotations;
          if (!Array.isArray(stored.status.conditions)) stored.status.conditions = [];
          let expected: string | undefined;
          try {
            expected = modelRule3(object, stored);
          } catch (error) {
            expect(() => admit(object, stored)).toThrow((error as Error).message);
            return;
          }
          const { plan } = admit(object, stored);
          if (expected === undefined) expect(['heartbeat', 'report-due']).toContain(plan.reason);
          else expect(plan.reason).toBe(expected);
        },
      ),
      runs(1000),
    );
  });
});

describe('parseDuration', () => {
  it('reads hours, minutes and seconds in the kubelet spelling; anything else is NaN', () => {
    expect(parseDuration('5m')).toBe(300_000);
    expect(parseDuration('90s')).toBe(90_000);
    expect(parseDuration('1h2m3s')).toBe(3_723_000);
    for (const text of ['', '5', '5min', '1.5m', '-5m', 's', ' 5m']) expect(parseDuration(text), text).toBeNaN();
  });
});

// ---------------------------------------------------------------------------------------------
// Edges the mutation run (docs/testing.md) found untested
// ---------------------------------------------------------------------------------------------

describe('planStatusCoalescing: edges found by mutation testing', () => {
  const at = T0 + 10_000;
  const update = () => inflated(kubeletNode({ at, cpu: '4', address: '172.18.0.3', ready: true }, {}));
  const plan = (object: Json, oldObject: Json | undefined, userInfo: StatusUpdateRequest['userInfo'] = KUBELET) =>
    planStatusCoalescing({ name: NAME, userInfo, object, oldObject }, REPORT_PERIOD_MS);

  it('the writer is the kubelet only for its own exact name; the request names the node when the object does not', () => {
    expect(plan(update(), storedAt(), { username: 'system:node:xworker-1' })).toEqual({ decision: 'passed', reason: 'other-writer' });
    expect(planStatusCoalescing({ name: NAME, object: update(), oldObject: storedAt() }, REPORT_PERIOD_MS)).toEqual({
      decision: 'passed',
      reason: 'other-writer',
    });
    const nameless = update();
    delete nameless.metadata.name;
    expect(plan(nameless, storedAt())).toEqual({ decision: 'passed', reason: 'status-changed' });
  });

  it('passes, saying why, an object without metadata, one without status, and a stored object without metadata', () => {
    const bare = update();
    delete bare.metadata;
    expect(plan(bare, storedAt())).toEqual({ decision: 'passed', reason: 'not-inflated' });
    expect(plan(update(), undefined)).toEqual({ decision: 'passed', reason: 'no-stored-object' });
    const statusless = update();
    delete statusless.status;
    expect(plan(statusless, storedAt())).toEqual({ decision: 'passed', reason: 'condition-changed' });
    const stored = storedAt();
    delete stored.metadata;
    expect(plan(update(), stored)).toEqual({ decision: 'passed', reason: 'status-changed' });
  });
});
