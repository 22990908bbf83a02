import { Module } from '@nestjs/common';
import { SelfManagedCertificates } from './self-managed-cert.service.js';

/** Imported by AppModule when OVERCOMMIT_CERT_MODE=self-managed (KubeModule and TlsModule are global). */
@Module({ providers: [SelfManagedCertificates] })
export class SelfManagedCertModule {}
