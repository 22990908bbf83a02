import { Global, Module } from '@nestjs/common';
import { TerminusModule } from '@nestjs/terminus';
import { makeCounterProvider } from '@willsoto/nestjs-prometheus';
import { HTTP_REFUSED_METRIC } from '../server/server-limits.js';
import { HealthController } from './health.controller.js';
import { LifecycleService } from './lifecycle.service.js';

@Global()
@Module({
  imports: [TerminusModule.forRoot({ logger: false })],
  controllers: [HealthController],
  providers: [
    LifecycleService,
    makeCounterProvider({
      name: HTTP_REFUSED_METRIC,
      help: 'Connections and requests refused by the server limits, by reason: connections (closed on accept), body-bytes (503)',
      labelNames: ['reason'],
    }),
  ],
  exports: [LifecycleService],
})
export class HealthModule {}
