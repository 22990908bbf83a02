/**
 * GET /plan's work for a 5,000-node cluster, in this process: `npm run bench:plan`. It imports
 * the built app (dist/; the script builds when stale, unless --no-build).
 *
 * The cluster: 5,000 synthetic Nodes (kubeadm-like figures, four pools and the defaults, half
 * already inflated by the webhook so their record is read back) and 30 bound pods each, held
 * as the server holds them (the pod index by node). Each run plans every node under the config
 * and serialises the answer (what the controller returns). Baseline in the same run:
 * planNodeStatus alone over the same nodes, the webhook's own work.
 */
import 'reflect-metadata';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { pathToFileURL } from 'node:url';
import { benchMain, machineInfo, median, percentile, round, ROOT, table } from './lib.js';

const { flags, log, outFile, command } = benchMain(
  {
    script: 'bench:plan',
    results: 'plan.json',
    build: true,
    flags: {
      nodes: { type: 'number', default: 5000, min: 1, integer: true },
      runs: { type: 'number', default: 60, min: 1, integer: true },
    },
  },
  main,
);
const dist = (path: string) => import(pathToFileURL(join(ROOT, 'dist', path)).href);

const CONFIG = `
nodes:
  defaultRatios: { cpu: 1.5, memory: 1.2 }
  pools:
${['a', 'b', 'c', 'd'].map((p, i) => `    - { name: pool-${p}, nodeSelector: { matchLabels: { pool: ${p} } }, ratios: { cpu: ${2 + i}, memory: 1.5, pods: 2 }${i % 2 ? ', mode: shadow' : ''} }`).join('\n')}
`;

async function main(): Promise<void> {
  const { parseConfig } = await dist('overcommit.config.js');
  const { planNodeStatus, resolveNodePolicy } = await dist('domain/node-rules/node-oversell.rules.js');
  const { nodeStatusPatch } = await dist('node-oversell/node-oversell.strategy.js');
  const { planCluster } = await dist('domain/node-rules/node-plan.js');
  const { PodsByNode } = await dist('kube/pods-by-node.js');
  const { default: fastJsonPatch } = await import('fast-json-patch');

  const parsed = parseConfig(CONFIG);
  if (!parsed.ok) throw new Error(parsed.errors.join('\n'));
  const nodesConfig = parsed.value.nodes;
  const { nodes: count, runs } = flags;

  const nodes: any[] = [];
  const pods = new PodsByNode();
  for (let i = 0; i < count; i++) {
    const name = `node-${String(i).padStart(5, '0')}`;
    const labels: Record<string, string> = { 'kubernetes.io/hostname': name, ...(i % 5 === 4 ? {} : { pool: 'abcd'[i % 5] }) };
    let node: any = {
      metadata: { name, labels, annotations: { 'node.alpha.kubernetes.io/ttl': '0' } },
      status: {
        capacity: { cpu: '16', memory: '65843016Ki', pods: '110', 'ephemeral-storage': '101430960Ki', 'hugepages-2Mi': '0' },
        allocatable: { cpu: '15800m', memory: '65228616Ki', pods: '110', 'ephemeral-storage': '93478772582', 'hugepages-2Mi': '0' },
      },
    };
    if (i % 2 === 0) {
      const plan = planNodeStatus(node, resolveNodePolicy(labels, nodesConfig), node);
      node = fastJsonPatch.applyPatch(node, nodeStatusPatch(node, plan), true, false).newDocument;
    }
    nodes.push(node);
    for (let p = 0; p < 30; p++) {
      pods.upsert({
        metadata: { uid: `${name}-${p}`, namespace: 'bench', name: `${name}-${p}` },
        spec: { nodeName: name, containers: [{ name: 'c', resources: { requests: { cpu: '250m', memory: '512Mi' } } }] },
        status: { phase: 'Running' },
      });
    }
  }

  const podSize = { cpu: 500n, memory: 2n ** 30n };
  const timed = (fn: () => unknown): number[] => {
    for (let i = 0; i < 5; i++) fn(); // warm-up
    const ms: number[] = [];
    for (let i = 0; i < runs; i++) {
      const start = performance.now();
      fn();
      ms.push(performance.now() - start);
    }
    return ms.sort((a, b) => a - b);
  };
  let bytes = 0;
  const plan = timed(() => {
    bytes = JSON.stringify({
      generation: 1,
      origin: 'bench',
      ...planCluster(nodes, (node: string) => pods.usage(node).requests, nodesConfig, podSize, { admittedOf: (node: string) => pods.admitted(node) }),
    }).length;
  });
  const baseline = timed(() => {
    for (const node of nodes) planNodeStatus(node, resolveNodePolicy(node.metadata.labels, nodesConfig), node);
  });

  const summary = (ms: number[]) => ({ medianMs: round(median(ms), 1), p99Ms: round(percentile(ms, 99), 1) });
  const result = {
    command,
    at: new Date().toISOString(),
    machine: machineInfo(),
    nodes: count,
    podsPerNode: 30,
    runs,
    p99Ms5000Nodes: count === 5000 ? summary(plan).p99Ms : null,
    plan: { ...summary(plan), responseKiB: round(bytes / 1024, 0) },
    baselinePlanNodeStatus: summary(baseline),
    ratioToBaseline: round(median(plan) / median(baseline), 1),
  };
  log(
    table(
      ['what', 'median ms', 'p99 ms'],
      [
        [`plan of ${count} nodes (+ JSON)`, result.plan.medianMs, result.plan.p99Ms],
        [`planNodeStatus × ${count} (baseline)`, result.baselinePlanNodeStatus.medianMs, result.baselinePlanNodeStatus.p99Ms],
      ],
    ),
  );
  writeFileSync(outFile, `${JSON.stringify(result, null, 2)}\n`);
  log(`wrote ${outFile}`);
}
