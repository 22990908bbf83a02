import { KubeConfig, type KubernetesObject, type V1Node, Watch } from '@kubernetes/client-node';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { LIST_PAGE_SIZE, type ListPage, ResilientInformer, stripManagedFields, TransformingWatch } from './resilient-informer.js';

/** A transform as the pod-policy Node cache has one: managedFields and the image list dropped. */
function trimNode(node: V1Node): V1Node {
  stripManagedFields(node);
  delete node.status?.images;
  return node;
}

const managedFields = [{ manager: 'kubelet', operation: 'Update', fieldsType: 'FieldsV1', fieldsV1: { 'f:status': {} } }];

function node(name: string, resourceVersion: string): V1Node {
  return {
    apiVersion: 'v1',
    kind: 'Node',
    metadata: { name, resourceVersion, labels: { pool: 'a' }, annotations: { note: 'x' }, managedFields },
    status: {
      allocatable: { cpu: '4' },
      capacity: { cpu: '4' },
      images: [{ names: ['registry.k8s.io/pause:3.10'], sizeBytes: 320000 }],
      conditions: [{ type: 'Ready', status: 'True' }],
    },
  };
}

/**
 * A watch endpoint on a local port, for client-node's Watch (which needs a server to read a
 * stream from): answers every `?watch=true` GET with `events` as JSON lines, then ends the
 * stream, or with `keepOpen` leaves it open as the API server does.
 */
async function watchServer(events: { type: string; object: unknown }[], { keepOpen = false } = {}) {
  const server = http.createServer((req, res) => {
    res.writeHead(200, { 'content-type': 'application/json' });
    if (new URL(req.url ?? '', 'http://x').searchParams.get('watch') !== 'true') return res.end('{}');
    res.flushHeaders();
    for (const event of events) res.write(`${JSON.stringify(event)}\n`);
    if (!keepOpen) res.end();
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const kube = new KubeConfig();
  // client-node refuses plain http unless TLS verification is explicitly off.
  kube.loadFromOptions({
    clusters: [{ name: 'local', server: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, skipTLSVerify: true }],
    users: [{ name: 'nobody' }],
    contexts: [{ name: 'local', cluster: 'local', user: 'nobody' }],
    currentContext: 'local',
  });
  const close = () => {
    server.closeAllConnections();
    return new Promise<void>((resolve) => server.close(() => resolve()));
  };
  return { kube, close };
}

let cleanup: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const step of cleanup.reverse()) await step();
  cleanup = [];
});

describe('stripManagedFields', () => {
  it('drops managedFields and nothing else; an object without them stays as it is', () => {
    const pod = stripManagedFields({
      metadata: { name: 'p', namespace: 'n', resourceVersion: '7', managedFields },
      spec: { nodeName: 'a' },
    } as KubernetesObject);
    expect(pod).toEqual({ metadata: { name: 'p', namespace: 'n', resourceVersion: '7' }, spec: { nodeName: 'a' } });
    expect(stripManagedFields({ metadata: { name: 'bare' } })).toEqual({ metadata: { name: 'bare' } });
    expect(stripManagedFields({} as KubernetesObject)).toEqual({});
  });
});

describe('TransformingWatch', () => {
  it('transforms the objects of ADDED, MODIFIED and DELETED events, and nothing else', async () => {
    const server = await watchServer([
      { type: 'ADDED', object: node('a', '1') },
      { type: 'MODIFIED', object: node('a', '2') },
      { type: 'BOOKMARK', object: { kind: 'Node', metadata: { resourceVersion: '3', managedFields } } },
      { type: 'DELETED', object: node('a', '4') },
    ]);
    cleanup.push(server.close);
    const seen: { phase: string; object: any }[] = [];
    await new Promise<void>((resolve, reject) => {
      void new TransformingWatch<V1Node>(server.kube, trimNode)
        .watch(
          '/api/v1/nodes',
          {},
          (phase, object) => seen.push({ phase, object }),
          (error) => (error ? reject(error) : resolve()),
        )
        .catch(reject);
    });
    expect(seen.map((e) => e.phase)).toEqual(['ADDED', 'MODIFIED', 'BOOKMARK', 'DELETED']);
    for (const { phase, object } of seen.filter((e) => e.phase !== 'BOOKMARK')) {
      expect(object.metadata.managedFields, phase).toBeUndefined();
      expect(object.status.images, phase).toBeUndefined();
      expect(object.status.allocatable, phase).toEqual({ cpu: '4' });
    }
    expect(seen[2].object.metadata.managedFields).toEqual(managedFields);
  });
});

describe('ResilientInformer', () => {
  it('caches list items and watch events through its transform (managedFields stripped by default)', async () => {
    const server = await watchServer([{ type: 'ADDED', object: node('b', '6') }], { keepOpen: true });
    cleanup.push(server.close);
    const listed = { metadata: { resourceVersion: '5' }, items: [node('a', '5')] };

    const nodes = new ResilientInformer<V1Node>(server.kube, '/api/v1/nodes', async () => structuredClone(listed), {
      description: 'nodes',
      transform: trimNode,
    });
    cleanup.push(() => nodes.stop());
    const added = new Promise<void>((resolve) => nodes.cache.on('add', (object) => object.metadata?.name === 'b' && resolve()));
    await nodes.start();
    await added;
    expect(nodes.isSynced()).toBe(true);
    for (const name of ['a', 'b']) {
      const cached = nodes.cache.get(name)!;
      expect(cached.metadata?.managedFields, name).toBeUndefined();
      expect(cached.status?.images, name).toBeUndefined();
      expect(cached.metadata?.labels, name).toEqual({ pool: 'a' });
    }

    const plain = new ResilientInformer<V1Node>(server.kube, '/api/v1/nodes', async () => structuredClone(listed), { description: 'nodes' });
    cleanup.push(() => plain.stop());
    await plain.start();
    expect(plain.cache.get('a')?.metadata?.managedFields).toBeUndefined();
    expect(plain.cache.get('a')?.status?.images).toHaveLength(1);
  });

  it('lists in pages of LIST_PAGE_SIZE, following continue, each page transformed before the next is asked for', async () => {
    const server = await watchServer([], { keepOpen: true });
    cleanup.push(server.close);
    const total = 2 * LIST_PAGE_SIZE + 3;
    const pages: ListPage[] = [];
    let transformedBeforeLast = 0;
    let transformed = 0;
    const list = async (page: ListPage) => {
      pages.push(page);
      if (pages.length === 3) transformedBeforeLast = transformed;
      const start = Number(page._continue ?? 0);
      const end = Math.min(total, start + page.limit);
      const items = Array.from({ length: end - start }, (_, i) => node(`n-${start + i}`, '9'));
      return { metadata: { resourceVersion: '9', ...(end < total ? { _continue: String(end) } : {}) }, items };
    };
    const nodes = new ResilientInformer<V1Node>(server.kube, '/api/v1/nodes', list, {
      description: 'nodes',
      transform: (object) => {
        transformed++;
        return trimNode(object);
      },
    });
    cleanup.push(() => nodes.stop());
    await nodes.start();

    expect(pages).toEqual([
      { limit: LIST_PAGE_SIZE },
      { limit: LIST_PAGE_SIZE, _continue: String(LIST_PAGE_SIZE) },
      { limit: LIST_PAGE_SIZE, _continue: String(2 * LIST_PAGE_SIZE) },
    ]);
    expect(transformedBeforeLast).toBe(2 * LIST_PAGE_SIZE);
    expect(nodes.isSynced()).toBe(true);
    expect(nodes.cache.list()).toHaveLength(total);
    expect(nodes.cache.get(`n-${total - 1}`)?.status?.images).toBeUndefined();
    expect(nodes.cache.get('n-0')?.metadata?.managedFields).toBeUndefined();
  });

  it('stopped while its list is in flight, opens no watch when the list answers', async () => {
    let watches = 0;
    const server = await watchServer([], { keepOpen: true });
    cleanup.push(server.close);
    let answerList!: () => void;
    const listAnswered = new Promise<void>((resolve) => (answerList = resolve));
    let listAsked!: () => void;
    const listStarted = new Promise<void>((resolve) => (listAsked = resolve));
    const nodes = new ResilientInformer<V1Node>(
      server.kube,
      '/api/v1/nodes',
      async () => {
        listAsked();
        await listAnswered;
        return { metadata: { resourceVersion: '3' }, items: [node('a', '3')] };
      },
      { description: 'nodes' },
    );
    const opened = vi.spyOn(Watch.prototype, 'watch').mockImplementation(async () => {
      watches++;
      return new AbortController();
    });
    cleanup.push(async () => opened.mockRestore());
    const starting = nodes.start();
    await listStarted;
    await nodes.stop();
    answerList();
    await starting;
    expect(watches).toBe(0);
    expect(nodes.isSynced()).toBe(true);

    // A started informer does open its watch (the spy counts it).
    const other = new ResilientInformer<V1Node>(server.kube, '/api/v1/nodes', async () => ({ metadata: { resourceVersion: '3' }, items: [] }), {
      description: 'nodes',
    });
    cleanup.push(() => other.stop());
    await other.start();
    expect(watches).toBe(1);
  });
});
