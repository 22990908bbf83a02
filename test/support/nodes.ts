import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import type { E2eEnv } from './env.js';
import type { KubeClient } from './kube-client.js';
import { baseUnits, inflatedBaseUnits } from './quantity.js';

/** How many names of each kind have tokens (cluster.sh make_tokens). */
export const NODE_NAME_POOLS = { 'sim-node': 1100, 'kwok-node': 20 } as const;
export type NodeNamePool = keyof typeof NODE_NAME_POOLS;

/**
 * Names with a static token (`node-<name>`) that no other test file of this run has taken:
 * claims are folders made with an atomic mkdir under runDir/claims/, so test files in other
 * workers never get the same name. kwok-node-* for kwok-managed nodes (20 in all),
 * sim-node-* for the rest.
 */
export function claimNodeNames(env: E2eEnv, pool: NodeNamePool, count: number): string[] {
  const dir = join(env.runDir, 'claims');
  mkdirSync(dir, { recursive: true });
  const names: string[] = [];
  for (let i = 0; i < NODE_NAME_POOLS[pool] && names.length < count; i++) {
    const name = `${pool}-${i}`;
    try {
      mkdirSync(join(dir, name));
      names.push(name);
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
    }
  }
  if (names.length < count) throw new Error(`only ${names.length} of ${count} ${pool} names left (cluster.sh makes tokens for ${NODE_NAME_POOLS[pool]})`);
  return names;
}

export const RAW_ANNOTATION = 'kube-overcommit.io/allocatable-raw';
export const RATIOS_ANNOTATION = 'kube-overcommit.io/ratios';
export const POOL_ANNOTATION = 'kube-overcommit.io/pool';
export const DISABLED_LABEL = 'kube-overcommit.io/disabled';
export const MANAGED_RESOURCES = ['cpu', 'memory', 'ephemeral-storage', 'pods'] as const;

/** A Node as read back, with the parts the scenarios look at. */
export interface NodeView {
  name: string;
  allocatable: Record<string, string>;
  capacity: Record<string, string>;
  labels: Record<string, string>;
  annotations: Record<string, string>;
  /** kube-overcommit.io/allocatable-raw, parsed (undefined when absent or not JSON). */
  recordedRaw?: { allocatable: Record<string, string>; capacity: Record<string, string> };
  /** kube-overcommit.io/ratios, parsed. */
  recordedRatios?: Record<string, number>;
  ready: boolean;
  taints: Array<{ key: string; value?: string; effect: string }>;
  object: any;
}

function parseJson(text: string | undefined): any {
  if (text === undefined) return undefined;
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}

export function viewNode(node: any): NodeView {
  const annotations = node.metadata?.annotations ?? {};
  return {
    name: node.metadata?.name,
    allocatable: node.status?.allocatable ?? {},
    capacity: node.status?.capacity ?? {},
    labels: node.metadata?.labels ?? {},
    annotations,
    recordedRaw: parseJson(annotations[RAW_ANNOTATION]),
    recordedRatios: parseJson(annotations[RATIOS_ANNOTATION]),
    ready: (node.status?.conditions ?? []).some((c: any) => c.type === 'Ready' && c.status === 'True'),
    taints: node.spec?.taints ?? [],
    object: node,
  };
}

export async function getNode(client: KubeClient, name: string): Promise<NodeView> {
  return viewNode(await client.get(`/api/v1/nodes/${name}`));
}

/**
 * What the webhook must store for a raw allocatable and ratios: floor(raw × ratio) per managed
 * resource with a ratio, in base units (millicores, bytes, count); other resources as raw.
 */
export function expectedAllocatable(raw: Record<string, string>, ratios: Record<string, number | string>): Record<string, bigint> {
  const out: Record<string, bigint> = {};
  for (const [resource, quantity] of Object.entries(raw)) {
    const ratio = (MANAGED_RESOURCES as readonly string[]).includes(resource) ? ratios[resource] : undefined;
    out[resource] = ratio === undefined ? baseUnits(resource, quantity) : inflatedBaseUnits(resource, quantity, ratio);
  }
  return out;
}

/** A resource list in base units (for toEqual against expectedAllocatable). */
export function inBaseUnits(list: Record<string, string>, only?: readonly string[]): Record<string, bigint> {
  const out: Record<string, bigint> = {};
  for (const [resource, quantity] of Object.entries(list)) if (!only || only.includes(resource)) out[resource] = baseUnits(resource, quantity);
  return out;
}
