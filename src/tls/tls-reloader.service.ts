import { createHash } from 'node:crypto';
import { type FSWatcher, watch } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { dirname } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import type { Server as TlsServer } from 'node:tls';
import { Inject, Injectable, Logger, type OnApplicationBootstrap, type OnApplicationShutdown, type OnModuleDestroy, Optional } from '@nestjs/common';
import { InjectMetric } from '@willsoto/nestjs-prometheus';
import type { Counter, Gauge } from 'prom-client';
import { BackgroundTasks } from '../common/background-tasks.js';
import { type TlsMaterial, validateClientCa, validatePair } from './tls-material.js';
import { secureContextOptions } from './tls-policy.js';

/** Holder for the HTTPS server; read lazily, so main.ts may fill it after the module is built. */
export interface HttpsServerRef {
  readonly server: TlsServer | null;
}
export const HTTPS_SERVER = Symbol('HTTPS_SERVER');
export const TLS_MATERIAL = Symbol('TLS_MATERIAL');
export const TLS_RELOADER_OPTIONS = Symbol('TLS_RELOADER_OPTIONS');

export const TLS_RELOADS_METRIC = 'kube_overcommit_tls_reloads_total';
export const TLS_EXPIRY_METRIC = 'kube_overcommit_tls_certificate_expiry_timestamp_seconds';

export interface TlsReloaderOptions {
  debounceMs: number;
  attempts: number;
  retryDelayMs: number;
  pollMs: number;
}
const DEFAULTS: TlsReloaderOptions = { debounceMs: 100, attempts: 5, retryDelayMs: 200, pollMs: 30_000 };

/** Re-reads the certificate files and the client CA on change and swaps them into the running HTTPS server. */
@Injectable()
export class TlsReloader implements OnApplicationBootstrap, OnApplicationShutdown, OnModuleDestroy {
  private readonly logger = new Logger('Tls');
  private readonly options: TlsReloaderOptions;
  private material: TlsMaterial;
  /** Digest of the last file content handled (served, or rejected): unchanged content is not re-tried. */
  private seen: string;
  private watchers: FSWatcher[] = [];
  private debounceTimer?: NodeJS.Timeout;
  private pollTimer?: NodeJS.Timeout;
  private running: Promise<void> | null = null;
  private rerun = false;
  private closed = false;
  private readonly guardedTrigger: () => void;

  // eslint-disable-next-line max-params -- Nest resolves each parameter by its token: the list counts the provider's dependencies.
  constructor(
    @Inject(TLS_MATERIAL) material: TlsMaterial,
    @Inject(HTTPS_SERVER) private readonly https: HttpsServerRef,
    @InjectMetric(TLS_RELOADS_METRIC) private readonly reloads: Counter<string>,
    @InjectMetric(TLS_EXPIRY_METRIC) private readonly expiry: Gauge<string>,
    background: BackgroundTasks,
    @Optional() @Inject(TLS_RELOADER_OPTIONS) options?: Partial<TlsReloaderOptions>,
  ) {
    this.options = { ...DEFAULTS, ...options };
    this.material = material;
    this.seen = digest(material.cert, material.key, material.clientCa);
    this.reloads.inc({ result: 'success' }, 0);
    this.reloads.inc({ result: 'failure' }, 0);
    if (!material.placeholder) this.expiry.set(material.notAfter.getTime() / 1000);
    this.guardedTrigger = background.guard('tls-reload', () => this.trigger());
  }

  onApplicationBootstrap(): void {
    const files = this.watchedFiles();
    if (files.length === 0) return;
    // Kubernetes updates a Secret volume by renaming the `..data` symlink inside the directory;
    // a watch on the file itself would keep following the old inode.
    for (const dir of new Set(files.map((file) => dirname(file)))) {
      try {
        const watcher = watch(dir, { persistent: false }, () => this.schedule());
        watcher.on('error', (err) => this.logger.warn(`watching ${dir} failed (${err.message}); relying on the poll`));
        this.watchers.push(watcher);
      } catch (err) {
        this.logger.warn(`cannot watch ${dir} (${(err as Error).message}); relying on the poll`);
      }
    }
    // inotify can miss events (overlay filesystems, watch limits): compare contents now and then.
    this.pollTimer = setInterval(this.guardedTrigger, this.options.pollMs).unref();
    this.guardedTrigger(); // catches a rotation between loadInitialTls() and now
  }

  onModuleDestroy(): void {
    this.close();
  }

  onApplicationShutdown(): void {
    this.close();
  }

  /** True while a valid, unexpired certificate (not a placeholder) is installed on the HTTPS server. */
  isReady(): boolean {
    return this.https.server !== null && !this.material.placeholder && this.material.notAfter.getTime() > Date.now();
  }

  current(): TlsMaterial {
    return { ...this.material };
  }

  /** The serving pair's files (absent for a generated pair) and the client CA file. */
  private watchedFiles(): string[] {
    const { certFile, keyFile, selfSigned, policy } = this.material;
    const pair = !selfSigned && certFile && keyFile ? [certFile, keyFile] : [];
    return policy?.clientCaFile ? [...pair, policy.clientCaFile] : pair;
  }

  private schedule(): void {
    if (this.closed) return;
    clearTimeout(this.debounceTimer);
    this.debounceTimer = setTimeout(this.guardedTrigger, this.options.debounceMs);
  }

  /**
   * Runs reloads one at a time; a trigger during a reload causes one more pass afterwards.
   * Returns the pass it started, for the guard to catch what it throws.
   */
  private trigger(): Promise<void> | undefined {
    if (this.closed) return undefined;
    if (this.running) {
      this.rerun = true;
      return undefined;
    }
    return (this.running = (async () => {
      do {
        this.rerun = false;
        await this.reload();
      } while (this.rerun && !this.closed);
    })().finally(() => {
      this.running = null;
    }));
  }

  private async reload(): Promise<void> {
    const { certFile, keyFile, policy } = this.material;
    const caFile = policy?.clientCaFile;
    let lastError: unknown;
    let lastDigest: string | undefined;
    for (let attempt = 1; attempt <= this.options.attempts; attempt++) {
      if (this.closed) return;
      try {
        const [cert, key, clientCa] = await this.readFiles();
        lastDigest = digest(cert, key, clientCa);
        if (lastDigest === this.seen) return;
        const { notAfter } = validatePair(key, cert, {
          cert: `TLS certificate ${certFile}`,
          key: `TLS private key ${keyFile}`,
        });
        if (clientCa !== undefined) validateClientCa(clientCa, `client CA ${caFile}`);
        this.serve({ key, cert, notAfter, clientCa }, `${certFile ?? '(generated)'}${caFile ? ` and client CA ${caFile}` : ''}`);
        this.seen = lastDigest;
        return;
      } catch (err) {
        lastError = err;
        // A rotation may be half-written (one file new, the other old or truncated): read again.
        if (attempt < this.options.attempts) await sleep(this.options.retryDelayMs);
      }
    }
    if (this.closed) return;
    if (lastDigest) this.seen = lastDigest;
    this.reloads.inc({ result: 'failure' });
    this.logger.error(
      `TLS reload failed after ${this.options.attempts} attempts, still serving the previous certificate: ` +
        (lastError instanceof Error ? lastError.message : String(lastError)),
    );
  }

  /** The serving pair as the files hold it now (a generated pair as it is) and the client CA file's contents. */
  private readFiles(): Promise<[string, string, string | undefined]> {
    const { certFile, keyFile, selfSigned, policy } = this.material;
    const caFile = policy?.clientCaFile;
    return Promise.all([
      selfSigned ? this.material.cert : readFile(certFile!, 'utf8'),
      selfSigned ? this.material.key : readFile(keyFile!, 'utf8'),
      caFile ? readFile(caFile, 'utf8') : undefined,
    ]);
  }

  /**
   * Serves a certificate that comes from elsewhere than the files (the self-managed Secret).
   * An unusable pair is counted and logged, and the previous certificate stays: false.
   */
  install(cert: string, key: string, source: string): boolean {
    try {
      const { notAfter } = validatePair(key, cert, { cert: `TLS certificate from ${source}`, key: `TLS private key from ${source}` });
      this.serve({ key, cert, notAfter }, `from ${source}`);
      return true;
    } catch (err) {
      this.reloads.inc({ result: 'failure' });
      this.logger.error(`TLS certificate from ${source} not installed, still serving the previous one: ${(err as Error).message}`);
      return false;
    }
  }

  /** Installs a validated pair (and client CA) for new handshakes; established connections keep theirs. */
  private serve(pair: { key: string; cert: string; notAfter: Date; clientCa?: string }, source: string): void {
    const server = this.https.server;
    if (!server) throw new Error('no HTTPS server registered to receive the certificate');
    const clientCa = pair.clientCa ?? this.material.clientCa;
    server.setSecureContext(secureContextOptions({ key: pair.key, cert: pair.cert, clientCa }, this.material.policy));
    this.material = {
      ...this.material,
      key: pair.key,
      cert: pair.cert,
      notAfter: pair.notAfter,
      placeholder: false,
      ...(clientCa !== undefined ? { clientCa } : {}),
    };
    this.reloads.inc({ result: 'success' });
    this.expiry.set(pair.notAfter.getTime() / 1000);
    this.logger.log(`reloaded TLS certificate ${source} (expires ${pair.notAfter.toISOString()})`);
  }

  private close(): void {
    this.closed = true;
    for (const watcher of this.watchers) watcher.close();
    this.watchers = [];
    clearTimeout(this.debounceTimer);
    clearInterval(this.pollTimer);
  }
}

function digest(cert: string, key: string, clientCa = ''): string {
  return createHash('sha256').update(cert).update('\0').update(key).update('\0').update(clientCa).digest('hex');
}
