/**
 * `kube-overcommit plan`: the plan (node-plan.ts) of a cluster from the user's kubeconfig
 * (KUBECONFIG, else ~/.kube/config, as kubectl), under the config in the ConfigMap or, to
 * preview an edit, a config file. One LIST of nodes and one of non-terminal pods per run.
 */
import { CoreV1Api, KubeConfig } from '@kubernetes/client-node';
import { readFileSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { parseConfig, type OvercommitConfig } from '../overcommit.config.js';
import { configMapRef } from '../config/configmap.source.js';
import { NON_TERMINAL_PODS } from '../kube/pod-cache.service.js';
import { PodsByNode } from '../kube/pods-by-node.js';
import type { PodLike } from '../domain/pod-resources.js';
import type { NodeLike } from '../domain/node-like.js';
import type { ResourceAmounts } from '../domain/resources.js';
import { type ClusterPlan, formatPlanTable, planCluster, readPodSize } from '../domain/node-rules/node-plan.js';
import { type NodeUsageEntry, readPublished, USAGE_CONFIGMAP, USAGE_DATA_KEY } from '../domain/node-rules/usage-aware.rules.js';

export const PLAN_USAGE = `Usage: kube-overcommit plan [options]

Per node: pool, raw allocatable, ratios in force and why, planned and stored allocatable,
requests of bound pods, headroom, and whether the stored value already matches the plan.

Options:
  --config <file>        plan with this config.yaml instead of the ConfigMap's (preview an edit)
  --configmap <ns/name>  the ConfigMap to read (default kube-overcommit/kube-overcommit-config)
  --pod-size <size>      count how many more pods of this size fit, e.g. cpu=500m,memory=1Gi
  --context <name>       the kubeconfig context (default: the current one)
  -o, --output <format>  table (default) or json
  -h, --help             this text
`;

export interface PlanArgs {
  config?: string;
  configmap?: string;
  podSize: ResourceAmounts | null;
  context?: string;
  output: 'table' | 'json';
}

/** The command line after `plan`. Throws with a one-line reason on anything it does not take. */
export function readPlanArgs(argv: string[]): PlanArgs | 'help' {
  const { values, positionals } = parseArgs({
    args: argv,
    allowPositionals: true,
    options: {
      config: { type: 'string' },
      configmap: { type: 'string' },
      'pod-size': { type: 'string' },
      context: { type: 'string' },
      output: { type: 'string', short: 'o', default: 'table' },
      help: { type: 'boolean', short: 'h' },
    },
  });
  if (values.help) return 'help';
  if (positionals.length > 0) throw new Error(`unexpected argument ${JSON.stringify(positionals[0])}`);
  if (values.output !== 'table' && values.output !== 'json') throw new Error(`--output must be table or json, got ${JSON.stringify(values.output)}`);
  if (values.configmap !== undefined && !/^[^/]+\/[^/]+$/.test(values.configmap))
    throw new Error(`--configmap must be <namespace>/<name>, got ${JSON.stringify(values.configmap)}`);
  return {
    config: values.config,
    configmap: values.configmap,
    podSize: values['pod-size'] === undefined ? null : readPodSize(values['pod-size']),
    context: values.context,
    output: values.output,
  };
}

function parsed(text: string, origin: string): OvercommitConfig {
  const result = parseConfig(text);
  if (!result.ok) throw new Error(`invalid config in ${origin}:\n  ${result.errors.join('\n  ')}`);
  return result.value;
}

export interface PlanConfig {
  config: OvercommitConfig;
  origin: string;
}

/** The config file given with --config, validated as the server validates it. */
export function readConfigFile(path: string): PlanConfig {
  return { config: parsed(readFileSync(path, 'utf8'), path), origin: `file:${path}` };
}

/** The config in the ConfigMap. */
async function readConfigMap(core: CoreV1Api, configmap: string | undefined): Promise<PlanConfig> {
  const ref = configMapRef({ OVERCOMMIT_CONFIGMAP: configmap });
  const cm = await core.readNamespacedConfigMap({ namespace: ref.namespace, name: ref.name });
  const origin = `configmap:${ref.namespace}/${ref.name}@${cm.metadata?.resourceVersion ?? ''}`;
  const text = cm.data?.[ref.key];
  if (text === undefined) throw new Error(`ConfigMap ${ref.namespace}/${ref.name} has no key ${ref.key}`);
  return { config: parsed(text, origin), origin };
}

/**
 * One LIST of nodes and one of non-terminal pods, planned under `chosen` (a --config file)
 * or else the ConfigMap's config.
 */
export async function planFromCluster(args: PlanArgs, kube: KubeConfig, chosen?: PlanConfig): Promise<ClusterPlan & { origin: string }> {
  const core = kube.makeApiClient(CoreV1Api);
  const { config, origin } = chosen ?? (await readConfigMap(core, args.configmap));
  const [nodes, pods, usage] = await Promise.all([
    core.listNode(),
    core.listPodForAllNamespaces({ fieldSelector: NON_TERMINAL_PODS }),
    readPublishedUsage(core, configMapRef({ OVERCOMMIT_CONFIGMAP: args.configmap }).namespace),
  ]);
  const index = new PodsByNode();
  for (const pod of pods.items) index.upsert(pod as PodLike);
  return {
    origin,
    ...planCluster(nodes.items as NodeLike[], (node) => index.usage(node).requests, config.nodes, args.podSize, {
      usageOf: (node) => usage.get(node),
      exclusiveOf: (node) => index.usage(node).exclusiveCpu ?? 0n,
      admittedOf: (node) => index.admitted(node),
    }),
  };
}

/** The usage-aware ratios the leader published (ConfigMap kube-overcommit-usage), none when it has not. */
async function readPublishedUsage(core: CoreV1Api, namespace: string): Promise<Map<string, NodeUsageEntry>> {
  try {
    const text = (await core.readNamespacedConfigMap({ namespace, name: USAGE_CONFIGMAP })).data?.[USAGE_DATA_KEY];
    return text === undefined ? new Map() : readPublished(text);
  } catch (error) {
    if ((error as { code?: number }).code === 404) return new Map();
    throw error;
  }
}

/** Runs `kube-overcommit <argv>`; returns the exit code. */
export async function runCli(argv: string[], out: (text: string) => void, err: (text: string) => void): Promise<number> {
  const [command, ...rest] = argv;
  if (command === '-h' || command === '--help') {
    out(PLAN_USAGE);
    return 0;
  }
  if (command !== 'plan') {
    err(`${command === undefined ? 'a command is needed' : `unknown command ${JSON.stringify(command)}`}\n\n${PLAN_USAGE}`);
    return 2;
  }
  let args: PlanArgs | 'help';
  try {
    args = readPlanArgs(rest);
  } catch (error) {
    err(`kube-overcommit plan: ${(error as Error).message}\n\n${PLAN_USAGE}`);
    return 2;
  }
  if (args === 'help') {
    out(PLAN_USAGE);
    return 0;
  }
  try {
    // A bad --config stops before any cluster access.
    const chosen = args.config === undefined ? undefined : readConfigFile(args.config);
    const kube = new KubeConfig();
    kube.loadFromDefault();
    if (args.context !== undefined) kube.setCurrentContext(args.context);
    const plan = await planFromCluster(args, kube, chosen);
    out(args.output === 'json' ? `${JSON.stringify(plan, null, 2)}\n` : `# config: ${plan.origin}\n${formatPlanTable(plan)}`);
    return 0;
  } catch (error) {
    err(`kube-overcommit plan: ${(error as Error).message}\n`);
    return 1;
  }
}
