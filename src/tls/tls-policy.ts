/**
 * What the HTTPS server negotiates and whom it trusts as a caller, read from the environment.
 *
 * Invariants:
 *  1. TLS 1.2 is served with ECDHE key exchange and AEAD ciphers (AES-GCM, ChaCha20-Poly1305)
 *     only: kube-apiserver's own recommended list. No CBC, no SHA-1 MAC, no static RSA.
 *  2. TLS 1.3 always offers OpenSSL's three suites (all AEAD); they are not configurable, as in
 *     Go, so what an API server negotiates with TLS 1.3 never depends on this config.
 *  3. Every name in OVERCOMMIT_TLS_CIPHER_SUITES must be one of CIPHER_SUITES (IANA or OpenSSL
 *     spelling); an unknown or unsafe name stops the start with the list of accepted names, it
 *     never silently narrows or widens what is offered.
 *  4. The options handed to the server at creation and at every certificate reload come from
 *     one function (secureContextOptions): a reload never drops the suites, the minimum
 *     version or the client CA (Node's setSecureContext replaces the whole context).
 */
import type { SecureContextOptions } from 'node:tls';

/** TLS 1.2 suites accepted by name: IANA name → OpenSSL name. */
export const CIPHER_SUITES: Readonly<Record<string, string>> = {
  TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256: 'ECDHE-ECDSA-AES128-GCM-SHA256',
  TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256: 'ECDHE-RSA-AES128-GCM-SHA256',
  TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384: 'ECDHE-ECDSA-AES256-GCM-SHA384',
  TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384: 'ECDHE-RSA-AES256-GCM-SHA384',
  TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256: 'ECDHE-ECDSA-CHACHA20-POLY1305',
  TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256: 'ECDHE-RSA-CHACHA20-POLY1305',
};

/** Go's (and so kube-apiserver's) spelling of the ChaCha20 suites, without the hash. */
const GO_ALIASES: Readonly<Record<string, string>> = {
  TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305: 'TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256',
  TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305: 'TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256',
};

/** OpenSSL's TLS 1.3 suites (invariant 2), listed first so that Node passes them to OpenSSL's TLS 1.3 list. */
const TLS13_SUITES = ['TLS_AES_128_GCM_SHA256', 'TLS_AES_256_GCM_SHA384', 'TLS_CHACHA20_POLY1305_SHA256'];

/** The accepted spellings of the minimum version: kube-apiserver's `--tls-min-version` and Node's. */
const MIN_VERSIONS: Readonly<Record<string, 'TLSv1.2' | 'TLSv1.3'>> = {
  VersionTLS12: 'TLSv1.2',
  VersionTLS13: 'TLSv1.3',
  'TLSv1.2': 'TLSv1.2',
  'TLSv1.3': 'TLSv1.3',
};

export interface TlsPolicy {
  minVersion: 'TLSv1.2' | 'TLSv1.3';
  /** OpenSSL names of the TLS 1.2 suites offered, in preference order. */
  tls12Suites: string[];
  /** OVERCOMMIT_CLIENT_CA_FILE: when set, /mutate answers only callers presenting a certificate from this CA. */
  clientCaFile?: string;
}

export const DEFAULT_TLS_POLICY: TlsPolicy = { minVersion: 'TLSv1.2', tls12Suites: Object.values(CIPHER_SUITES) };

/** Reads OVERCOMMIT_TLS_MIN_VERSION, OVERCOMMIT_TLS_CIPHER_SUITES and OVERCOMMIT_CLIENT_CA_FILE; throws naming the variable. */
export function readTlsPolicy(env: NodeJS.ProcessEnv): TlsPolicy {
  const version = env.OVERCOMMIT_TLS_MIN_VERSION?.trim() || 'VersionTLS12';
  const minVersion = MIN_VERSIONS[version];
  if (!minVersion) {
    throw new Error(`OVERCOMMIT_TLS_MIN_VERSION: ${JSON.stringify(version)} is not one of ${Object.keys(MIN_VERSIONS).join(', ')}`);
  }
  const names = (env.OVERCOMMIT_TLS_CIPHER_SUITES ?? '')
    .split(',')
    .map((name) => name.trim())
    .filter(Boolean);
  const tls12Suites = names.length === 0 ? DEFAULT_TLS_POLICY.tls12Suites : [...new Set(names.map(readSuite))];
  const clientCaFile = env.OVERCOMMIT_CLIENT_CA_FILE?.trim() || undefined;
  return { minVersion, tls12Suites, ...(clientCaFile ? { clientCaFile } : {}) };
}

function readSuite(name: string): string {
  const iana = GO_ALIASES[name] ?? name;
  const openssl = CIPHER_SUITES[iana] ?? Object.values(CIPHER_SUITES).find((known) => known === name.toUpperCase());
  if (openssl) return openssl;
  throw new Error(
    `OVERCOMMIT_TLS_CIPHER_SUITES: ${JSON.stringify(name)} is not an accepted TLS 1.2 suite (ECDHE with AES-GCM or ChaCha20-Poly1305); ` +
      `accepted: ${Object.entries(CIPHER_SUITES)
        .map(([ianaName, opensslName]) => `${ianaName} (${opensslName})`)
        .join(', ')}`,
  );
}

/** The secure-context options for a serving pair under a policy (invariant 4). */
export function secureContextOptions(pair: { key: string; cert: string; clientCa?: string }, policy: TlsPolicy = DEFAULT_TLS_POLICY): SecureContextOptions {
  return {
    key: pair.key,
    cert: pair.cert,
    minVersion: policy.minVersion,
    ciphers: [...TLS13_SUITES, ...policy.tls12Suites].join(':'),
    ...(pair.clientCa ? { ca: pair.clientCa } : {}),
  };
}
