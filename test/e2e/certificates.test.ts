/**
 * Certificates against a real control plane: the README's `kubectl apply -k k8s/` on a bare
 * cluster (no cert-manager), the webhook issuing its own certificate (self-managed mode),
 * a renewal while kubelets write, `kubectl delete -k k8s/` leaving nothing; then the
 * k8s/cert-manager component, rendered, and applied over cert-manager's own CRDs with the
 * harness standing in for cert-manager (its controller cannot be built or run here).
 *
 * The cluster the other files share is made bare first (their overlay deleted) and restored at
 * the end (overlay applied again, a new ServiceAccount token in env.webhook.kubeconfig).
 * As in the other files, the webhook process stands in for the Deployment's pods, with the
 * rendered Deployment's environment and the RBAC the manifests grant; the webhook
 * configuration's clientConfig is pointed at it (a `url` instead of the Service), so in
 * self-managed mode its certificate also names 127.0.0.1 (OVERCOMMIT_CERT_EXTRA_SANS).
 */
import { execFileSync, spawnSync } from 'node:child_process';
import { X509Certificate } from 'node:crypto';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { createServer } from 'node:https';
import type { AddressInfo } from 'node:net';
import { connect } from 'node:tls';
import { generate, type SelfsignedOptions } from 'selfsigned';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseAllDocuments } from 'yaml';
import {
  adminClient,
  apiserverMetrics,
  claimNodeNames,
  e2eEnv,
  entryUrl,
  getNode,
  KubeApiError,
  kubectl,
  nodesWebhookName,
  SimKubelet,
  waitUntil,
  webhookCallCounts,
  WebhookProcess,
} from './harness/index.js';
import { freePort } from '../support/process.js';
import { renewWebhookToken } from '../support/setup.js';

const env = e2eEnv();
const admin = adminClient(env);
const K8S = join(env.repoRoot, 'k8s');
const NAMESPACE = 'kube-overcommit';
const SECRET = `/api/v1/namespaces/${NAMESPACE}/secrets/kube-overcommit-tls`;
const LEASE = `/apis/coordination.k8s.io/v1/namespaces/${NAMESPACE}/leases/kube-overcommit-certificates`;
const MWC = '/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations/kube-overcommit';
/** Short enough to see a whole renewal here: renewed at 40 s, served from the new CA 10 s later. */
const VALIDITY = '60s';
const SETTLE_MS = 10_000;
const POD_NAME = `kube-overcommit-e2e-${process.pid}`;

/** The rendered Deployment's own environment (literal values; the harness sets the downward-API ones). */
function containerEnv(docs: Record<string, any>[]): Record<string, string> {
  const deployment = docs.find((d) => d.kind === 'Deployment' && d.metadata.name === 'kube-overcommit')!;
  const vars: { name: string; value?: string }[] = deployment.spec.template.spec.containers.find((c: any) => c.name === 'webhook').env;
  return Object.fromEntries(vars.filter((v) => v.value !== undefined && !v.value.includes('$(')).map((v) => [v.name, v.value!]));
}

const walkEnv = {
  ...containerEnv(parseAllDocuments(execFileSync(join(env.binDir, 'kubectl'), ['kustomize', K8S], { encoding: 'utf8' })).map((d) => d.toJS())),
  OVERCOMMIT_SHUTDOWN_DELAY_MS: '200',
  OVERCOMMIT_CERT_EXTRA_SANS: '127.0.0.1',
  OVERCOMMIT_CERT_VALIDITY: VALIDITY,
};
const webhook = new WebhookProcess(env, { env: walkEnv });
/** A second replica on ports of its own: the API server does not call it, it only serves what the Secret holds. */
let replica2: WebhookProcess | undefined;
const REPLICA_2 = 'kube-overcommit-e2e-replica-2';
const kubelets: SimKubelet[] = [];

const pem = (base64: string | undefined) => Buffer.from(base64 ?? '', 'base64').toString('utf8');
const certificates = (text: string) => (text.match(/-----BEGIN CERTIFICATE-----[\s\S]+?-----END CERTIFICATE-----/g) ?? []).map((p) => new X509Certificate(p));

/** The Secret's certificates: the trusted CAs (fingerprints, newest first) and the serving certificate. */
async function readSecret() {
  const secret = await admin.get(SECRET);
  const cas = certificates(pem(secret.data?.['ca.crt']));
  const serving = secret.data?.['tls.crt'] ? new X509Certificate(pem(secret.data['tls.crt'])) : undefined;
  const issuer = serving && cas.find((ca) => serving.checkIssued(ca) && serving.verify(ca.publicKey));
  return { secret, cas: cas.map((c) => c.fingerprint256), serving, issuer: issuer?.fingerprint256 };
}

/** Every entry's caBundle (equal, or the test fails) as CA fingerprints, and the bundle text. */
async function readBundle() {
  const configuration = await admin.get(MWC);
  const bundles: string[] = configuration.webhooks.map((w: any) => pem(w.clientConfig.caBundle));
  expect(new Set(bundles).size, 'every entry carries the same caBundle').toBe(1);
  return {
    text: bundles[0]!,
    cas: certificates(bundles[0]!).map((c) => c.fingerprint256),
    since: configuration.metadata.annotations?.['kube-overcommit.io/ca-bundle-since'],
  };
}

/** The certificate a handshake gets, verified as the API server does: against the caBundle, for the address in the URL. */
function handshake(caBundle: string, port = env.webhook.httpsPort): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket = connect({ host: '127.0.0.1', port, ca: caBundle, rejectUnauthorized: true }, () => {
      resolve(socket.getPeerX509Certificate()!.fingerprint256);
      socket.end();
    });
    socket.setTimeout(5_000, () => socket.destroy(new Error('handshake timed out')));
    socket.on('error', reject);
  });
}

/** A failure of the connection, not of the certificate's verification. */
function isTransportError(error: NodeJS.ErrnoException): boolean {
  return ['ECONNREFUSED', 'ECONNRESET', 'EPIPE', 'ETIMEDOUT'].includes(error.code ?? '') || error.message === 'handshake timed out';
}

/** What of k8s/ exists in the cluster (`kubectl get -k k8s/`). */
async function leftovers(): Promise<string[]> {
  return (await kubectl(env, ['get', '-k', K8S, '--ignore-not-found', '-o', 'name'])).split('\n').filter(Boolean);
}

async function waitBare(what: string): Promise<void> {
  await waitUntil(
    what,
    async () => {
      const namespaceGone = await admin.get(`/api/v1/namespaces/${NAMESPACE}`).then(
        () => false,
        (e) => e instanceof KubeApiError && e.status === 404,
      );
      return namespaceGone && (await leftovers()).length === 0;
    },
    { timeoutMs: 120_000, intervalMs: 500, describe: leftovers },
  );
}

async function startKubelet(name: string): Promise<SimKubelet> {
  const kubelet = await SimKubelet.start(env, { name, capacity: { cpu: '4', memory: '8Gi', pods: '110' }, updateFrequencyMs: 1_000, reportFrequencyMs: 4_000 });
  kubelets.push(kubelet);
  return kubelet;
}

beforeAll(async () => {
  // A bare cluster: what the harness applied for the other files goes.
  await kubectl(env, ['delete', '-k', join(env.runDir, 'overlay'), '--ignore-not-found', '--wait=true'], { timeoutMs: 180_000 });
  await waitBare('the harness overlay to be gone');
}, 200_000);

afterAll(async () => {
  await Promise.all(kubelets.map((k) => k.stop({ deleteNode: true })));
  await replica2?.stop();
  await webhook.stop();
  await kubectl(env, ['delete', '-k', K8S, '--ignore-not-found', '--wait=true'], { timeoutMs: 180_000 });
  await waitBare('k8s/ to be gone before the harness overlay comes back');
  await kubectl(env, ['apply', '-k', join(env.runDir, 'overlay')]);
  await waitUntil('ServiceAccount kube-overcommit', () => admin.get(`/api/v1/namespaces/${NAMESPACE}/serviceaccounts/kube-overcommit`));
  await renewWebhookToken(env);
  admin.close();
}, 300_000);

describe('certificates without cert-manager (self-managed), the cluster walk', () => {
  it('1. kubectl apply -k k8s/ on a bare cluster: the webhook issues its own certificate, writes the caBundle of every entry, and inflates a node at its first write', async () => {
    await kubectl(env, ['apply', '-k', K8S]);
    // What apply made: an empty Secret, a Lease nobody holds, entries without a caBundle.
    expect((await admin.get(SECRET)).data ?? {}).toEqual({});
    expect((await admin.get(LEASE)).spec?.holderIdentity).toBeUndefined();
    const applied = await admin.get(MWC);
    for (const entry of applied.webhooks) expect(entry.clientConfig.caBundle, entry.name).toBeUndefined();

    // The stand-in for the Service: each entry's clientConfig points at this machine.
    await admin.patch(
      MWC,
      applied.webhooks.flatMap((entry: any, i: number) => [
        { op: 'test', path: `/webhooks/${i}/name`, value: entry.name },
        { op: 'remove', path: `/webhooks/${i}/clientConfig/service` },
        { op: 'add', path: `/webhooks/${i}/clientConfig/url`, value: entryUrl(env, entry.name) },
      ]),
      'json',
    );
    await waitUntil('ServiceAccount kube-overcommit', () => admin.get(`/api/v1/namespaces/${NAMESPACE}/serviceaccounts/kube-overcommit`));
    await renewWebhookToken(env);

    await webhook.start(); // ready = serving the certificate from the Secret
    const { secret, cas, serving, issuer } = await readSecret();
    expect(Object.keys(secret.data).sort()).toEqual(['ca.crt', 'ca.key', 'tls.crt', 'tls.key']);
    expect(cas).toHaveLength(1);
    expect(issuer).toBe(cas[0]);
    expect(serving!.subjectAltName).toBe(
      'DNS:kube-overcommit.kube-overcommit.svc, DNS:kube-overcommit.kube-overcommit.svc.cluster.local, IP Address:127.0.0.1',
    );
    const bundle = await readBundle();
    expect(bundle.text).toBe(pem(secret.data['ca.crt']));
    expect(await handshake(bundle.text)).toBe(serving!.fingerprint256);
    expect((await admin.get(LEASE)).spec.holderIdentity).toBe(POD_NAME);

    // Applying the manifests again leaves the issued certificate and the Lease alone.
    const shipped = parseAllDocuments(await kubectl(env, ['kustomize', K8S])).map((d) => d.toJS());
    const secretAndLease = shipped.filter(
      (d) => (d.kind === 'Secret' || d.kind === 'Lease') && ['kube-overcommit-tls', 'kube-overcommit-certificates'].includes(d.metadata.name),
    );
    expect(secretAndLease).toHaveLength(2);
    await kubectl(env, ['apply', '-f', '-'], { input: secretAndLease.map((d) => JSON.stringify(d)).join('\n---\n') });
    expect((await admin.get(SECRET)).data).toEqual(secret.data);
    expect((await admin.get(LEASE)).spec.holderIdentity).toBe(POD_NAME);

    // The one edit that turns overcommit on, then a kubelet registers: its first write is inflated.
    await webhook.useConfig({ nodes: { defaultRatios: { cpu: 2 } } });
    const name = nodesWebhookName(env);
    const before = webhookCallCounts(await apiserverMetrics(env), name);
    const [nodeName] = claimNodeNames(env, 'sim-node', 1);
    const kubelet = await startKubelet(nodeName!);
    expect((await getNode(admin, nodeName!)).allocatable.cpu).toBe('8');
    await kubelet.waitForPatches(1);
    const after = webhookCallCounts(await apiserverMetrics(env), name);
    expect(after.failOpen, 'calls that failed open').toBe(before.failOpen);
    expect(after.ok - before.ok).toBeGreaterThanOrEqual(2);
    kubelet.assertHealthy();
  });

  it('2. renewal while kubelets write: the new CA joins the bundle, the serving certificate follows after the settle time, the old CA leaves, the other replica serves it too; no call fails open or is rejected', async () => {
    const nodes = [kubelets[0]!, ...(await Promise.all(claimNodeNames(env, 'sim-node', 2).map(startKubelet)))];
    const [httpsPort, httpPort] = [await freePort(), await freePort()];
    replica2 = new WebhookProcess({ ...env, webhook: { ...env.webhook, httpsPort, httpPort } }, { env: { ...walkEnv, POD_NAME: REPLICA_2 } });
    await replica2.start();
    expect(await handshake((await readBundle()).text, httpsPort)).toBe((await readSecret()).serving!.fingerprint256);
    // From a steady state (one CA) to the next one with another CA.
    const start = await waitUntil('one CA in the bundle', async () => ((await readBundle()).cas.length === 1 ? readBundle() : undefined), {
      timeoutMs: 90_000,
    });
    const oldCa = start.cas[0]!;
    const name = nodesWebhookName(env);
    const before = webhookCallCounts(await apiserverMetrics(env), name);
    const patches0 = nodes.map((k) => k.stats.patchSuccesses);

    let bothSeenAt: number | undefined;
    let newServingAt: number | undefined;
    let newCa: string | undefined;
    let since: string | undefined;
    // The rotation's safety, observed at every probe and asserted after the wait: a violation seen
    // once fails the test, however the rotation goes on.
    const violations: string[] = [];
    await waitUntil(
      'a renewal: the serving certificate from a new CA, and only that CA in the bundle',
      async () => {
        const [bundle, secret] = await Promise.all([readBundle(), readSecret()]);
        if (bundle.cas.length === 2 && bothSeenAt === undefined) {
          if (bundle.cas[1] !== oldCa) violations.push(`the new bundle left out the old CA: ${JSON.stringify(bundle.cas)}`);
          newCa = bundle.cas[0];
          bothSeenAt = Date.now();
          since = bundle.since;
        }
        if (secret.issuer !== oldCa && secret.issuer !== undefined && newServingAt === undefined) {
          // The serving certificate switches only to a CA the webhook configuration already trusts ...
          if (!bundle.cas.includes(secret.issuer))
            violations.push(`serving certificate from ${secret.issuer}, not in the bundle ${JSON.stringify(bundle.cas)}`);
          newServingAt = Date.now();
        }
        // ... and every handshake verifies against the bundle in force (a connection the loaded machine drops is no verdict).
        const served = await handshake(bundle.text).catch((error: NodeJS.ErrnoException) => {
          if (!isTransportError(error)) violations.push(`handshake against the bundle ${JSON.stringify(bundle.cas)}: ${error.code ?? ''} ${error.message}`);
          return undefined;
        });
        return bundle.cas.length === 1 && bundle.cas[0] !== oldCa && secret.issuer === bundle.cas[0] && served === secret.serving?.fingerprint256;
      },
      { timeoutMs: 120_000, intervalMs: 250, describe: async () => ({ bundle: (await readBundle()).cas, secret: (await readSecret()).issuer, violations }) },
    );
    expect(violations).toEqual([]);
    // The other replica serves the new certificate too, without a restart; the leader did not change.
    await waitUntil(
      'replica 2 serves the new certificate',
      async () => (await handshake((await readBundle()).text, httpsPort)) === (await readSecret()).serving!.fingerprint256,
    );
    expect((await admin.get(LEASE)).spec.holderIdentity).toBe(POD_NAME);
    await Promise.all(nodes.map((k) => k.waitForPatches(2)));
    const after = webhookCallCounts(await apiserverMetrics(env), name);
    const patched = nodes.reduce((sum, k, i) => sum + k.stats.patchSuccesses - patches0[i]!, 0);
    expect(after.failOpen, 'calls that failed open').toBe(before.failOpen);
    expect(after.rejections, 'calls rejected').toBe(before.rejections);
    expect(after.notOk, 'calls answered other than 200').toBe(before.notOk);
    expect(after.ok - before.ok).toBeGreaterThanOrEqual(patched);

    expect(bothSeenAt, 'the bundle held the old and the new CA').toBeDefined();
    expect(newServingAt).toBeDefined();
    expect((await readSecret()).issuer).toBe(newCa);
    // Settled: the serving certificate was issued SETTLE_MS or more after the bundle was written.
    const issuedAt = Date.parse((await readSecret()).serving!.validFrom) + 5 * 60_000;
    expect(issuedAt - Date.parse(since!)).toBeGreaterThanOrEqual(SETTLE_MS - 1_000);
    const metrics = await webhook.metrics();
    expect(metrics.sum('kube_overcommit_tls_reloads_total', { result: 'success' })).toBeGreaterThanOrEqual(2);
    expect(metrics.sum('kube_overcommit_tls_reloads_total', { result: 'failure' })).toBe(0);
    for (const k of nodes) {
      k.assertHealthy();
      expect((await getNode(admin, k.name)).allocatable.cpu).toBe('8');
    }
  }, 180_000);

  it('3. the leader stopped releases the Lease and the other replica takes it; kubectl delete -k k8s/ leaves nothing behind', async () => {
    await Promise.all(kubelets.splice(0).map((k) => k.stop({ deleteNode: true })));
    await webhook.stop();
    await waitUntil('replica 2 to take the Lease', async () => (await admin.get(LEASE)).spec.holderIdentity === REPLICA_2, { timeoutMs: 10_000 });
    await replica2!.stop();
    expect((await admin.get(LEASE)).spec.holderIdentity).toBeUndefined();
    await kubectl(env, ['delete', '-k', K8S, '--wait=true'], { timeoutMs: 180_000 });
    await waitBare('everything of k8s/ to be gone');
    expect(await leftovers()).toEqual([]);
  }, 200_000);
});

/**
 * cert-manager's CRDs, from its Go module as the control plane is built from theirs (`go mod
 * download`: the Go module cache, the network the first time). Its controller cannot be built
 * from the module proxy (its cmd/ modules are not published there), so nothing issues here.
 */
const CERT_MANAGER_MODULE = 'github.com/cert-manager/cert-manager@v1.21.2';

async function certManagerCrds(): Promise<string> {
  const go = process.env.GO ?? ['go', '/usr/local/go/bin/go'].find((g) => spawnSync(g, ['version']).status === 0);
  if (!go) throw new Error("no Go toolchain (set GO=/path/to/go): needed for cert-manager's CRDs");
  const { stdout, stderr, status } = spawnSync(go, ['mod', 'download', '-json', CERT_MANAGER_MODULE], { encoding: 'utf8', cwd: env.runDir });
  if (status !== 0) throw new Error(`go mod download ${CERT_MANAGER_MODULE} failed: ${stderr || stdout}`);
  const dir = join(JSON.parse(stdout).Dir, 'deploy', 'crds');
  return ['cert-manager.io_issuers.yaml', 'cert-manager.io_certificates.yaml'].map((f) => readFileSync(join(dir, f), 'utf8')).join('\n---\n');
}

describe('k8s/cert-manager (cert-manager itself cannot run here)', () => {
  type Doc = Record<string, any>;
  const overlay = join(env.runDir, 'cert-manager-overlay');
  /** k8s/base with the component, and an annotation of the user's own on the webhook configuration. */
  async function render(): Promise<Doc[]> {
    mkdirSync(overlay, { recursive: true });
    writeFileSync(
      join(overlay, 'kustomization.yaml'),
      [
        'apiVersion: kustomize.config.k8s.io/v1beta1',
        'kind: Kustomization',
        `resources: [${relative(overlay, join(K8S, 'base'))}]`,
        `components: [${relative(overlay, join(K8S, 'cert-manager'))}]`,
        'patches:',
        '  - patch: |-',
        '      apiVersion: admissionregistration.k8s.io/v1',
        '      kind: MutatingWebhookConfiguration',
        '      metadata: { name: kube-overcommit, annotations: { example.com/owner: platform } }',
        '',
      ].join('\n'),
    );
    return parseAllDocuments(await kubectl(env, ['kustomize', overlay])).map((d) => d.toJS() as Doc);
  }

  it('4. rendered: a self-signed root, a CA Certificate, a CA Issuer and the serving Certificate from it into the mounted Secret; the CA injected from the CA Certificate; no self-managed object left', async () => {
    const docs = await render();
    const get = (kind: string, name: string) => {
      const found = docs.filter((d) => d.kind === kind && d.metadata.name === name);
      expect(found, `${kind} ${name}`).toHaveLength(1);
      return found[0]!;
    };
    const root = get('Issuer', 'kube-overcommit-selfsigned');
    expect(root.spec).toEqual({ selfSigned: {} });
    const ca = get('Certificate', 'kube-overcommit-ca');
    // Renewed with the same key: what it signed before still verifies against the renewed CA.
    expect(ca.spec).toMatchObject({ isCA: true, privateKey: { rotationPolicy: 'Never' }, issuerRef: { kind: 'Issuer', name: root.metadata.name } });
    const caIssuer = get('Issuer', 'kube-overcommit-ca');
    expect(caIssuer.spec).toEqual({ ca: { secretName: ca.spec.secretName } });
    const serving = get('Certificate', 'kube-overcommit');
    expect(serving.spec.isCA).toBeUndefined();
    expect(serving.spec.issuerRef).toEqual({ kind: 'Issuer', name: caIssuer.metadata.name });
    expect(serving.spec.dnsNames).toEqual(['kube-overcommit.kube-overcommit.svc', 'kube-overcommit.kube-overcommit.svc.cluster.local']);
    // What cert-manager's own webhook checks beyond the schema: renewBefore < duration, one kind per Issuer
    for (const c of [ca, serving]) {
      expect(c.metadata.namespace).toBe(NAMESPACE);
      expect(parseInt(c.spec.renewBefore)).toBeLessThan(parseInt(c.spec.duration));
    }
    for (const issuer of [root, caIssuer]) expect(Object.keys(issuer.spec)).toHaveLength(1);

    const deployment = get('Deployment', 'kube-overcommit');
    const pod = deployment.spec.template.spec;
    const container = pod.containers.find((c: Doc) => c.name === 'webhook');
    expect(container.env.filter((e: Doc) => e.name === 'OVERCOMMIT_CERT_MODE')).toEqual([{ name: 'OVERCOMMIT_CERT_MODE', value: 'files' }]);
    const volume = pod.volumes.find((v: Doc) => v.secret);
    expect(volume.secret.secretName).toBe(serving.spec.secretName);
    expect(container.volumeMounts).toContainEqual({ name: volume.name, mountPath: '/etc/kube-overcommit/tls', readOnly: true });

    const configuration = get('MutatingWebhookConfiguration', 'kube-overcommit');
    expect(configuration.metadata.annotations).toEqual({
      'example.com/owner': 'platform',
      'cert-manager.io/inject-ca-from': `${NAMESPACE}/${ca.metadata.name}`,
    });
    for (const entry of configuration.webhooks) expect(entry.clientConfig.caBundle).toBeUndefined();

    // The Leases of the reconciler and of usage-aware ratios stay: they are not certificate objects.
    const otherLeases = ['kube-overcommit-reconciler', 'kube-overcommit-usage'];
    expect(
      docs.filter(
        (d) => d.kind === 'Secret' || (d.kind === 'Lease' && !otherLeases.includes(d.metadata.name)) || d.metadata.name === 'kube-overcommit-certificates',
      ),
    ).toEqual([]);
  });

  it('4b. a CA renewed with the same key and name (rotationPolicy: Never) still verifies what the CA signed before', async () => {
    const subject = [{ name: 'commonName', value: 'kube-overcommit-ca' }];
    const caOptions: SelfsignedOptions = {
      keyType: 'ec',
      algorithm: 'sha256',
      extensions: [
        { name: 'basicConstraints', cA: true, critical: true },
        { name: 'keyUsage', keyCertSign: true, critical: true },
      ],
    };
    const before = await generate(subject, { ...caOptions, notAfterDate: new Date(Date.now() + 3_600_000) });
    const renewed = await generate(subject, {
      ...caOptions,
      keyPair: { privateKey: before.private, publicKey: before.public },
      notAfterDate: new Date(Date.now() + 7_200_000),
    });
    expect(renewed.cert).not.toBe(before.cert);
    const serving = await generate([{ name: 'commonName', value: 'kube-overcommit.kube-overcommit.svc' }], {
      keyType: 'ec',
      algorithm: 'sha256',
      ca: { cert: before.cert, key: before.private },
      extensions: [{ name: 'subjectAltName', altNames: [{ type: 7, ip: '127.0.0.1' }] }],
    });
    const server = createServer({ cert: serving.cert, key: serving.private });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    try {
      const port = (server.address() as AddressInfo).port;
      const authorized = await new Promise<boolean>((resolve, reject) => {
        const socket = connect({ host: '127.0.0.1', port, ca: renewed.cert }, () => {
          resolve(socket.authorized);
          socket.end();
        });
        socket.on('error', reject);
      });
      expect(authorized).toBe(true);
    } finally {
      server.close();
    }
  });

  it("5. applied with cert-manager's CRDs (strict validation by the API server), the CA injected and renewals of the serving certificate from that CA while kubelets write: no call fails open; delete -k leaves nothing", async () => {
    const crds = await certManagerCrds();
    await kubectl(env, ['apply', '--server-side', '-f', '-'], { input: crds });
    // Polled rather than `kubectl wait`, which fails outright on a CRD whose status has no conditions yet.
    for (const crd of ['certificates.cert-manager.io', 'issuers.cert-manager.io']) {
      await expect
        .poll(
          async () => {
            const stored = await admin.get<{ status?: { conditions?: { type: string; status: string }[] } }>(
              `/apis/apiextensions.k8s.io/v1/customresourcedefinitions/${crd}`,
            );
            return stored.status?.conditions?.some((c) => c.type === 'Established' && c.status === 'True') ?? false;
          },
          { timeout: 60_000, interval: 250 },
        )
        .toBe(true);
    }
    try {
      const docs = await render();
      await kubectl(env, ['apply', '--validate=strict', '-k', overlay]);
      // Stored as written: nothing pruned by cert-manager's schemas.
      for (const doc of docs.filter((d) => d.apiVersion === 'cert-manager.io/v1')) {
        const stored = await admin.get(`/apis/cert-manager.io/v1/namespaces/${NAMESPACE}/${doc.kind.toLowerCase()}s/${doc.metadata.name}`);
        expect(stored.spec, `${doc.kind} ${doc.metadata.name}`).toEqual(doc.spec);
      }
      // Standing in for cert-manager: its CA is the harness's (env.webhook.tlsDir holds a certificate
      // it issued, as the mounted Secret would); cainjector's part is the caBundle of every entry.
      const caBundle = readFileSync(join(env.webhook.tlsDir, '..', 'ca.crt')).toString('base64');
      const applied = await admin.get(MWC);
      await admin.patch(
        MWC,
        applied.webhooks.flatMap((entry: any, i: number) => [
          { op: 'test', path: `/webhooks/${i}/name`, value: entry.name },
          { op: 'replace', path: `/webhooks/${i}/clientConfig`, value: { url: entryUrl(env, entry.name), caBundle } },
        ]),
        'json',
      );
      await waitUntil('ServiceAccount kube-overcommit', () => admin.get(`/api/v1/namespaces/${NAMESPACE}/serviceaccounts/kube-overcommit`));
      await renewWebhookToken(env);

      const filesWebhook = new WebhookProcess(env, { env: { ...containerEnv(docs), OVERCOMMIT_SHUTDOWN_DELAY_MS: '200' } });
      await filesWebhook.start();
      try {
        await filesWebhook.useConfig({ nodes: { defaultRatios: { cpu: 2 } } });
        const nodes = await Promise.all(claimNodeNames(env, 'sim-node', 3).map(startKubelet));
        for (const k of nodes) expect((await getNode(admin, k.name)).allocatable.cpu).toBe('8');
        const name = nodesWebhookName(env);
        const before = webhookCallCounts(await apiserverMetrics(env), name);
        const patches0 = nodes.map((k) => k.stats.patchSuccesses);
        for (let i = 1; i <= 2; i++) {
          const { serialNumber } = await filesWebhook.rotateCertificate();
          await waitUntil(
            `renewal ${i}: certificate ${serialNumber} served`,
            async () => (await filesWebhook.servedCertificate()).serialNumber === serialNumber,
          );
          await Promise.all(nodes.map((k) => k.waitForPatches(2)));
        }
        const after = webhookCallCounts(await apiserverMetrics(env), name);
        const patched = nodes.reduce((sum, k, i) => sum + k.stats.patchSuccesses - patches0[i]!, 0);
        expect(after.failOpen, 'calls that failed open').toBe(before.failOpen);
        expect(after.rejections, 'calls rejected').toBe(before.rejections);
        expect(after.notOk, 'calls answered other than 200').toBe(before.notOk);
        expect(after.ok - before.ok).toBeGreaterThanOrEqual(patched);
        for (const k of nodes) k.assertHealthy();
      } finally {
        await Promise.all(kubelets.splice(0).map((k) => k.stop({ deleteNode: true })));
        await filesWebhook.stop();
      }
      await kubectl(env, ['delete', '-k', overlay, '--wait=true'], { timeoutMs: 180_000 });
      await waitUntil(
        'nothing of the cert-manager kustomization left',
        async () => (await kubectl(env, ['get', '-k', overlay, '--ignore-not-found', '-o', 'name'])).trim() === '',
        {
          timeoutMs: 120_000,
          intervalMs: 500,
        },
      );
    } finally {
      await kubectl(env, ['delete', '--ignore-not-found', '-f', '-'], { input: crds });
    }
  }, 300_000);
});
