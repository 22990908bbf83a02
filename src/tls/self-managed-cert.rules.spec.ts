import { X509Certificate } from 'node:crypto';
import { createServer } from 'node:https';
import type { AddressInfo } from 'node:net';
import { connect } from 'node:tls';
import { beforeAll, describe, expect, it } from 'vitest';
import { issueCa, issueServing } from './cert-authority.js';
import {
  BACKDATE_MS,
  BUNDLE_SINCE_ANNOTATION,
  type CertSecretState,
  type Certificate,
  GRACE_MS,
  SETTLE_MS,
  type WebhookBundleState,
  caBundleText,
  certSecretData,
  planCertificates,
  readCertMode,
  readCertSecret,
  readDuration,
  readSelfManagedSettings,
  readWebhookBundle,
  renewalTime,
} from './self-managed-cert.rules.js';

const settings = readSelfManagedSettings({ OVERCOMMIT_CERT_VALIDITY: '90d' }, 'kube-overcommit');
const HOUR = 3_600_000;
const at = (ms: number) => new Date(T0 + ms);
const T0 = Date.parse('2026-01-01T00:00:00Z');

type Ca = { ca: Certificate; key: string };

/** The Secret as the API returns it, read back. */
function secret(cas: Ca[], serving?: { serving: Certificate; key: string }, caKey = cas[0]?.key): CertSecretState {
  return readCertSecret(certSecretData({ cas: cas.map((c) => c.ca), caKey, serving: serving && { pem: serving.serving.pem, key: serving.key } }));
}

function webhook(bundle: string, since: Date, entries = 3): WebhookBundleState {
  return readWebhookBundle({
    metadata: { annotations: { [BUNDLE_SINCE_ANNOTATION]: since.toISOString() } },
    webhooks: Array.from({ length: entries }, () => ({ clientConfig: { caBundle: Buffer.from(bundle).toString('base64') } })),
  });
}

describe('settings', () => {
  it('reads the mode, files by default, and refuses anything else', () => {
    expect(readCertMode({})).toBe('files');
    expect(readCertMode({ OVERCOMMIT_CERT_MODE: 'self-managed' })).toBe('self-managed');
    expect(() => readCertMode({ OVERCOMMIT_CERT_MODE: 'cert-manager' })).toThrow('OVERCOMMIT_CERT_MODE must be one of files, self-managed, got "cert-manager"');
  });

  it('names the Service in the namespace, adds extra names and addresses', () => {
    const s = readSelfManagedSettings({ OVERCOMMIT_CERT_EXTRA_SANS: ' 127.0.0.1, ::1,webhook.example.com ' }, 'platform');
    expect(s.dnsNames).toEqual(['kube-overcommit.platform.svc', 'kube-overcommit.platform.svc.cluster.local', 'webhook.example.com']);
    expect(s.ipAddresses).toEqual(['127.0.0.1', '::1']);
    expect(s.validityMs).toBe(365 * 24 * HOUR);
    expect(() => readSelfManagedSettings({ OVERCOMMIT_CERT_EXTRA_SANS: 'not a name' }, 'p')).toThrow(
      'OVERCOMMIT_CERT_EXTRA_SANS: "not a name" is neither an IP address nor a DNS name',
    );
  });

  it('reads durations and refuses a validity too short to renew in', () => {
    expect(readDuration('X', '90s')).toBe(90_000);
    expect(readDuration('X', '8760h')).toBe(365 * 24 * HOUR);
    expect(readDuration('X', '2d')).toBe(48 * HOUR);
    expect(() => readDuration('X', '1y')).toThrow('X must be a whole number of s, m, h or d (e.g. 8760h), got "1y"');
    expect(() => readSelfManagedSettings({ OVERCOMMIT_CERT_VALIDITY: '59s' }, 'p')).toThrow('OVERCOMMIT_CERT_VALIDITY must be at least 60s');
  });
});

describe('issued certificates', () => {
  let ca: Ca;
  let serving: { serving: Certificate; key: string };
  beforeAll(async () => {
    ca = await issueCa(at(0), 90 * 24 * HOUR);
    serving = await issueServing(ca, { ...settings, ipAddresses: ['127.0.0.1'] }, at(0));
  });

  it('a CA, and a serving certificate for the names that it signed, backdated', () => {
    expect(ca.ca.x509.ca).toBe(true);
    expect(serving.serving.x509.ca).toBe(false);
    expect(serving.serving.x509.checkIssued(ca.ca.x509)).toBe(true);
    expect(serving.serving.x509.verify(ca.ca.x509.publicKey)).toBe(true);
    expect(serving.serving.x509.subjectAltName).toBe(
      'DNS:kube-overcommit.kube-overcommit.svc, DNS:kube-overcommit.kube-overcommit.svc.cluster.local, IP Address:127.0.0.1',
    );
    expect(Date.parse(serving.serving.x509.validFrom)).toBe(T0 - BACKDATE_MS);
    expect(serving.serving.issuedAt).toEqual(at(0));
    expect(serving.serving.notAfter).toEqual(at(90 * 24 * HOUR));
  });

  it('never outlives its CA', async () => {
    const later = await issueServing(ca, settings, at(80 * 24 * HOUR));
    expect(later.serving.notAfter).toEqual(ca.ca.notAfter);
  });

  it('a TLS client that trusts the CA (as the API server does from caBundle) accepts the serving certificate', async () => {
    const now = await issueCa(new Date(), HOUR);
    const leaf = await issueServing(now, { ...settings, ipAddresses: ['127.0.0.1'] }, new Date());
    const server = createServer({ cert: leaf.serving.pem, key: leaf.key }, (_q, r) => r.end());
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    const port = (server.address() as AddressInfo).port;
    try {
      for (const servername of ['kube-overcommit.kube-overcommit.svc', undefined]) {
        const authorized = await new Promise<boolean>((resolve, reject) => {
          const socket = connect({ host: '127.0.0.1', port, servername, ca: [caBundleText([now.ca])] }, () => {
            resolve(socket.authorized);
            socket.end();
          });
          socket.on('error', reject);
        });
        expect(authorized).toBe(true);
      }
    } finally {
      server.close();
    }
  });

  it('reads back what it wrote, and names what is unusable', async () => {
    const state = secret([ca], serving);
    expect(state.problems).toEqual([]);
    expect(state.caKey).toBe(ca.key);
    expect(state.serving?.issuer).toBe(0);
    expect(state.cas.map((c) => c.pem)).toEqual([ca.ca.pem]);

    const other = await issueCa(at(0), HOUR);
    const mismatched = secret([ca], { serving: serving.serving, key: other.key }, other.key);
    expect(mismatched.caKey).toBeUndefined();
    expect(mismatched.serving).toBeUndefined();
    expect(mismatched.problems).toEqual(['ca.key is not the key of the first certificate in ca.crt', 'tls.crt / tls.key: unusable (tls.key is not its key)']);
    expect(readCertSecret(undefined)).toEqual({ cas: [], caKey: undefined, serving: undefined, problems: [] });
    expect(readCertSecret({ 'ca.crt': Buffer.from('-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----').toString('base64') }).problems[0]).toMatch(
      /^ca\.crt: a certificate that does not parse/,
    );
    expect(new X509Certificate(Buffer.from(certSecretData({ cas: [ca.ca] })['ca.crt']!, 'base64')).fingerprint256).toBe(ca.ca.x509.fingerprint256);
  });
});

describe('planCertificates: one renewal, step by step', () => {
  const V = 90 * 24 * HOUR;
  let ca1: Ca;
  let ca2: Ca;
  let leaf1: { serving: Certificate; key: string };
  let leaf2: { serving: Certificate; key: string };
  beforeAll(async () => {
    ca1 = await issueCa(at(0), V);
    leaf1 = await issueServing(ca1, settings, at(0));
    ca2 = await issueCa(at(60 * 24 * HOUR), V);
    leaf2 = await issueServing(ca2, settings, at(60 * 24 * HOUR + SETTLE_MS));
  });

  it('from nothing: a CA, then the bundle, then the serving certificate at once', () => {
    expect(planCertificates(secret([]), readWebhookBundle({ webhooks: [{}, {}] }), settings, at(0))).toMatchObject({
      kind: 'new-ca',
      reason: 'no CA yet',
      keep: [],
    });
    const withCa = secret([ca1]);
    expect(planCertificates(withCa, readWebhookBundle({ webhooks: [{}, {}] }), settings, at(0))).toEqual({
      kind: 'write-bundle',
      bundle: caBundleText([ca1.ca]),
    });
    // no serving certificate yet: nothing to break, no settle
    expect(planCertificates(withCa, webhook(caBundleText([ca1.ca]), at(0)), settings, at(1))).toEqual({
      kind: 'issue-serving',
      reason: 'no serving certificate yet',
    });
  });

  it('steady: waits for the renewal at two thirds of the lifetime; any entry without the bundle is rewritten', () => {
    const state = secret([ca1], leaf1);
    const bundle = caBundleText([ca1.ca]);
    expect(renewalTime(ca1.ca)).toEqual(at(60 * 24 * HOUR));
    expect(planCertificates(state, webhook(bundle, at(0)), settings, at(HOUR))).toEqual({
      kind: 'wait',
      until: at(60 * 24 * HOUR),
      reason: 'the next renewal',
    });
    const oneStale = webhook(bundle, at(0));
    oneStale.bundles[2] = '';
    expect(planCertificates(state, oneStale, settings, at(HOUR))).toEqual({ kind: 'write-bundle', bundle });
  });

  it('renewal: new CA beside the old, bundle, settle, serving certificate from the new CA, grace, old CA dropped', () => {
    const renewal = at(60 * 24 * HOUR);
    const step1 = planCertificates(secret([ca1], leaf1), webhook(caBundleText([ca1.ca]), at(0)), settings, renewal);
    expect(step1).toMatchObject({ kind: 'new-ca', keep: [{ pem: ca1.ca.pem }] });

    const overlapping = secret([ca2, ca1], leaf1);
    expect(overlapping.serving?.issuer).toBe(1);
    const bundle = caBundleText([ca2.ca, ca1.ca]);
    expect(planCertificates(overlapping, webhook(caBundleText([ca1.ca]), at(0)), settings, renewal)).toEqual({ kind: 'write-bundle', bundle });

    // the bundle holds both; the serving certificate stays on the old CA until it settled
    expect(planCertificates(overlapping, webhook(bundle, renewal), settings, at(60 * 24 * HOUR + 1))).toEqual({
      kind: 'wait',
      until: at(60 * 24 * HOUR + SETTLE_MS),
      reason: 'the API servers to load the new CA bundle',
    });
    expect(planCertificates(overlapping, webhook(bundle, renewal), settings, at(60 * 24 * HOUR + SETTLE_MS))).toEqual({
      kind: 'issue-serving',
      reason: 'a new CA is in the bundle',
    });

    const switched = secret([ca2, ca1], leaf2);
    const issued = 60 * 24 * HOUR + SETTLE_MS;
    expect(planCertificates(switched, webhook(bundle, renewal), settings, at(issued + 1))).toEqual({
      kind: 'wait',
      until: at(issued + GRACE_MS),
      reason: 'every replica to serve the certificate from the new CA',
    });
    expect(planCertificates(switched, webhook(bundle, renewal), settings, at(issued + GRACE_MS))).toMatchObject({
      kind: 'drop-old-cas',
      keep: [{ pem: ca2.ca.pem }],
    });
    expect(planCertificates(secret([ca2], leaf2), webhook(bundle, renewal), settings, at(issued + GRACE_MS))).toEqual({
      kind: 'write-bundle',
      bundle: caBundleText([ca2.ca]),
    });
  });

  it('a bundle written before the leader restarted still settles from the time it was written', () => {
    const overlapping = secret([ca2, ca1], leaf1);
    const bundle = caBundleText([ca2.ca, ca1.ca]);
    const lateWrite = at(60 * 24 * HOUR + HOUR);
    expect(planCertificates(overlapping, webhook(bundle, lateWrite), settings, at(60 * 24 * HOUR + HOUR + 1))).toMatchObject({ kind: 'wait' });
    // without the time, it is written again (with the time), never assumed settled
    const noAnnotation = { ...webhook(bundle, lateWrite), since: undefined };
    expect(planCertificates(overlapping, noAnnotation, settings, at(60 * 24 * HOUR + HOUR + 1))).toEqual({ kind: 'write-bundle', bundle });
  });

  it('an expired serving certificate is replaced at once; an expired old CA is dropped', () => {
    const bundle = caBundleText([ca2.ca, ca1.ca]);
    const afterCa1 = at(V + 1);
    expect(planCertificates(secret([ca2, ca1], leaf1), webhook(bundle, afterCa1), settings, afterCa1)).toEqual({
      kind: 'issue-serving',
      reason: 'the serving certificate is expired or from no CA in ca.crt',
    });
    expect(planCertificates(secret([ca2, ca1], leaf2), webhook(bundle, at(0)), settings, afterCa1)).toMatchObject({
      kind: 'drop-old-cas',
      reason: 'an older CA expired',
      keep: [{ pem: ca2.ca.pem }],
    });
  });

  it('new names: a serving certificate from the same CA, without waiting', () => {
    const more = { ...settings, ipAddresses: ['127.0.0.1'] };
    expect(planCertificates(secret([ca1], leaf1), webhook(caBundleText([ca1.ca]), at(0)), more, at(HOUR))).toEqual({
      kind: 'issue-serving',
      reason: 'names changed to DNS:kube-overcommit.kube-overcommit.svc, DNS:kube-overcommit.kube-overcommit.svc.cluster.local, IP Address:127.0.0.1',
    });
  });

  it('a lost CA key: a new CA, keeping the old one trusted while its certificate is served', () => {
    expect(planCertificates(secret([ca1], leaf1, ''), webhook(caBundleText([ca1.ca]), at(0)), settings, at(HOUR))).toMatchObject({
      kind: 'new-ca',
      reason: 'ca.key missing or not the CA’s',
      keep: [{ pem: ca1.ca.pem }],
    });
  });
});
