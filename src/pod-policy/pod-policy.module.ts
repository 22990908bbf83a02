import { Module } from '@nestjs/common';
import { POD_FACTS } from './pod-facts.js';
import { PodFactsService } from './pod-facts.service.js';
import { podPolicyMetrics } from './pod-policy.metrics.js';
import { PodPolicyMetrics, PodPolicyStrategy } from './pod-policy.strategy.js';

/**
 * Pod policies: contributes PodPolicyStrategy (found by the admission pipeline through its
 * @AdmissionStrategyProvider decorator), the informer-backed facts it reads and its counters.
 * KubeConfig, KUBE_ENV and NamespaceCache come from the global KubeModule.
 */
@Module({
  providers: [...podPolicyMetrics, PodPolicyMetrics, PodFactsService, { provide: POD_FACTS, useExisting: PodFactsService }, PodPolicyStrategy],
  exports: [PodPolicyStrategy, PodFactsService],
})
export class PodPolicyModule {}
