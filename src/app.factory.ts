import { NestFactory } from '@nestjs/core';
import { FastifyAdapter, type NestFastifyApplication } from '@nestjs/platform-fastify';
import { Logger } from 'nestjs-pino';
import http from 'node:http';
import https from 'node:https';
import net, { type AddressInfo } from 'node:net';
import type { TLSSocket } from 'node:tls';
import { getToken } from '@willsoto/nestjs-prometheus';
import type { FastifyInstance } from 'fastify';
import type { Logger as PinoLogger } from 'pino';
import type { Counter } from 'prom-client';
import { AdmissionHttpMetrics } from './admission/admission.metrics.js';
import { AdmissionPipeline } from './admission/admission.pipeline.js';
import { isAdmissionTarget } from './admission/admission.routes.js';
import { createAdmissionServer } from './admission/admission.server.js';
import { AppModule } from './app.module.js';
import { LifecycleService } from './health/lifecycle.service.js';
import { contextLog, createRootLogger } from './logging.js';
import { ServerDrain } from './server-drain.js';
import { BodyBudget, HTTP_REFUSED_METRIC, REFUSAL_REASONS, type ServerLimits, readDeclaredBodyBytes, readServerLimits } from './server-limits.js';
import { loadInitialTls } from './tls/tls-material.js';
import { secureContextOptions } from './tls/tls-policy.js';

/** The largest AdmissionReview accepted: the API server's own request limit is 3 MiB; a larger body gets 413. */
export const MAX_BODY_BYTES = 3 * 1024 * 1024;
/** How often Node checks the headers and request timeouts (its default, 30 s, would let a stalled request live 40 s). */
const TIMEOUT_CHECK_MS = 1_000;

export interface AppOptions {
  httpsPort: number;
  httpPort: number;
  host?: string;
  env?: NodeJS.ProcessEnv;
  /** Every log line goes through it (default: createRootLogger(env)). */
  logger?: PinoLogger;
}

export interface RunningApp {
  app: NestFastifyApplication;
  httpsServer: https.Server;
  httpServer: http.Server;
  httpsPort: number;
  httpPort: number;
  close(): Promise<void>;
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
 * The one line for a port already taken (a second `npm start`), naming the variable that sets it;
 * undefined for any other error.
 */
export function portInUse(error: NodeJS.ErrnoException & { port?: number }, ports: Record<string, number>): Error | undefined {
  const variable = Object.keys(ports).find((name) => ports[name] === error.port);
  if (error.code !== 'EADDRINUSE' || !variable) return undefined;
  return new Error(`port ${error.port} is already in use (another kube-overcommit running?): stop that process, or set ${variable} to a free port`);
}

/**
 * Fails with the listen error (EADDRINUSE, with its `port`) when a port is taken, before Nest
 * boots and logs a start that is about to fail.
 */
async function probePort(port: number, host: string): Promise<void> {
  if (port === 0) return;
  const probe = net.createServer();
  await new Promise<void>((resolve, reject) => {
    probe.once('error', reject);
    probe.listen(port, host, () => probe.close(() => resolve()));
  });
}

/**
 * Two servers: HTTPS serves /mutate and the paths under it (the admission Fastify instance,
 * admission.server.ts) and the ops endpoints (Nest's Fastify instance); plain HTTP serves the
 * ops endpoints only and answers 404 for /mutate and its paths (admission is never accepted
 * without TLS). Both apply the limits of server-limits.ts before a request reaches either
 * instance. Every call on the webhook paths over HTTPS is counted and timed from its arrival
 * (AdmissionHttpMetrics), whoever answers it. With a client CA configured, the HTTPS server asks
 * every client for a certificate but lets the handshake finish without one, so probes and
 * scrapes reach the ops endpoints; the webhook paths answer 401 to a caller without a
 * certificate from that CA. Shutdown drains both servers (server-drain.ts): from SIGTERM every
 * answer says `Connection: close` and idle connections are closed, so keep-alive clients move
 * to another replica before the listeners close; calls in flight, and connections accepted
 * before the listeners close, are answered.
 */
export async function createApp(options: AppOptions): Promise<RunningApp> {
  const env = options.env ?? process.env;
  const host = options.host ?? '0.0.0.0';
  const logger = options.logger ?? createRootLogger(env);
  const limits = readServerLimits(env);
  await probePort(options.httpsPort, host);
  await probePort(options.httpPort, host);
  const tls = await loadInitialTls(env, contextLog(logger, 'Tls'));
  const clientCaFile = tls.policy?.clientCaFile;
  const bodies = new BodyBudget(limits.maxBodyBytesInFlight);
  let httpsServer!: https.Server;
  let httpServer!: http.Server;
  // Both set before the servers listen, so every request finds them.
  let admission!: FastifyInstance;
  let refused!: Counter<string>;
  let admissionHttp!: AdmissionHttpMetrics;
  let drain!: ServerDrain;

  /** The body budget; false when the request was answered here. */
  const admit = (req: http.IncomingMessage, res: http.ServerResponse): boolean => {
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

  const adapter = new FastifyAdapter({
    bodyLimit: MAX_BODY_BYTES,
    serverFactory: (handler: http.RequestListener) => {
      const httpOptions = { connectionsCheckingInterval: TIMEOUT_CHECK_MS };
      httpsServer = https.createServer(
        {
          ...httpOptions,
          ...secureContextOptions(tls, tls.policy),
          handshakeTimeout: limits.handshakeTimeoutMs,
          requestCert: clientCaFile !== undefined,
          rejectUnauthorized: false,
        },
        (req, res) => {
          const mutate = isAdmissionTarget(req.url);
          if (mutate) admissionHttp.track(req, res);
          if (mutate && clientCaFile && !(req.socket as TLSSocket).authorized) return refuseClient(req.socket as TLSSocket, res, clientCaFile);
          if (!admit(req, res)) return;
          if (mutate) admission.routing(req, res);
          else handler(req, res);
        },
      );
      httpServer = http.createServer(httpOptions, (req, res) => {
        if (!admit(req, res)) return;
        if (isAdmissionTarget(req.url)) return answer(res, 404, '/mutate is served over HTTPS only');
        handler(req, res);
      });
      for (const server of [httpsServer, httpServer]) {
        applyLimits(server, limits);
        server.on('drop', () => refused.inc({ reason: 'connections' }));
      }
      drain = new ServerDrain([httpsServer, httpServer]);
      return httpsServer;
    },
  });
  const app = await NestFactory.create<NestFastifyApplication>(
    AppModule.forRoot(env, logger, tls, () => httpsServer),
    adapter,
    {
      bufferLogs: true,
    },
  );
  app.useLogger(app.get(Logger));
  app.flushLogs();
  const lifecycle = app.get(LifecycleService);
  lifecycle.onDraining(() => drain.start());
  refused = app.get<Counter<string>>(getToken(HTTP_REFUSED_METRIC));
  for (const reason of REFUSAL_REASONS) refused.inc({ reason }, 0);
  admissionHttp = app.get(AdmissionHttpMetrics);
  admission = await createAdmissionServer(app.get(AdmissionPipeline), { bodyLimit: MAX_BODY_BYTES });
  await app.listen(options.httpsPort, host);
  await new Promise<void>((resolve, reject) => {
    httpServer.once('error', reject);
    httpServer.listen(options.httpPort, host, () => resolve());
  });
  return {
    app,
    httpsServer,
    httpServer,
    httpsPort: (httpsServer.address() as AddressInfo).port,
    httpPort: (httpServer.address() as AddressInfo).port,
    async close() {
      lifecycle.startDraining();
      await drain.close();
      await app.close();
      await admission.close();
    },
  };
}
