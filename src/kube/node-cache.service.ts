import { Inject, Injectable, Logger, type OnApplicationShutdown } from '@nestjs/common';
import { CoreV1Api, KubeConfig, type V1Node } from '@kubernetes/client-node';
import type { NodeLike } from '../domain/node-like.js';
import { KUBE_ENV, inCluster } from './kube.env.js';
import { ResilientInformer, stripManagedFields } from './resilient-informer.js';

/**
 * What the Node cache keeps of a Node: all but managedFields and status.images. The image list
 * (up to the kubelet's nodeStatusMaxImages, 50 by default) is most of a Node's size, and its
 * readers use only labels, annotations, allocatable and capacity.
 */
export function trimCachedNode(node: V1Node): V1Node {
  stripManagedFields(node);
  if (node.status?.images) delete node.status.images;
  return node;
}

/** Who reads the Node cache: the pod policies' node cap, GET /plan, the reconciler and the node-policy publisher while they lead. */
export type NodeCacheUser = 'node-cap' | 'plan' | 'reconciler' | 'node-policy';

/** Told of every Node added to or updated in the Node cache, and of each of its lists. */
export interface NodeCacheListener {
  changed(node: NodeLike): void;
  listed(): void;
}

/**
 * One informer of the cluster's Nodes, held without their image lists (trimCachedNode), shared
 * by every feature that reads it, beside PodCache. It is the costly cache: with inflation every
 * node-status write comes back to each replica as a watch event, so it runs only while at
 * least one user wants it (`use`), and only in a cluster.
 *
 * RBAC: list and watch on nodes.
 */
@Injectable()
export class NodeCache implements OnApplicationShutdown {
  private readonly logger = new Logger('NodeCache');
  private readonly users = new Set<NodeCacheUser>();
  private readonly listeners = new Set<NodeCacheListener>();
  private readonly runningListeners = new Set<(running: boolean) => void>();
  private informer?: ResilientInformer<V1Node>;
  readonly available: boolean;

  constructor(
    private readonly kube: KubeConfig,
    @Inject(KUBE_ENV) env: NodeJS.ProcessEnv,
  ) {
    this.available = inCluster(env);
  }

  async onApplicationShutdown(): Promise<void> {
    this.users.clear();
    await this.informer?.stop();
  }

  /** `user` wants the cache (`on`) or no longer does: it starts with its first user and stops with its last. */
  use(user: NodeCacheUser, on: boolean): void {
    if (!this.available || on === this.users.has(user)) return;
    if (on) this.users.add(user);
    else this.users.delete(user);
    if (this.users.size > 0 && this.informer === undefined) this.start();
    if (this.users.size === 0 && this.informer !== undefined) {
      const informer = this.informer;
      this.informer = undefined;
      this.runningListeners.forEach((listener) => listener(false));
      void informer.stop();
      this.logger.log('nodes cache stopped: nothing in force reads it');
    }
  }

  /** Subscribes to the cache's events (handlers must not throw: guard them); returns the unsubscribe function. */
  onNodes(listener: NodeCacheListener): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  /** Told when the cache starts (true) and stops (false); returns the unsubscribe function. */
  onRunning(listener: (running: boolean) => void): () => void {
    this.runningListeners.add(listener);
    return () => this.runningListeners.delete(listener);
  }

  private start(): void {
    const core = this.kube.makeApiClient(CoreV1Api);
    const informer = new ResilientInformer<V1Node>(this.kube, '/api/v1/nodes', (page) => core.listNode(page), {
      description: 'nodes',
      onListed: () => this.listeners.forEach((listener) => listener.listed()),
      transform: trimCachedNode,
    });
    const changed = (node: V1Node) => this.listeners.forEach((listener) => listener.changed(node as NodeLike));
    informer.cache.on('add', changed);
    informer.cache.on('update', changed);
    this.informer = informer;
    this.runningListeners.forEach((listener) => listener(true));
    this.logger.log(`nodes cache started for ${[...this.users].join(', ')}`);
    void informer.start();
  }

  get running(): boolean {
    return this.informer !== undefined;
  }

  isSynced(): boolean {
    return this.informer?.isSynced() ?? false;
  }

  nodes(): readonly NodeLike[] {
    return (this.informer?.cache.list() ?? []) as readonly NodeLike[];
  }

  node(name: string): NodeLike | undefined {
    return this.informer?.cache.get(name) as NodeLike | undefined;
  }
}
