import { createSecureContext } from 'node:tls';
import { describe, expect, it } from 'vitest';
import { CIPHER_SUITES, DEFAULT_TLS_POLICY, readTlsPolicy, secureContextOptions } from './tls-policy.js';

describe('readTlsPolicy', () => {
  it('defaults to TLS 1.2 with the six ECDHE AEAD suites and no client CA', () => {
    expect(readTlsPolicy({})).toEqual(DEFAULT_TLS_POLICY);
    expect(DEFAULT_TLS_POLICY.tls12Suites.every((suite) => /^ECDHE-(ECDSA|RSA)-(AES(128|256)-GCM-SHA(256|384)|CHACHA20-POLY1305)$/.test(suite))).toBe(true);
  });

  it("reads kube-apiserver's and Node's spellings of the minimum version", () => {
    expect(readTlsPolicy({ OVERCOMMIT_TLS_MIN_VERSION: 'VersionTLS13' }).minVersion).toBe('TLSv1.3');
    expect(readTlsPolicy({ OVERCOMMIT_TLS_MIN_VERSION: 'TLSv1.2' }).minVersion).toBe('TLSv1.2');
    expect(() => readTlsPolicy({ OVERCOMMIT_TLS_MIN_VERSION: 'VersionTLS11' })).toThrow(
      'OVERCOMMIT_TLS_MIN_VERSION: "VersionTLS11" is not one of VersionTLS12, VersionTLS13, TLSv1.2, TLSv1.3',
    );
  });

  it('accepts IANA, Go and OpenSSL names, in the order given, without duplicates', () => {
    const policy = readTlsPolicy({
      OVERCOMMIT_TLS_CIPHER_SUITES: 'TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305, ecdhe-ecdsa-aes128-gcm-sha256,TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256',
    });
    expect(policy.tls12Suites).toEqual(['ECDHE-RSA-CHACHA20-POLY1305', 'ECDHE-ECDSA-AES128-GCM-SHA256']);
  });

  it('refuses CBC and unknown suites, listing the accepted names', () => {
    for (const name of ['TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA', 'AES128-GCM-SHA256', 'HIGH']) {
      expect(() => readTlsPolicy({ OVERCOMMIT_TLS_CIPHER_SUITES: name })).toThrow(
        new RegExp(`"${name}" is not an accepted TLS 1.2 suite .*accepted: TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256 \\(ECDHE-ECDSA-AES128-GCM-SHA256\\)`),
      );
    }
  });

  it('reads the client CA file name', () => {
    expect(readTlsPolicy({ OVERCOMMIT_CLIENT_CA_FILE: '/etc/ca.crt' }).clientCaFile).toBe('/etc/ca.crt');
    expect(readTlsPolicy({ OVERCOMMIT_CLIENT_CA_FILE: '' }).clientCaFile).toBeUndefined();
  });
});

describe('secureContextOptions', () => {
  it('puts the TLS 1.3 suites and the policy into one cipher string OpenSSL accepts', () => {
    const options = secureContextOptions({ key: 'k', cert: 'c' });
    expect(options.ciphers).toBe(
      ['TLS_AES_128_GCM_SHA256', 'TLS_AES_256_GCM_SHA384', 'TLS_CHACHA20_POLY1305_SHA256', ...Object.values(CIPHER_SUITES)].join(':'),
    );
    expect(options.minVersion).toBe('TLSv1.2');
    expect(options.ca).toBeUndefined();
    expect(() => createSecureContext({ ciphers: options.ciphers, minVersion: options.minVersion })).not.toThrow();
    expect(secureContextOptions({ key: 'k', cert: 'c', clientCa: 'CA' }).ca).toBe('CA');
  });
});
