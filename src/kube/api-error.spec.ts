import { ApiException, CoreV1Api, KubeConfig, Watch } from '@kubernetes/client-node';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { describeApiError } from './api-error.js';

function kubeConfigFor(server: string): KubeConfig {
  const kube = new KubeConfig();
  kube.loadFromOptions({
    clusters: [{ name: 'c', server, skipTLSVerify: true }],
    users: [{ name: 'u', token: 'unused' }],
    contexts: [{ name: 'c', cluster: 'c', user: 'u' }],
    currentContext: 'c',
  });
  return kube;
}

async function listen(handler: http.RequestListener): Promise<{ server: http.Server; url: string }> {
  const server = http.createServer(handler);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { server, url: `http://127.0.0.1:${(server.address() as AddressInfo).port}` };
}

const FORBIDDEN = {
  kind: 'Status',
  apiVersion: 'v1',
  status: 'Failure',
  reason: 'Forbidden',
  code: 403,
  message: 'namespaces is forbidden: User "x" cannot list resource "namespaces"',
};

describe('describeApiError, on what client-node really throws', () => {
  let open: http.Server | undefined;
  afterEach(() => new Promise<void>((resolve) => (open ? open.close(() => resolve()) : resolve())));

  it('a server that refuses connections: its address and the cause instead of "fetch failed"', async () => {
    const { server, url } = await listen(() => {});
    await new Promise((resolve) => server.close(resolve));
    const error = await kubeConfigFor(url)
      .makeApiClient(CoreV1Api)
      .listNamespace()
      .catch((e: unknown) => e);
    expect((error as Error).message).toBe('fetch failed');
    expect(describeApiError(error, url)).toBe(`cannot reach ${url}: ECONNREFUSED`);
  });

  it('an HTTP error from a request: the status code and the Status message, on one line', async () => {
    const listening = await listen((_req, res) => res.writeHead(403, { 'content-type': 'application/json' }).end(JSON.stringify(FORBIDDEN)));
    open = listening.server;
    const error = await kubeConfigFor(listening.url)
      .makeApiClient(CoreV1Api)
      .listNamespace()
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ApiException);
    expect(describeApiError(error, listening.url)).toBe(`${listening.url} answered 403: ${FORBIDDEN.message}`);
  });

  it('an HTTP error from a watch: the status code and text', async () => {
    const listening = await listen((_req, res) => res.writeHead(403).end());
    open = listening.server;
    // A watch reports its failure through its done callback, as ListWatch receives it.
    const error = await new Promise((resolve) => void new Watch(kubeConfigFor(listening.url)).watch('/api/v1/namespaces', {}, () => {}, resolve));
    expect(describeApiError(error, listening.url)).toBe(`${listening.url} answered 403 Forbidden`);
  });

  it('anything else keeps its message, prefixed by the server (or "the API server" when unknown)', () => {
    expect(describeApiError(new Error('No currently active cluster'), undefined)).toBe('the API server: No currently active cluster');
    expect(describeApiError('boom', 'https://k:6443')).toBe('https://k:6443: boom');
  });
});
