import { execFileSync } from 'node:child_process';
import { copyFileSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseAllDocuments } from 'yaml';
import { adminClient, apiserverMetrics, claimNodeNames, e2eEnv, nodesWebhookName, WebhookProcess } from './harness/index.js';

type Doc = Record<string, any>;

const env = e2eEnv();
const DASHBOARD = join('k8s', 'monitoring', 'kube-overcommit-dashboard.json');
/** kube-state-metrics' series the rules read (the e2e runs no kube-state-metrics). */
const KUBE_STATE_METRICS = ['kube_pod_container_resource_requests', 'kube_pod_status_phase', 'kube_node_status_allocatable', 'kube_node_status_capacity'];

const dashboard = JSON.parse(readFileSync(DASHBOARD, 'utf8'));
const rendered = parseAllDocuments(execFileSync(join(env.binDir, 'kubectl'), ['kustomize', join('k8s', 'monitoring')], { encoding: 'utf8' })).map(
  (d) => d.toJS() as Doc,
);
const groups: Doc[] = rendered.find((d) => d.kind === 'PrometheusRule')!.spec.groups;
const recorded = new Set(groups.flatMap((g) => g.rules.filter((r: Doc) => r.record).map((r: Doc) => r.record as string)));

/** Every PromQL expression of the dashboard: panel targets and the variable queries' metrics. */
function dashboardExpressions(): string[] {
  const panels: Doc[] = dashboard.panels.flatMap((p: Doc) => [p, ...(p.panels ?? [])]);
  const targets = panels.flatMap((p) => (p.targets ?? []).map((t: Doc) => t.expr as string));
  const variables = dashboard.templating.list.filter((v: Doc) => v.type === 'query').map((v: Doc) => /^label_values\((.+),\s*\w+\)$/.exec(v.definition)![1]!);
  return [...targets, ...variables];
}

/**
 * The metric names an expression reads: identifiers left once strings, label matchers, ranges,
 * numbers and label lists (by, on, ...) are removed, other than function names.
 */
function metricNames(expr: string): string[] {
  const bare = expr
    .replace(/"(?:[^"\\]|\\.)*"/g, '')
    .replace(/\{[^}]*\}/g, '')
    .replace(/\[[^\]]*\]/g, '')
    .replace(/\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)/g, '')
    .replace(/\b\d+(\.\d+)?(e[+-]?\d+)?\b/gi, '');
  const names = [...bare.matchAll(/([a-zA-Z_:][a-zA-Z0-9_:]*)(\s*\()?/g)].filter((m) => !m[2]).map((m) => m[1]!);
  return names.filter((n) => !['and', 'or', 'unless', 'bool', 'offset'].includes(n));
}

/** Names a /metrics text exposes: sample names, and every series a `# TYPE` line announces (a labelled metric without samples yet included). */
function exposedNames(text: string): Set<string> {
  const names = new Set<string>();
  for (const line of text.split('\n')) {
    const type = /^# TYPE (\S+) (\w+)/.exec(line);
    if (type) {
      const [, name, kind] = type;
      names.add(name!);
      if (kind === 'histogram') for (const s of ['_bucket', '_sum', '_count']) names.add(name + s);
      if (kind === 'summary') for (const s of ['_sum', '_count']) names.add(name + s);
    } else if (/^[a-zA-Z_:]/.test(line)) names.add(/^[a-zA-Z_:][a-zA-Z0-9_:]*/.exec(line)![0]);
  }
  return names;
}

/** Runs promtool (built from its Go module by control-plane/build.sh) in `dir`; a non-zero exit throws with its output. */
function promtool(dir: string, args: string[]): string {
  return execFileSync(join(env.binDir, 'promtool'), args, { encoding: 'utf8', cwd: dir });
}

describe('Grafana dashboard k8s/monitoring/kube-overcommit-dashboard.json', () => {
  const admin = adminClient(env);
  const webhook = new WebhookProcess(env);
  let appMetrics = new Set<string>();
  let apiserverNames = new Set<string>();

  beforeAll(async () => {
    // With no webhook running, a Node created now fails open at the nodes entry: the API server
    // then exports the fail-open counter the dashboard plots (it has no series before one).
    const [name] = claimNodeNames(env, 'sim-node', 1);
    await admin.post('/api/v1/nodes', { apiVersion: 'v1', kind: 'Node', metadata: { name } });
    await admin.delete(`/api/v1/nodes/${name}`);
    const apiserver = await apiserverMetrics(env);
    expect(apiserver.sum('apiserver_admission_webhook_fail_open_count', { name: nodesWebhookName(env), type: 'admit' })).toBeGreaterThan(0);
    apiserverNames = new Set(apiserver.samples.map((s) => s.name));
    await webhook.start();
    const { status, body } = await webhook.get('/metrics');
    expect(status).toBe(200);
    appMetrics = exposedNames(body);
  });
  afterAll(async () => {
    await webhook.stop();
    admin.close();
  });

  it('queries only metrics the app exports, the API server exports, or the PrometheusRule records', () => {
    const used = new Set(dashboardExpressions().flatMap(metricNames));
    const unknown = [...used].filter((n) => (n.startsWith('apiserver_') ? !apiserverNames.has(n) : !appMetrics.has(n) && !recorded.has(n)));
    expect(unknown).toEqual([]);
    // What the dashboard is for (per node raw vs overcommitted vs requests, ratios,
    // admission rate, latency, fail-open, strategy errors, config generation and reloads, certificate).
    expect([...used].sort()).toEqual(
      expect.arrayContaining([
        'kube_overcommit_node_allocatable_raw',
        'kube_overcommit_node_allocatable_overcommitted',
        'node_resource:kube_overcommit_requests:sum',
        'node_resource:kube_overcommit_requests_per_raw_allocatable:ratio',
        'resource:kube_overcommit_requests_per_raw_allocatable:ratio',
        'kube_overcommit_node_ratio',
        'kube_overcommit_node_allocatable_reason',
        'kube_overcommit_admission_requests_total',
        'kube_overcommit_admission_duration_seconds_bucket',
        'apiserver_admission_webhook_fail_open_count',
        'kube_overcommit_admission_strategy_errors_total',
        'kube_overcommit_config_generation',
        'kube_overcommit_config_reloads_total',
        'kube_overcommit_tls_certificate_expiry_timestamp_seconds',
      ]),
    );
  });

  it("the recording rules read only the app's metrics, kube-state-metrics' and each other", () => {
    const inputs = new Set(groups.flatMap((g) => g.rules.filter((r: Doc) => r.record).flatMap((r: Doc) => metricNames(r.expr))));
    expect([...inputs].filter((n) => !appMetrics.has(n) && !recorded.has(n) && !KUBE_STATE_METRICS.includes(n))).toEqual([]);
  });

  it("the alerts read only the app's metrics, the API server's, kube-state-metrics', the recorded ones and Prometheus' up", () => {
    const inputs = new Set(groups.flatMap((g) => g.rules.filter((r: Doc) => r.alert).flatMap((r: Doc) => metricNames(r.expr))));
    const known = (n: string) =>
      n.startsWith('apiserver_') ? apiserverNames.has(n) : appMetrics.has(n) || recorded.has(n) || KUBE_STATE_METRICS.includes(n) || n === 'up';
    expect([...inputs].filter((n) => !known(n))).toEqual([]);
    // The leader alerts read the gauges the app exports for them.
    expect([...inputs]).toEqual(
      expect.arrayContaining([
        'kube_overcommit_reconciler_enabled',
        'kube_overcommit_reconciler_leader',
        'kube_overcommit_usage_publish_total',
        'kube_overcommit_node_policy_active',
        'kube_overcommit_node_policy_leader',
        'kube_overcommit_node_target_writes_total',
        'kube_overcommit_node_target_drift_total',
      ]),
    );
  });

  it("every expression parses (promtool check rules, Grafana's variables replaced)", () => {
    const dir = mkdtempSync(join(tmpdir(), 'kube-overcommit-dashboard-'));
    const exprs = dashboardExpressions();
    // $__rate_interval and friends are durations; $node and $resource stand inside label matchers.
    const concrete = (e: string) => e.replace(/\$__\w+/g, '5m').replace(/\$\{?\w+\}?/g, 'x');
    const rules = { groups: [{ name: 'dashboard', rules: exprs.map((expr, i) => ({ record: `dashboard:expr_${i}`, expr: concrete(expr) })) }] };
    writeFileSync(join(dir, 'dashboard.rules.yaml'), JSON.stringify(rules));
    expect(promtool(dir, ['check', 'rules', 'dashboard.rules.yaml'])).toMatch(new RegExp(`SUCCESS: ${exprs.length} rules found`));
  });

  it('is shipped as a ConfigMap labelled grafana_dashboard: "1", holding the JSON file', () => {
    const configMap = rendered.find((d) => d.kind === 'ConfigMap' && d.metadata.name === 'kube-overcommit-dashboard')!;
    expect(configMap.metadata.labels.grafana_dashboard).toBe('1');
    expect(JSON.parse(configMap.data['kube-overcommit.json'])).toEqual(dashboard);
    expect(dashboard.uid).toBe('kube-overcommit');
  });
});

describe('recording rules (PrometheusRule group kube-overcommit.rules)', () => {
  it('pass promtool unit tests: requests ÷ raw and ÷ overcommitted allocatable, per node and per cluster', () => {
    const dir = mkdtempSync(join(tmpdir(), 'kube-overcommit-recording-'));
    writeFileSync(join(dir, 'rules.yaml'), JSON.stringify({ groups }));
    copyFileSync(join('test', 'e2e', 'prometheus', 'recording.test.yaml'), join(dir, 'recording.test.yaml'));
    expect(promtool(dir, ['test', 'rules', 'recording.test.yaml'])).toMatch(/SUCCESS/);
  });

  it("the alerts docs/monitoring.md gives in place of kubernetes-mixin's pass promtool check rules", () => {
    const doc = readFileSync(join('docs', 'monitoring.md'), 'utf8');
    const section = doc.slice(doc.indexOf('## Pointing the common alerts'));
    const block = /```yaml\n([\s\S]*?)```/.exec(section)![1]!;
    const dir = mkdtempSync(join(tmpdir(), 'kube-overcommit-docs-rules-'));
    writeFileSync(join(dir, 'alerts.yaml'), block);
    expect(promtool(dir, ['check', 'rules', 'alerts.yaml'])).toMatch(/SUCCESS: 3 rules found/);
  });
});
