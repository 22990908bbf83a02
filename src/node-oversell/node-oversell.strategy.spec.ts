import { Test } from '@nestjs/testing';
import { getToken } from '@willsoto/nestjs-prometheus';
import fastJsonPatch from 'fast-json-patch';
import { Counter, Gauge, Registry } from 'prom-client';
import { describe, expect, it, vi } from 'vitest';
import { nodeOversellStrategy } from '../../test/fixtures/node-oversell-strategy.js';
import { TestConfigModule } from '../../test/fixtures/config-module.js';
import { AdmissionStrategyProvider } from '../admission/admission-strategy.decorator.js';
import type { AdmissionRequest, StrategyResult } from '../admission/admission.types.js';
import { BACKGROUND_ERRORS, BackgroundTasksModule } from '../common/background-tasks.js';
import { escapeJsonPointer, jsonPointer } from '../domain/json-pointer.js';
import type { OvercommitConfig } from '../overcommit.config.js';
import {
  NODE_ALLOCATABLE_OVERCOMMITTED_METRIC,
  NODE_ALLOCATABLE_RAW_METRIC,
  NODE_ALLOCATABLE_REASON_METRIC,
  NODE_METRICS_DROPPED_METRIC,
  NODE_RATIO_METRIC,
} from './node-oversell.metrics.js';
import { NodeOversellModule } from './node-oversell.module.js';
import { UsageModule } from '../usage/usage.module.js';
import { FLOOR_ANNOTATION, POOL_ANNOTATION, RATIOS_ANNOTATION, RAW_ANNOTATION, USAGE_ANNOTATION } from '../domain/node-rules/node-oversell.rules.js';
import { type ResourceAmounts } from '../domain/resources.js';
import { type NodeUsageEntry } from '../domain/node-rules/usage-aware.rules.js';
import { KubeModule } from '../kube/kube.module.js';
import { DEFAULT_NODE_METRICS_MAX_NODES, NODE_METRICS_TTL_MS, NodeOversellStrategy, isNodeName, nodeMetricsMaxNodes } from './node-oversell.strategy.js';

const { applyPatch } = fastJsonPatch;
type Json = Record<string, any>;

// --- realistic Nodes ----------------------------------------------------------------------------

/** A kubeadm control-plane/worker Node as `kubectl get node -o json` shows it. */
function kubeadmNode(): Json {
  return {
    apiVersion: 'v1',
    kind: 'Node',
    metadata: {
      name: 'worker-1',
      uid: '6a1f7d52-1f6e-4b55-9a3c-0d7f8c1e2b3a',
      resourceVersion: '184467',
      creationTimestamp: '2026-03-01T09:12:44Z',
      labels: {
        'beta.kubernetes.io/arch': 'amd64',
        'beta.kubernetes.io/os': 'linux',
        'kubernetes.io/arch': 'amd64',
        'kubernetes.io/hostname': 'worker-1',
        'kubernetes.io/os': 'linux',
        'topology.kubernetes.io/zone': 'eu-west-1a',
      },
      annotations: {
        'kubeadm.alpha.kubernetes.io/cri-socket': 'unix:///var/run/containerd/containerd.sock',
        'node.alpha.kubernetes.io/ttl': '0',
        'volumes.kubernetes.io/controller-managed-attach-detach': 'true',
      },
    },
    spec: { podCIDR: '10.244.1.0/24', podCIDRs: ['10.244.1.0/24'] },
    status: {
      addresses: [
        { type: 'InternalIP', address: '172.18.0.3' },
        { type: 'Hostname', address: 'worker-1' },
      ],
      allocatable: {
        cpu: '4',
        'ephemeral-storage': '47438335103',
        'hugepages-1Gi': '0',
        'hugepages-2Mi': '0',
        memory: '16318064Ki',
        pods: '110',
      },
      capacity: {
        cpu: '4',
        'ephemeral-storage': '51474912Ki',
        'hugepages-1Gi': '0',
        'hugepages-2Mi': '0',
        memory: '16420464Ki',
        pods: '110',
      },
      conditions: [
        {
          type: 'MemoryPressure',
          status: 'False',
          reason: 'KubeletHasSufficientMemory',
          message: 'kubelet has sufficient memory available',
          lastHeartbeatTime: '2026-03-02T10:00:00Z',
          lastTransitionTime: '2026-03-01T09:12:44Z',
        },
        {
          type: 'DiskPressure',
          status: 'False',
          reason: 'KubeletHasNoDiskPressure',
          message: 'kubelet has no disk pressure',
          lastHeartbeatTime: '2026-03-02T10:00:00Z',
          lastTransitionTime: '2026-03-01T09:12:44Z',
        },
        {
          type: 'PIDPressure',
          status: 'False',
          reason: 'KubeletHasSufficientPID',
          message: 'kubelet has sufficient PID available',
          lastHeartbeatTime: '2026-03-02T10:00:00Z',
          lastTransitionTime: '2026-03-01T09:12:44Z',
        },
        {
          type: 'Ready',
          status: 'True',
          reason: 'KubeletReady',
          message: 'kubelet is posting ready status',
          lastHeartbeatTime: '2026-03-02T10:00:00Z',
          lastTransitionTime: '2026-03-01T09:13:10Z',
        },
      ],
      daemonEndpoints: { kubeletEndpoint: { Port: 10250 } },
      images: [
        {
          names: ['registry.k8s.io/etcd@sha256:44a8e24dcbba3470ee1fee21d5e88d128c936e9b55d4bc51fbef8086f8ed123b', 'registry.k8s.io/etcd:3.5.15-0'],
          sizeBytes: 56909194,
        },
        { names: ['docker.io/kindest/kindnetd:v20240813-c6f155d6'], sizeBytes: 36793393 },
        { names: ['registry.k8s.io/kube-proxy:v1.31.0'], sizeBytes: 30207900 },
        { names: ['registry.k8s.io/pause:3.10'], sizeBytes: 320368 },
      ],
      nodeInfo: {
        architecture: 'amd64',
        bootID: 'c3c1c0f4-1b76-4c0a-8f93-1d7f3e0f8f4e',
        containerRuntimeVersion: 'containerd://1.7.18',
        kernelVersion: '6.8.0-45-generic',
        kubeProxyVersion: 'v1.31.0',
        kubeletVersion: 'v1.31.0',
        machineID: '2d1e4ab5d0a44f5b9e1f6c7a8b9c0d1e',
        operatingSystem: 'linux',
        osImage: 'Debian GNU/Linux 12 (bookworm)',
        systemUUID: '2d1e4ab5-d0a4-4f5b-9e1f-6c7a8b9c0d1e',
      },
    },
  };
}

/** A kwok fake node: no ephemeral-storage, no annotations at all. */
function kwokNode(): Json {
  return {
    apiVersion: 'v1',
    kind: 'Node',
    metadata: { name: 'kwok-node-0', labels: { type: 'kwok', 'kubernetes.io/hostname': 'kwok-node-0', 'kubernetes.io/role': 'agent' } },
    spec: { taints: [{ key: 'kwok.x-k8s.io/node', value: 'fake', effect: 'NoSchedule' }] },
    status: {
      allocatable: { cpu: '32', memory: '256Gi', pods: '110' },
      capacity: { cpu: '32', memory: '256Gi', pods: '110' },
      nodeInfo: { architecture: 'amd64', kubeletVersion: 'fake', kubeProxyVersion: 'fake', operatingSystem: 'linux' },
      phase: 'Running',
    },
  };
}

/** A node whose kubelet reserves a fraction of a core: allocatable cpu in millicores. */
function millicoreNode(): Json {
  const node = kubeadmNode();
  node.metadata.name = 'worker-2';
  node.status.allocatable.cpu = '3900m';
  node.status.allocatable.memory = '15715664Ki';
  return node;
}

/** A GPU node: extended resources and hugepages must never be touched. */
function gpuNode(): Json {
  const node = kubeadmNode();
  node.metadata.name = 'gpu-1';
  node.metadata.labels['node-pool'] = 'gpu';
  node.metadata.labels['nvidia.com/gpu.present'] = 'true';
  node.status.allocatable = {
    cpu: '63500m',
    'ephemeral-storage': '456431536963',
    'hugepages-1Gi': '2Gi',
    'hugepages-2Mi': '1Gi',
    memory: '524078968Ki',
    'nvidia.com/gpu': '8',
    pods: '110',
  };
  node.status.capacity = {
    cpu: '64',
    'ephemeral-storage': '495263276Ki',
    'hugepages-1Gi': '2Gi',
    'hugepages-2Mi': '1Gi',
    memory: '528407928Ki',
    'nvidia.com/gpu': '8',
    pods: '110',
  };
  return node;
}

// --- harness -------------------------------------------------------------------------------------

const config = (nodes: Json): OvercommitConfig => ({ nodes: { defaultRatios: {}, pools: [], ...nodes } }) as unknown as OvercommitConfig;
const CONFIG = config({
  defaultRatios: { cpu: 1.5, memory: 1.2 },
  pools: [{ name: 'gpu', nodeSelector: { matchLabels: { 'node-pool': 'gpu' } }, ratios: { cpu: 2, memory: 1.5, 'ephemeral-storage': 1.1, pods: 2 } }],
});

function harness(env: NodeJS.ProcessEnv = {}) {
  const registry = new Registry();
  /** The requests bound to each node, as the pod cache would report them; absent = unknown. */
  const committed = new Map<string, ResourceAmounts>();
  const events: Array<{ node: { name: string; uid?: string }; reason: string; message: string }> = [];
  /** What the usage-aware leader published, per node. */
  const published = new Map<string, NodeUsageEntry>();
  const strategy = nodeOversellStrategy({
    registry,
    env,
    committed: (node) => committed.get(node),
    record: (node, reason, message) => events.push({ node, reason, message }),
    usage: (name) => published.get(name),
  });

  const request = (object: Json, extra: Partial<AdmissionRequest> = {}): AdmissionRequest => ({
    uid: 'e911857d-c318-11e8-bbad-025000000001',
    kind: { group: '', version: 'v1', kind: 'Node' },
    resource: { group: '', version: 'v1', resource: 'nodes' },
    subResource: 'status',
    name: object.metadata?.name,
    operation: 'UPDATE',
    userInfo: { username: `system:node:${object.metadata?.name}`, groups: ['system:nodes', 'system:authenticated'] },
    object,
    oldObject: object,
    ...extra,
  });
  /** Runs admit and applies its patch (validated) to a clone, as the API server would. */
  const admit = (object: Json, cfg = CONFIG, extra: Partial<AdmissionRequest> = {}): { result: StrategyResult; node: Json } => {
    const frozen = structuredClone(object);
    const result = strategy.admit(request(frozen, extra), cfg);
    expect(frozen).toEqual(object); // admit never mutates the request object
    const node = result.patch ? applyPatch(structuredClone(object), result.patch, true, false).newDocument : object;
    return { result, node };
  };
  const samples = async (name: string): Promise<Array<Record<string, string | number>>> =>
    (await registry.getSingleMetric(name)!.get()).values.map(({ labels, value }) => ({ ...labels, value }));
  /** The nodes that have series, sorted. */
  const nodes = async () => [...new Set((await samples(NODE_RATIO_METRIC)).map((s) => s.node))].sort();
  return { strategy, request, admit, samples, nodes, committed, events, published };
}

/** Everything but status.allocatable and our annotations must come out as it went in. */
function expectOnlyOursChanged(before: Json, after: Json): void {
  const strip = (node: Json) => {
    const copy = structuredClone(node);
    delete copy.status.allocatable;
    for (const key of [RAW_ANNOTATION, RATIOS_ANNOTATION, POOL_ANNOTATION, FLOOR_ANNOTATION]) delete copy.metadata.annotations?.[key];
    if (copy.metadata.annotations && Object.keys(copy.metadata.annotations).length === 0 && !before.metadata.annotations) delete copy.metadata.annotations;
    return copy;
  };
  expect(strip(after)).toEqual(strip(before));
  expect(after.status.capacity).toEqual(before.status.capacity);
}

// --- tests ---------------------------------------------------------------------------------------

describe('escapeJsonPointer', () => {
  it('escapes ~ then / (RFC 6901)', () => {
    expect(escapeJsonPointer('kube-overcommit.io/allocatable-raw')).toBe('kube-overcommit.io~1allocatable-raw');
    expect(escapeJsonPointer('a~/b')).toBe('a~0~1b');
    expect(escapeJsonPointer('~1')).toBe('~01');
    expect(jsonPointer(['metadata', 'annotations', 'kube-overcommit.io/pool'])).toBe('/metadata/annotations/kube-overcommit.io~1pool');
    expect(jsonPointer([])).toBe('');
  });
});

describe('NodeOversellStrategy', () => {
  it('is discoverable as an admission strategy of the nodes entry, for nodes CREATE and nodes/status UPDATE', () => {
    expect(Reflect.getMetadata(AdmissionStrategyProvider.KEY, NodeOversellStrategy)).toEqual({
      name: 'node-oversell',
      entry: 'nodes',
      rules: [
        { resource: 'nodes', subResource: '', operations: ['CREATE'] },
        { resource: 'nodes', subResource: 'status', operations: ['UPDATE'] },
      ],
    });
  });

  it('inflates a kubeadm node: only the changed allocatable and our annotations, paths escaped', () => {
    const { admit } = harness();
    const before = kubeadmNode();
    const { result, node } = admit(before);
    const memory = `${(16318064n * 1024n * 12n) / 10n}`; // 1.2 × 16318064Ki, floor, in bytes
    expect(result.patch).toEqual([
      { op: 'replace', path: '/status/allocatable/cpu', value: '6' },
      { op: 'replace', path: '/status/allocatable/memory', value: memory },
      {
        op: 'add',
        path: '/metadata/annotations/kube-overcommit.io~1allocatable-raw',
        value:
          '{"allocatable":{"cpu":"4","memory":"16318064Ki","ephemeral-storage":"47438335103","pods":"110"},"capacity":{"cpu":"4","memory":"16420464Ki","ephemeral-storage":"51474912Ki","pods":"110"}}',
      },
      { op: 'add', path: '/metadata/annotations/kube-overcommit.io~1ratios', value: '{"cpu":1.5,"memory":1.2}' },
    ]);
    expect(node.status.allocatable).toEqual({ ...before.status.allocatable, cpu: '6', memory });
    expect(node.metadata.annotations['kubeadm.alpha.kubernetes.io/cri-socket']).toBe('unix:///var/run/containerd/containerd.sock');
    expect(node.metadata.annotations).not.toHaveProperty(POOL_ANNOTATION);
    expectOnlyOursChanged(before, node);

    // Reinvocation on our own output, a heartbeat from another writer: nothing to do.
    expect(admit(node).result).toEqual({});
    const heartbeat = structuredClone(node);
    heartbeat.status.conditions[3].lastHeartbeatTime = '2026-03-02T10:00:10Z';
    heartbeat.status.allocatable.cpu = '6000m'; // re-canonicalised: same value
    expect(admit(heartbeat).result).toEqual({});

    // The kubelet's next status PATCH carries its raw values again: same result, no compounding.
    const kubelet = structuredClone(node);
    kubelet.status.allocatable = { ...before.status.allocatable };
    const again = admit(kubelet);
    expect(again.node.status.allocatable).toEqual(node.status.allocatable);
    expect(again.result.patch?.map((op) => op.path)).toEqual(['/status/allocatable/cpu', '/status/allocatable/memory']);
  });

  it('leaves every field it does not model as the writer sent it: a 1.37 kubelet’s declaredFeatures, a lifecycle condition, unknown keys at any depth', () => {
    const { admit } = harness();
    const before = kubeadmNode();
    before.status.declaredFeatures = ['RestartAllContainersOnContainerExits', 'InPlacePodLevelResourcesVerticalScaling', 'ExtendWebSocketsToKubelet'];
    before.status.features = { supplementalGroupsPolicy: true };
    before.status.runtimeHandlers = [{ name: 'runc', features: { recursiveReadOnlyMounts: true, userNamespaces: true } }];
    before.status.conditions.push({
      type: 'MaintenancePlanned',
      status: 'True',
      lastHeartbeatTime: null,
      lastTransitionTime: '2026-03-02T09:00:00Z',
      reason: 'KernelUpgrade',
      message: 'planned by the platform team',
    });
    before.status.futureStatus = { phase: 'Draining', since: 3 };
    before.status.nodeInfo.futureInfo = ['a', 1, null];
    before.status.capacity.futureNested = { deep: { deeper: [{}] } };
    before.spec.futureSpec = true;
    before.futureTopLevel = 'x';
    const { result, node } = admit(before);
    expect(result.patch?.map(({ op, path }) => `${op} ${path}`)).toEqual([
      'replace /status/allocatable/cpu',
      'replace /status/allocatable/memory',
      'add /metadata/annotations/kube-overcommit.io~1allocatable-raw',
      'add /metadata/annotations/kube-overcommit.io~1ratios',
    ]);
    expect(node.status.declaredFeatures).toEqual([
      'RestartAllContainersOnContainerExits',
      'InPlacePodLevelResourcesVerticalScaling',
      'ExtendWebSocketsToKubelet',
    ]);
    expect([node.status.futureStatus, node.status.nodeInfo.futureInfo, node.status.capacity.futureNested, node.spec.futureSpec, node.futureTopLevel]).toEqual([
      { phase: 'Draining', since: 3 },
      ['a', 1, null],
      { deep: { deeper: [{}] } },
      true,
      'x',
    ]);
    // Everything else, the lifecycle condition and its null heartbeat included, as it went in.
    expectOnlyOursChanged(before, node);
  });

  it('adds /metadata/annotations as a whole on a kwok node that has none', () => {
    const { admit } = harness();
    const before = kwokNode();
    const { result, node } = admit(before, config({ defaultRatios: { cpu: 3, pods: 1 } }), { operation: 'CREATE', subResource: undefined });
    expect(result.patch).toEqual([
      { op: 'replace', path: '/status/allocatable/cpu', value: '96' },
      {
        op: 'add',
        path: '/metadata/annotations',
        value: {
          'kube-overcommit.io/allocatable-raw':
            '{"allocatable":{"cpu":"32","memory":"256Gi","pods":"110"},"capacity":{"cpu":"32","memory":"256Gi","pods":"110"}}',
          'kube-overcommit.io/ratios': '{"cpu":3}',
        },
      },
    ]);
    expect(node.status.allocatable).toEqual({ cpu: '96', memory: '256Gi', pods: '110' });
    expectOnlyOursChanged(before, node);
    expect(admit(node, config({ defaultRatios: { cpu: 3, pods: 1 } })).result).toEqual({});
  });

  it('millicore allocatable: 3900m × 1.15 = 4485m exactly', () => {
    const { admit } = harness();
    const before = millicoreNode();
    const { node } = admit(before, config({ defaultRatios: { cpu: 1.15 } }));
    expect(node.status.allocatable.cpu).toBe('4485m');
    expect(node.status.allocatable.memory).toBe('15715664Ki');
    expect(JSON.parse(node.metadata.annotations[RAW_ANNOTATION]).allocatable.cpu).toBe('3900m');
    expectOnlyOursChanged(before, node);
  });

  it('GPU node in a pool: extended resources and hugepages untouched, pool recorded', () => {
    const { admit } = harness();
    const before = gpuNode();
    const { node } = admit(before);
    expect(node.status.allocatable).toEqual({
      cpu: '127',
      'ephemeral-storage': `${(456431536963n * 11n) / 10n}`,
      'hugepages-1Gi': '2Gi',
      'hugepages-2Mi': '1Gi',
      memory: `${(524078968n * 1024n * 15n) / 10n / 1024n}Ki`, // 1.5 × a Ki count that is even: still whole Ki
      'nvidia.com/gpu': '8',
      pods: '220',
    });
    expect(node.metadata.annotations[POOL_ANNOTATION]).toBe('gpu');
    expect(JSON.parse(node.metadata.annotations[RATIOS_ANNOTATION])).toEqual({ cpu: 2, memory: 1.5, 'ephemeral-storage': 1.1, pods: 2 });
    expectOnlyOursChanged(before, node);

    // Leaving the pool for the defaults: the recorded raw is re-inflated, the pool annotation removed.
    const moved = structuredClone(node);
    delete moved.metadata.labels['node-pool'];
    const { result, node: after } = admit(moved);
    expect(after.status.allocatable.cpu).toBe('95250m');
    expect(after.status.allocatable.pods).toBe('110');
    expect(after.status.allocatable['ephemeral-storage']).toBe('456431536963');
    expect(result.patch).toContainEqual({ op: 'remove', path: '/metadata/annotations/kube-overcommit.io~1pool' });
    expect(result.patch).toContainEqual({ op: 'replace', path: '/metadata/annotations/kube-overcommit.io~1ratios', value: '{"cpu":1.5,"memory":1.2}' });
  });

  it('opting out restores the raw values and removes our annotations', () => {
    const { admit } = harness();
    const before = kubeadmNode();
    const inflated = admit(before).node;
    for (const label of ['kube-overcommit.io/disabled', 'node-oversell/disable']) {
      const optedOut = structuredClone(inflated);
      optedOut.metadata.labels[label] = 'true';
      const { result, node } = admit(optedOut);
      expect(node.status.allocatable).toEqual(before.status.allocatable);
      expect(result.patch).toContainEqual({ op: 'remove', path: '/metadata/annotations/kube-overcommit.io~1allocatable-raw' });
      expect(result.patch).toContainEqual({ op: 'remove', path: '/metadata/annotations/kube-overcommit.io~1ratios' });
      expect(Object.keys(node.metadata.annotations).filter((k) => k.startsWith('kube-overcommit.io/'))).toEqual([]);
      expect(admit(node).result).toEqual({}); // still opted out: nothing more
    }
  });

  it('returns no patch when nothing changes', () => {
    const { admit } = harness();
    expect(admit(kubeadmNode(), config({})).result).toEqual({});
    expect(admit(kubeadmNode(), config({ defaultRatios: { cpu: 1, memory: 1 } })).result).toEqual({});
    expect(admit(kwokNode(), config({ defaultRatios: { 'ephemeral-storage': 2 } })).result).toEqual({}); // kwok has none
    const noAllocatable = kubeadmNode();
    delete noAllocatable.status.allocatable;
    expect(admit(noAllocatable).result).toEqual({});
    const noStatus = kubeadmNode();
    delete noStatus.status;
    expect(admit(noStatus).result).toEqual({});
  });

  it('ignores a request without an object', () => {
    const { strategy } = harness();
    expect(
      strategy.admit(
        { uid: 'x', kind: { group: '', version: 'v1', kind: 'Node' }, resource: { group: '', version: 'v1', resource: 'nodes' }, operation: 'UPDATE' },
        CONFIG,
      ),
    ).toEqual({});
  });

  it('throws (the pipeline then fails open) on an unparsable managed quantity', () => {
    const { strategy } = harness();
    const node = kubeadmNode();
    node.status.allocatable.cpu = 'four';
    expect(() =>
      strategy.admit(
        {
          uid: 'x',
          kind: { group: '', version: 'v1', kind: 'Node' },
          resource: { group: '', version: 'v1', resource: 'nodes' },
          operation: 'UPDATE',
          object: node,
        },
        CONFIG,
      ),
    ).toThrow(/invalid quantity "four"/);
  });

  it('exports per-node gauges, not for dry runs, and drops a stale pool series', async () => {
    const { admit, samples } = harness();
    admit(gpuNode(), CONFIG, { dryRun: true });
    expect(await samples(NODE_RATIO_METRIC)).toEqual([]);

    admit(kubeadmNode());
    expect(await samples(NODE_ALLOCATABLE_RAW_METRIC)).toEqual([
      { node: 'worker-1', resource: 'cpu', value: 4 },
      { node: 'worker-1', resource: 'memory', value: 16709697536 },
      { node: 'worker-1', resource: 'ephemeral-storage', value: 47438335103 },
      { node: 'worker-1', resource: 'pods', value: 110 },
    ]);
    expect(await samples(NODE_ALLOCATABLE_OVERCOMMITTED_METRIC)).toContainEqual({ node: 'worker-1', resource: 'cpu', value: 6 });
    expect(await samples(NODE_RATIO_METRIC)).toEqual([
      { node: 'worker-1', resource: 'cpu', pool: '', value: 1.5 },
      { node: 'worker-1', resource: 'memory', pool: '', value: 1.2 },
      { node: 'worker-1', resource: 'ephemeral-storage', pool: '', value: 1 },
      { node: 'worker-1', resource: 'pods', pool: '', value: 1 },
    ]);

    const pooled = kubeadmNode();
    pooled.metadata.labels['node-pool'] = 'gpu';
    admit(pooled);
    const ratios = await samples(NODE_RATIO_METRIC);
    expect(ratios.every((s) => s.pool === 'gpu')).toBe(true);
    expect(ratios).toContainEqual({ node: 'worker-1', resource: 'cpu', pool: 'gpu', value: 2 });

    admit(millicoreNode(), config({ defaultRatios: { cpu: 1.15 } }));
    expect(await samples(NODE_ALLOCATABLE_RAW_METRIC)).toContainEqual({ node: 'worker-2', resource: 'cpu', value: 3.9 });
    expect(await samples(NODE_ALLOCATABLE_OVERCOMMITTED_METRIC)).toContainEqual({ node: 'worker-2', resource: 'cpu', value: 4.485 });
  });

  it("drops a node's gauges after an hour without an admission for it, and keeps a node that keeps calling", async () => {
    const { strategy, admit, samples, nodes } = harness();
    const started = Date.now();
    admit(kubeadmNode());
    admit(millicoreNode(), config({ defaultRatios: { cpu: 1.15 } }));
    expect(await nodes()).toEqual(['worker-1', 'worker-2']);

    strategy.pruneSilentNodes(started + NODE_METRICS_TTL_MS - 60_000);
    expect(await nodes()).toEqual(['worker-1', 'worker-2']);

    vi.useFakeTimers({ now: started + NODE_METRICS_TTL_MS / 2, toFake: ['Date'] });
    try {
      admit(kubeadmNode()); // an unchanged heartbeat: gauges untouched, but worker-1 was seen
    } finally {
      vi.useRealTimers();
    }
    strategy.pruneSilentNodes(started + NODE_METRICS_TTL_MS + 1_000);
    expect(await nodes()).toEqual(['worker-1']);
    for (const metric of [NODE_ALLOCATABLE_RAW_METRIC, NODE_ALLOCATABLE_OVERCOMMITTED_METRIC]) {
      expect(
        (await samples(metric)).every((s) => s.node === 'worker-1'),
        metric,
      ).toBe(true);
    }

    admit(millicoreNode(), config({ defaultRatios: { cpu: 1.15 } })); // back: exported again
    expect(await nodes()).toEqual(['worker-1', 'worker-2']);
  });
});

describe('NodeOversellStrategy with the commitment floor', () => {
  // kubeadmNode: 4 CPUs raw; CONFIG gives cpu 1.5 → 6. Bound: 7.2 CPUs.
  const bound: ResourceAmounts = { cpu: 7200n, memory: 1024n ** 3n, pods: 9n };

  it('writes the bound requests, says so in an annotation, the reason gauge and one Event when it starts and one when it stops', async () => {
    const { admit, samples, committed, events } = harness();
    committed.set('worker-1', bound);
    const raised = admit(kubeadmNode()).node;
    expect(raised.status.allocatable.cpu).toBe('7200m');
    expect(raised.metadata.annotations[FLOOR_ANNOTATION]).toBe('{"cpu":"7200m"}');
    expect(await samples(NODE_ALLOCATABLE_REASON_METRIC)).toContainEqual({ node: 'worker-1', resource: 'cpu', reason: 'floor', value: 1 });
    expect(await samples(NODE_ALLOCATABLE_REASON_METRIC)).toContainEqual({ node: 'worker-1', resource: 'memory', reason: 'static', value: 1 });
    expect(events).toEqual([
      {
        node: { name: 'worker-1', uid: expect.any(String) },
        reason: 'CommitmentFloorApplied',
        message: 'allocatable raised to the requests bound to the node, so the kubelet keeps admitting its running pods: cpu 7200m (raw 4 × ratio 1.5 = 6)',
      },
    ]);
    // Reinvocation, a heartbeat, a dry run: no second Event.
    expect(admit(raised).result).toEqual({});
    admit(raised, CONFIG, { dryRun: true });
    expect(events).toHaveLength(1);

    committed.set('worker-1', { cpu: 5000n, pods: 5n });
    const lifted = admit(raised).node;
    expect(lifted.status.allocatable.cpu).toBe('6');
    expect(lifted.metadata.annotations[FLOOR_ANNOTATION]).toBeUndefined();
    expect(events.map((e) => e.reason)).toEqual(['CommitmentFloorApplied', 'CommitmentFloorLifted']);
    const cpuReasons = (await samples(NODE_ALLOCATABLE_REASON_METRIC)).filter((s) => s.resource === 'cpu');
    expect(cpuReasons).toEqual([{ node: 'worker-1', resource: 'cpu', reason: 'static', value: 1 }]);
  });

  it('nodes.commitmentFloor: false writes what the ratios give, whatever is bound', () => {
    const { admit, committed, events } = harness();
    committed.set('worker-1', bound);
    const off = { ...CONFIG, nodes: { ...CONFIG.nodes, commitmentFloor: false } } as OvercommitConfig;
    expect(admit(kubeadmNode(), off).node.status.allocatable.cpu).toBe('6');
    expect(events).toEqual([]);
  });

  it('unknown commitments (the pod cache has not listed): what the ratios give', () => {
    const { admit } = harness();
    expect(admit(kubeadmNode()).node.status.allocatable.cpu).toBe('6');
  });
});

describe('NodeOversellStrategy with usage-aware ratios', () => {
  const USAGE = config({ defaultRatios: { cpu: 2, memory: 1.2 }, defaultUsage: { target: { cpu: 0.6 } } });

  it('writes the published ratio capped at the ceiling, the usage annotation and the reason; then the floor', async () => {
    const { admit, samples, published, committed } = harness();
    published.set('worker-1', { cpu: { ratio: 1.5, reason: 'usage', A: '4', R: '3', U: '900m' } });
    const node = admit(kubeadmNode(), USAGE).node;
    expect(node.status.allocatable.cpu).toBe('6');
    expect(node.metadata.annotations[RATIOS_ANNOTATION]).toBe('{"cpu":1.5,"memory":1.2}');
    expect(node.metadata.annotations[USAGE_ANNOTATION]).toBe('{"cpu":{"ratio":1.5,"reason":"usage","A":"4","R":"3","U":"900m"}}');
    expect(await samples(NODE_ALLOCATABLE_REASON_METRIC)).toContainEqual({ node: 'worker-1', resource: 'cpu', reason: 'usage', value: 1 });
    expect(admit(node, USAGE).result).toEqual({}); // idempotent

    published.set('worker-1', { cpu: { ratio: 1, reason: 'hot', A: '4', R: '3', U: '3800m' } });
    committed.set('worker-1', { cpu: 5000n });
    const hot = admit(node, USAGE).node;
    expect(hot.status.allocatable.cpu).toBe('5'); // 4 × 1 < 5 bound: the floor
    const cpuReasons = (await samples(NODE_ALLOCATABLE_REASON_METRIC)).filter((s) => s.resource === 'cpu');
    expect(cpuReasons).toEqual([{ node: 'worker-1', resource: 'cpu', reason: 'floor', value: 1 }]);

    // A published ratio above the ceiling of the config in force is read as the ceiling.
    published.set('worker-1', { cpu: { ratio: 9, reason: 'usage' } });
    committed.clear();
    expect(admit(hot, USAGE).node.status.allocatable.cpu).toBe('8');
  });

  it('no published entry: the ratio recorded on the stored Node, capped at the ceiling (stale); without usage the annotation goes', async () => {
    const { admit, published, samples } = harness();
    published.set('worker-1', { cpu: { ratio: 1.7, reason: 'usage' } });
    const node = admit(kubeadmNode(), USAGE).node;
    published.clear();
    const kept = admit(node, USAGE).node;
    expect(kept.status.allocatable.cpu).toBe('6800m');
    expect(kept.metadata.annotations[USAGE_ANNOTATION]).toBe('{"cpu":{"ratio":1.7,"reason":"stale"}}');
    expect(await samples(NODE_ALLOCATABLE_REASON_METRIC)).toContainEqual({ node: 'worker-1', resource: 'cpu', reason: 'stale', value: 1 });
    const plain = admit(kept, config({ defaultRatios: { cpu: 2 } })).node;
    expect(plain.status.allocatable.cpu).toBe('8');
    expect(plain.metadata.annotations[USAGE_ANNOTATION]).toBeUndefined();
  });
});

describe('per-node series: bounded, whatever the reviews carry', () => {
  const named = (name: unknown): Json => {
    const node = kubeadmNode();
    node.metadata.name = name;
    return node;
  };
  const counted = async (samples: ReturnType<typeof harness>['samples'], name: string, labels: Record<string, string>) =>
    (await samples(name)).find((s) => Object.entries(labels).every(([k, v]) => s[k] === v))?.value;

  it('a node named by an object is never exported, and the prune timer an hour later does not throw', async () => {
    vi.useFakeTimers();
    try {
      const { strategy, request, admit, samples, nodes } = harness();
      strategy.onModuleInit();
      // The envelope's name is valid; the object's name is not, and is not what the gauges are keyed on.
      const result = strategy.admit(request(kubeadmNode(), { object: named({ toString: 1 }) }), CONFIG);
      expect(result.patch).toHaveLength(4); // still inflated: only the export is skipped
      admit(kubeadmNode());
      expect(await nodes()).toEqual(['worker-1']);

      expect(() => vi.advanceTimersByTime(NODE_METRICS_TTL_MS + 60_000)).not.toThrow();
      expect(await nodes()).toEqual([]);
      expect(await counted(samples, NODE_METRICS_DROPPED_METRIC, { reason: 'silent' })).toBe(1);
      expect(await counted(samples, BACKGROUND_ERRORS, { task: 'node-metrics-prune' })).toBe(0);
      strategy.onModuleDestroy();
    } finally {
      vi.useRealTimers();
    }
  });

  it('an error in the prune timer is logged and counted, and the timer keeps running', async () => {
    vi.useFakeTimers();
    try {
      const { strategy, samples } = harness();
      const prune = vi.spyOn(strategy, 'pruneSilentNodes').mockImplementationOnce(() => {
        throw new TypeError('Cannot convert object to primitive value');
      });
      strategy.onModuleInit();
      expect(() => vi.advanceTimersByTime(60_000)).not.toThrow();
      expect(await counted(samples, BACKGROUND_ERRORS, { task: 'node-metrics-prune' })).toBe(1);
      vi.advanceTimersByTime(60_000);
      expect(prune).toHaveBeenCalledTimes(2);
      expect(await counted(samples, BACKGROUND_ERRORS, { task: 'node-metrics-prune' })).toBe(1);
      strategy.onModuleDestroy();
    } finally {
      vi.useRealTimers();
    }
  });

  it('exports only names the API server accepts for a Node (DNS-1123 subdomain, at most 253 characters)', async () => {
    for (const name of ['worker-1', 'ip-10-0-1-17.eu-west-1.compute.internal', 'a', '0', `${'a'.repeat(63)}.${'b'.repeat(189)}`]) {
      expect(isNodeName(name), name).toBe(true);
    }
    for (const name of [
      { toString: 1 },
      ['worker-1'],
      42,
      null,
      undefined,
      '',
      'Worker-1',
      '-worker',
      'worker-',
      'a..b',
      'a_b',
      'é',
      'a'.repeat(254),
      'x'.repeat(1 << 20),
    ]) {
      expect(isNodeName(name), String(JSON.stringify(name)).slice(0, 20)).toBe(false);
    }
    const { strategy, request, nodes } = harness();
    for (const name of ['x'.repeat(1 << 20), 42, { toString: 1 }]) strategy.admit(request(kubeadmNode(), { object: named(name), name: undefined }), CONFIG);
    strategy.admit(request(kubeadmNode(), { object: named(undefined), name: 'from-the-envelope' }), CONFIG);
    expect(await nodes()).toEqual(['from-the-envelope']);
  });

  it('exports at most OVERCOMMIT_NODE_METRICS_MAX_NODES nodes: the least recently admitted goes, counted', async () => {
    const { admit, samples, nodes } = harness({ OVERCOMMIT_NODE_METRICS_MAX_NODES: '3' });
    for (const name of ['a', 'b', 'c']) admit(named(name));
    admit(named('a')); // a heartbeat: a is now the most recent
    admit(named('d'));
    expect(await nodes()).toEqual(['a', 'c', 'd']);
    for (const metric of [NODE_ALLOCATABLE_RAW_METRIC, NODE_ALLOCATABLE_OVERCOMMITTED_METRIC]) {
      expect(
        (await samples(metric)).some((s) => s.node === 'b'),
        metric,
      ).toBe(false);
    }
    for (let i = 0; i < 1000; i++) admit(named(`node-${i}`));
    expect(await nodes()).toEqual(['node-997', 'node-998', 'node-999']);
    expect((await samples(NODE_ALLOCATABLE_RAW_METRIC)).length).toBe(3 * 4);
    expect(await counted(samples, NODE_METRICS_DROPPED_METRIC, { reason: 'limit' })).toBe(1001);
    expect(await counted(samples, NODE_METRICS_DROPPED_METRIC, { reason: 'silent' })).toBe(0);
  });

  it('reads OVERCOMMIT_NODE_METRICS_MAX_NODES: a positive integer, 10,000 when unset', () => {
    expect(nodeMetricsMaxNodes({})).toBe(DEFAULT_NODE_METRICS_MAX_NODES);
    expect(DEFAULT_NODE_METRICS_MAX_NODES).toBe(10_000);
    expect(nodeMetricsMaxNodes({ OVERCOMMIT_NODE_METRICS_MAX_NODES: '' })).toBe(10_000);
    expect(nodeMetricsMaxNodes({ OVERCOMMIT_NODE_METRICS_MAX_NODES: '50000' })).toBe(50_000);
    for (const bad of ['0', '-1', '1.5', 'ten', '1e400']) {
      expect(() => nodeMetricsMaxNodes({ OVERCOMMIT_NODE_METRICS_MAX_NODES: bad }), bad).toThrow(
        /OVERCOMMIT_NODE_METRICS_MAX_NODES must be a positive integer/,
      );
    }
  });
});

describe('NodeOversellModule', () => {
  it('provides the strategy with its gauges', async () => {
    const moduleRef = await Test.createTestingModule({
      imports: [TestConfigModule, KubeModule.forRoot({}), BackgroundTasksModule, UsageModule, NodeOversellModule],
    }).compile();
    const strategy = moduleRef.get(NodeOversellStrategy);
    expect(strategy).toBeInstanceOf(NodeOversellStrategy);
    for (const name of [NODE_ALLOCATABLE_RAW_METRIC, NODE_ALLOCATABLE_OVERCOMMITTED_METRIC, NODE_RATIO_METRIC]) {
      expect(name).toMatch(/^kube_overcommit_node_/);
      expect(moduleRef.get(getToken(name))).toBeInstanceOf(Gauge);
    }
    expect(moduleRef.get(getToken(NODE_METRICS_DROPPED_METRIC))).toBeInstanceOf(Counter);
    expect(
      strategy.admit(
        {
          uid: 'x',
          kind: { group: '', version: 'v1', kind: 'Node' },
          resource: { group: '', version: 'v1', resource: 'nodes' },
          operation: 'CREATE',
          object: kubeadmNode(),
        },
        CONFIG,
      ).patch,
    ).toHaveLength(4);
    await moduleRef.close();
  });
});

describe('NodeOversellStrategy on objects it cannot patch or odd quantities', () => {
  const run = (object: Json, oldObject: Json | undefined, cfg = CONFIG): StrategyResult => {
    const { strategy } = harness();
    return strategy.admit(
      {
        uid: 'x',
        kind: { group: '', version: 'v1', kind: 'Node' },
        resource: { group: '', version: 'v1', resource: 'nodes' },
        subResource: 'status',
        operation: 'UPDATE',
        object,
        oldObject,
      },
      cfg,
    );
  };

  it.each([
    ['metadata.annotations is an array', (node: Json) => (node.metadata.annotations = ['x'])],
    ['metadata.annotations is a string', (node: Json) => (node.metadata.annotations = 'x')],
    ['metadata is a string', (node: Json) => (node.metadata = 'worker-1')],
    ['metadata is an array', (node: Json) => (node.metadata = [])],
  ])('%s: throws a clear error (the pipeline admits it unchanged and counts it), never a patch that does not apply', (_, shape) => {
    const node = kubeadmNode();
    shape(node);
    expect(() => run(node, node)).toThrow(/not an object: cannot write our annotations/);
  });

  it('capacity.memory "-1": the second pass on its own output changes nothing', () => {
    const { admit } = harness();
    const before = kubeadmNode();
    before.status.capacity.memory = '-1';
    const first = admit(before, CONFIG, { oldObject: before }).node;
    expect(first.status.allocatable.cpu).toBe('6');
    expect(admit(first, CONFIG, { oldObject: before }).result).toEqual({});
  });
});
