import { BadRequestException, Controller, Get, Inject, Query, ServiceUnavailableException } from '@nestjs/common';
import { ConfigStore } from '../config/config.store.js';
import { NodeCache } from '../kube/node-cache.service.js';
import { PodCache } from '../kube/pod-cache.service.js';
import { type ClusterPlan, planCluster, readPodSize } from '../domain/node-rules/node-plan.js';
import { watchForPlan } from './plan-caches.js';
import { NODE_USAGE, type PublishedUsage } from '../domain/node-rules/node-services.js';

export interface PlanResponse extends ClusterPlan {
  /** The config generation and origin the plan was computed with. */
  generation: number;
  origin: string;
}

/**
 * GET /plan on the ops endpoints (both ports): the plan of every node (node-plan.ts) under
 * the config in force, from this replica's informer caches, never an API call per request.
 * `?podSize=cpu=500m,memory=1Gi` counts how many more such pods fit. 503 outside a cluster
 * and until the caches have listed (the first call starts them), 400 on a bad podSize.
 */
@Controller()
export class PlanController {
  constructor(
    private readonly nodes: NodeCache,
    private readonly pods: PodCache,
    private readonly config: ConfigStore,
    @Inject(NODE_USAGE) private readonly usage: PublishedUsage,
  ) {}

  @Get('plan')
  plan(@Query('podSize') podSize?: string): PlanResponse {
    let size = null;
    try {
      if (podSize !== undefined) size = readPodSize(podSize);
    } catch (error) {
      throw new BadRequestException((error as Error).message);
    }
    if (!this.nodes.available) throw new ServiceUnavailableException('not in a cluster: no node or pod cache to plan from');
    if (!watchForPlan(this.nodes, this.pods)) throw new ServiceUnavailableException('node and pod caches not listed yet: retry in a few seconds');
    const { config, generation, origin } = this.config.snapshot();
    return {
      generation,
      origin,
      ...planCluster(this.nodes.nodes(), (node) => this.pods.usage(node).requests, config.nodes, size, {
        usageOf: (node) => this.usage.published(node),
        exclusiveOf: (node) => this.pods.usage(node).exclusiveCpu ?? 0n,
        admittedOf: (node) => this.pods.admitted(node),
      }),
    };
  }
}
