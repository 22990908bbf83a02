import { randomBytes } from 'node:crypto';
import type { CoreV1Event, V1ObjectReference } from '@kubernetes/client-node';

/**
 * A core/v1 Event about `object`, as this webhook reports it (one occurrence, count 1), in
 * `namespace`: the object's own, or `default` for a cluster-scoped object such as a Node (the
 * API server accepts no other namespace for those).
 */
export function eventAbout(
  object: V1ObjectReference & { name: string },
  namespace: string,
  type: 'Normal' | 'Warning',
  reason: string,
  message: string,
): CoreV1Event {
  const now = new Date();
  return {
    metadata: { name: `${object.name}.${randomBytes(8).toString('hex')}`, namespace },
    involvedObject: object,
    type,
    reason,
    message: message.slice(0, 1024),
    source: { component: 'kube-overcommit' },
    reportingComponent: 'kube-overcommit',
    reportingInstance: process.env.POD_NAME ?? process.env.HOSTNAME ?? 'kube-overcommit',
    firstTimestamp: now,
    lastTimestamp: now,
    count: 1,
  };
}
