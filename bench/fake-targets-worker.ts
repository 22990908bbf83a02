/**
 * bench:publisher's API server: test/fixtures/node-targets-api.ts started in a worker thread, so
 * that the leader's event loop and CPU (the main thread's) hold only the publisher's work.
 * Posts the server's URL; then answers each message with what the shards hold: per shard the
 * bytes of its `data` as stored (JSON) and its entries, and the shard writes applied so far.
 */
import { parentPort } from 'node:worker_threads';
import { FakeTargetsApi } from '../test/fixtures/node-targets-api.js';

export interface ShardsReport {
  bytes: number[];
  entries: number[];
  writes: number;
}

const api = new FakeTargetsApi();
const kube = await api.start();
parentPort!.on('message', () => {
  const shards = [...api.shards.values()];
  const report: ShardsReport = {
    bytes: shards.map((shard) => Buffer.byteLength(JSON.stringify(shard.data))),
    entries: shards.map((shard) => Object.keys(shard.data).length),
    writes: api.writes.length,
  };
  parentPort!.postMessage(report);
});
parentPort!.postMessage(kube.getCurrentCluster()!.server);
