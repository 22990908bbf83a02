/**
 * Self-managed certificates (OVERCOMMIT_CERT_MODE=self-managed), as pure functions: what the
 * leader must do next to the Secret and to the webhook configuration's caBundle.
 *
 *   1. The Secret is the only store: `ca.crt` (the trusted CAs, newest first), `ca.key` (the
 *      newest CA's key), `tls.crt` / `tls.key` (the serving certificate every replica serves).
 *   2. Every entry of the MutatingWebhookConfiguration carries `ca.crt` as its caBundle; the
 *      update sets BUNDLE_SINCE_ANNOTATION in the same write.
 *   3. A serving certificate from a CA is put in the Secret only once a bundle holding that CA
 *      has been in the webhook configuration for SETTLE_MS (the API servers load it from
 *      their own watch), unless no usable serving certificate exists at all.
 *   4. An older CA leaves `ca.crt` only once it has expired, or once the serving certificate
 *      from the newest CA has been in the Secret for GRACE_MS (every replica serves it).
 *   5. A certificate is renewed at two thirds of its own lifetime: a CA by adding a new CA
 *      (rule 2 then publishes the overlapping bundle), a serving certificate by issuing one from
 *      the newest CA; a serving certificate whose names differ from the wanted ones too.
 *
 * One step at a time: the leader applies the step, reads both objects again and plans again,
 * so a step interrupted by a crash or a lost leadership is simply planned again.
 */
import { X509Certificate, createPrivateKey } from 'node:crypto';
import { isIP } from 'node:net';

export type CertMode = 'self-managed' | 'files';
export const CERT_MODES: readonly CertMode[] = ['files', 'self-managed'];

export const CERT_SECRET = 'kube-overcommit-tls';
export const CERT_LEASE = 'kube-overcommit-certificates';
export const WEBHOOK_CONFIGURATION = 'kube-overcommit';
export const SERVICE = 'kube-overcommit';
export const BUNDLE_SINCE_ANNOTATION = 'kube-overcommit.io/ca-bundle-since';

/** API servers load a webhook configuration from their watch, normally within a second. */
export const SETTLE_MS = 10_000;
/** Replicas read the Secret through a watch; a minute also covers a watch that is reconnecting. */
export const GRACE_MS = 60_000;
/** notBefore is set this far back, so that an API server whose clock is behind ours accepts a fresh certificate. */
export const BACKDATE_MS = 5 * 60_000;
export const DEFAULT_VALIDITY_MS = 365 * 24 * 3600_000;
/** Below this the renewal window (a third) would not hold SETTLE_MS and a reload. */
export const MIN_VALIDITY_MS = 60_000;

export interface SelfManagedSettings {
  namespace: string;
  dnsNames: string[];
  ipAddresses: string[];
  validityMs: number;
}

export function readCertMode(env: NodeJS.ProcessEnv): CertMode {
  const mode = env.OVERCOMMIT_CERT_MODE || 'files';
  if (!CERT_MODES.includes(mode as CertMode)) {
    throw new Error(`OVERCOMMIT_CERT_MODE must be one of ${CERT_MODES.join(', ')}, got ${JSON.stringify(mode)}`);
  }
  return mode as CertMode;
}

/** `90s`, `15m`, `24h`, `365d`. */
export function readDuration(name: string, text: string): number {
  const match = /^(\d+)(s|m|h|d)$/.exec(text.trim());
  if (!match) throw new Error(`${name} must be a whole number of s, m, h or d (e.g. 8760h), got ${JSON.stringify(text)}`);
  const unit = { s: 1_000, m: 60_000, h: 3_600_000, d: 86_400_000 }[match[2] as 's' | 'm' | 'h' | 'd'];
  return Number(match[1]) * unit;
}

/** The Service's names (how the API server reaches the pods) and OVERCOMMIT_CERT_EXTRA_SANS. */
export function readSelfManagedSettings(env: NodeJS.ProcessEnv, namespace: string): SelfManagedSettings {
  const dnsNames = [`${SERVICE}.${namespace}.svc`, `${SERVICE}.${namespace}.svc.cluster.local`];
  const ipAddresses: string[] = [];
  for (const san of (env.OVERCOMMIT_CERT_EXTRA_SANS ?? '')
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean)) {
    if (isIP(san)) ipAddresses.push(san);
    else if (/^(\*\.)?[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/i.test(san)) dnsNames.push(san.toLowerCase());
    else throw new Error(`OVERCOMMIT_CERT_EXTRA_SANS: ${JSON.stringify(san)} is neither an IP address nor a DNS name`);
  }
  const validityMs = env.OVERCOMMIT_CERT_VALIDITY ? readDuration('OVERCOMMIT_CERT_VALIDITY', env.OVERCOMMIT_CERT_VALIDITY) : DEFAULT_VALIDITY_MS;
  if (validityMs < MIN_VALIDITY_MS) throw new Error(`OVERCOMMIT_CERT_VALIDITY must be at least 60s, got ${env.OVERCOMMIT_CERT_VALIDITY}`);
  return { namespace, dnsNames: [...new Set(dnsNames)], ipAddresses: [...new Set(ipAddresses)], validityMs };
}

export interface Certificate {
  pem: string;
  x509: X509Certificate;
  /** When we made it: notBefore + BACKDATE_MS. */
  issuedAt: Date;
  notAfter: Date;
}

export interface ServingCertificate extends Certificate {
  key: string;
  /** Index in `cas` of the CA that signed it; -1 for none of them. */
  issuer: number;
}

export interface CertSecretState {
  /** `ca.crt`: newest first. */
  cas: Certificate[];
  /** `ca.key`, when it is the key of cas[0]. */
  caKey?: string;
  serving?: ServingCertificate;
  /** What was present but unusable (logged by the caller). */
  problems: string[];
}

const PEM_CERTIFICATE = /-----BEGIN CERTIFICATE-----[\s\S]+?-----END CERTIFICATE-----/g;

export function readCertificate(pem: string): Certificate {
  const x509 = new X509Certificate(pem);
  return { pem: x509.toString(), x509, issuedAt: new Date(Date.parse(x509.validFrom) + BACKDATE_MS), notAfter: new Date(x509.validTo) };
}

/** The Secret's `data` (base64 values, as the API returns them). */
export function readCertSecret(data: Readonly<Record<string, string>> | undefined): CertSecretState {
  const text = (key: string) => (data?.[key] ? Buffer.from(data[key], 'base64').toString('utf8') : '');
  const problems: string[] = [];
  const cas: Certificate[] = [];
  for (const pem of text('ca.crt').match(PEM_CERTIFICATE) ?? []) {
    try {
      cas.push(readCertificate(pem));
    } catch (error) {
      problems.push(`ca.crt: a certificate that does not parse (${(error as Error).message})`);
    }
  }
  let caKey: string | undefined;
  if (text('ca.key') && cas[0]) {
    try {
      if (cas[0].x509.checkPrivateKey(createPrivateKey(text('ca.key')))) caKey = text('ca.key');
      else problems.push('ca.key is not the key of the first certificate in ca.crt');
    } catch (error) {
      problems.push(`ca.key: not a private key (${(error as Error).message})`);
    }
  }
  let serving: ServingCertificate | undefined;
  if (text('tls.crt') || text('tls.key')) {
    try {
      const certificate = readCertificate(text('tls.crt'));
      if (!certificate.x509.checkPrivateKey(createPrivateKey(text('tls.key')))) throw new Error('tls.key is not its key');
      const issuer = cas.findIndex((ca) => certificate.x509.checkIssued(ca.x509) && certificate.x509.verify(ca.x509.publicKey));
      serving = { ...certificate, key: text('tls.key'), issuer };
    } catch (error) {
      problems.push(`tls.crt / tls.key: unusable (${(error as Error).message})`);
    }
  }
  return { cas, caKey, serving, problems };
}

/** The Secret's `data` for a state (PEM text, base64-encoded). */
export function certSecretData(state: { cas: readonly Certificate[]; caKey?: string; serving?: { pem: string; key: string } }): Record<string, string> {
  const data: Record<string, string> = { 'ca.crt': caBundleText(state.cas) };
  if (state.caKey) data['ca.key'] = state.caKey;
  if (state.serving) Object.assign(data, { 'tls.crt': state.serving.pem, 'tls.key': state.serving.key });
  return Object.fromEntries(Object.entries(data).map(([k, v]) => [k, Buffer.from(v).toString('base64')]));
}

export function caBundleText(cas: readonly Certificate[]): string {
  return cas.map((ca) => ca.pem.trim() + '\n').join('');
}

/** What the webhook configuration carries (caBundle values are base64 of PEM). */
export interface WebhookBundleState {
  /** Each entry's caBundle, decoded. */
  bundles: string[];
  since?: Date;
}

export function readWebhookBundle(configuration: {
  metadata?: { annotations?: Readonly<Record<string, string>> };
  webhooks?: ReadonlyArray<{ clientConfig?: { caBundle?: string } }>;
}): WebhookBundleState {
  const since = configuration.metadata?.annotations?.[BUNDLE_SINCE_ANNOTATION];
  return {
    bundles: (configuration.webhooks ?? []).map((w) => Buffer.from(w.clientConfig?.caBundle ?? '', 'base64').toString('utf8')),
    since: since && !Number.isNaN(Date.parse(since)) ? new Date(since) : undefined,
  };
}

export type CertStep =
  | { kind: 'new-ca'; reason: string; keep: Certificate[] }
  | { kind: 'write-bundle'; bundle: string }
  | { kind: 'issue-serving'; reason: string }
  | { kind: 'drop-old-cas'; reason: string; keep: Certificate[] }
  | { kind: 'wait'; until: Date; reason: string };

/** When a certificate is due for renewal: two thirds into its own lifetime. */
export function renewalTime(certificate: Pick<Certificate, 'issuedAt' | 'notAfter'>): Date {
  const issued = certificate.issuedAt.getTime();
  return new Date(issued + ((certificate.notAfter.getTime() - issued) * 2) / 3);
}

export function subjectAltNames(settings: Pick<SelfManagedSettings, 'dnsNames' | 'ipAddresses'>): string[] {
  return [...settings.dnsNames.map((n) => `DNS:${n}`), ...settings.ipAddresses.map((ip) => `IP Address:${ip}`)].sort();
}

function servedNames(certificate: Certificate): string[] {
  return (certificate.x509.subjectAltName ?? '').split(', ').filter(Boolean).sort();
}

export function planCertificates(
  state: CertSecretState,
  webhook: WebhookBundleState,
  settings: Pick<SelfManagedSettings, 'dnsNames' | 'ipAddresses'>,
  now: Date,
): CertStep {
  const t = now.getTime();
  const unexpired = state.cas.filter((ca) => ca.notAfter.getTime() > t);
  const newCa = planNewCa(state, unexpired, t);
  if (newCa) return newCa;

  const bundle = caBundleText(state.cas);
  if (webhook.bundles.length === 0 || webhook.bundles.some((b) => b !== bundle) || !webhook.since) return { kind: 'write-bundle', bundle };

  const serving = state.serving;
  if (!serving || serving.issuer < 0 || serving.notAfter.getTime() <= t) {
    return { kind: 'issue-serving', reason: serving ? 'the serving certificate is expired or from no CA in ca.crt' : 'no serving certificate yet' };
  }
  return planReissue(serving, webhook, settings, t) ?? planOldCas(state, unexpired, serving, t);
}

/** Rules 1 and 5 for the CA: a new one when there is none with its key, or at the newest's renewal; null while it stands. */
function planNewCa(state: CertSecretState, unexpired: Certificate[], t: number): CertStep | null {
  const newest = state.cas[0];
  if (!newest || !state.caKey) return { kind: 'new-ca', reason: newest ? 'ca.key missing or not the CA’s' : 'no CA yet', keep: unexpired };
  if (renewalTime(newest).getTime() <= t) {
    return { kind: 'new-ca', reason: `CA renewal (expires ${newest.notAfter.toISOString()})`, keep: unexpired };
  }
  return null;
}

/**
 * Rules 3 and 5 for a usable serving certificate: a new one from a new CA (once that CA's bundle
 * has settled), at renewal, or for new names; null while it stands.
 */
function planReissue(
  serving: ServingCertificate,
  webhook: WebhookBundleState,
  settings: Pick<SelfManagedSettings, 'dnsNames' | 'ipAddresses'>,
  t: number,
): CertStep | null {
  const wanted = subjectAltNames(settings);
  const reason =
    serving.issuer !== 0
      ? 'a new CA is in the bundle'
      : renewalTime(serving).getTime() <= t
        ? `renewal (expires ${serving.notAfter.toISOString()})`
        : servedNames(serving).join() !== wanted.join()
          ? `names changed to ${wanted.join(', ')}`
          : undefined;
  if (!reason) return null;
  const settled = (webhook.since?.getTime() ?? 0) + SETTLE_MS;
  if (serving.issuer !== 0 && settled > t) {
    return { kind: 'wait', until: new Date(settled), reason: 'the API servers to load the new CA bundle' };
  }
  return { kind: 'issue-serving', reason };
}

/** Rule 4 once the serving certificate stands: the older CAs dropped when due, else a wait for what comes next. */
function planOldCas(state: CertSecretState, unexpired: Certificate[], serving: ServingCertificate, t: number): CertStep {
  const newest = state.cas[0];
  if (state.cas.length > 1) {
    if (unexpired.length < state.cas.length) return { kind: 'drop-old-cas', reason: 'an older CA expired', keep: unexpired };
    const dropAt = serving.issuedAt.getTime() + GRACE_MS;
    if (dropAt <= t) return { kind: 'drop-old-cas', reason: 'every replica serves the certificate from the new CA', keep: [newest] };
    return { kind: 'wait', until: new Date(dropAt), reason: 'every replica to serve the certificate from the new CA' };
  }
  const next = Math.min(renewalTime(newest).getTime(), renewalTime(serving).getTime());
  return { kind: 'wait', until: new Date(next), reason: 'the next renewal' };
}
