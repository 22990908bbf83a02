import { Counter, Gauge, Registry } from 'prom-client';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { backgroundTasks } from '../../test/fixtures/background.js';
import { configStore } from '../../test/fixtures/config-store.js';
import { KnownNodes } from '../../test/fixtures/known-nodes.js';
import { IN_CLUSTER_ENV } from '../../test/fixtures/namespaces.js';
import { DISCOVERY_PATH, type Failure, FakeTargetsApi, POLICY_PATH, shardConfigMap } from '../../test/fixtures/node-targets-api.js';
import { kubeadmNode } from '../../test/fixtures/nodes.js';
import { nestLogs } from '../../test/setup/nest-logs.js';
import type { NodeLike } from '../domain/node-like.js';
import {
  NODE_POLICY_ACTIVE_METRIC,
  NODE_POLICY_LEADER_METRIC,
  NODE_POLICY_PATH_CHECKS_METRIC,
  NODE_TARGET_DRIFT_METRIC,
  NODE_TARGET_PLANS_METRIC,
  NODE_TARGET_WRITES_METRIC,
  NODE_TARGETS_METRIC,
  type NodePolicyTiming,
  NodeTargetsPublisher,
} from './node-policy.service.js';
import { shardOf } from './node-targets.rules.js';

/** The publisher's timing, shortened: a look-up every 400 ms, retried after 40, 80, 160 ... ms. */
const TIMING: Partial<NodePolicyTiming> = {
  debounceMs: 20,
  resyncMs: 300,
  detectMs: 400,
  detectRetryMs: 40,
  requestTimeoutMs: 150,
  lease: { leaseDurationMs: 1_000, renewDeadlineMs: 600, retryPeriodMs: 100 },
};

const CONFIG = 'nodes:\n  defaultRatios: { cpu: 1.5 }\n';

const node = (name: string, uid = `uid-${name}`): NodeLike => {
  const shaped = kubeadmNode({ name, images: 0 });
  return { ...shaped, metadata: { ...shaped.metadata, uid } };
};

describe('NodeTargetsPublisher against a fake API server', () => {
  const running: Array<() => Promise<void>> = [];
  afterEach(async () => {
    for (const stop of running.splice(0).reverse()) await stop();
  });

  /** The fake API server, `nodes` in the cache, and `replicas` publishers (pods replica-0, replica-1 ...) started against it. */
  async function cluster(
    nodes: NodeLike[],
    {
      replicas = 1,
      config = CONFIG,
      before,
      timing,
    }: { replicas?: number; config?: string; before?: (api: FakeTargetsApi) => void; timing?: Partial<NodePolicyTiming> } = {},
  ) {
    const api = new FakeTargetsApi();
    before?.(api);
    const kube = await api.start();
    running.push(() => api.stop());
    const cache = new KnownNodes(nodes);
    const store = configStore(config);
    const started = [];
    for (let i = 0; i < replicas; i++) {
      const registry = new Registry();
      const gauge = (name: string, labelNames: string[] = []) => new Gauge({ name, help: 'h', labelNames, registers: [registry] });
      const counter = (name: string, labelNames: string[]) => new Counter({ name, help: 'h', labelNames, registers: [registry] });
      const publisher = new NodeTargetsPublisher(
        kube,
        { ...IN_CLUSTER_ENV, POD_NAME: `replica-${i}` },
        store,
        cache as never,
        { isSynced: () => true, onListed: () => () => {} } as never,
        { committed: () => undefined },
        { published: () => undefined, onRead: () => () => {} },
        backgroundTasks(),
        gauge(NODE_POLICY_ACTIVE_METRIC),
        gauge(NODE_TARGETS_METRIC, ['state']),
        counter(NODE_TARGET_WRITES_METRIC, ['result']),
        counter(NODE_POLICY_PATH_CHECKS_METRIC, ['answer']),
        gauge(NODE_POLICY_LEADER_METRIC),
        counter(NODE_TARGET_DRIFT_METRIC, ['kind']),
        counter(NODE_TARGET_PLANS_METRIC, ['how']),
        { ...TIMING, ...timing },
      );
      const metric = async (name: string, labels: Record<string, string> = {}) =>
        (await registry.getSingleMetric(name)!.get()).values.find((v) => Object.entries(labels).every(([k, value]) => v.labels[k] === value))?.value;
      let stopped = false;
      const stop = async () => {
        if (stopped) return;
        stopped = true;
        await publisher.onApplicationShutdown();
      };
      running.push(stop);
      publisher.onModuleInit();
      started.push({ publisher, metric, stop, identity: `replica-${i}` });
    }
    return { api, cache, store, replicas: started };
  }

  const until = (what: () => boolean | Promise<boolean>, timeout = 5_000) => vi.waitUntil(what, { timeout, interval: 10 });

  describe('the path moves to the webhook alone only on a definite answer', () => {
    it('the policy found: every node’s entry published, the path gauge 1', async () => {
      const { api, replicas } = await cluster([node('a'), node('b')]);
      await until(() => api.entries().size === 2);
      expect([...api.entries().keys()].sort()).toEqual(['a', 'b']);
      expect(await replicas[0]!.metric(NODE_POLICY_ACTIVE_METRIC)).toBe(1);
      expect(nestLogs('log').map((l) => l.message)).toContain(
        'node status path: the MutatingAdmissionPolicy kube-overcommit-nodes, the webhook for what it cannot decide',
      );
    });

    const definite: Array<[string, (api: FakeTargetsApi) => void, RegExp]> = [
      ['the policy absent (404)', (api) => (api.policyInstalled = false), /could not be read: .* answered 404/],
      [
        'the policy unreadable (403: the component’s RBAC absent)',
        (api) => api.fail(POLICY_PATH, 403),
        /answered 403.*the component k8s\/node-policy.* is not installed/,
      ],
      ['MutatingAdmissionPolicy not served (discovery lists no such resource)', (api) => (api.served = false), /the API server, v1\.35\.4, does not serve/],
      ['admissionregistration.k8s.io/v1 not served (404 for its discovery)', (api) => api.fail(DISCOVERY_PATH, 404), /does not serve admissionregistration/],
    ];
    for (const [what, answer, why] of definite) {
      it(`${what}: the webhook alone, every entry withdrawn`, async () => {
        const { api, replicas } = await cluster([node('a'), node('b')]);
        await until(() => api.entries().size === 2);
        answer(api);
        await until(() => api.entries().size === 0);
        expect(await replicas[0]!.metric(NODE_POLICY_ACTIVE_METRIC)).toBe(0);
        expect(await replicas[0]!.metric(NODE_POLICY_PATH_CHECKS_METRIC, { answer: 'webhook-only' })).toBeGreaterThanOrEqual(1);
        expect(
          nestLogs('log')
            .map((l) => String(l.message))
            .find((m) => m.startsWith('node status path: the webhook alone')),
        ).toMatch(why);
      });
    }

    it('the webhook alone without the component (no policy, no shard): nothing written, no drift counted at the resyncs', async () => {
      const { api, replicas } = await cluster([node('a')], {
        before: (api) => {
          api.policyInstalled = false;
          api.shards.clear();
        },
      });
      // The shards read (each answered 404) at three resyncs.
      await until(() => api.count('GET /api/v1/namespaces/kube-overcommit/configmaps/kube-overcommit-node-targets-00') >= 3);
      expect(api.writes).toEqual([]);
      expect(await replicas[0]!.metric(NODE_TARGET_DRIFT_METRIC, { kind: 'shard-missing' })).toBe(0);
      expect(await replicas[0]!.metric(NODE_POLICY_ACTIVE_METRIC)).toBe(0);
    });

    it('nodes.admissionPolicy: false: the webhook alone, every entry withdrawn, without asking the API server', async () => {
      const { api, store } = await cluster([node('a')]);
      await until(() => api.entries().size === 1);
      const lookups = api.count(`GET ${POLICY_PATH}`);
      expect(store.apply('nodes:\n  defaultRatios: { cpu: 1.5 }\n  admissionPolicy: false\n', 'test').ok).toBe(true);
      await until(() => api.entries().size === 0);
      expect(api.count(`GET ${POLICY_PATH}`)).toBe(lookups);
    });

    const indefinite: Array<[string, string, Failure]> = [
      ['429 Too Many Requests', POLICY_PATH, 429],
      ['a timeout (the API server never answers)', POLICY_PATH, 'timeout'],
      ['a connection reset', POLICY_PATH, 'reset'],
      ['503 from discovery (an API server restarting)', DISCOVERY_PATH, 503],
    ];
    for (const [what, path, failure] of indefinite) {
      it(`${what}: the policy path kept, no entry withdrawn, the look-up retried with backoff until it answers`, async () => {
        const { api, replicas } = await cluster([node('a'), node('b')]);
        await until(() => api.entries().size === 2);
        const writes = api.writes.length;
        api.fail(path, failure);
        // Several look-ups fail: retried 40, 80, 160, 320 ms after each, then every 400 ms.
        await until(async () => ((await replicas[0]!.metric(NODE_POLICY_PATH_CHECKS_METRIC, { answer: 'unknown' })) ?? 0) >= 5);
        api.heal(path);
        const answered = (await replicas[0]!.metric(NODE_POLICY_PATH_CHECKS_METRIC, { answer: 'policy' }))!;
        await until(async () => (await replicas[0]!.metric(NODE_POLICY_PATH_CHECKS_METRIC, { answer: 'policy' }))! > answered);

        expect(api.writes.length, 'no shard written').toBe(writes);
        expect([...api.entries().keys()].sort()).toEqual(['a', 'b']);
        expect(await replicas[0]!.metric(NODE_POLICY_ACTIVE_METRIC)).toBe(1);
        expect(await replicas[0]!.metric(NODE_POLICY_PATH_CHECKS_METRIC, { answer: 'webhook-only' })).toBe(0);
        const retries = nestLogs('warn')
          .map((l) => String(l.message))
          .filter((m) => m.startsWith('could not tell which path serves node status writes'));
        expect(retries[0]).toMatch(/keeping the policy path; asking again in 40 ms$/);
        expect(retries.slice(0, 5).map((m) => Number(/asking again in (\d+) ms$/.exec(m)?.[1]))).toEqual([40, 80, 160, 320, 400]);
      });
    }

    it('no definite answer at start-up: nothing published or withdrawn until one comes', async () => {
      const { api } = await cluster([node('a')], {
        before: (api) => {
          api.editShard('kube-overcommit-node-targets-03', { left: 'from an earlier leader' });
          api.fail(POLICY_PATH, 429);
        },
      });
      await until(() => api.holder() === 'replica-0' && api.count(`GET ${POLICY_PATH}`) >= 4);
      expect(api.writes).toEqual([]);
      expect(nestLogs('warn').map((l) => String(l.message))).toContainEqual(expect.stringMatching(/keeping none decided yet, nothing published or withdrawn/));
      api.heal(POLICY_PATH);
      await until(() => api.entries().has('a') && !api.entries().has('left'));
      expect([...api.entries().keys()]).toEqual(['a']);
    });
  });

  describe('the leader keeps the shards as planned', () => {
    const drift = async (replica: { metric: (name: string, labels?: Record<string, string>) => Promise<number | undefined> }, kind: string) =>
      (await replica.metric(NODE_TARGET_DRIFT_METRIC, { kind })) ?? 0;
    const entryOf = (api: FakeTargetsApi, name: string) => api.entries().get(name)?.split('\n');

    it('leader change: the new leader reads the shards and rewrites nothing unchanged; only the leader writes; a deposed leader’s late write is undone within one resync', async () => {
      const { api, cache, replicas } = await cluster([node('a'), node('b')], { replicas: 2 });
      const [first, second] = replicas as [(typeof replicas)[0], (typeof replicas)[0]];
      await until(() => api.entries().size === 2);
      const leader = api.holder();
      const [old, next] = leader === first.identity ? [first, second] : [second, first];
      const published = api.entries();
      expect(await old.metric(NODE_POLICY_LEADER_METRIC)).toBe(1);
      expect(await next.metric(NODE_POLICY_LEADER_METRIC)).toBe(0);
      await old.stop(); // releases the Lease: the other replica takes it at its next try
      await until(() => api.holder() === next.identity);
      await until(async () => (await next.metric(NODE_POLICY_LEADER_METRIC)) === 1);
      const writes = api.writes.length;
      // Two resyncs of the new leader: the entries, their valid-until included, are the published ones.
      await new Promise((resolve) => setTimeout(resolve, 2 * TIMING.resyncMs! + 100));
      expect(api.writes.length, 'writes after the leader change with nothing changed').toBe(writes);
      expect(api.entries()).toEqual(published);
      // A change is written by the new leader alone.
      cache.set({ ...node('a'), status: { ...node('a').status, allocatable: { ...node('a').status!.allocatable, cpu: '2' } } });
      await until(() => entryOf(api, 'a')?.[1] === 'cpu 2 4 3 2');
      expect(api.writes.slice(writes).filter((w) => w.holder !== next.identity)).toEqual([]);
      // The deposed leader's late PATCH of what it planned before: undone at the new leader's next resync.
      const late = api.entries().get('a')!.replace('cpu 2 4 3 2', 'cpu 4 4 6 4');
      api.editShard(shardConfigMap(shardOf('a')), { a: late });
      await until(() => entryOf(api, 'a')?.[1] === 'cpu 2 4 3 2', 2 * TIMING.resyncMs! + 500);
      expect(await drift(next, 'entry')).toBe(1);
    });

    it('an external edit (an entry bent, one added, one removed) is written back within one resync and counted', async () => {
      const { api, replicas } = await cluster([node('a'), node('b'), node('c')]);
      await until(() => api.entries().size === 3);
      const planned = api.entries();
      const shardA = shardConfigMap(shardOf('a'));
      const shardB = shardConfigMap(shardOf('b'));
      api.editShard(shardA, { a: planned.get('a')!.replace(/^cpu 4 4 6 4$/m, 'cpu 4 4 40 4'), intruder: planned.get('a')! });
      api.editShard(shardB, { b: null });
      // Written back as planned (the bent and the removed entries with a new valid-until: their body was not the published one).
      const bodies = (entries: Map<string, string>) => new Map([...entries].map(([name, entry]) => [name, entry.split('\n').slice(0, -1)]));
      await until(() => api.entries().size === 3 && entryOf(api, 'a')?.[1] === 'cpu 4 4 6 4', 2 * TIMING.resyncMs! + 500);
      expect(bodies(api.entries())).toEqual(bodies(planned));
      // The untouched entry kept its valid-until; the removed one is published anew.
      expect(api.entries().get('c')).toBe(planned.get('c'));
      expect(await drift(replicas[0]!, 'entry')).toBe(3);
      expect(nestLogs('warn').map((l) => String(l.message))).toContainEqual(
        expect.stringMatching(/entries changed by another writer; writing the planned ones back/),
      );
    });

    it('a shard deleted: counted, the other shards still published; created again (empty, as the manifests create it): refilled within one resync', async () => {
      const names = ['a', 'b', 'c', 'd', 'e'];
      const { api, cache, replicas } = await cluster(names.map((n) => node(n)));
      await until(() => api.entries().size === names.length);
      const gone = shardConfigMap(shardOf('a'));
      const elsewhere = names.find((n) => shardConfigMap(shardOf(n)) !== gone)!;
      api.shards.delete(gone);
      await until(async () => (await drift(replicas[0]!, 'shard-missing')) >= 1, 2 * TIMING.resyncMs! + 500);
      expect(nestLogs('warn').map((l) => String(l.message))).toContain(
        `${gone} is gone: the webhook serves its nodes until it is created again (k8s/node-policy)`,
      );
      cache.set({ ...node(elsewhere), status: { ...node(elsewhere).status, allocatable: { ...node(elsewhere).status!.allocatable, cpu: '3' } } });
      await until(() => entryOf(api, elsewhere)?.[1] === 'cpu 3 4 4500m 3');
      api.createShard(gone);
      await until(() => api.entries().size === names.length, 2 * TIMING.resyncMs! + 500);
      expect(entryOf(api, 'a')?.[1]).toBe('cpu 4 4 6 4');
      expect(await replicas[0]!.metric(NODE_TARGET_WRITES_METRIC, { result: 'error' })).toBe(0);
    });

    it('a node deleted and created again with the same name: its entry removed, then published for the new Node’s uid', async () => {
      const { api, cache } = await cluster([node('a', 'uid-1'), node('b')]);
      await until(() => entryOf(api, 'a')?.[12] === 'uid-1');
      cache.remove('a');
      await until(() => !api.entries().has('a'));
      cache.set(node('a', 'uid-2'));
      await until(() => entryOf(api, 'a')?.[12] === 'uid-2');
      // A cache that saw only the new Node (its delete missed, a relist): the entry follows the uid all the same.
      cache.set(node('a', 'uid-3'));
      await until(() => entryOf(api, 'a')?.[12] === 'uid-3');
      expect(api.entries().get('a')!.split('\n')).toHaveLength(14);
    });

    it('a publication plans again only the node that changed; a config edit plans every node (rule 9)', async () => {
      const names = ['a', 'b', 'c', 'd', 'e'];
      const { api, cache, store, replicas } = await cluster(names.map((name) => node(name)));
      const plans = async () => ({
        planned: (await replicas[0]!.metric(NODE_TARGET_PLANS_METRIC, { how: 'planned' })) ?? 0,
        reused: (await replicas[0]!.metric(NODE_TARGET_PLANS_METRIC, { how: 'reused' })) ?? 0,
      });
      await until(() => api.entries().size === 5);
      expect((await plans()).planned).toBe(5);
      const shaped = node('c');
      cache.set({ ...shaped, status: { ...shaped.status, allocatable: { ...shaped.status!.allocatable, cpu: '3' } } });
      await until(() => entryOf(api, 'c')?.[1]?.startsWith('cpu 3 ') === true);
      const after = await plans();
      expect(after.planned).toBe(6);
      expect(after.reused % 4).toBe(0); // every publication since reused the four others, resyncs' too
      expect(store.apply('nodes:\n  defaultRatios: { cpu: 2 }\n', 'test').ok).toBe(true);
      await until(() => entryOf(api, 'a')?.[1] === 'cpu 4 4 8 4');
      expect((await plans()).planned).toBe(11);
    });

    it('valid-until: kept across resyncs while more than half the validity is left, then renewed; so the shards are not rewritten at every resync', async () => {
      const { api } = await cluster([node('a')], { timing: { entryValidityMs: 4_000 } });
      await until(() => api.entries().has('a'));
      const first = entryOf(api, 'a')![13]!;
      const writes = api.writes.length;
      const requests = api.requests.length;
      await new Promise((resolve) => setTimeout(resolve, 1_500)); // 5 resyncs, less than half the validity
      expect(entryOf(api, 'a')![13]).toBe(first);
      expect(api.writes.length).toBe(writes);
      // Each resync read the shards' resourceVersions alone: no shard had changed.
      const reads = api.requests.slice(requests).filter((r) => r.request.includes('/configmaps/'));
      expect(reads.length).toBeGreaterThanOrEqual(4 * 16);
      expect(reads.filter((r) => !r.request.endsWith(' (metadata)'))).toEqual([]);
      await until(() => entryOf(api, 'a')![13] !== first, 3_000);
      expect(Date.parse(entryOf(api, 'a')![13]!) - Date.parse(first)).toBeGreaterThanOrEqual(1_000);
      expect(api.writes.length).toBe(writes + 1);
    });
  });
});
