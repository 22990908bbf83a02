/**
 * The node-status policy's cost inside kube-apiserver, side by side in one cluster with another
 * version of it, with its floor and with the webhook alone: `npm run bench:policy`.
 *
 * One control plane of the e2e harness, the webhook (cpu ratio 1.5, coalescing on), `--nodes`
 * simulated kubelets and the node-status policy (k8s/node-policy, installed from its files:
 * test/support/node-policy.ts). Once every node's target is published, each round measures four
 * versions, in an order rotated from round to round:
 *
 *   policy    the MutatingAdmissionPolicy's spec from `--policy` (the work tree's policy.yaml)
 *   against   the same from `--against`: a git ref's policy.yaml (HEAD by default: the same policy
 *             answers the noise of the measure) or a file
 *   floor     the policy with its match conditions and a mutation of one JSON Patch `test` and no
 *             variables: what any policy costs with these shards (its writes go to the webhook)
 *   webhook   the bindings deleted: the webhook's nodes entry alone decides and coalesces
 *
 * each after 3 s and a few PATCHes to warm up (the API server's informers take the change up and
 * it compiles a changed policy): `--patches`
 * heartbeat PATCHes (forced kubelet status updates: the raw allocatable and new heartbeat times,
 * the steady state both paths coalesce), `--concurrency` at a time. Per round, from the API
 * server's metrics between two scrapes, per PATCH:
 *
 *   policyMutationMs  the policy's mutation (apiserver_mutating_admission_policy_check_duration_seconds)
 *   policyMatchMs     its match conditions, one per shard (apiserver_admission_match_condition_evaluation_seconds)
 *   webhookMs         the nodes entry: its calls (apiserver_admission_webhook_admission_duration_seconds)
 *                     and its matchConditions
 *   apiserverCpuMs    kube-apiserver's CPU (/proc), the kubelet's GET before each PATCH included
 *   webhookCpuMs      the webhook process's CPU (/proc)
 *   webhookCalls      calls of the nodes entry
 *   nodeEtcdWrites    etcd writes of Node keys (etcd_requests_total{resource="nodes",operation="update"})
 *
 * and per version the median over the rounds, with policy ÷ against and policy ÷ webhook.
 * Writes bench/results/node-policy-cel.json (or --out). About 5 minutes at the defaults.
 */
import { execFileSync } from 'node:child_process';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { parseAllDocuments } from 'yaml';
import { nodesWebhookName } from '../test/support/apiserver.js';
import { adminClient } from '../test/support/kube-client.js';
import { installNodePolicy, NODE_POLICY } from '../test/support/node-policy.js';
import { claimNodeNames } from '../test/support/nodes.js';
import { sameQuantity } from '../test/support/quantity.js';
import { SimKubelet } from '../test/support/sim-kubelet.js';
import { onStage } from '../test/support/stage.js';
import { waitUntil } from '../test/support/wait.js';
import { WebhookProcess } from '../test/support/webhook.js';
import { clusterProcesses, counterDelta, scrape } from './cluster.js';
import { benchMain, cpuSeconds, machineInfo, median, ratioOf, ROOT, round, sleep, table } from './lib.js';

const bench = benchMain(
  {
    script: 'bench:policy',
    results: 'node-policy-cel.json',
    clock: true,
    flags: {
      /** The git ref whose k8s/node-policy/policy.yaml is compared with the work tree's, or a file holding one. */
      against: { type: 'string', default: 'HEAD' },
      /** The policy.yaml measured against it: the work tree's by default. */
      policy: { type: 'string', default: 'k8s/node-policy/policy.yaml' },
      nodes: { type: 'number', default: 20, min: 1, integer: true },
      patches: { type: 'number', default: 1500, min: 10, integer: true },
      rounds: { type: 'number', default: 3, min: 1, integer: true },
      concurrency: { type: 'number', default: 4, min: 1, integer: true },
      keep: { type: 'boolean' },
    },
  },
  main,
);
const { flags, log, outFile } = bench;

const POLICY_FILE = 'k8s/node-policy/policy.yaml';
const POLICY_PATH = `/apis/admissionregistration.k8s.io/v1/mutatingadmissionpolicies/${NODE_POLICY}`;
const WARM_UP_PATCHES = 40;
const SETTLE_MS = 3_000;

/** The MutatingAdmissionPolicy's spec in a policy.yaml's text. */
function policySpec(text: string): any {
  const policy = parseAllDocuments(text)
    .map((doc) => doc.toJS())
    .find((object) => object?.kind === 'MutatingAdmissionPolicy');
  if (!policy) throw new Error(`no MutatingAdmissionPolicy in ${POLICY_FILE}`);
  return policy.spec;
}

const FLOOR_MUTATION = "[JSONPatch{op: 'test', path: '/kind', value: 'Node'}]";
const FIGURES = ['policyMutationMs', 'policyMatchMs', 'webhookMs', 'apiserverCpuMs', 'webhookCpuMs', 'webhookCalls', 'nodeEtcdWrites'] as const;
type Figures = Record<(typeof FIGURES)[number], number>;

interface Version {
  name: 'policy' | 'against' | 'floor' | 'webhook';
  /** Where its spec comes from. */
  source: string;
  /** The policy's spec; none: the bindings deleted. */
  spec?: any;
}

interface Round extends Figures {
  version: Version['name'];
  patches: number;
  seconds: number;
}

async function main(): Promise<number> {
  const policy = policySpec(readFileSync(resolve(ROOT, flags.policy), 'utf8'));
  const against = policySpec(
    existsSync(flags.against)
      ? readFileSync(flags.against, 'utf8')
      : execFileSync('git', ['show', `${flags.against}:${POLICY_FILE}`], { cwd: ROOT, encoding: 'utf8' }),
  );
  const versions: Version[] = [
    { name: 'policy', source: flags.policy, spec: policy },
    { name: 'against', source: flags.against, spec: against },
    {
      name: 'floor',
      source: `${flags.policy}: its matchConditions, the mutation ${FLOOR_MUTATION}`,
      spec: { ...policy, variables: [], mutations: [{ patchType: 'JSONPatch', jsonPatch: { expression: FLOOR_MUTATION } }] },
    },
    { name: 'webhook', source: 'the bindings deleted' },
  ];
  const same = JSON.stringify(policy) === JSON.stringify(against);
  log(`${flags.policy} against ${flags.against}${same ? ' (the same policy: the noise of the measure)' : ''}`);
  return onStage('bench-policy', log, flags.keep, async (stage) => {
    const { env } = stage;
    const processes = clusterProcesses(env);
    const webhook = new WebhookProcess(env, { logLevel: 'info' });
    await webhook.start();
    stage.onTearDown(() => webhook.stop());
    await webhook.useConfig({ nodes: { defaultRatios: { cpu: 1.5, memory: 1 } } });
    const admin = adminClient(env);
    stage.onTearDown(() => admin.close());
    const kubelets: SimKubelet[] = [];
    stage.onTearDown(() => Promise.all(kubelets.map((k) => k.stop())).then(() => undefined));
    // Only forced updates: no status loop of their own, no Lease in the measure.
    for (const name of claimNodeNames(env, 'sim-node', flags.nodes))
      kubelets.push(
        await SimKubelet.start(env, {
          name,
          capacity: { cpu: '4', memory: '16Gi', pods: '110', 'ephemeral-storage': '100Gi' },
          updateFrequencyMs: 3_600_000,
          reportFrequencyMs: 3_600_000,
          lease: false,
        }),
      );
    for (const kubelet of kubelets) {
      await kubelet.syncNow({ force: true });
      await waitUntil(`${kubelet.name} inflated to cpu 6`, async () => {
        const node = await admin.get(`/api/v1/nodes/${kubelet.name}`);
        return sameQuantity('cpu', node.status.allocatable.cpu, '6');
      });
    }
    const installed = await installNodePolicy(env, admin);
    stage.onTearDown(() => installed.uninstall());
    // The webhook looks the path up every minute, then publishes.
    await waitUntil(
      `${flags.nodes} targets published`,
      async () => ((await webhook.metrics()).sum('kube_overcommit_node_targets_published', { state: 'published' }) >= flags.nodes ? true : undefined),
      { timeoutMs: 150_000, intervalMs: 1_000 },
    );
    log('every target published');

    const heartbeats = async (count: number) => {
      let next = 0;
      const worker = async () => {
        while (next < count) {
          const kubelet = kubelets[next++ % kubelets.length]!;
          const update = await kubelet.syncNow({ force: true });
          if (!update?.ok) throw new Error(`${kubelet.name}: status PATCH failed: ${update?.error ?? 'none sent'}`);
        }
      };
      await Promise.all(Array.from({ length: flags.concurrency }, worker));
    };
    const statusPatch = { resource: 'nodes', subresource: 'status', verb: 'PATCH' };
    const nodesEntry = nodesWebhookName(env);
    // The policy's bindings, one per shard (k8s/node-policy/policy.yaml).
    const bindingsPath = '/apis/admissionregistration.k8s.io/v1/mutatingadmissionpolicybindings';
    const bindings = (await admin.get(bindingsPath)).items
      .filter((item: any) => item.spec.policyName === NODE_POLICY)
      .map((item: any) => ({
        apiVersion: 'admissionregistration.k8s.io/v1',
        kind: 'MutatingAdmissionPolicyBinding',
        metadata: { name: item.metadata.name, labels: item.metadata.labels },
        spec: item.spec,
      }));
    let bound = true;
    const use = async (version: Version) => {
      if (!version.spec) {
        if (bound) for (const binding of bindings) await admin.delete(`${bindingsPath}/${binding.metadata.name}`);
        bound = false;
        return;
      }
      const current = await admin.get(POLICY_PATH);
      await admin.put(POLICY_PATH, { ...current, spec: version.spec });
      if (!bound) for (const binding of bindings) await admin.post(bindingsPath, binding);
      bound = true;
    };
    const rounds: Round[] = [];
    for (let r = 0; r < flags.rounds; r++) {
      for (const version of [...versions.slice(r % versions.length), ...versions.slice(0, r % versions.length)]) {
        await use(version);
        // The API server's informers take the new policy or binding up within a second or so.
        await sleep(SETTLE_MS);
        await heartbeats(WARM_UP_PATCHES);
        const before = await scrape(env, processes, webhook);
        const cpuBefore = cpuSeconds(processes.pids.apiserver);
        const webhookCpuBefore = cpuSeconds(webhook.pid!);
        const started = Date.now();
        await heartbeats(flags.patches);
        const seconds = (Date.now() - started) / 1000;
        const cpu = cpuSeconds(processes.pids.apiserver) - cpuBefore;
        const webhookCpu = cpuSeconds(webhook.pid!) - webhookCpuBefore;
        const after = await scrape(env, processes, webhook);
        const delta = (name: string, labels: Record<string, string>) => counterDelta(before.apiserver, after.apiserver, name, labels);
        const patches = delta('apiserver_request_total', statusPatch);
        const perPatch = (value: number) => round(value / patches, 3);
        const result: Round = {
          version: version.name,
          patches,
          seconds: round(seconds, 1),
          policyMutationMs: perPatch(delta('apiserver_mutating_admission_policy_check_duration_seconds_sum', { policy: NODE_POLICY }) * 1000),
          policyMatchMs: perPatch(delta('apiserver_admission_match_condition_evaluation_seconds_sum', { kind: 'policy', name: NODE_POLICY }) * 1000),
          webhookMs: perPatch(
            (delta('apiserver_admission_webhook_admission_duration_seconds_sum', { name: nodesEntry, type: 'admit' }) +
              delta('apiserver_admission_match_condition_evaluation_seconds_sum', { kind: 'webhook', name: nodesEntry })) *
              1000,
          ),
          apiserverCpuMs: perPatch(cpu * 1000),
          webhookCpuMs: perPatch(webhookCpu * 1000),
          webhookCalls: perPatch(delta('apiserver_admission_webhook_request_total', { name: nodesEntry, type: 'admit' })),
          nodeEtcdWrites: perPatch(delta('etcd_requests_total', { resource: 'nodes', operation: 'update' })),
        };
        log(`round ${r + 1}, ${version.name}: ${JSON.stringify(result)}`);
        rounds.push(result);
      }
    }
    await use(versions[0]!);

    const medians = Object.fromEntries(
      versions.map((version) => {
        const mine = rounds.filter((r) => r.version === version.name);
        return [version.name, Object.fromEntries(FIGURES.map((figure) => [figure, round(median(mine.map((r) => r[figure])), 3)])) as Figures];
      }),
    ) as Record<Version['name'], Figures>;
    const admissionMs = (f: Figures) => f.policyMutationMs + f.policyMatchMs + f.webhookMs;
    const comparisons = {
      policyVsAgainst: Object.fromEntries(FIGURES.map((figure) => [figure, ratioOf(medians.policy[figure], medians.against[figure])])),
      policyVsWebhook: {
        apiserverCpuMs: ratioOf(medians.policy.apiserverCpuMs, medians.webhook.apiserverCpuMs),
        apiserverAndWebhookCpuMs: ratioOf(
          medians.policy.apiserverCpuMs + medians.policy.webhookCpuMs,
          medians.webhook.apiserverCpuMs + medians.webhook.webhookCpuMs,
        ),
        admissionMs: ratioOf(admissionMs(medians.policy), admissionMs(medians.webhook)),
      },
      /** The part of the policy's time that its CEL (variables and patch expression) adds to the floor's. */
      policyCelMsOverFloor: round(medians.policy.policyMutationMs - medians.floor.policyMutationMs, 3),
    };
    writeFileSync(
      outFile,
      `${JSON.stringify(
        {
          benchmark: 'node-policy-cel',
          command: bench.command,
          startedAt: bench.startedAt.toISOString(),
          finishedAt: new Date().toISOString(),
          machine: { ...machineInfo(), loadAvgAtStart: bench.loadAvgAtStart },
          cluster: { kubernetes: env.k8sVersion },
          options: { ...flags, samePolicy: same },
          versions: Object.fromEntries(versions.map((v) => [v.name, v.source])),
          medians,
          ...comparisons,
          rounds,
        },
        null,
        2,
      )}\n`,
    );
    console.log(
      `\n${table(
        ['per PATCH', ...versions.map((v) => v.name)],
        FIGURES.map((figure) => [figure, ...versions.map((v) => medians[v.name][figure])]),
      )}\n${JSON.stringify(comparisons)}\nwrote ${outFile}`,
    );
    return true;
  });
}
