/** The resources whose allocatable may be inflated. Extended resources (GPUs, hugepages) never are. */
export const MANAGED_RESOURCES = ['cpu', 'memory', 'ephemeral-storage', 'pods'] as const;
export type ManagedResource = (typeof MANAGED_RESOURCES)[number];

/** Amounts of the managed resources in base units (millicores, bytes, count); a missing key = resource absent. */
export type ResourceAmounts = Partial<Record<ManagedResource, bigint>>;

/** What is already committed on a node. */
export interface NodeUsage {
  /** Sum of the effective requests of the node's non-terminal pods; `pods` is their count. */
  requests: ResourceAmounts;
  /** Sum of their exclusive CPUs (pod-resources.ts exclusiveCpus), millicores; absent = 0. */
  exclusiveCpu?: bigint;
}
