import type { KubeConfig } from '@kubernetes/client-node';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { backgroundTasks } from '../../test/fixtures/background.js';
import { kubeConfigFor } from '../../test/fixtures/kube-config.js';
import { IN_CLUSTER_ENV } from '../../test/fixtures/namespaces.js';
import { nestLogs } from '../../test/setup/nest-logs.js';
import { MAX_QUEUED_NODE_EVENTS, NodeEvents } from './node-events.service.js';

/** An API server that takes Events: each POST kept (path and body), answered 201, or 500 for the reasons in `failing`. */
class EventSink {
  readonly posts: Array<{ path: string; body: any }> = [];
  readonly failing = new Set<string>();
  private readonly server = http.createServer((req, res) => {
    let text = '';
    req.on('data', (chunk: Buffer) => (text += chunk.toString()));
    req.on('end', () => {
      const body = JSON.parse(text);
      this.posts.push({ path: req.url ?? '', body });
      const status = this.failing.has(body.reason) ? 500 : 201;
      res
        .writeHead(status, { 'content-type': 'application/json' })
        .end(JSON.stringify(status === 201 ? body : { kind: 'Status', code: 500, message: 'etcd down' }));
    });
  });

  async start(): Promise<KubeConfig> {
    await new Promise<void>((resolve) => this.server.listen(0, '127.0.0.1', resolve));
    return kubeConfigFor(`http://127.0.0.1:${(this.server.address() as AddressInfo).port}`);
  }

  async stop(): Promise<void> {
    this.server.closeAllConnections();
    await new Promise((resolve) => this.server.close(resolve));
  }

  /** Resolves once `count` Events were posted (fails after `timeout` ms without them). */
  received(count: number, timeout = 10_000): Promise<boolean> {
    return vi.waitUntil(() => this.posts.length >= count, { timeout, interval: 10 });
  }

  /** `node reason` of each Event posted, in order. */
  summary(): string[] {
    return this.posts.map(({ body }) => `${body.involvedObject.name} ${body.reason}`);
  }
}

describe('NodeEvents', () => {
  let sink: EventSink;
  afterEach(async () => {
    await sink?.stop();
  });

  it('writes each Event about a Node to the default namespace, in the order recorded, without holding the caller', async () => {
    sink = new EventSink();
    const events = new NodeEvents(await sink.start(), IN_CLUSTER_ENV, backgroundTasks());
    events.record({ name: 'worker-1', uid: 'u-1' }, 'NodeHot', 'usage above hotThreshold');
    events.record({ name: 'worker-2' }, 'NodeHot', 'usage above hotThreshold');
    expect(sink.posts).toEqual([]); // queued: written in the background
    await sink.received(2);
    expect(sink.posts.map(({ path }) => path)).toEqual(['/api/v1/namespaces/default/events', '/api/v1/namespaces/default/events']);
    expect(sink.posts[0]!.body).toMatchObject({
      metadata: { namespace: 'default' },
      involvedObject: { apiVersion: 'v1', kind: 'Node', name: 'worker-1', uid: 'u-1' },
      type: 'Normal',
      reason: 'NodeHot',
      message: 'usage above hotThreshold',
    });
    expect(sink.posts[1]!.body.involvedObject).toEqual({ apiVersion: 'v1', kind: 'Node', name: 'worker-2' });
  });

  it('drops the same Event for the same node within the repeat window, not another reason or another node', async () => {
    sink = new EventSink();
    const events = new NodeEvents(await sink.start(), IN_CLUSTER_ENV, backgroundTasks());
    events.record({ name: 'worker-1' }, 'NodeHot', 'hot');
    events.record({ name: 'worker-1' }, 'NodeHot', 'hot again');
    events.record({ name: 'worker-2' }, 'NodeHot', 'hot');
    events.record({ name: 'worker-1' }, 'NodeCooled', 'cool');
    events.record({ name: 'worker-1' }, 'NodeHot', 'hot after cooling');
    await sink.received(4);
    expect(sink.summary()).toEqual(['worker-1 NodeHot', 'worker-2 NodeHot', 'worker-1 NodeCooled', 'worker-1 NodeHot']);
    expect(sink.posts.map(({ body }) => body.message)).not.toContain('hot again');
  });

  it('logs a write that fails and goes on with the next', async () => {
    sink = new EventSink();
    sink.failing.add('NodeHot');
    const events = new NodeEvents(await sink.start(), IN_CLUSTER_ENV, backgroundTasks());
    events.record({ name: 'worker-1' }, 'NodeHot', 'hot');
    events.record({ name: 'worker-2' }, 'NodeCooled', 'cool');
    await sink.received(2);
    expect(sink.summary()).toEqual(['worker-1 NodeHot', 'worker-2 NodeCooled']);
    expect(nestLogs('warn').map((line) => line.message)).toEqual([expect.stringMatching(/^could not record Event NodeHot on node worker-1: .*500/)]);
  });

  it(`keeps at most ${MAX_QUEUED_NODE_EVENTS} Events waiting: the next one is dropped and logged`, async () => {
    sink = new EventSink();
    const events = new NodeEvents(await sink.start(), IN_CLUSTER_ENV, backgroundTasks());
    // Recorded in one go: nothing is written before the background drain starts.
    for (let i = 0; i <= MAX_QUEUED_NODE_EVENTS; i++) events.record({ name: `node-${i}` }, 'NodeHot', 'hot');
    expect(nestLogs('warn').map((line) => line.message)).toEqual([
      `node node-${MAX_QUEUED_NODE_EVENTS}: Event NodeHot dropped, ${MAX_QUEUED_NODE_EVENTS} already waiting to be written`,
    ]);
    // Written once there is room again.
    await sink.received(MAX_QUEUED_NODE_EVENTS, 100_000);
    events.record({ name: 'late' }, 'NodeHot', 'hot');
    await sink.received(MAX_QUEUED_NODE_EVENTS + 1);
    const written = sink.posts.map(({ body }) => body.involvedObject.name);
    expect(written).toHaveLength(MAX_QUEUED_NODE_EVENTS + 1);
    expect(written.at(-1)).toBe('late');
    expect(written).not.toContain(`node-${MAX_QUEUED_NODE_EVENTS}`);
  }, 120_000);

  it('records nothing outside a cluster', async () => {
    sink = new EventSink();
    const kube = await sink.start();
    new NodeEvents(kube, {}, backgroundTasks()).record({ name: 'worker-1' }, 'NodeHot', 'outside');
    // The same sink, in a cluster: once its Event is written, the first one would have been too.
    new NodeEvents(kube, IN_CLUSTER_ENV, backgroundTasks()).record({ name: 'worker-1' }, 'NodeHot', 'inside');
    await sink.received(1);
    expect(sink.posts.map(({ body }) => body.message)).toEqual(['inside']);
  });
});
