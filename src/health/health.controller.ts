import { Controller, Get } from '@nestjs/common';
import { HealthCheck, HealthCheckService, HealthIndicatorService } from '@nestjs/terminus';
import { ConfigStore } from '../config/config.store.js';
import { NamespaceCache } from '../kube/namespace-cache.service.js';
import { PodCache } from '../kube/pod-cache.service.js';
import { TlsReloader } from '../tls/tls-reloader.service.js';
import { LifecycleService } from './lifecycle.service.js';

@Controller()
export class HealthController {
  // eslint-disable-next-line max-params -- Nest resolves each parameter by its token: the list counts the provider's dependencies.
  constructor(
    private readonly health: HealthCheckService,
    private readonly indicators: HealthIndicatorService,
    private readonly config: ConfigStore,
    private readonly tls: TlsReloader,
    private readonly lifecycle: LifecycleService,
    private readonly namespaces: NamespaceCache,
    private readonly pods: PodCache,
  ) {}

  /** Liveness: the process answers. Nothing here depends on the API server. */
  @Get('healthz')
  @HealthCheck()
  liveness() {
    return this.health.check([]);
  }

  /**
   * Readiness: serving a valid certificate, config loaded (ConfigMap listed), namespaces listed,
   * pods listed while the commitment floor reads them (for at most FLOOR_READY_WAIT_MS), not draining.
   */
  @Get('readyz')
  @HealthCheck()
  readiness() {
    return this.health.check([
      () => {
        const tls = this.indicators.check('tls');
        return this.tls.isReady() ? tls.up() : tls.down('no valid certificate loaded');
      },
      () => {
        const config = this.indicators.check('config');
        const { generation, origin } = this.config.snapshot();
        return this.config.isLoaded() ? config.up({ generation, origin }) : config.down({ message: 'config source not synced yet' });
      },
      () => {
        const namespaces = this.indicators.check('namespaces');
        return this.namespaces.isReady() ? namespaces.up() : namespaces.down('namespace cache not synced yet');
      },
      () => {
        const pods = this.indicators.check('pods');
        return this.pods.readyForFloor() ? pods.up() : pods.down('pod cache not listed yet (the commitment floor counts bound pods)');
      },
      () => {
        const lifecycle = this.indicators.check('lifecycle');
        return this.lifecycle.isDraining() ? lifecycle.down('shutting down') : lifecycle.up();
      },
    ]);
  }
}
