import { type DynamicModule, Module } from '@nestjs/common';
import type { Server as TlsServer } from 'node:tls';
import { LoggerModule } from 'nestjs-pino';
import type { Logger as PinoLogger } from 'pino';
import { AdmissionModule } from './admission/admission.module.js';
import { BackgroundTasksModule } from './common/background-tasks.js';
import { ConfigModule } from './config/config.module.js';
import { HealthModule } from './health/health.module.js';
import { KubeModule } from './kube/kube.module.js';
import { MetricsModule } from './metrics/metrics.module.js';
import { NodeOversellModule } from './node-oversell/node-oversell.module.js';
import { NodePolicyModule } from './node-policy/node-policy.module.js';
import { OVERCOMMIT_CONFIG } from './overcommit.config.js';
import { PlanModule } from './plan/plan.module.js';
import { ReconcilerModule } from './reconciler/reconciler.module.js';
import { StatusCoalescingModule } from './status-coalescing/status-coalescing.module.js';
import { UsageModule } from './usage/usage.module.js';
import { PodPolicyModule } from './pod-policy/pod-policy.module.js';
import { SidecarModule } from './sidecar/sidecar.module.js';
import type { TlsMaterial } from './tls/tls-material.js';
import { SelfManagedCertModule } from './tls/self-managed-cert.module.js';
import { readCertMode } from './tls/self-managed-cert.rules.js';
import { TlsModule } from './tls/tls.module.js';

@Module({})
export class AppModule {
  static forRoot(env: NodeJS.ProcessEnv, logger: PinoLogger, tls: TlsMaterial, getHttpsServer: () => TlsServer | undefined): DynamicModule {
    return {
      module: AppModule,
      imports: [
        LoggerModule.forRoot({
          // Request logging stays off: the admission pipeline logs one line per decision at
          // debug, with the request uid (and /mutate is not served by Nest: admission.server.ts).
          pinoHttp: { logger, autoLogging: false, quietReqLogger: true },
        }),
        MetricsModule.forRoot(),
        BackgroundTasksModule,
        KubeModule.forRoot(env),
        ConfigModule.forRoot(env, OVERCOMMIT_CONFIG),
        TlsModule.forRoot(tls, getHttpsServer),
        ...(readCertMode(env) === 'self-managed' ? [SelfManagedCertModule] : []),
        HealthModule,
        AdmissionModule,
        UsageModule,
        NodeOversellModule,
        StatusCoalescingModule,
        ReconcilerModule,
        NodePolicyModule,
        PodPolicyModule,
        SidecarModule,
        PlanModule,
      ],
    };
  }
}
