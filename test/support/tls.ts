import { X509Certificate } from 'node:crypto';
import { existsSync, mkdirSync, readdirSync, readFileSync, readlinkSync, renameSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import tls from 'node:tls';
import { run } from './process.js';

export interface CertificateAuthority {
  certFile: string;
  keyFile: string;
}

/** A self-signed CA under `dir` (ca.crt, ca.key), made with openssl. */
export async function createCa(dir: string, commonName: string): Promise<CertificateAuthority> {
  mkdirSync(dir, { recursive: true });
  const certFile = join(dir, 'ca.crt');
  const keyFile = join(dir, 'ca.key');
  await run('openssl', [
    'req',
    '-x509',
    '-newkey',
    'rsa:2048',
    '-nodes',
    '-sha256',
    '-days',
    '30',
    '-keyout',
    keyFile,
    '-out',
    certFile,
    '-subj',
    `/CN=${commonName}`,
    '-addext',
    'basicConstraints=critical,CA:TRUE',
    '-addext',
    'keyUsage=critical,keyCertSign,cRLSign',
  ]);
  return { certFile, keyFile };
}

let serial = 0;

/**
 * A serving certificate for `ips` (and `dnsNames`) signed by `ca`, as PEM texts. Each call makes
 * a new key and a new serial.
 */
export async function issueServingCertificate(
  ca: CertificateAuthority,
  workDir: string,
  options: { ips?: string[]; dnsNames?: string[]; commonName?: string; days?: number } = {},
): Promise<{ cert: string; key: string; serialNumber: string }> {
  mkdirSync(workDir, { recursive: true });
  const base = join(workDir, `leaf-${process.pid}-${Date.now()}-${++serial}`);
  const sans = [...(options.ips ?? ['127.0.0.1']).map((ip) => `IP:${ip}`), ...(options.dnsNames ?? []).map((d) => `DNS:${d}`)];
  writeFileSync(
    `${base}.ext`,
    [
      'basicConstraints=critical,CA:FALSE',
      'keyUsage=critical,digitalSignature,keyEncipherment',
      'extendedKeyUsage=serverAuth',
      `subjectAltName=${sans.join(',')}`,
    ].join('\n') + '\n',
  );
  await run('openssl', [
    'req',
    '-newkey',
    'rsa:2048',
    '-nodes',
    '-sha256',
    '-keyout',
    `${base}.key`,
    '-out',
    `${base}.csr`,
    '-subj',
    `/CN=${options.commonName ?? 'kube-overcommit-e2e'}`,
  ]);
  await run('openssl', [
    'x509',
    '-req',
    '-sha256',
    '-days',
    String(options.days ?? 7),
    '-in',
    `${base}.csr`,
    '-CA',
    ca.certFile,
    '-CAkey',
    ca.keyFile,
    '-set_serial',
    `0x${Date.now().toString(16)}${(serial % 4096).toString(16).padStart(3, '0')}`,
    '-extfile',
    `${base}.ext`,
    '-out',
    `${base}.crt`,
  ]);
  const cert = readFileSync(`${base}.crt`, 'utf8');
  const key = readFileSync(`${base}.key`, 'utf8');
  for (const ext of ['crt', 'key', 'csr', 'ext']) rmSync(`${base}.${ext}`, { force: true });
  return { cert, key, serialNumber: new X509Certificate(cert).serialNumber };
}

/**
 * Writes `files` into `dir` the way the kubelet updates a Secret volume (AtomicWriter):
 * the data goes into a new hidden timestamped folder, a `..data_tmp` symlink to it is renamed
 * over `..data` (one atomic step), each visible file is a symlink `name -> ..data/name`, and the
 * previous timestamped folder is removed.
 */
export function writeSecretVolume(dir: string, files: Record<string, string>): void {
  mkdirSync(dir, { recursive: true });
  const dataLink = join(dir, '..data');
  const previous = existsSync(dataLink) ? readlinkSync(dataLink) : undefined;
  const now = new Date();
  const stamp = `..${now.toISOString().replace(/[-:T]/g, '_').replace(/\..*$/, '')}.${process.hrtime.bigint() % 1_000_000_000n}`;
  mkdirSync(join(dir, stamp));
  for (const [name, content] of Object.entries(files)) writeFileSync(join(dir, stamp, name), content, { mode: 0o644 });
  const tmpLink = join(dir, '..data_tmp');
  rmSync(tmpLink, { force: true });
  symlinkSync(stamp, tmpLink);
  renameSync(tmpLink, dataLink);
  for (const name of Object.keys(files)) {
    const link = join(dir, name);
    if (!existsSync(link)) symlinkSync(join('..data', name), link);
  }
  if (previous && previous !== stamp) rmSync(join(dir, previous), { recursive: true, force: true });
  // Leftovers of interrupted writes.
  for (const entry of readdirSync(dir)) {
    if (entry.startsWith('..') && entry !== '..data' && entry !== stamp) rmSync(join(dir, entry), { recursive: true, force: true });
  }
}

/** The certificate a TLS server presents (connects, reads the peer certificate, disconnects). */
export function servedCertificate(host: string, port: number, caFile: string): Promise<{ serialNumber: string; fingerprint256: string; validTo: string }> {
  return new Promise((resolve, reject) => {
    const socket = tls.connect({ host, port, ca: readFileSync(caFile), servername: undefined, rejectUnauthorized: true }, () => {
      const peer = socket.getPeerCertificate();
      socket.end();
      resolve({ serialNumber: peer.serialNumber, fingerprint256: peer.fingerprint256, validTo: peer.valid_to });
    });
    socket.setTimeout(5_000, () => socket.destroy(new Error(`TLS handshake with ${host}:${port} timed out`)));
    socket.on('error', reject);
  });
}
