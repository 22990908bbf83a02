import { BACKDATE_MS, type Certificate, type SelfManagedSettings, readCertificate } from './self-managed-cert.rules.js';

// selfsigned (and its X.509 stack, costly to import: docs/performance.md) loads on the first issuance:
// a replica whose certificate comes from files, or from a Secret already filled, never needs it.

const KEY = { keyType: 'ec', curve: 'P-256', algorithm: 'sha256' } as const;

/** A CA valid `validityMs` from `now`; its name carries the time, so that two CAs in one bundle are told apart. */
export async function issueCa(now: Date, validityMs: number): Promise<{ ca: Certificate; key: string }> {
  const { generate } = await import('selfsigned');
  const pems = await generate([{ name: 'commonName', value: `kube-overcommit-ca-${Math.floor(now.getTime() / 1000)}` }], {
    ...KEY,
    notBeforeDate: new Date(now.getTime() - BACKDATE_MS),
    notAfterDate: new Date(now.getTime() + validityMs),
    extensions: [
      { name: 'basicConstraints', cA: true, pathLenConstraint: 0, critical: true },
      { name: 'keyUsage', keyCertSign: true, cRLSign: true, digitalSignature: true, critical: true },
    ],
  });
  return { ca: readCertificate(pems.cert), key: pems.private };
}

/** A serving certificate signed by `ca`, for the settings' names, never outliving the CA. */
export async function issueServing(
  ca: { ca: Certificate; key: string },
  settings: Pick<SelfManagedSettings, 'namespace' | 'dnsNames' | 'ipAddresses' | 'validityMs'>,
  now: Date,
): Promise<{ serving: Certificate; key: string }> {
  const notAfter = Math.min(now.getTime() + settings.validityMs, ca.ca.notAfter.getTime());
  const { generate } = await import('selfsigned');
  const pems = await generate([{ name: 'commonName', value: settings.dnsNames[0]! }], {
    ...KEY,
    notBeforeDate: new Date(now.getTime() - BACKDATE_MS),
    notAfterDate: new Date(notAfter),
    ca: { cert: ca.ca.pem, key: ca.key },
    extensions: [
      { name: 'basicConstraints', cA: false },
      { name: 'keyUsage', digitalSignature: true, critical: true },
      { name: 'extKeyUsage', serverAuth: true },
      {
        name: 'subjectAltName',
        altNames: [...settings.dnsNames.map((value) => ({ type: 2 as const, value })), ...settings.ipAddresses.map((ip) => ({ type: 7 as const, ip }))],
      },
    ],
  });
  return { serving: readCertificate(pems.cert), key: pems.private };
}
