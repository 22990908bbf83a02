import { NestFactory } from '@nestjs/core';
import { FastifyAdapter, type NestFastifyApplication } from '@nestjs/platform-fastify';
import { Logger } from 'nestjs-pino';
import http from 'node:http';
import https from 'node:https';
import type { AddressInfo } from 'node:net';
import type { FastifyInstance } from 'fastify';
import { AdmissionPipeline } from './admission/admission.pipeline.js';
import { createAdmissionServer, isAdmissionTarget } from './admission/admission.server.js';
import { AppModule } from './app.module.js';
import { loadInitialTls } from './tls/tls-material.js';

/** DESIGN's limit: a larger body gets 413. */
export const MAX_BODY_BYTES = 3 * 1024 * 1024;
/** Longer than the API server's idle timeout for webhook connections (90 s), so it closes them first. */
export const KEEP_ALIVE_MS = 95_000;

export interface AppOptions {
  httpsPort: number;
  httpPort: number;
  host?: string;
  env?: NodeJS.ProcessEnv;
}

export interface RunningApp {
  app: NestFastifyApplication;
  httpsServer: https.Server;
  httpServer: http.Server;
  httpsPort: number;
  httpPort: number;
  close(): Promise<void>;
}

function keepAlive(server: http.Server): void {
  server.keepAliveTimeout = KEEP_ALIVE_MS;
  server.headersTimeout = KEEP_ALIVE_MS + 5_000;
}

/**
 * Two servers: HTTPS serves /mutate (the admission Fastify instance, admission.server.ts) and
 * the ops endpoints (Nest's Fastify instance); plain HTTP serves the ops endpoints only and
 * answers 404 for /mutate (admission is never accepted without TLS).
 */
export async function createApp(options: AppOptions): Promise<RunningApp> {
  const env = options.env ?? process.env;
  const host = options.host ?? '0.0.0.0';
  const bootLog = { info: (m: string) => console.log(m), warn: (m: string) => console.warn(m) };
  const tls = await loadInitialTls(env, bootLog);
  let httpsServer!: https.Server;
  let httpServer!: http.Server;
  // Set before the servers listen, so every request finds it.
  let admission!: FastifyInstance;
  const adapter = new FastifyAdapter({
    bodyLimit: MAX_BODY_BYTES,
    serverFactory: (handler: http.RequestListener) => {
      httpsServer = https.createServer({ key: tls.key, cert: tls.cert }, (req, res) =>
        isAdmissionTarget(req.url) ? admission.routing(req, res) : handler(req, res),
      );
      httpServer = http.createServer((req, res) => {
        if (isAdmissionTarget(req.url)) {
          res.writeHead(404, { 'content-type': 'application/json' });
          res.end(JSON.stringify({ statusCode: 404, error: 'Not Found', message: '/mutate is served over HTTPS only' }));
          return;
        }
        handler(req, res);
      });
      keepAlive(httpsServer);
      keepAlive(httpServer);
      return httpsServer;
    },
  });
  const app = await NestFactory.create<NestFastifyApplication>(AppModule.forRoot(env, tls, () => httpsServer), adapter, {
    bufferLogs: true,
  });
  app.useLogger(app.get(Logger));
  app.flushLogs();
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
      httpServer.closeIdleConnections();
      await Promise.all([new Promise((resolve) => httpServer.close(resolve)), app.close()]);
      await admission.close();
    },
  };
}
