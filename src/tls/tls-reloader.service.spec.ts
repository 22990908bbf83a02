import { X509Certificate } from 'node:crypto';
import { mkdir, mkdtemp, rename, rm, symlink, writeFile } from 'node:fs/promises';
import { Agent, type Server as HttpsServer, createServer, request } from 'node:https';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { connect, type TLSSocket } from 'node:tls';
import { Logger } from '@nestjs/common';
import { Test } from '@nestjs/testing';
import { Counter, Gauge, Registry, register } from 'prom-client';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { backgroundTasks } from '../../test/fixtures/background.js';
import { BackgroundTasksModule } from '../common/background-tasks.js';
import { type TlsMaterial, generateSelfSigned, loadInitialTls } from './tls-material.js';
import { secureContextOptions } from './tls-policy.js';
import { TLS_EXPIRY_METRIC, TLS_RELOADS_METRIC, TlsReloader } from './tls-reloader.service.js';
import { TlsModule } from './tls.module.js';

const fingerprint = (cert: string) => new X509Certificate(cert).fingerprint256;

/** Lays out a Secret volume the way the kubelet's AtomicWriter does, and swaps it the same way. */
class SecretVolume {
  private generation = 0;
  constructor(readonly dir: string) {}
  get certFile() {
    return join(this.dir, 'tls.crt');
  }
  get keyFile() {
    return join(this.dir, 'tls.key');
  }
  async init(files: { cert: string; key: string }) {
    await this.swap(files);
    await symlink('..data/tls.crt', this.certFile);
    await symlink('..data/tls.key', this.keyFile);
  }
  async swap({ cert, key }: { cert: string; key: string }) {
    const ts = `..2024_01_01_00_00_0${this.generation++}.000000001`;
    await mkdir(join(this.dir, ts));
    await writeFile(join(this.dir, ts, 'tls.crt'), cert);
    await writeFile(join(this.dir, ts, 'tls.key'), key);
    await symlink(ts, join(this.dir, '..data_tmp'));
    await rename(join(this.dir, '..data_tmp'), join(this.dir, '..data'));
  }
}

async function peerFingerprint(port: number): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket = connect({ host: '127.0.0.1', port, servername: 'localhost', rejectUnauthorized: false }, () => {
      resolve(socket.getPeerCertificate().fingerprint256);
      socket.end();
    });
    socket.on('error', reject);
  });
}

/** When a poll gives up (not a latency asserted: a loaded machine may take seconds to deliver a file event). */
const POLL = { timeout: 10_000, interval: 50 };

function get(agent: Agent, port: number): Promise<{ body: string; reused: boolean; peer: string }> {
  return new Promise((resolve, reject) => {
    const req = request({ host: '127.0.0.1', port, path: '/', agent }, (res) => {
      const peer = (res.socket as TLSSocket).getPeerCertificate().fingerprint256; // socket is detached at 'end'
      let body = '';
      res.on('data', (c) => (body += c));
      res.on('end', () => resolve({ body, reused: req.reusedSocket, peer }));
    });
    req.on('error', reject);
    req.end();
  });
}

describe('TlsReloader (real files, real HTTPS server)', () => {
  let first: TlsMaterial;
  let second: TlsMaterial;
  let dir: string;
  let volume: SecretVolume;
  let server: HttpsServer;
  let port: number;
  let registry: Registry;
  let reloads: Counter<string>;
  let expiry: Gauge<string>;
  let reloader: TlsReloader;
  const quiet = { info: () => {}, warn: () => {} };

  const count = async (result: string) => (await reloads.get()).values.find((v) => v.labels.result === result)?.value ?? 0;

  beforeAll(async () => {
    Logger.overrideLogger(false);
    [first, second] = await Promise.all([generateSelfSigned(), generateSelfSigned()]);
  });
  afterAll(() => {
    Logger.overrideLogger(['log', 'error', 'warn', 'debug', 'verbose', 'fatal']);
  });

  beforeEach(async () => {
    dir = await mkdtemp(join(tmpdir(), 'tls-reloader-'));
    volume = new SecretVolume(dir);
    await volume.init(first);
    const material = await loadInitialTls({ OVERCOMMIT_TLS_CERT_FILE: volume.certFile, OVERCOMMIT_TLS_KEY_FILE: volume.keyFile }, quiet);
    server = createServer(secureContextOptions(material, material.policy), (_req, res) => res.end('ok'));
    server.keepAliveTimeout = 30_000;
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    port = (server.address() as AddressInfo).port;

    registry = new Registry();
    reloads = new Counter({ name: TLS_RELOADS_METRIC, help: 'h', labelNames: ['result'], registers: [registry] });
    expiry = new Gauge({ name: TLS_EXPIRY_METRIC, help: 'h', registers: [registry] });
    reloader = new TlsReloader(material, { server }, reloads, expiry, backgroundTasks(registry));
    reloader.onApplicationBootstrap();
  });

  afterEach(async () => {
    reloader.onApplicationShutdown();
    server.closeAllConnections();
    await new Promise((r) => server.close(r));
    await rm(dir, { recursive: true, force: true });
  });

  it('serves the new certificate to new connections after a ..data swap; open connections keep working', async () => {
    expect(await peerFingerprint(port)).toBe(fingerprint(first.cert));
    expect(reloader.isReady()).toBe(true);
    const agent = new Agent({ keepAlive: true, maxSockets: 1, rejectUnauthorized: false });
    const before = await get(agent, port);
    expect(before).toMatchObject({ body: 'ok', reused: false, peer: fingerprint(first.cert) });

    await volume.swap(second);

    await expect.poll(() => peerFingerprint(port), POLL).toBe(fingerprint(second.cert));
    // The keep-alive connection opened before the swap is still the one used, on its original handshake.
    const after = await get(agent, port);
    expect(after).toMatchObject({ body: 'ok', reused: true, peer: fingerprint(first.cert) });
    agent.destroy();

    expect(await count('success')).toBe(1);
    expect(await count('failure')).toBe(0);
    expect((await expiry.get()).values[0].value).toBe(second.notAfter.getTime() / 1000);
    expect(reloader.current()).toMatchObject({ cert: second.cert, key: second.key, selfSigned: false });
    expect(reloader.isReady()).toBe(true);
  });

  it('keeps the previous certificate and counts a failure when the new pair is invalid', async () => {
    await volume.swap({ cert: '-----BEGIN CERTIFICATE-----\ngarbage\n', key: second.key });

    // 5 attempts 200 ms apart, after a 100 ms debounce
    await expect.poll(() => count('failure'), POLL).toBe(1);
    expect(await count('success')).toBe(0);
    expect(await peerFingerprint(port)).toBe(fingerprint(first.cert));
    expect(reloader.current().cert).toBe(first.cert);
    expect((await expiry.get()).values[0].value).toBe(first.notAfter.getTime() / 1000);
    expect(reloader.isReady()).toBe(true);

    // and recovers on the next good rotation
    await volume.swap(second);
    await expect.poll(() => peerFingerprint(port), POLL).toBe(fingerprint(second.cert));
    expect(await count('failure')).toBe(1);
  });

  it('keeps the TLS policy across a reload: CBC suites stay refused', async () => {
    const cbcOnly = () =>
      new Promise<string>((resolve) => {
        const socket = connect({ host: '127.0.0.1', port, rejectUnauthorized: false, maxVersion: 'TLSv1.2', ciphers: 'ECDHE-ECDSA-AES128-SHA' }, () => {
          resolve('connected');
          socket.end();
        });
        socket.on('error', () => resolve('refused'));
      });
    expect(await cbcOnly()).toBe('refused');
    await volume.swap(second);
    await expect.poll(() => peerFingerprint(port), POLL).toBe(fingerprint(second.cert));
    expect(await cbcOnly()).toBe('refused');
  });

  it('retries a half-written pair instead of failing', async () => {
    // key replaced first (no longer matches the old certificate), certificate 300 ms later
    await rm(volume.keyFile);
    await writeFile(volume.keyFile, second.key);
    await new Promise((r) => setTimeout(r, 300));
    await rm(volume.certFile);
    await writeFile(volume.certFile, second.cert);

    await expect.poll(() => peerFingerprint(port), POLL).toBe(fingerprint(second.cert));
    expect(await count('success')).toBe(1);
    expect(await count('failure')).toBe(0);
  });

  it('installs a pair from elsewhere (the self-managed Secret) and refuses an unusable one, keeping what it serves', async () => {
    expect(reloader.install(second.cert, second.key, 'Secret ns/tls')).toBe(true);
    expect(await peerFingerprint(port)).toBe(fingerprint(second.cert));
    expect(reloader.current()).toMatchObject({ cert: second.cert, key: second.key });
    expect(await count('success')).toBe(1);

    expect(reloader.install(first.cert, second.key, 'Secret ns/tls')).toBe(false);
    expect(await peerFingerprint(port)).toBe(fingerprint(second.cert));
    expect(await count('failure')).toBe(1);
    expect((await expiry.get()).values[0].value).toBe(second.notAfter.getTime() / 1000);
  });

  it('ignores events that do not change the content: only the rotation after them counts', async () => {
    await writeFile(join(dir, 'unrelated'), 'x');
    // Past the 100 ms debounce, so that the rotation is a reload of its own (the pause paces the
    // input; what is asserted follows the rotation, seen served).
    await new Promise((r) => setTimeout(r, 300));
    await volume.swap(second);
    await expect.poll(() => peerFingerprint(port), POLL).toBe(fingerprint(second.cert));
    expect(await count('success')).toBe(1);
    expect(await count('failure')).toBe(0);
  });
});

describe('TlsReloader with a placeholder (self-managed mode)', () => {
  it('is not ready until a certificate is installed', async () => {
    const placeholder = await loadInitialTls({ OVERCOMMIT_CERT_MODE: 'self-managed' }, { info: () => {}, warn: () => {} });
    expect(placeholder.placeholder).toBe(true);
    const real = await generateSelfSigned();
    const server = createServer({ key: placeholder.key, cert: placeholder.cert });
    const registry = new Registry();
    const reloads = new Counter({ name: TLS_RELOADS_METRIC, help: 'h', labelNames: ['result'], registers: [registry] });
    const expiry = new Gauge({ name: TLS_EXPIRY_METRIC, help: 'h', registers: [registry] });
    Logger.overrideLogger(false);
    try {
      const reloader = new TlsReloader(placeholder, { server }, reloads, expiry, backgroundTasks(registry));
      expect(reloader.isReady()).toBe(false);
      expect((await expiry.get()).values[0].value).toBe(0);
      expect(reloader.install(real.cert, real.key, 'Secret ns/tls')).toBe(true);
      expect(reloader.isReady()).toBe(true);
      expect((await expiry.get()).values[0].value).toBe(real.notAfter.getTime() / 1000);
    } finally {
      Logger.overrideLogger(['log', 'error', 'warn', 'debug', 'verbose', 'fatal']);
    }
  });
});

describe('TlsModule', () => {
  it('wires the reloader with its metrics through Nest DI', async () => {
    register.clear();
    const material = await generateSelfSigned();
    const moduleRef = await Test.createTestingModule({
      imports: [BackgroundTasksModule, TlsModule.forRoot(material, () => null)],
    }).compile();
    const reloader = moduleRef.get(TlsReloader);
    expect(reloader.current().cert).toBe(material.cert);
    expect(reloader.isReady()).toBe(false); // no server yet
    const text = await register.metrics();
    expect(text).toContain(`${TLS_RELOADS_METRIC}{result="failure"} 0`);
    expect(text).toContain(`${TLS_EXPIRY_METRIC} ${material.notAfter.getTime() / 1000}`);
    await moduleRef.close();
    register.clear();
  });
});
