import http from 'node:http';
import https from 'node:https';
import type { AddressInfo } from 'node:net';
import type { Duplex } from 'node:stream';
import type { TLSSocket } from 'node:tls';
import type { Counter } from 'prom-client';
import type { AdmissionHttpMetrics } from '../admission/admission.metrics.js';
import { isAdmissionTarget } from '../admission/admission.routes.js';
import { ServerDrain } from './server-drain.js';
import { BodyBudget, type ServerLimits, readDeclaredBodyBytes } from './server-limits.js';
import type { TlsMaterial } from '../tls/tls-material.js';
import { secureContextOptions } from '../tls/tls-policy.js';

/** The largest AdmissionReview accepted: the API server's own request limit is 3 MiB; a larger body gets 413. */
export const MAX_BODY_BYTES = 3 * 1024 * 1024;
/** How often Node checks the headers and request timeouts (its default, 30 s, would let a stalled request live 40 s). */
const TIMEOUT_CHECK_MS = 1_000;

/** Something that answers a request it is handed (a Fastify instance's `routing`). */
type Routing = (req: http.IncomingMessage, res: http.ServerResponse) => void;

/** What the edge hands requests to and counts with, all built before it serves. */
export interface EdgeHandlers {
  /** The admission server (admission.server.ts): /mutate and the paths under it, over HTTPS. */
  admission: Routing;
  /** Nest's HTTP layer: the ops endpoints, on both servers. */
  ops: Routing;
  /** Counts what the limits refused, by reason (server-limits.ts). */
  refused: Counter<string>;
  admissionHttp: AdmissionHttpMetrics;
  /** How the HTTPS server answers a malformed request (Fastify's, as when Fastify owned that server). */
  clientError?: (error: Error, socket: Duplex) => void;
}

export interface EdgeOptions {
  limits: ServerLimits;
  tls: TlsMaterial;
}

function applyLimits(server: http.Server, limits: ServerLimits): void {
  server.keepAliveTimeout = limits.keepAliveMs;
  server.headersTimeout = limits.headersTimeoutMs;
  server.requestTimeout = limits.requestTimeoutMs;
  if (limits.maxConnections > 0) server.maxConnections = limits.maxConnections;
}

function answer(res: http.ServerResponse, statusCode: number, message: string, headers: http.OutgoingHttpHeaders = {}): void {
  res.writeHead(statusCode, { 'content-type': 'application/json', ...headers });
  res.end(JSON.stringify({ statusCode, error: http.STATUS_CODES[statusCode], message }));
}

/** 401 for a /mutate caller whose certificate (if any) is not from the client CA, saying which. */
function refuseClient(socket: TLSSocket, res: http.ServerResponse, clientCaFile: string): void {
  const presented = Object.keys(socket.getPeerCertificate()).length > 0;
  const reason = presented ? `the certificate presented was refused: ${socket.authorizationError}` : 'no certificate presented';
  answer(res, 401, `a client certificate issued by the CA in ${clientCaFile} is required (${reason})`);
}

/**
 * The admission edge: the two servers and what happens to a request before an application
 * layer sees it. HTTPS serves /mutate and the paths under it (the admission server) and the ops
 * endpoints (Nest); plain HTTP serves the ops endpoints only and answers 404 for /mutate and its
 * paths (admission is never accepted without TLS). Both apply the limits of server-limits.ts
 * (timeouts, connections, the body budget) first. Every call on the webhook paths over HTTPS is
 * counted and timed from its arrival (AdmissionHttpMetrics), whoever answers it. With a client
 * CA configured, the HTTPS server asks every client for a certificate but lets the handshake
 * finish without one, so probes and scrapes reach the ops endpoints; the webhook paths answer
 * 401 to a caller without a certificate from that CA. Shutdown drains both servers
 * (server-drain.ts).
 *
 * The servers exist from construction (the TLS reloader swaps the HTTPS server's context); they
 * get their request handlers, all built by then, and listen in `serve`.
 */
export class AdmissionEdge {
  readonly httpsServer: https.Server;
  readonly httpServer: http.Server;
  readonly drain: ServerDrain;
  private readonly clientCaFile: string | undefined;

  constructor(private readonly options: EdgeOptions) {
    const { limits, tls } = options;
    this.clientCaFile = tls.policy?.clientCaFile;
    const httpOptions = { connectionsCheckingInterval: TIMEOUT_CHECK_MS };
    this.httpsServer = https.createServer({
      ...httpOptions,
      ...secureContextOptions(tls, tls.policy),
      handshakeTimeout: limits.handshakeTimeoutMs,
      requestCert: this.clientCaFile !== undefined,
      rejectUnauthorized: false,
    });
    this.httpServer = http.createServer(httpOptions);
    for (const server of [this.httpsServer, this.httpServer]) applyLimits(server, limits);
    this.drain = new ServerDrain([this.httpsServer, this.httpServer]);
  }

  /** Hands requests to `handlers` and listens; resolves with the ports bound. */
  async serve(handlers: EdgeHandlers, ports: { httpsPort: number; httpPort: number; host: string }): Promise<{ httpsPort: number; httpPort: number }> {
    const { refused, admissionHttp, admission, ops } = handlers;
    const admit = this.bodyBudget(refused);
    const clientCaFile = this.clientCaFile;
    if (handlers.clientError) this.httpsServer.on('clientError', handlers.clientError);
    this.httpsServer.on('request', (req: http.IncomingMessage, res: http.ServerResponse) => {
      const mutate = isAdmissionTarget(req.url);
      if (mutate) admissionHttp.track(req, res);
      if (mutate && clientCaFile && !(req.socket as TLSSocket).authorized) return refuseClient(req.socket as TLSSocket, res, clientCaFile);
      if (!admit(req, res)) return;
      if (mutate) admission(req, res);
      else ops(req, res);
    });
    this.httpServer.on('request', (req: http.IncomingMessage, res: http.ServerResponse) => {
      if (!admit(req, res)) return;
      if (isAdmissionTarget(req.url)) return answer(res, 404, '/mutate is served over HTTPS only');
      ops(req, res);
    });
    for (const server of [this.httpsServer, this.httpServer]) server.on('drop', () => refused.inc({ reason: 'connections' }));
    const listen = (server: http.Server, port: number) =>
      new Promise<number>((resolve, reject) => {
        server.once('error', reject);
        server.listen(port, ports.host, () => {
          server.off('error', reject);
          resolve((server.address() as AddressInfo).port);
        });
      });
    return { httpsPort: await listen(this.httpsServer, ports.httpsPort), httpPort: await listen(this.httpServer, ports.httpPort) };
  }

  /** The body budget shared by both servers: a check that is false when the request was answered here. */
  private bodyBudget(refused: Counter<string>): (req: http.IncomingMessage, res: http.ServerResponse) => boolean {
    const { limits } = this.options;
    const bodies = new BodyBudget(limits.maxBodyBytesInFlight);
    return (req, res) => {
      const bytes = readDeclaredBodyBytes(req.headers, MAX_BODY_BYTES);
      if (bytes === 0) return true;
      if (!bodies.tryReserve(bytes)) {
        // Node discards the unread body as it arrives (never buffered) and keeps the connection.
        refused.inc({ reason: 'body-bytes' });
        answer(res, 503, `too many request bodies in flight (over ${limits.maxBodyBytesInFlight} bytes); retry`, { 'retry-after': '1' });
        return false;
      }
      res.once('close', () => bodies.release(bytes));
      return true;
    };
  }
}
