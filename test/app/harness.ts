import { mkdtempSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import https from 'node:https';
import http from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import fastJsonPatch, { type Operation } from 'fast-json-patch';
import { expect, vi } from 'vitest';
import { Metrics } from '../support/metrics.js';
import { createApp, type RunningApp } from '../../src/server/app.factory.js';
import { createRootLogger } from '../../src/server/logging.js';

/** A pino log line, parsed. */
export type LogLine = { level: number; msg: string; context?: string } & Record<string, unknown>;
export const LEVEL = { debug: 20, info: 30, warn: 40, error: 50 } as const;

/**
 * Where app logs go: the lines of the server started last. nestjs-pino keeps one root logger
 * per process (the first app's), so every app of a test file writes through the same stream;
 * the servers of a file run one after the other.
 */
let currentLines: LogLine[] = [];
const appLogStream = { write: (line: string) => void currentLines.push(JSON.parse(line)) };

export interface Reply {
  status: number;
  headers: http.IncomingHttpHeaders;
  text: string;
  json(): any;
}

export function send(
  url: string,
  options: { method?: string; body?: string | Buffer; headers?: Record<string, string>; agent?: http.Agent } = {},
): Promise<Reply> {
  const client = url.startsWith('https:') ? https : http;
  return new Promise((resolve, reject) => {
    const req = client.request(
      url,
      {
        method: options.method ?? (options.body === undefined ? 'GET' : 'POST'),
        headers: { ...(options.body !== undefined ? { 'content-type': 'application/json' } : {}), ...options.headers },
        rejectUnauthorized: false,
        agent: options.agent,
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c) => chunks.push(c));
        res.on('end', () => {
          const text = Buffer.concat(chunks).toString('utf8');
          resolve({ status: res.statusCode ?? 0, headers: res.headers, text, json: () => JSON.parse(text) });
        });
      },
    );
    req.on('error', reject);
    req.end(options.body);
  });
}

export interface TestServer {
  running: RunningApp;
  https: string;
  http: string;
  configFile: string;
  /** Every line the app logged so far (tests assert on what they provoke; nothing is printed). */
  logs(minLevel?: number): LogLine[];
  writeConfig(text: string): void;
  mutate(review: unknown): Promise<Reply>;
  metrics(): Promise<string>;
  stop(): Promise<void>;
}

/** The whole app on real HTTPS (self-signed localhost certificate), config from a watched file. */
export async function startServer(config: string, env: Record<string, string> = {}): Promise<TestServer> {
  const dir = mkdtempSync(join(tmpdir(), 'kube-overcommit-app-'));
  const configFile = join(dir, 'config.yaml');
  writeFileSync(configFile, config);
  const lines: LogLine[] = [];
  currentLines = lines;
  const appEnv = {
    LOG_LEVEL: 'warn',
    OVERCOMMIT_CONFIG_FILE: configFile,
    OVERCOMMIT_TLS_CERT_FILE: join(dir, 'none.crt'),
    OVERCOMMIT_TLS_KEY_FILE: join(dir, 'none.key'),
    ...env,
  };
  const running = await createApp({
    httpsPort: 0,
    httpPort: 0,
    host: '127.0.0.1',
    env: appEnv,
    logger: createRootLogger(appEnv, appLogStream),
  });
  const base = `https://127.0.0.1:${running.httpsPort}`;
  return {
    running,
    https: base,
    http: `http://127.0.0.1:${running.httpPort}`,
    configFile,
    logs: (minLevel = 0) => lines.filter((line) => line.level >= minLevel),
    // Replaced by rename, as editors and Kubernetes volume updates do: written in place, the
    // watcher could read it half-written (an empty file is a valid, empty config).
    writeConfig: (text) => {
      writeFileSync(`${configFile}.next`, text);
      renameSync(`${configFile}.next`, configFile);
    },
    mutate: (review) => send(`${base}/mutate`, { body: JSON.stringify(review) }),
    metrics: async () => (await send(`${base}/metrics`)).text,
    async stop() {
      await running.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/**
 * Polls (vi.waitFor) until `check` returns a value other than undefined or false, which is
 * returned. `timeoutMs` is when to give up, not a latency the test asserts: that is measured in
 * bench/. The check holds no `expect` (scripts/check-tests.js): the test asserts what it returns.
 */
export function eventually<T>(check: () => Promise<T | undefined | false>, timeoutMs = 10_000): Promise<T> {
  return vi.waitFor(
    async () => {
      const value = await check();
      if (value === undefined || value === false) throw new Error(`condition not met within ${timeoutMs} ms`);
      return value;
    },
    { timeout: timeoutMs, interval: 50 },
  );
}

/** The value of the first sample of `name` whose labels include `labels`, in a scrape. */
export function metricValue(text: string, name: string, labels: Record<string, string> = {}): number | undefined {
  return Metrics.parse(text).find(name, labels)[0]?.value;
}

/** The JSONPatch of an AdmissionReview answer, decoded ([] when it has none). */
export function decodePatch(body: any): Operation[] {
  return body.response.patch ? JSON.parse(Buffer.from(body.response.patch, 'base64').toString('utf8')) : [];
}

/**
 * The answer to `review` checked against the AdmissionReview contract (apiVersion, kind, uid,
 * allowed, patchType when there is a patch), and the object as the API server would store it:
 * the patch applied with every operation validated against the object it sent.
 */
export function admitted(review: any, body: any): { object: any; patch: Operation[]; warnings: string[] } {
  expect(body.apiVersion).toBe('admission.k8s.io/v1');
  expect(body.kind).toBe('AdmissionReview');
  expect(body.response.uid).toBe(review.request.uid);
  expect(body.response.allowed).toBe(true);
  const warnings: string[] = body.response.warnings ?? [];
  if (!body.response.patch) return { object: review.request.object, patch: [], warnings };
  expect(body.response.patchType).toBe('JSONPatch');
  const patch = decodePatch(body);
  return { object: fastJsonPatch.applyPatch(structuredClone(review.request.object), patch, true, false).newDocument, patch, warnings };
}
