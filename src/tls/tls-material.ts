import { X509Certificate, createPrivateKey } from 'node:crypto';
import { access, readFile } from 'node:fs/promises';
import { createSecureContext } from 'node:tls';
import { type TlsPolicy, readTlsPolicy } from './tls-policy.js';
import { readCertMode } from './self-managed-cert.rules.js';

export interface TlsMaterial {
  key: string;
  cert: string;
  certFile?: string;
  keyFile?: string;
  selfSigned: boolean;
  notAfter: Date;
  /** Suites, minimum version, client CA file; DEFAULT_TLS_POLICY when absent. */
  policy?: TlsPolicy;
  /** The client CA bundle (PEM) read from `policy.clientCaFile`. */
  clientCa?: string;
  /** Served only until the real certificate is installed (self-managed mode); readiness stays down. */
  placeholder?: boolean;
}

export interface TlsLog {
  info(msg: string): void;
  warn(msg: string): void;
}

export const DEFAULT_TLS_CERT_FILE = '/etc/kube-overcommit/tls/tls.crt';
export const DEFAULT_TLS_KEY_FILE = '/etc/kube-overcommit/tls/tls.key';

/**
 * Checks that `cert` (PEM, leaf first if a chain) and `key` (PEM) form a usable pair.
 * `names` only changes how the two are called in error messages (e.g. their file paths).
 */
export function validatePair(key: string, cert: string, names: { cert?: string; key?: string } = {}): { notAfter: Date } {
  const certName = names.cert ?? 'TLS certificate';
  const keyName = names.key ?? 'TLS private key';
  if (!cert.trim()) throw new Error(`${certName}: empty`);
  if (!key.trim()) throw new Error(`${keyName}: empty`);

  let x509: X509Certificate;
  try {
    x509 = new X509Certificate(cert);
  } catch (err) {
    throw new Error(`${certName}: not a valid PEM X.509 certificate (${reason(err)})`);
  }
  let privateKey;
  try {
    privateKey = createPrivateKey(key);
  } catch (err) {
    throw new Error(`${keyName}: not a valid unencrypted PEM private key (${reason(err)})`);
  }
  if (!x509.checkPrivateKey(privateKey)) {
    throw new Error(`${keyName} does not match the public key of ${certName} (subject ${x509.subject.replace(/\n/g, ', ')})`);
  }
  try {
    // What the TLS server itself will do with them: catches anything OpenSSL still refuses.
    createSecureContext({ key, cert });
  } catch (err) {
    throw new Error(`${certName} / ${keyName}: rejected by OpenSSL (${reason(err)})`);
  }
  return { notAfter: new Date(x509.validTo) };
}

/**
 * Checks a client CA bundle (PEM, one or more certificates) as the server will use it;
 * `name` says what it is in error messages (its file path).
 */
export function validateClientCa(ca: string, name: string): void {
  if (!ca.includes('-----BEGIN CERTIFICATE-----')) throw new Error(`${name}: no PEM certificate in it`);
  try {
    new X509Certificate(ca);
    createSecureContext({ ca });
  } catch (err) {
    throw new Error(`${name}: not a valid PEM CA bundle (${reason(err)})`);
  }
}

/** Loads the serving certificate, the TLS policy and the client CA before Nest starts (the servers need them at creation). */
export async function loadInitialTls(env: NodeJS.ProcessEnv, log: TlsLog): Promise<TlsMaterial> {
  const policy = readTlsPolicy(env);
  let clientCa: string | undefined;
  if (policy.clientCaFile) {
    clientCa = await readFile(policy.clientCaFile, 'utf8').catch((err) => {
      throw new Error(`OVERCOMMIT_CLIENT_CA_FILE: cannot read ${policy.clientCaFile} (${reason(err)})`);
    });
    validateClientCa(clientCa, `client CA ${policy.clientCaFile}`);
    log.info(`/mutate answers only clients with a certificate from ${policy.clientCaFile}`);
  }
  const pair = await loadServingPair(env, log);
  return { ...pair, policy, ...(clientCa ? { clientCa } : {}) };
}

async function loadServingPair(env: NodeJS.ProcessEnv, log: TlsLog): Promise<TlsMaterial> {
  if (readCertMode(env) === 'self-managed') {
    log.info('TLS: self-managed certificates; not ready until the Secret holds a serving certificate');
    return { ...(await generateSelfSigned('kube-overcommit-placeholder')), placeholder: true };
  }
  const certFile = env.OVERCOMMIT_TLS_CERT_FILE || DEFAULT_TLS_CERT_FILE;
  const keyFile = env.OVERCOMMIT_TLS_KEY_FILE || DEFAULT_TLS_KEY_FILE;
  const [hasCert, hasKey] = await Promise.all([exists(certFile), exists(keyFile)]);

  if (hasCert && hasKey) {
    const [cert, key] = await Promise.all([readFile(certFile, 'utf8'), readFile(keyFile, 'utf8')]);
    const { notAfter } = validatePair(key, cert, {
      cert: `TLS certificate ${certFile}`,
      key: `TLS private key ${keyFile}`,
    });
    if (notAfter.getTime() <= Date.now()) log.warn(`TLS certificate ${certFile} expired at ${notAfter.toISOString()}`);
    log.info(`Serving TLS certificate ${certFile} (expires ${notAfter.toISOString()})`);
    return { key, cert, certFile, keyFile, selfSigned: false, notAfter };
  }
  if (hasCert !== hasKey) {
    const [present, missing] = hasCert ? [certFile, keyFile] : [keyFile, certFile];
    throw new Error(`TLS: ${present} exists but ${missing} does not; set OVERCOMMIT_TLS_CERT_FILE and OVERCOMMIT_TLS_KEY_FILE to a matching pair`);
  }
  if (env.KUBERNETES_SERVICE_HOST) {
    throw new Error(
      `TLS: neither ${certFile} nor ${keyFile} exists; in a cluster the serving certificate must be mounted ` +
        `(e.g. the cert-manager Secret) or OVERCOMMIT_TLS_CERT_FILE / OVERCOMMIT_TLS_KEY_FILE set`,
    );
  }

  const material = await generateSelfSigned();
  log.warn(
    `TLS: ${certFile} and ${keyFile} not found and not in a cluster: serving a generated self-signed certificate ` +
      `for localhost (expires ${material.notAfter.toISOString()})`,
  );
  return material;
}

/** Self-signed certificate for localhost, 127.0.0.1 and ::1, valid one year (selfsigned loads only here). */
export async function generateSelfSigned(cn = 'localhost'): Promise<TlsMaterial> {
  const notBeforeDate = new Date();
  const notAfterDate = new Date(notBeforeDate.getTime() + 365 * 24 * 3600 * 1000);
  const { generate } = await import('selfsigned');
  const pems = await generate([{ name: 'commonName', value: cn }], {
    keyType: 'ec',
    curve: 'P-256',
    algorithm: 'sha256',
    notBeforeDate,
    notAfterDate,
    extensions: [
      { name: 'basicConstraints', cA: false },
      { name: 'keyUsage', digitalSignature: true, critical: true },
      { name: 'extKeyUsage', serverAuth: true },
      {
        name: 'subjectAltName',
        altNames: [
          { type: 2, value: cn },
          { type: 7, ip: '127.0.0.1' },
          { type: 7, ip: '::1' },
        ],
      },
    ],
  });
  const { notAfter } = validatePair(pems.private, pems.cert, { cert: 'generated certificate', key: 'generated key' });
  return { key: pems.private, cert: pems.cert, selfSigned: true, notAfter };
}

async function exists(path: string): Promise<boolean> {
  try {
    await access(path); // follows symlinks: a dangling Secret symlink counts as missing
    return true;
  } catch {
    return false;
  }
}

function reason(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}
