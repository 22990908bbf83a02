import type { Server as TlsServer } from 'node:tls';
import { type DynamicModule, Module } from '@nestjs/common';
import { makeCounterProvider, makeGaugeProvider } from '@willsoto/nestjs-prometheus';
import type { TlsMaterial } from './tls-material.js';
import {
  HTTPS_SERVER,
  type HttpsServerRef,
  TLS_EXPIRY_METRIC,
  TLS_MATERIAL,
  TLS_RELOADER_OPTIONS,
  TLS_RELOADS_METRIC,
  TlsReloader,
  type TlsReloaderOptions,
} from './tls-reloader.service.js';

@Module({})
export class TlsModule {
  /**
   * @param material what loadInitialTls() returned (the adapter was built with it)
   * @param getHttpsServer returns the HTTPS server (e.g. `() => adapter.getHttpServer()`); called at reload time
   */
  static forRoot(material: TlsMaterial, getHttpsServer: () => TlsServer | null | undefined, options?: Partial<TlsReloaderOptions>): DynamicModule {
    const ref: HttpsServerRef = {
      get server() {
        return getHttpsServer() ?? null;
      },
    };
    return {
      module: TlsModule,
      global: true,
      providers: [
        { provide: TLS_MATERIAL, useValue: material },
        { provide: HTTPS_SERVER, useValue: ref },
        { provide: TLS_RELOADER_OPTIONS, useValue: options ?? {} },
        makeCounterProvider({
          name: TLS_RELOADS_METRIC,
          help: 'Reloads of the serving TLS certificate from its files, by result',
          labelNames: ['result'],
        }),
        makeGaugeProvider({
          name: TLS_EXPIRY_METRIC,
          help: 'Expiry (notAfter) of the TLS certificate being served, as a Unix timestamp',
        }),
        TlsReloader,
      ],
      exports: [TlsReloader],
    };
  }
}
