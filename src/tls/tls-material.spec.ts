import { X509Certificate } from 'node:crypto';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { generateSelfSigned, loadInitialTls, validatePair } from './tls-material.js';

function recordingLog() {
  const lines = { info: [] as string[], warn: [] as string[] };
  return { lines, log: { info: (m: string) => lines.info.push(m), warn: (m: string) => lines.warn.push(m) } };
}

describe('loadInitialTls', () => {
  let dir: string;
  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'tls-material-'));
  });
  afterAll(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  const missing = () => ({
    OVERCOMMIT_TLS_CERT_FILE: join(dir, 'absent.crt'),
    OVERCOMMIT_TLS_KEY_FILE: join(dir, 'absent.key'),
  });

  it('generates a self-signed localhost pair outside a cluster, with a warning', async () => {
    const { lines, log } = recordingLog();
    const material = await loadInitialTls(missing(), log);

    expect(material.selfSigned).toBe(true);
    expect(material.certFile).toBeUndefined();
    expect(validatePair(material.key, material.cert).notAfter).toEqual(material.notAfter);
    const x509 = new X509Certificate(material.cert);
    expect(x509.subjectAltName).toContain('DNS:localhost');
    expect(x509.subjectAltName).toContain('IP Address:127.0.0.1');
    expect(x509.checkHost('localhost')).toBe('localhost');
    expect(x509.checkIP('127.0.0.1')).toBe('127.0.0.1');
    expect(x509.checkIP('::1')).toBe('::1');
    const days = (material.notAfter.getTime() - Date.now()) / 86_400_000;
    expect(days).toBeGreaterThan(364);
    expect(days).toBeLessThan(367);
    expect(lines.warn.join('\n')).toMatch(/self-signed/);
  });

  it('refuses to start in a cluster when the files are missing', async () => {
    const env = { ...missing(), KUBERNETES_SERVICE_HOST: '10.96.0.1' };
    await expect(loadInitialTls(env, recordingLog().log)).rejects.toThrow(
      new RegExp(`neither ${join(dir, 'absent.crt')} nor ${join(dir, 'absent.key')} exists; in a cluster`),
    );
  });

  it('refuses a lone certificate or key', async () => {
    const certFile = join(dir, 'lone.crt');
    await writeFile(certFile, (await generateSelfSigned()).cert);
    const env = { OVERCOMMIT_TLS_CERT_FILE: certFile, OVERCOMMIT_TLS_KEY_FILE: join(dir, 'lone.key') };
    await expect(loadInitialTls(env, recordingLog().log)).rejects.toThrow(`${certFile} exists but ${join(dir, 'lone.key')} does not`);
  });

  it('loads a valid pair from files', async () => {
    const pair = await generateSelfSigned();
    const env = { OVERCOMMIT_TLS_CERT_FILE: join(dir, 'ok.crt'), OVERCOMMIT_TLS_KEY_FILE: join(dir, 'ok.key') };
    await writeFile(env.OVERCOMMIT_TLS_CERT_FILE, pair.cert);
    await writeFile(env.OVERCOMMIT_TLS_KEY_FILE, pair.key);
    const material = await loadInitialTls({ ...env, KUBERNETES_SERVICE_HOST: '10.96.0.1' }, recordingLog().log);
    expect(material).toMatchObject({ ...pair, selfSigned: false, certFile: env.OVERCOMMIT_TLS_CERT_FILE });
  });

  it('names the key file when key and certificate do not match', async () => {
    const [a, b] = await Promise.all([generateSelfSigned(), generateSelfSigned()]);
    const env = { OVERCOMMIT_TLS_CERT_FILE: join(dir, 'mm.crt'), OVERCOMMIT_TLS_KEY_FILE: join(dir, 'mm.key') };
    await writeFile(env.OVERCOMMIT_TLS_CERT_FILE, a.cert);
    await writeFile(env.OVERCOMMIT_TLS_KEY_FILE, b.key);
    await expect(loadInitialTls(env, recordingLog().log)).rejects.toThrow(
      `TLS private key ${env.OVERCOMMIT_TLS_KEY_FILE} does not match the public key of TLS certificate ${env.OVERCOMMIT_TLS_CERT_FILE}`,
    );
  });

  it('names the certificate file when it is not a certificate', async () => {
    const pair = await generateSelfSigned();
    const env = { OVERCOMMIT_TLS_CERT_FILE: join(dir, 'bad.crt'), OVERCOMMIT_TLS_KEY_FILE: join(dir, 'bad.key') };
    await writeFile(env.OVERCOMMIT_TLS_CERT_FILE, '-----BEGIN CERTIFICATE-----\nnot base64 at all\n');
    await writeFile(env.OVERCOMMIT_TLS_KEY_FILE, pair.key);
    await expect(loadInitialTls(env, recordingLog().log)).rejects.toThrow(`TLS certificate ${env.OVERCOMMIT_TLS_CERT_FILE}: not a valid PEM X.509 certificate`);
  });
});

describe('validatePair', () => {
  it('rejects empty input and a key in place of a certificate', async () => {
    const pair = await generateSelfSigned();
    expect(() => validatePair('', pair.cert)).toThrow('TLS private key: empty');
    expect(() => validatePair(pair.key, pair.key)).toThrow('TLS certificate: not a valid PEM X.509 certificate');
    expect(() => validatePair(pair.cert, pair.cert)).toThrow('TLS private key: not a valid unencrypted PEM private key');
  });
});
