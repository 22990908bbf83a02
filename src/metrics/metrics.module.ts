import { type DynamicModule, Module } from '@nestjs/common';
import { PrometheusModule } from '@willsoto/nestjs-prometheus';
import { register } from 'prom-client';

/** `/metrics` in Prometheus text format, with the default process metrics. Each feature module declares its own metrics. */
@Module({})
export class MetricsModule {
  static forRoot(): DynamicModule {
    // prom-client's default registry is process-wide and register() starts the default
    // collectors: a second app in one process (tests, benchmarks) starts from a clean registry.
    register.clear();
    return {
      module: MetricsModule,
      imports: [PrometheusModule.register({ path: '/metrics', global: true, defaultMetrics: { enabled: true } })],
    };
  }
}
