import { once } from 'node:events';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import https from 'node:https';
import net from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import tls from 'node:tls';
import { generate } from 'selfsigned';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { createApp, portInUse } from '../../src/server/app.factory.js';
import { kubeadmNode, nodeReview } from '../fixtures/nodes.js';
import { eventually, metricValue, send, startServer, type TestServer } from './harness.js';

const CONFIG = 'nodes: { defaultRatios: { cpu: 2 } }';
const CBC_SUITES = 'ECDHE-ECDSA-AES128-SHA:ECDHE-ECDSA-AES256-SHA:ECDHE-ECDSA-AES128-SHA256:ECDHE-ECDSA-AES256-SHA384';

/** The outcome of one TLS handshake: the suite and version negotiated, or the error. */
function handshake(port: number, options: tls.ConnectionOptions): Promise<{ cipher?: string; version?: string; error?: string }> {
  return new Promise((resolve) => {
    const socket = tls.connect({ host: '127.0.0.1', port, rejectUnauthorized: false, ...options }, () => {
      resolve({ cipher: socket.getCipher().name, version: socket.getProtocol() ?? undefined });
      socket.end();
    });
    socket.once('error', (error) => resolve({ error: error.message }));
  });
}

/** A raw TLS connection that writes `head`, then waits: what the server sends back, and when it closed. */
function stall(port: number, head: string): Promise<{ response: string; closedAfterMs: number }> {
  return new Promise((resolve, reject) => {
    const started = Date.now();
    let response = '';
    const socket = tls.connect({ host: '127.0.0.1', port, rejectUnauthorized: false }, () => socket.write(head));
    socket.on('data', (chunk) => (response += chunk));
    socket.once('error', (error) => (error as NodeJS.ErrnoException).code === 'ECONNRESET' || reject(error));
    socket.once('close', () => resolve({ response, closedAfterMs: Date.now() - started }));
  });
}

function postHead(length: number): string {
  return `POST /mutate HTTP/1.1\r\nhost: localhost\r\ncontent-type: application/json\r\ncontent-length: ${length}\r\n\r\n`;
}

describe('TLS: AEAD suites only', () => {
  let server: TestServer;
  beforeAll(async () => {
    server = await startServer(CONFIG);
  });
  afterAll(async () => {
    await server?.stop();
  });

  it('refuses a TLS 1.2 client that offers only CBC suites', async () => {
    const result = await handshake(server.running.httpsPort, { maxVersion: 'TLSv1.2', ciphers: CBC_SUITES });
    expect(result.error).toMatch(/handshake failure|no shared cipher|alert/i);
  });

  it('serves TLS 1.2 with ECDHE and AES-GCM or ChaCha20, and TLS 1.3 as before', async () => {
    const port = server.running.httpsPort;
    expect(await handshake(port, { maxVersion: 'TLSv1.2', ciphers: 'ECDHE-ECDSA-AES128-GCM-SHA256' })).toEqual({
      cipher: 'ECDHE-ECDSA-AES128-GCM-SHA256',
      version: 'TLSv1.2',
    });
    expect(await handshake(port, { maxVersion: 'TLSv1.2', ciphers: 'ECDHE-ECDSA-CHACHA20-POLY1305' })).toMatchObject({ version: 'TLSv1.2' });
    expect(await handshake(port, { minVersion: 'TLSv1.3' })).toMatchObject({ version: 'TLSv1.3', cipher: expect.stringMatching(/^TLS_/) });
  });
});

describe('TLS: minimum version and suites from the environment', () => {
  let server: TestServer | undefined;
  afterEach(async () => {
    await server?.stop();
    server = undefined;
  });

  it('OVERCOMMIT_TLS_MIN_VERSION=VersionTLS13 refuses TLS 1.2', async () => {
    server = await startServer(CONFIG, { OVERCOMMIT_TLS_MIN_VERSION: 'VersionTLS13' });
    expect((await handshake(server.running.httpsPort, { maxVersion: 'TLSv1.2' })).error).toBeDefined();
    expect(await handshake(server.running.httpsPort, {})).toMatchObject({ version: 'TLSv1.3' });
  });

  it('OVERCOMMIT_TLS_CIPHER_SUITES narrows TLS 1.2 to the suites named (IANA names)', async () => {
    server = await startServer(CONFIG, { OVERCOMMIT_TLS_CIPHER_SUITES: 'TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384' });
    const port = server.running.httpsPort;
    expect((await handshake(port, { maxVersion: 'TLSv1.2', ciphers: 'ECDHE-ECDSA-AES128-GCM-SHA256' })).error).toBeDefined();
    expect(await handshake(port, { maxVersion: 'TLSv1.2' })).toMatchObject({ cipher: 'ECDHE-ECDSA-AES256-GCM-SHA384' });
  });

  it('refuses to start with a suite it does not accept, naming the variable', async () => {
    await expect(startServer(CONFIG, { OVERCOMMIT_TLS_CIPHER_SUITES: 'ECDHE-ECDSA-AES128-SHA' })).rejects.toThrow(
      /OVERCOMMIT_TLS_CIPHER_SUITES: "ECDHE-ECDSA-AES128-SHA" is not an accepted TLS 1.2 suite/,
    );
  });
});

/** A CA and a client certificate it issued (what kube-apiserver presents with an AdmissionConfiguration). */
async function clientPki(cn: string) {
  const ca = await generate([{ name: 'commonName', value: `${cn}-ca` }], {
    keyType: 'ec',
    curve: 'P-256',
    algorithm: 'sha256',
    extensions: [
      { name: 'basicConstraints', cA: true, critical: true },
      { name: 'keyUsage', keyCertSign: true, cRLSign: true, critical: true },
    ],
  });
  const client = await generate([{ name: 'commonName', value: cn }], {
    keyType: 'ec',
    curve: 'P-256',
    algorithm: 'sha256',
    ca: { key: ca.private, cert: ca.cert },
    extensions: [
      { name: 'basicConstraints', cA: false },
      { name: 'keyUsage', digitalSignature: true, critical: true },
      { name: 'extKeyUsage', clientAuth: true },
    ],
  });
  // A new agent per call: a new connection, so a new handshake against the CA in force.
  return { caCert: ca.cert, agent: () => new https.Agent({ cert: client.cert, key: client.private, rejectUnauthorized: false }) };
}

describe('OVERCOMMIT_CLIENT_CA_FILE', () => {
  let server: TestServer;
  let dir: string;
  let caFile: string;
  let trusted: Awaited<ReturnType<typeof clientPki>>;
  let other: Awaited<ReturnType<typeof clientPki>>;
  beforeAll(async () => {
    [trusted, other] = await Promise.all([clientPki('kube-apiserver'), clientPki('intruder')]);
    dir = mkdtempSync(join(tmpdir(), 'kube-overcommit-client-ca-'));
    caFile = join(dir, 'client-ca.crt');
    writeFileSync(caFile, trusted.caCert);
    server = await startServer(CONFIG, { OVERCOMMIT_CLIENT_CA_FILE: caFile });
  });
  afterAll(async () => {
    await server?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  const mutate = (agent?: https.Agent) => send(`${server.https}/mutate`, { body: JSON.stringify(nodeReview(kubeadmNode())), agent });

  it('answers /mutate to a client with a certificate from that CA', async () => {
    const reply = await mutate(trusted.agent());
    expect(reply.status).toBe(200);
    expect(reply.json().response.patch).toBeDefined();
  });

  it('answers 401 to a client without a certificate, or with one from another CA', async () => {
    const none = await mutate(new https.Agent({ rejectUnauthorized: false }));
    expect(none.status).toBe(401);
    expect(none.json().message).toBe(`a client certificate issued by the CA in ${caFile} is required (no certificate presented)`);
    const stranger = await mutate(other.agent());
    expect(stranger.status).toBe(401);
    expect(stranger.json().message).toMatch(/\(the certificate presented was refused: [A-Z_]+\)$/);
    expect(stranger.json().response).toBeUndefined();
    // Refused before any handler, and still counted by path and code.
    await eventually(async () => metricValue(await server.metrics(), 'kube_overcommit_admission_http_requests_total', { path: '/mutate', code: '401' }) === 2);
  });

  it('keeps the ops endpoints open to clients without a certificate (probes, scrapes)', async () => {
    expect((await send(`${server.https}/healthz`)).status).toBe(200);
    expect((await send(`${server.https}/metrics`)).status).toBe(200);
  });

  it('re-reads the CA file on change: the new CA is trusted for new connections', async () => {
    writeFileSync(caFile, other.caCert);
    await eventually(async () => (await mutate(other.agent())).status === 200);
    expect((await mutate(trusted.agent())).status).toBe(401);
    writeFileSync(caFile, trusted.caCert);
    await eventually(async () => (await mutate(trusted.agent())).status === 200);
  });
});

describe('stalled clients are cut off, bounded in time and bytes', () => {
  let server: TestServer;
  beforeAll(async () => {
    server = await startServer(CONFIG, {
      OVERCOMMIT_HEADERS_TIMEOUT_MS: '500',
      OVERCOMMIT_REQUEST_TIMEOUT_MS: '1000',
      OVERCOMMIT_TLS_HANDSHAKE_TIMEOUT_MS: '500',
      OVERCOMMIT_MAX_BODY_BYTES_IN_FLIGHT: String(4 * 1024 * 1024),
      OVERCOMMIT_MAX_CONNECTIONS: '20',
    });
  });
  afterAll(async () => {
    await server?.stop();
  });

  it('a body declared and never finished: 408 and the connection closed after the request timeout', async () => {
    const { response, closedAfterMs } = await stall(server.running.httpsPort, postHead(1000) + 'x'.repeat(999));
    expect(response).toMatch(/^HTTP\/1\.1 408/);
    expect(closedAfterMs).toBeGreaterThanOrEqual(900);
    expect(closedAfterMs).toBeLessThan(8_000);
  });

  it('headers never finished: 408 after the headers timeout', async () => {
    const { response, closedAfterMs } = await stall(server.running.httpsPort, 'POST /mutate HTTP/1.1\r\nhost: localhost\r\nx-slow: 1');
    expect(response).toMatch(/^HTTP\/1\.1 408/);
    expect(closedAfterMs).toBeLessThan(8_000);
  });

  it('a TLS handshake never started: the connection is closed after the handshake timeout', async () => {
    const started = Date.now();
    await new Promise<void>((resolve) => {
      const socket = net.connect(server.running.httpsPort, '127.0.0.1');
      socket.on('error', () => undefined);
      socket.once('close', () => resolve());
    });
    expect(Date.now() - started).toBeLessThan(8_000);
  });

  it('past the bytes in flight: 503 at once, while the body is still arriving; the budget comes back when the stalled body is cut off', async () => {
    const port = server.running.httpsPort;
    // Its bytes are reserved once the server has read its head: the request event says so.
    const reserved = once(server.running.httpsServer, 'request');
    const stalled = stall(port, postHead(3 * 1024 * 1024) + 'x'.repeat(1024));
    await reserved;
    // The body keeps arriving; the answer comes before it ends (a timeout would be a 408).
    const refused = await new Promise<string>((resolve) => {
      let response = '';
      const socket = tls.connect({ host: '127.0.0.1', port, rejectUnauthorized: false }, () => socket.write(postHead(2 * 1024 * 1024) + 'x'.repeat(64 * 1024)));
      socket.on('data', (chunk) => {
        response += chunk;
        if (response.includes('}')) socket.destroy();
      });
      socket.once('close', () => resolve(response));
    });
    expect(refused).toMatch(/^HTTP\/1\.1 503/);
    expect(refused).toMatch(/retry-after: 1/i);
    expect(refused).toMatch(/too many request bodies in flight/);
    expect(metricValue(await server.metrics(), 'kube_overcommit_http_refused_total', { reason: 'body-bytes' })).toBe(1);
    await eventually(async () => metricValue(await server.metrics(), 'kube_overcommit_admission_http_requests_total', { path: '/mutate', code: '503' }) === 1);
    // A small review still fits beside the stalled body.
    expect((await server.mutate(nodeReview(kubeadmNode()))).status).toBe(200);
    await stalled;
    const big = nodeReview(kubeadmNode({ images: 3_000 }));
    expect(JSON.stringify(big).length).toBeGreaterThan(1024 * 1024);
    expect((await server.mutate(big)).status).toBe(200);
    // The stalled calls were cut off without an answer of their own: none left in flight.
    await eventually(async () => metricValue(await server.metrics(), 'kube_overcommit_admission_in_flight_requests') === 0);
  });

  it('an idle keep-alive connection outlives the headers timeout and is reused', async () => {
    const agent = new https.Agent({ keepAlive: true, maxSockets: 1 });
    const first = await send(`${server.https}/healthz`, { agent });
    await new Promise((r) => setTimeout(r, 1_500));
    const sockets = Object.values(agent.freeSockets).flat().length;
    const second = await send(`${server.https}/healthz`, { agent });
    expect([first.status, second.status, sockets]).toEqual([200, 200, 1]);
    agent.destroy();
  });

  it('past the connection limit a new connection is closed; one slot freed, it is served again', async () => {
    const port = server.running.httpsPort;
    const held: tls.TLSSocket[] = [];
    const open = () =>
      new Promise<tls.TLSSocket | undefined>((resolve) => {
        const socket = tls.connect({ host: '127.0.0.1', port, rejectUnauthorized: false }, () => resolve(socket));
        socket.once('error', () => resolve(undefined));
      });
    try {
      // Earlier tests' keep-alive connections may hold some of the 20 slots, and free them when they time out
      // while this loop runs (on a loaded machine it runs for seconds): what is bounded is the connections open at once.
      for (let socket = await open(); socket; socket = await open()) {
        held.push(socket);
        expect(held.filter((s) => !s.destroyed).length).toBeLessThanOrEqual(20);
      }
      expect((await handshake(port, {})).error).toBeDefined();
      const dropped = metricValue(await send(`${server.http}/metrics`).then((r) => r.text), 'kube_overcommit_http_refused_total', { reason: 'connections' });
      expect(dropped).toBeGreaterThanOrEqual(2);
      held.pop()!.destroy();
      await eventually(async () => (await handshake(port, {})).error === undefined);
    } finally {
      for (const socket of held) socket.destroy();
    }
  });
});

describe('a port already in use', () => {
  it('fails with EADDRINUSE, and the message names the variable to change', async () => {
    const busy = net.createServer();
    await new Promise<void>((resolve) => busy.listen(0, '127.0.0.1', resolve));
    const { port } = busy.address() as net.AddressInfo;
    try {
      const error = await createApp({ httpsPort: 0, httpPort: port, host: '127.0.0.1', env: {} }).then(
        () => undefined,
        (e: NodeJS.ErrnoException) => e,
      );
      expect(error?.code).toBe('EADDRINUSE');
      expect(portInUse(error!, { OVERCOMMIT_HTTPS_PORT: 8443, OVERCOMMIT_HTTP_PORT: port })?.message).toBe(
        `port ${port} is already in use (another kube-overcommit running?): stop that process, or set OVERCOMMIT_HTTP_PORT to a free port`,
      );
      expect(portInUse(new Error('other'), { OVERCOMMIT_HTTP_PORT: port })).toBeUndefined();
    } finally {
      busy.close();
    }
  });
});
