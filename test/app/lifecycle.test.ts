import { writeFileSync } from 'node:fs';
import https from 'node:https';
import net from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import tls from 'node:tls';
import { afterAll, describe, expect, it } from 'vitest';
import { LifecycleService } from '../../src/health/lifecycle.service.js';
import { IDLE_GRACE_MS } from '../../src/server/server-drain.js';
import { kubeadmNode, nodeReview } from '../fixtures/nodes.js';
import { LEVEL, eventually, send, startServer, type TestServer } from './harness.js';

/** A port with nothing listening: connections are refused at once. */
async function closedPort(): Promise<number> {
  const server = net.createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as net.AddressInfo;
  await new Promise((resolve) => server.close(resolve));
  return port;
}

/** Whether a new TCP connection to `port` is refused: the listener is closed. */
function refuses(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = net.connect(port, '127.0.0.1');
    socket.once('connect', () => (socket.destroy(), resolve(false)));
    socket.once('error', () => resolve(true));
  });
}

/** A kubeconfig whose API server refuses connections. */
async function unreachableKubeconfig(): Promise<string> {
  const port = await closedPort();
  const kubeconfig = join(tmpdir(), `kube-overcommit-unreachable-${port}.kubeconfig`);
  writeFileSync(
    kubeconfig,
    JSON.stringify({
      apiVersion: 'v1',
      kind: 'Config',
      clusters: [{ name: 'gone', cluster: { server: `https://127.0.0.1:${port}`, 'insecure-skip-tls-verify': true } }],
      users: [{ name: 'sa', user: { token: 'unused' } }],
      contexts: [{ name: 'gone', context: { cluster: 'gone', user: 'sa' } }],
      'current-context': 'gone',
    }),
  );
  return kubeconfig;
}

describe('draining on shutdown', () => {
  let server: TestServer | undefined;
  afterAll(async () => {
    await server?.stop().catch(() => undefined);
  });

  it('turns unready while still answering admission calls, then closes', async () => {
    server = await startServer('nodes: { defaultRatios: { cpu: 2 } }');
    expect((await send(`${server.http}/readyz`)).status).toBe(200);
    server.running.app.get(LifecycleService).startDraining();

    const ready = await send(`${server.http}/readyz`);
    expect(ready.status).toBe(503);
    expect(ready.json().error.lifecycle).toEqual({ status: 'down', message: 'shutting down' });
    expect((await send(`${server.http}/healthz`)).status).toBe(200);
    // The API server may still send calls until endpoints drop us: they are answered.
    const reply = await server.mutate(nodeReview(kubeadmNode()));
    expect(reply.status).toBe(200);
    expect(reply.json().response.patch).toBeDefined();

    const { httpsPort } = server.running;
    await server.running.close();
    expect(await refuses(httpsPort)).toBe(true);
    server = undefined;
  });
});

/** Where the server was when a request was sent: `closed` once `close()` has resolved. */
type Phase = 'serving' | 'draining' | 'closing' | 'closed';

interface Call {
  phase: Phase;
  /** Whether the request went out on a connection whose TLS handshake had finished. */
  onOpenConnection: boolean;
  status?: number;
  connection?: string;
  error?: string;
}

/** One POST /mutate on `agent`, recorded whatever happens. */
function call(url: string, agent: https.Agent, body: string, phase: Phase): Promise<Call> {
  return new Promise((resolve) => {
    const record: Call = { phase, onOpenConnection: false };
    const req = https.request(url, { method: 'POST', agent, headers: { 'content-type': 'application/json' } }, (res) => {
      res.resume();
      res.on('end', () => resolve({ ...record, status: res.statusCode, connection: res.headers.connection }));
    });
    req.on('socket', (socket) => {
      if (req.reusedSocket) record.onOpenConnection = true;
      else socket.once('secureConnect', () => (record.onOpenConnection = true));
    });
    req.on('error', (error: NodeJS.ErrnoException) => resolve({ ...record, error: error.code ?? error.message }));
    req.end(body);
  });
}

describe('draining under load, keep-alive clients', () => {
  let server: TestServer | undefined;
  afterAll(async () => {
    await server?.stop().catch(() => undefined);
  });

  it('answers every request sent before the listener closed: Connection: close while draining, 0 resets', async () => {
    server = await startServer('nodes: { defaultRatios: { cpu: 2 } }');
    const { running } = server;
    const url = `${server.https}/mutate`;
    const body = JSON.stringify(nodeReview(kubeadmNode()));
    const agent = new https.Agent({ keepAlive: true, maxSockets: 16, rejectUnauthorized: false });
    const calls: Call[] = [];
    const settled = (phase: Phase) => calls.filter((c) => c.phase === phase);
    // Each step waits for calls to have happened, not for time to pass: a loaded machine only
    // makes the test slower.
    let progress = () => {};
    const until = (check: () => boolean) => new Promise<void>((resolve) => (progress = () => void (check() && resolve()))());
    let phase: Phase = 'serving';
    const client = async () => {
      while (phase !== 'closed' || settled('closed').length < 16) {
        calls.push(await call(url, agent, body, phase));
        progress();
      }
    };
    const clients = Array.from({ length: 16 }, client);

    // Every client on a keep-alive connection, then draining while they keep sending.
    await until(() => settled('serving').filter((c) => c.status !== undefined).length >= 100);
    running.app.get(LifecycleService).startDraining();
    phase = 'draining';
    await until(() => settled('draining').filter((c) => c.status !== undefined).length >= 16);
    phase = 'closing';
    await running.close();
    phase = 'closed';
    await Promise.all(clients);
    agent.destroy();
    server = undefined;

    const beforeClose = calls.filter((c) => c.phase === 'serving' || c.phase === 'draining');
    // Every request sent before close() on an open connection was answered, and answered 200; the
    // only failures allowed are connections that were still being opened when the listener closed.
    expect(beforeClose.filter((c) => c.error !== undefined && c.onOpenConnection)).toEqual([]);
    expect(beforeClose.filter((c) => c.error === undefined && c.status !== 200)).toEqual([]);
    expect(beforeClose.filter((c) => c.status === 200).length).toBeGreaterThanOrEqual(116);
    // While draining every answer tells the client to leave the connection.
    const drained = calls.filter((c) => c.phase !== 'serving' && c.status !== undefined);
    expect(drained.length).toBeGreaterThanOrEqual(16);
    expect(drained.every((c) => c.connection === 'close')).toBe(true);
    // Once close() has resolved, connections open at the close have finished: nothing is
    // answered, no client is left on a connection to a closed server, every new one is refused.
    const late = calls.filter((c) => c.phase === 'closed');
    expect(late.length).toBeGreaterThanOrEqual(16);
    expect(late.filter((c) => c.status !== undefined)).toEqual([]);
  });
});

/** A POST /mutate written by hand, so a test can send part of it. */
const rawRequest = (body: string, headers = '') =>
  `POST /mutate HTTP/1.1\r\nhost: localhost\r\ncontent-type: application/json\r\ncontent-length: ${Buffer.byteLength(body)}\r\n${headers}\r\n${body}`;

/** A TLS connection whose bytes the test writes itself; what it received, its errors, when it closed. */
interface RawConnection {
  socket: tls.TLSSocket;
  acceptedAt: number;
  received: () => string;
  errors: string[];
  closed: Promise<number>;
}

async function rawConnection(port: number): Promise<RawConnection> {
  const socket = tls.connect({ host: '127.0.0.1', port, rejectUnauthorized: false });
  let text = '';
  const errors: string[] = [];
  socket.on('data', (chunk: Buffer) => (text += chunk.toString('utf8')));
  socket.on('error', (error: NodeJS.ErrnoException) => errors.push(error.code ?? error.message));
  const closed = new Promise<number>((resolve) => socket.once('close', () => resolve(performance.now())));
  await new Promise((resolve) => socket.once('secureConnect', resolve));
  return { socket, acceptedAt: performance.now(), received: () => text, errors, closed };
}

/** The answers in `text`: status and `Connection` header of each (100 Continue left out). */
function answers(text: string): { status: number; connection?: string }[] {
  return [...text.matchAll(/HTTP\/1\.1 (\d{3})[^\r]*\r\n((?:[^\r]+\r\n)*)\r\n/g)]
    .map(([, status, head]) => ({ status: Number(status), connection: /^connection: (.*)$/im.exec(head)?.[1] }))
    .filter((answer) => answer.status !== 100);
}

describe('the drain, connection by connection', () => {
  let server: TestServer | undefined;
  afterAll(async () => {
    await server?.stop().catch(() => undefined);
  });
  const body = JSON.stringify(nodeReview(kubeadmNode()));

  it('closes a kept-alive connection left idle once the drain starts, while the listener still accepts', async () => {
    server = await startServer('nodes: { defaultRatios: { cpu: 2 } }');
    const { running } = server;
    const kept = await rawConnection(running.httpsPort);
    kept.socket.write(rawRequest(body));
    await eventually(async () => answers(kept.received()).length === 1);
    expect(answers(kept.received())).toEqual([{ status: 200, connection: 'keep-alive' }]);

    running.app.get(LifecycleService).startDraining();
    // Closed by the server, quietly, once idle for the grace (idle since its answer, before the drain).
    await kept.closed;
    expect(kept.errors).toEqual([]);
    // The listeners still accept, and every answer says Connection: close (those answered before
    // a request reaches a handler too: HTTPS and plain HTTP).
    expect(await refuses(running.httpsPort)).toBe(false);
    const fresh = await server.mutate(nodeReview(kubeadmNode()));
    expect([fresh.status, fresh.headers.connection]).toEqual([200, 'close']);
    const overHttp = await send(`${server.http}/mutate`, { body });
    expect([overHttp.status, overHttp.headers.connection]).toEqual([404, 'close']);
    await running.close();
    server = undefined;
  });

  it('lets a call in flight when the listener closes finish: answered 200 with Connection: close, then close() resolves', async () => {
    server = await startServer('nodes: { defaultRatios: { cpu: 2 } }');
    const { running } = server;
    const inFlight = await rawConnection(running.httpsPort);
    const request = rawRequest(body, 'expect: 100-continue\r\n');
    // Headers and most of the body: the 100 says the server has the call.
    inFlight.socket.write(request.slice(0, -100));
    await eventually(async () => inFlight.received().startsWith('HTTP/1.1 100 Continue'));
    let closeResolved = false;
    const closing = running.close().then(() => (closeResolved = true));
    await eventually(() => refuses(running.httpsPort));
    expect(closeResolved).toBe(false);
    inFlight.socket.write(request.slice(-100));
    await inFlight.closed;
    expect(inFlight.errors).toEqual([]);
    expect(answers(inFlight.received())).toEqual([{ status: 200, connection: 'close' }]);
    await closing;
    server = undefined;
  });

  it('answers the first call of a connection accepted before the listener closed, and closes a silent one after the grace', async () => {
    server = await startServer('nodes: { defaultRatios: { cpu: 2 } }');
    const { running } = server;
    const late = await rawConnection(running.httpsPort);
    const silent = await rawConnection(running.httpsPort);
    let closeResolved = false;
    const closing = running.close().then(() => (closeResolved = true));
    await eventually(() => refuses(running.httpsPort));
    // Node's own server.close() would have reset both here, their calls not yet received.
    late.socket.write(rawRequest(body));
    await late.closed;
    expect(late.errors).toEqual([]);
    expect(answers(late.received())).toEqual([{ status: 200, connection: 'close' }]);
    expect(closeResolved).toBe(false);
    const silentClosedAt = await silent.closed;
    expect(silent.received()).toBe('');
    expect(silentClosedAt - silent.acceptedAt).toBeGreaterThanOrEqual(IDLE_GRACE_MS);
    await closing;
    server = undefined;
  });
});

describe('an unreachable API server', () => {
  let server: TestServer | undefined;
  afterAll(async () => {
    await server?.stop();
  });

  it('keeps serving admission with the config in force, unready, naming the problem', async () => {
    const kubeconfig = await unreachableKubeconfig();
    // No config file: cluster mode (OVERCOMMIT_KUBECONFIG), the ConfigMap source cannot list.
    server = await startServer('', { OVERCOMMIT_CONFIG_FILE: '', OVERCOMMIT_KUBECONFIG: kubeconfig, POD_NAMESPACE: 'kube-overcommit' });

    const ready = await send(`${server.http}/readyz`);
    expect(ready.status).toBe(503);
    expect(ready.json().error.config).toEqual({ status: 'down', message: 'config source not synced yet' });
    expect((await send(`${server.http}/healthz`)).status).toBe(200);

    // Admission keeps working on the built-in defaults (ratio 1: admitted unchanged).
    for (let i = 0; i < 3; i++) {
      const review = nodeReview(kubeadmNode());
      const reply = await server.mutate(review);
      expect(reply.status).toBe(200);
      expect(reply.json().response).toEqual({ uid: review.request.uid, allowed: true });
    }
    // Still retrying in the background, still serving; the retries name the server and the cause.
    await new Promise((r) => setTimeout(r, 1_500));
    const again = await eventually(async () => (await send(`${server!.https}/healthz`)).status === 200);
    expect(again).toBe(true);
    const retries = server.logs(LEVEL.warn).map((line) => line.msg);
    expect(retries).toContainEqual(
      expect.stringMatching(
        /^watch of ConfigMap kube-overcommit\/kube-overcommit-config failed \(cannot reach https:\/\/127\.0\.0\.1:\d+: ECONNREFUSED\); retrying in \d+ ms$/,
      ),
    );
  });

  it('ignores a KUBECONFIG set for kubectl: only OVERCOMMIT_KUBECONFIG selects a cluster', async () => {
    const local = await startServer('nodes: { defaultRatios: { cpu: 2 } }', { KUBECONFIG: await unreachableKubeconfig() });
    try {
      expect((await send(`${local.http}/readyz`)).status).toBe(200);
      expect((await local.mutate(nodeReview(kubeadmNode()))).json().response.patch).toBeDefined();
    } finally {
      await local.stop();
    }
  });
});
