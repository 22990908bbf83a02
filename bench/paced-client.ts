/**
 * An open-loop, fixed-rate HTTPS load client for one prebuilt POST: request i is due at
 * start + i/rate and goes out on an idle keep-alive connection as soon as it is due (or waits in
 * a queue when all `connections` are busy, as in any client's connection pool), whatever the
 * earlier ones are doing. HTTP/1.1 over raw TLS sockets with a minimal response parser (the servers
 * answer with Content-Length), so that the client costs little CPU next to the server on a small
 * machine; node:https costs about twice as much per request.
 */
import { performance } from 'node:perf_hooks';
import tls from 'node:tls';

export interface PacedResponse {
  status: number;
  body: string;
  /** When the request was due (start + i/rate), sent, and answered: performance.now() ms. */
  due: number;
  sent: number;
  done: number;
}

export interface PacedOptions {
  url: string;
  body: Buffer;
  rate: number;
  seconds: number;
  connections: number;
  /** Per-request deadline, ms. */
  timeoutMs?: number;
  onResponse(response: PacedResponse): void;
  /** A request lost: `cause` says how (the socket error's code, the connection closed, no answer in time). */
  onError(kind: 'error' | 'timeout', cause: string): void;
}

interface Conn {
  socket: tls.TLSSocket;
  busy: boolean;
  due: number;
  sent: number;
  chunks: Buffer[];
  length: number;
}

const HEADER_END = Buffer.from('\r\n\r\n');

/** Runs the paced load; resolves once every request sent has been answered or failed. Returns the seconds spent pacing. */
export async function pacedLoad(options: PacedOptions): Promise<number> {
  const url = new URL(options.url);
  const port = Number(url.port || 443);
  const request = Buffer.concat([
    Buffer.from(
      `POST ${url.pathname}${url.search} HTTP/1.1\r\nHost: ${url.host}\r\nContent-Type: application/json\r\n` +
        `Content-Length: ${options.body.length}\r\nConnection: keep-alive\r\n\r\n`,
    ),
    options.body,
  ]);
  const timeoutMs = options.timeoutMs ?? 10_000;
  const idle: Conn[] = [];
  const all = new Set<Conn>();
  const queue: number[] = [];
  let outstanding = 0;

  const send = (conn: Conn, due: number) => {
    conn.busy = true;
    conn.due = due;
    conn.sent = performance.now();
    conn.chunks = [];
    conn.length = 0;
    conn.socket.write(request);
  };
  const release = (conn: Conn) => {
    conn.busy = false;
    const due = queue.shift();
    if (due !== undefined) send(conn, due);
    else idle.push(conn);
  };
  const fail = (conn: Conn, kind: 'error' | 'timeout', cause: string) => {
    if (conn.busy) {
      outstanding--;
      options.onError(kind, cause);
    }
    conn.busy = false;
    all.delete(conn);
    const at = idle.indexOf(conn);
    if (at >= 0) idle.splice(at, 1);
    conn.socket.destroy();
    void open().then(release, () => undefined);
  };

  const open = () =>
    new Promise<Conn>((resolve, reject) => {
      const socket = tls.connect({ host: url.hostname, port, servername: 'localhost', rejectUnauthorized: false });
      const conn: Conn = { socket, busy: false, due: 0, sent: 0, chunks: [], length: 0 };
      socket.setNoDelay(true);
      socket.once('secureConnect', () => {
        all.add(conn);
        resolve(conn);
      });
      socket.on('error', (error: NodeJS.ErrnoException) => (all.has(conn) ? fail(conn, 'error', error.code ?? error.message) : reject(error)));
      socket.on('close', () => {
        if (all.has(conn)) fail(conn, 'error', 'connection closed');
      });
      socket.on('data', (chunk: Buffer) => {
        if (!conn.busy) return;
        conn.chunks.push(chunk);
        conn.length += chunk.length;
        const data = conn.chunks.length === 1 ? chunk : Buffer.concat(conn.chunks, conn.length);
        conn.chunks = [data];
        const end = data.indexOf(HEADER_END);
        if (end < 0) return;
        const head = data.toString('latin1', 0, end);
        const match = /\r\ncontent-length:\s*(\d+)/i.exec(head);
        if (!match) return fail(conn, 'error', 'response without content-length'); // chunked: not what these servers send
        const total = end + 4 + Number(match[1]);
        if (data.length < total) return;
        const done = performance.now();
        const status = Number(head.slice(9, 12));
        const response = { status, body: data.toString('utf8', end + 4, total), due: conn.due, sent: conn.sent, done };
        outstanding--;
        release(conn);
        options.onResponse(response);
      });
    });

  for (const conn of await Promise.all(Array.from({ length: options.connections }, open))) idle.push(conn);

  const start = performance.now();
  const interval = 1000 / options.rate;
  const total = Math.round(options.seconds * options.rate);
  let next = 0;
  while (next < total) {
    const now = performance.now();
    while (next < total && start + next * interval <= now) {
      const due = start + next++ * interval;
      outstanding++;
      const conn = idle.pop();
      if (conn) send(conn, due);
      else queue.push(due);
    }
    for (const conn of all) if (conn.busy && now - conn.sent > timeoutMs) fail(conn, 'timeout', `no answer in ${timeoutMs} ms`);
    await new Promise((resolve) => setTimeout(resolve, 1));
  }
  const paced = (performance.now() - start) / 1000;
  const deadline = performance.now() + timeoutMs;
  while (outstanding > 0 && performance.now() < deadline) {
    if (queue.length > 0 && idle.length > 0) release(idle.pop()!);
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
  // Requests still queued or in flight at the deadline count as timeouts.
  for (let i = 0; i < outstanding; i++) options.onError('timeout', 'queued or in flight at the deadline');
  for (const conn of all) {
    all.delete(conn);
    conn.socket.destroy();
  }
  return paced;
}
