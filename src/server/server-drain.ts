/**
 * Draining the webhook's servers on shutdown so that a rollout loses no call. The API server
 * pools keep-alive connections to the pod it dialled and keeps sending on them after the
 * endpoint is gone; a call sent on a connection that the server then destroys is reset, and the
 * API server applies the webhook's failure policy to it.
 *
 * Invariants:
 *  1. From the drain's start, every answer carries `Connection: close` — calls already in
 *     flight included, when their headers are not written yet — so the client retires each
 *     connection after its next answer, and Node closes it once that answer is written.
 *  2. A connection is closed by the drain only when nothing is in flight on it and it has been
 *     idle for IDLE_GRACE_MS since it was accepted or since its last answer: kept alive after an
 *     answer, or never used (Go's transport, the API server's, keeps spare connections it dialled
 *     and did not need), its client dials again, elsewhere once the endpoint is gone. Not at
 *     once: its client may be sending the next call (a new connection's first call comes right
 *     after the handshake), and destroying a connection under a call resets it. Closing an idle
 *     connection stays a race that HTTP/1.1 cannot avoid: a call the client writes within a
 *     round trip of the close is lost (Go's transport dials again only when it saw the close
 *     before writing).
 *  3. Closing the listeners stops new connections only: a call in flight finishes, a connection
 *     accepted before (its TLS handshake finished or not) gets its first call answered, when it
 *     comes within IDLE_GRACE_MS (invariant 2). Node's `server.close()` would destroy at once
 *     every connection whose call it has not parsed yet, so the listening socket is closed alone
 *     (`net.Server#close`), and `server.close()` runs once no connection is left.
 *  4. `close()` resolves once every connection of every server has ended.
 */
import type http from 'node:http';
import net from 'node:net';
import tls from 'node:tls';

/** How long a connection with nothing in flight is left to send a call before the drain closes it. */
export const IDLE_GRACE_MS = 1_000;
/** How often the drain looks for connections to close. */
const SWEEP_MS = 100;

/** What the drain knows of one connection. */
export interface DrainConnection {
  /** Calls received and not yet answered (more than one when pipelined). */
  inFlight: number;
  /** When it was accepted or its last answer ended (ms, performance.now()). */
  idleSince: number;
}

/** Whether the drain closes the connection now (invariant 2). */
export function planDrainClose(connection: DrainConnection, now: number): boolean {
  return connection.inFlight === 0 && now - connection.idleSince >= IDLE_GRACE_MS;
}

interface Tracked {
  idleSince: number;
  /**
   * The answers in flight on it. An array, not a Set: a Set that goes from one entry to none
   * on every call reallocates its table as it shrinks, and that table, held by a long-lived
   * connection, outlived young-generation collections: about 100 bytes promoted per call, which
   * brought mark-compacts under load (issue 26's "Third pass": git log -p docs/performance.md).
   */
  responses: http.ServerResponse[];
}

/** The drain of a set of HTTP(S) servers; `start()` on SIGTERM, `close()` when the listeners close. */
export class ServerDrain {
  private readonly connections = new Map<net.Socket, Tracked>();
  private draining = false;
  private sweeper?: NodeJS.Timeout;

  constructor(private readonly servers: readonly http.Server[]) {
    for (const server of servers) {
      // An HTTPS server's calls arrive on the TLS socket it emits once the handshake is done.
      server.on(server instanceof tls.Server ? 'secureConnection' : 'connection', (socket: net.Socket) => this.track(socket));
      // Before the server's own handler, which may answer at once.
      server.prependListener('request', (req: http.IncomingMessage, res: http.ServerResponse) => this.onCall(req, res));
    }
  }

  /** Invariants 1 and 2: answers say `Connection: close` from now on; idle connections get closed. */
  start(): void {
    if (this.draining) return;
    this.draining = true;
    for (const { responses } of this.connections.values()) for (const res of responses) retire(res);
    this.sweep();
    // Connections keep the process alive, not the sweep.
    this.sweeper = setInterval(() => this.sweep(), SWEEP_MS).unref();
  }

  /** Invariants 3 and 4: starts the drain if need be, closes the listeners, waits for every connection to end. */
  async close(): Promise<void> {
    this.start();
    await Promise.all(this.servers.map((server) => new Promise<void>((resolve) => net.Server.prototype.close.call(server, () => resolve()))));
    clearInterval(this.sweeper);
    // Nothing is left to destroy: this only stops Node's timeout checks (its other close steps have run).
    for (const server of this.servers) server.close();
  }

  private track(socket: net.Socket): void {
    this.connections.set(socket, { idleSince: performance.now(), responses: [] });
    socket.once('close', () => this.connections.delete(socket));
  }

  private onCall(req: http.IncomingMessage, res: http.ServerResponse): void {
    if (this.draining) retire(res);
    const connection = this.connections.get(req.socket);
    if (!connection) return;
    connection.responses.push(res);
    res.once('close', () => {
      removeResponse(connection.responses, res);
      connection.idleSince = performance.now();
    });
  }

  private sweep(): void {
    const now = performance.now();
    for (const [socket, { idleSince, responses }] of this.connections) {
      if (planDrainClose({ inFlight: responses.length, idleSince }, now)) socket.destroy();
    }
  }
}

/** Takes `res` out of `responses` in place: the last one moves into its slot (order is not kept). */
function removeResponse(responses: http.ServerResponse[], res: http.ServerResponse): void {
  const index = responses.indexOf(res);
  if (index === -1) return;
  const last = responses.pop()!;
  if (last !== res) responses[index] = last;
}

/** `Connection: close` on an answer whose headers are not written yet. */
function retire(res: http.ServerResponse): void {
  if (!res.headersSent) res.setHeader('connection', 'close');
}
