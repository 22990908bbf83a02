import { execFile } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import https from 'node:https';
import type { E2eEnv } from './env.js';

/** A non-2xx answer of the API server. */
export class KubeApiError extends Error {
  constructor(
    readonly method: string,
    readonly path: string,
    readonly status: number,
    readonly body: any,
  ) {
    super(
      `${method} ${path}: HTTP ${status}${body?.reason ? ` ${body.reason}` : ''}: ${body?.message ?? (typeof body === 'string' ? body.slice(0, 300) : JSON.stringify(body))}`,
    );
    this.name = 'KubeApiError';
  }
}

export type PatchType = 'strategic' | 'merge' | 'json' | 'apply';
const PATCH_CONTENT_TYPES: Record<PatchType, string> = {
  strategic: 'application/strategic-merge-patch+json',
  merge: 'application/merge-patch+json',
  json: 'application/json-patch+json',
  apply: 'application/apply-patch+yaml',
};

export interface RequestOptions {
  body?: unknown;
  contentType?: string;
  /** Query parameters (e.g. `{ fieldManager: 'e2e', labelSelector: 'a=b' }`). */
  query?: Record<string, string | number | boolean | undefined>;
  timeoutMs?: number;
}

/**
 * A minimal API client over node:https with a bearer token, in the style of what a kubelet or
 * controller sends: JSON in, JSON out, non-2xx as KubeApiError. Plain enough to be sure what
 * goes over the wire (the patch type, the subresource) — @kubernetes/client-node is available
 * too: see adminKubeConfig().
 */
export class KubeClient {
  private readonly agent: https.Agent;

  constructor(
    readonly server: string,
    private readonly token: string,
    ca: string | Buffer,
    /** Who this is, for messages (e.g. `system:node:sim-node-3`). */
    readonly identity: string,
    /** The User-Agent sent: the API server's field manager names managedFields entries after it. */
    private readonly userAgent?: string,
  ) {
    this.agent = new https.Agent({ ca, keepAlive: true, maxSockets: 8 });
  }

  /** The answer, whatever its status; `body` parsed as JSON when it is JSON. */
  async raw(method: string, path: string, options: RequestOptions = {}): Promise<{ status: number; body: any; text: string }> {
    const url = new URL(path, this.server);
    for (const [key, value] of Object.entries(options.query ?? {})) if (value !== undefined) url.searchParams.set(key, String(value));
    const payload = options.body === undefined ? undefined : typeof options.body === 'string' ? options.body : JSON.stringify(options.body);
    return new Promise((resolve, reject) => {
      const req = https.request(
        url,
        {
          method,
          agent: this.agent,
          headers: {
            authorization: `Bearer ${this.token}`,
            accept: 'application/json, */*',
            ...(this.userAgent !== undefined ? { 'user-agent': this.userAgent } : {}),
            ...(payload !== undefined ? { 'content-type': options.contentType ?? 'application/json', 'content-length': Buffer.byteLength(payload) } : {}),
          },
          timeout: options.timeoutMs ?? 15_000,
        },
        (res) => {
          const chunks: Buffer[] = [];
          res.on('data', (c: Buffer) => chunks.push(c));
          res.on('end', () => {
            const text = Buffer.concat(chunks).toString('utf8');
            let body: any = text;
            if ((res.headers['content-type'] ?? '').includes('json') && text !== '') {
              try {
                body = JSON.parse(text);
              } catch {
                // leave as text
              }
            }
            resolve({ status: res.statusCode ?? 0, body, text });
          });
          res.on('error', reject);
        },
      );
      req.on('timeout', () => req.destroy(new Error(`${method} ${path}: no answer within ${options.timeoutMs ?? 15_000} ms`)));
      req.on('error', reject);
      if (payload !== undefined) req.write(payload);
      req.end();
    });
  }

  async request<T = any>(method: string, path: string, options: RequestOptions = {}): Promise<T> {
    const { status, body } = await this.raw(method, path, options);
    if (status < 200 || status >= 300) throw new KubeApiError(method, path, status, body);
    return body as T;
  }

  get<T = any>(path: string, query?: RequestOptions['query']): Promise<T> {
    return this.request<T>('GET', path, { query });
  }

  post<T = any>(path: string, body: unknown, query?: RequestOptions['query']): Promise<T> {
    return this.request<T>('POST', path, { body, query });
  }

  put<T = any>(path: string, body: unknown, query?: RequestOptions['query']): Promise<T> {
    return this.request<T>('PUT', path, { body, query });
  }

  patch<T = any>(path: string, body: unknown, type: PatchType = 'strategic', query?: RequestOptions['query']): Promise<T> {
    return this.request<T>('PATCH', path, { body, contentType: PATCH_CONTENT_TYPES[type], query });
  }

  delete<T = any>(path: string, query?: RequestOptions['query'], body?: unknown): Promise<T> {
    return this.request<T>('DELETE', path, { query, body });
  }

  /** GET returning the text (e.g. /metrics). */
  async text(path: string): Promise<string> {
    const { status, text } = await this.raw('GET', path);
    if (status !== 200) throw new KubeApiError('GET', path, status, text);
    return text;
  }

  close(): void {
    this.agent.destroy();
  }
}

/** The cluster admin (group system:masters). */
export function adminClient(env: E2eEnv): KubeClient {
  return new KubeClient(env.apiserverUrl, env.adminToken, readFileSync(env.caFile), 'admin');
}

/** The static token of node `name` (cluster.sh make_tokens): `node-<name>`. */
export function nodeToken(name: string): string {
  return `node-${name}`;
}

/**
 * A node identity: user `system:node:<name>`, group `system:nodes`, token `node-<name>`.
 * cluster.sh makes tokens for sim-node-0..1099 and kwok-node-0..19 only. It sends a kubelet's
 * User-Agent, so its writes land in managedFields under the manager `kubelet`, as a kubelet's do.
 */
export function nodeClient(env: E2eEnv, name: string): KubeClient {
  return new KubeClient(
    env.apiserverUrl,
    nodeToken(name),
    readFileSync(env.caFile),
    `system:node:${name}`,
    `kubelet/${env.k8sVersion} (linux/amd64) kubernetes/e2e`,
  );
}

/** A kubeconfig file (mode 0600) for `user` with a bearer token, trusting the cluster CA by its path. */
export function writeTokenKubeconfig(file: string, server: string, caFile: string, user: string, token: string): void {
  const text = [
    'apiVersion: v1',
    'kind: Config',
    'clusters:',
    `- name: e2e`,
    `  cluster: { server: "${server}", certificate-authority: "${caFile}" }`,
    'users:',
    `- name: "${user}"`,
    `  user: { token: "${token}" }`,
    'contexts:',
    `- name: e2e`,
    `  context: { cluster: e2e, user: "${user}" }`,
    'current-context: e2e',
    '',
  ].join('\n');
  writeFileSync(file, text, { mode: 0o600 });
}

/** A client with any bearer token (e.g. a ServiceAccount token from `kubectl create token`). */
export function tokenClient(env: E2eEnv, token: string, identity: string): KubeClient {
  return new KubeClient(env.apiserverUrl, token, readFileSync(env.caFile), identity);
}

/** The admin kubeconfig for @kubernetes/client-node (`kc.makeApiClient(CoreV1Api)`). */
export async function adminKubeConfig(env: E2eEnv) {
  const { KubeConfig } = await import('@kubernetes/client-node');
  const kc = new KubeConfig();
  kc.loadFromFile(env.adminKubeconfig);
  return kc;
}

/**
 * The built kubectl as admin. Resolves with stdout; rejects with stderr in the message.
 *   await kubectl(env, ['apply', '-f', '-'], { input: yaml });
 */
export function kubectl(env: E2eEnv, args: string[], options: { input?: string; timeoutMs?: number } = {}): Promise<string> {
  return new Promise((resolve, reject) => {
    const child = execFile(
      `${env.binDir}/kubectl`,
      [`--kubeconfig=${env.adminKubeconfig}`, `--cache-dir=${env.runDir}/kube-cache`, '--request-timeout=20s', ...args],
      { timeout: options.timeoutMs ?? 60_000, maxBuffer: 64 * 1024 * 1024, env: { ...process.env, KUBECONFIG: env.adminKubeconfig } },
      (error, stdout, stderr) => {
        if (error) reject(new Error(`kubectl ${args.join(' ')} failed: ${stderr.trim() || error.message}`));
        else resolve(stdout);
      },
    );
    if (options.input !== undefined) child.stdin!.end(options.input);
  });
}

/** Deletes a Node (gone already is fine) and its Lease in kube-node-lease, as admin: a kubelet's stop({ deleteNode }). */
export async function deleteNodeAndLease(env: E2eEnv, name: string): Promise<void> {
  const admin = adminClient(env);
  try {
    await admin.delete(`/api/v1/nodes/${name}`).catch((e) => (e instanceof KubeApiError && e.status === 404 ? undefined : Promise.reject(e)));
    await admin.delete(`/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/${name}`).catch(() => undefined);
  } finally {
    admin.close();
  }
}
