import { NestFactory } from '@nestjs/core';
import { FastifyAdapter, type NestFastifyApplication } from '@nestjs/platform-fastify';
import { Logger } from 'nestjs-pino';
import type http from 'node:http';
import type https from 'node:https';
import net from 'node:net';
import type { Duplex } from 'node:stream';
import { getToken } from '@willsoto/nestjs-prometheus';
import type { Logger as PinoLogger } from 'pino';
import type { Counter } from 'prom-client';
import { AdmissionHttpMetrics } from '../admission/admission.metrics.js';
import { AdmissionPipeline } from '../admission/admission.pipeline.js';
import { createAdmissionServer } from '../admission/admission.server.js';
import { AppModule } from '../app.module.js';
import { lazySchemaCompilers } from '../common/fastify-schema-compilers.js';
import { AdmissionEdge, MAX_BODY_BYTES } from './edge.js';
import { LifecycleService } from '../health/lifecycle.service.js';
import { contextLog, createRootLogger } from './logging.js';
import { HTTP_REFUSED_METRIC, REFUSAL_REASONS, readServerLimits } from './server-limits.js';
import { loadInitialTls } from '../tls/tls-material.js';

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
 * Composes the application: Nest (the ops endpoints and every provider), the admission server
 * (admission.server.ts) and the edge in front of both (edge.ts: the two servers, their limits,
 * the client-certificate check, HTTP metrics and the drain). Every part is built before the
 * edge serves.
 */
export async function createApp(options: AppOptions): Promise<RunningApp> {
  const env = options.env ?? process.env;
  const host = options.host ?? '0.0.0.0';
  const logger = options.logger ?? createRootLogger(env);
  const limits = readServerLimits(env);
  await probePort(options.httpsPort, host);
  await probePort(options.httpPort, host);
  const tls = await loadInitialTls(env, contextLog(logger, 'Tls'));
  const edge = new AdmissionEdge({ limits, tls });
  // Nest's Fastify instance never listens: the edge hands it the ops requests.
  const app = await NestFactory.create<NestFastifyApplication>(
    AppModule.forRoot(env, logger, tls, () => edge.httpsServer),
    new FastifyAdapter({ bodyLimit: MAX_BODY_BYTES, schemaController: { compilersFactory: lazySchemaCompilers } }),
    { bufferLogs: true },
  );
  app.useLogger(app.get(Logger));
  app.flushLogs();
  const lifecycle = app.get(LifecycleService);
  lifecycle.onDraining(() => edge.drain.start());
  const refused = app.get<Counter<string>>(getToken(HTTP_REFUSED_METRIC));
  for (const reason of REFUSAL_REASONS) refused.inc({ reason }, 0);
  // After init: the pipeline knows the strategies, so the entries to serve.
  await app.init();
  const admission = await createAdmissionServer(app.get(AdmissionPipeline), { bodyLimit: MAX_BODY_BYTES });
  const ops = app.getHttpAdapter().getInstance();
  await ops.ready();
  const ports = await edge.serve(
    {
      admission: (req, res) => admission.routing(req, res),
      ops: (req, res) => ops.routing(req, res),
      refused,
      admissionHttp: app.get(AdmissionHttpMetrics),
      clientError: ops.server.listeners('clientError')[0] as ((error: Error, socket: Duplex) => void) | undefined,
    },
    { httpsPort: options.httpsPort, httpPort: options.httpPort, host },
  );
  return {
    app,
    httpsServer: edge.httpsServer,
    httpServer: edge.httpServer,
    ...ports,
    async close() {
      lifecycle.startDraining();
      await edge.drain.close();
      await app.close();
      await admission.close();
    },
  };
}
