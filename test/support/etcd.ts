/**
 * Every stored version of one object, read from etcd itself (its JSON gateway, `/v3/...`): what
 * an API watch cannot give across a restart of kube-apiserver, whose new watch cache starts at
 * the revision it lists (an older resourceVersion is 410 Gone). etcd keeps running through
 * `cluster.sh restart`, so one etcd watch sees every write of the key from its start, whichever
 * API server made it. The values are readable only when kube-apiserver stores JSON
 * (`--storage-media-type=application/json`; protobuf is its default).
 *
 *   const history = await EtcdKeyHistory.start(etcdUrl, '/registry/minions/sim-node-0');
 *   ...
 *   history.stop();
 *   history.versions   // [{ revision, object }] in revision order, the version stored at the start first
 */
import http from 'node:http';

export interface StoredVersion {
  /** The etcd revision of this write (what the API calls the resourceVersion). */
  revision: number;
  /** The stored object, parsed (JSON storage). */
  object: any;
}

const base64 = (text: string) => Buffer.from(text, 'utf8').toString('base64');
const decoded = (value: string) => JSON.parse(Buffer.from(value, 'base64').toString('utf8'));

function post(etcdUrl: string, path: string, body: unknown): Promise<any> {
  return new Promise((resolve, reject) => {
    const req = http.request(new URL(path, etcdUrl), { method: 'POST', timeout: 10_000 }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => {
        const text = Buffer.concat(chunks).toString('utf8');
        if (res.statusCode !== 200) reject(new Error(`etcd ${path}: HTTP ${res.statusCode}: ${text}`));
        else resolve(JSON.parse(text));
      });
      res.on('error', reject);
    });
    req.on('timeout', () => req.destroy(new Error(`etcd ${path}: timeout`)));
    req.on('error', reject);
    req.end(JSON.stringify(body));
  });
}

export class EtcdKeyHistory {
  readonly versions: StoredVersion[] = [];
  /** A deletion of the key seen by the watch (its revision). */
  readonly deletions: number[] = [];
  private request?: http.ClientRequest;
  private failure?: Error;
  private stopped = false;

  private constructor(
    private readonly etcdUrl: string,
    private readonly key: string,
  ) {}

  /** Reads the key's current version, then watches every later write until stop(). */
  static async start(etcdUrl: string, key: string): Promise<EtcdKeyHistory> {
    const history = new EtcdKeyHistory(etcdUrl, key);
    const range = await post(etcdUrl, '/v3/kv/range', { key: base64(key) });
    const current = range.kvs?.[0];
    if (!current) throw new Error(`etcd has no key ${key}`);
    history.versions.push({ revision: Number(current.mod_revision), object: decoded(current.value) });
    await history.watch(Number(range.header.revision) + 1);
    return history;
  }

  /** The watch's stream: one JSON object per line, `{"result": {"created": true}}` first, then events. */
  private watch(startRevision: number): Promise<void> {
    return new Promise((resolve, reject) => {
      const request = http.request(new URL('/v3/watch', this.etcdUrl), { method: 'POST' }, (res) => {
        if (res.statusCode !== 200) {
          reject(new Error(`etcd /v3/watch: HTTP ${res.statusCode}`));
          return;
        }
        let pending = '';
        res.on('data', (chunk: Buffer) => {
          pending += chunk.toString('utf8');
          const lines = pending.split('\n');
          pending = lines.pop()!;
          for (const line of lines.filter((l) => l.trim())) this.onMessage(JSON.parse(line), resolve);
        });
        res.on('error', (error) => this.fail(error));
        res.on('end', () => this.fail(new Error(`etcd watch of ${this.key}: the stream ended`)));
      });
      request.on('error', (error) => {
        this.fail(error);
        reject(error);
      });
      request.end(JSON.stringify({ create_request: { key: base64(this.key), start_revision: String(startRevision) } }));
      this.request = request;
    });
  }

  private onMessage(message: any, created: () => void): void {
    const result = message.result;
    if (message.error || result?.canceled) this.fail(new Error(`etcd watch of ${this.key} ended: ${JSON.stringify(message)}`));
    if (result?.created) created();
    for (const event of result?.events ?? []) {
      // The gateway leaves out an enum's default: PUT.
      if (event.type === 'DELETE') this.deletions.push(Number(event.kv.mod_revision));
      else this.versions.push({ revision: Number(event.kv.mod_revision), object: decoded(event.kv.value) });
    }
  }

  /** Ends the watch; throws if it failed on the way (so a gap in the history cannot pass unseen). */
  stop(): void {
    this.stopped = true;
    this.request?.destroy();
    if (this.failure) throw this.failure;
  }

  /** The first failure before stop(): the history has a gap from there. */
  private fail(error: Error): void {
    if (!this.stopped) this.failure ??= error;
  }
}
