import { Inject, Injectable, Logger } from '@nestjs/common';
import { CoreV1Api, KubeConfig, type CoreV1Event } from '@kubernetes/client-node';
import { BackgroundTasks } from '../common/background-tasks.js';
import { describeApiError } from '../kube/api-error.js';
import { eventAbout } from '../kube/events.js';
import { KUBE_ENV, inCluster } from '../kube/kube.env.js';
import type { NodeEventRecorder } from '../domain/node-rules/node-services.js';

/** Events waiting to be written at most; past it a new one is dropped (logged): a flood of transitions must not grow memory. */
export const MAX_QUEUED_NODE_EVENTS = 1000;

/** Where Events about cluster-scoped objects go: the API server accepts no other namespace for them. */
const CLUSTER_SCOPED_EVENTS_NAMESPACE = 'default';

/**
 * The same Event for the same node again within this window is dropped: two writes of one Node at
 * once (a kubelet's and the reconciler's nudge) are each admitted, and one again after its
 * conflict, before either is stored, so one transition can be seen twice.
 */
export const REPEAT_WINDOW_MS = 30_000;

/**
 * Queues Node Events and writes them one at a time in the background (task `node-events`), so
 * an admission never waits on an API call; a repeat within REPEAT_WINDOW_MS is dropped. Outside a
 * cluster it records nothing. A write that
 * fails is logged and the Event dropped: Events are informational, the decision they report
 * is also in the node's annotations and gauges.
 *
 * RBAC: create on events (in `default`, where Events about Nodes live).
 */
@Injectable()
export class NodeEvents implements NodeEventRecorder {
  private readonly logger = new Logger('NodeEvents');
  private readonly queue: CoreV1Event[] = [];
  private readonly core?: CoreV1Api;
  private readonly server?: string;
  private readonly drainInBackground: () => void;
  private draining = false;
  /** The last Event recorded per node, at most MAX_QUEUED_NODE_EVENTS nodes (the oldest go). */
  private readonly recent = new Map<string, { reason: string; at: number }>();

  constructor(kube: KubeConfig, @Inject(KUBE_ENV) env: NodeJS.ProcessEnv, background: BackgroundTasks) {
    if (inCluster(env)) this.core = kube.makeApiClient(CoreV1Api);
    this.server = kube.getCurrentCluster()?.server;
    this.drainInBackground = background.guard('node-events', () => this.drain());
  }

  record(node: { name: string; uid?: string }, reason: string, message: string): void {
    if (this.core === undefined) return;
    const now = Date.now();
    const last = this.recent.get(node.name);
    if (last?.reason === reason && now - last.at < REPEAT_WINDOW_MS) return;
    this.recent.delete(node.name);
    this.recent.set(node.name, { reason, at: now });
    if (this.recent.size > MAX_QUEUED_NODE_EVENTS) this.recent.delete(this.recent.keys().next().value!);
    if (this.queue.length >= MAX_QUEUED_NODE_EVENTS) {
      this.logger.warn(`node ${node.name}: Event ${reason} dropped, ${MAX_QUEUED_NODE_EVENTS} already waiting to be written`);
      return;
    }
    const object = { apiVersion: 'v1', kind: 'Node', name: node.name, ...(node.uid ? { uid: node.uid } : {}) };
    this.queue.push(eventAbout(object, CLUSTER_SCOPED_EVENTS_NAMESPACE, 'Normal', reason, message));
    if (!this.draining) setImmediate(this.drainInBackground);
  }

  private async drain(): Promise<void> {
    if (this.draining) return;
    this.draining = true;
    try {
      for (let event = this.queue.shift(); event !== undefined; event = this.queue.shift()) {
        try {
          await this.core!.createNamespacedEvent({ namespace: CLUSTER_SCOPED_EVENTS_NAMESPACE, body: event });
        } catch (error) {
          this.logger.warn(`could not record Event ${event.reason} on node ${event.involvedObject.name}: ${describeApiError(error, this.server)}`);
        }
      }
    } finally {
      this.draining = false;
    }
  }
}
