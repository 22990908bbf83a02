import { Injectable, type OnModuleInit } from '@nestjs/common';
import { ConfigStore } from '../config/config.store.js';
import { PodCache } from '../kube/pod-cache.service.js';
import type { ResourceAmounts } from '../domain/resources.js';
import { floorEnabled, type NodeCommitments } from '../domain/node-rules/node-services.js';

/**
 * The commitment floor's view of the shared pod cache: wanted while the config in force has the
 * floor on; unknown (no floor) outside a cluster and until the cache has listed, so a replica
 * that just started writes what the ratios give rather than a floor from a partial list.
 */
@Injectable()
export class CommitmentFloor implements NodeCommitments, OnModuleInit {
  constructor(
    private readonly pods: PodCache,
    private readonly config: ConfigStore,
  ) {}

  onModuleInit(): void {
    this.config.onChange(({ config }) => this.pods.use('commitment-floor', floorEnabled(config.nodes)));
    this.pods.use('commitment-floor', floorEnabled(this.config.snapshot().config.nodes));
  }

  committed(node: string): Readonly<ResourceAmounts> | undefined {
    // What the kubelet has admitted, never what it has been asked for: a Deferred resize counted here would fit at its next retry.
    return this.pods.isSynced() ? this.pods.admitted(node) : undefined;
  }
}
