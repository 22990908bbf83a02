import { execFileSync } from 'node:child_process';
import { copyFileSync, cpSync, mkdirSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { describe, expect, it } from 'vitest';
import { parse, parseAllDocuments, parseDocument } from 'yaml';
import { e2eEnv } from './harness/context.js';

type Doc = Record<string, any>;

/** `kubectl kustomize DIR` with the built kubectl (the same kustomize `kubectl apply -k` runs). */
function kustomize(dir: string): Doc[] {
  const out = execFileSync(join(e2eEnv().binDir, 'kubectl'), ['kustomize', dir], { encoding: 'utf8' });
  return parseAllDocuments(out).map((d) => d.toJS() as Doc);
}

const APP_LABELS = { 'app.kubernetes.io/name': 'kube-overcommit', 'app.kubernetes.io/part-of': 'kube-overcommit' };

const find = (docs: Doc[], kind: string, name?: string) => docs.find((d) => d.kind === kind && (!name || d.metadata?.name === name));

/** A kustomization in the run folder over the repository's k8s/ folders. */
function kustomizeOf(resources: string[], components: string[] = []): Doc[] {
  const { repoRoot, runDir } = e2eEnv();
  const dir = mkdtempSync(join(runDir, 'kustomization-'));
  const rel = (path: string) => relative(dir, join(repoRoot, path));
  writeFileSync(join(dir, 'kustomization.yaml'), JSON.stringify({ resources: resources.map(rel), components: components.map(rel) }));
  return kustomize(dir);
}

describe('shipped manifests', () => {
  it('k8s/ renders the base with self-managed certificates: no cert-manager object, caBundle left to the webhook', () => {
    const docs = kustomize('k8s');
    const deployment = find(docs, 'Deployment', 'kube-overcommit');
    const webhook = find(docs, 'MutatingWebhookConfiguration', 'kube-overcommit');
    expect(docs.filter((d) => String(d.apiVersion).startsWith('cert-manager.io/'))).toEqual([]);
    expect(deployment?.spec.template.spec.containers[0].env).toContainEqual({ name: 'OVERCOMMIT_CERT_MODE', value: 'self-managed' });
    expect(find(docs, 'Secret', 'kube-overcommit-tls')).toBeDefined();
    expect(find(docs, 'Lease', 'kube-overcommit-certificates')).toBeDefined();
    // Usage-aware ratios: the objects the leader fills and holds, created empty (RBAC cannot restrict create by name).
    expect(find(docs, 'ConfigMap', 'kube-overcommit-usage')).toMatchObject({ metadata: { namespace: 'kube-overcommit' } });
    expect(find(docs, 'Lease', 'kube-overcommit-usage')).toBeDefined();
    expect(find(docs, 'ClusterRole', 'kube-overcommit-usage')?.rules).toEqual([
      { apiGroups: ['metrics.k8s.io'], resources: ['nodes', 'pods'], verbs: ['get', 'list'] },
    ]);
    for (const entry of webhook?.webhooks ?? []) {
      expect(entry.clientConfig.caBundle, `${entry.name} caBundle is written by the webhook, never by the manifests`).toBeUndefined();
      expect(entry.failurePolicy).toBe('Ignore');
      expect(entry.timeoutSeconds).toBeLessThanOrEqual(2);
      expect(entry.sideEffects).toBe('None');
      // Each entry on its own path, which runs only its strategies.
      expect(entry.clientConfig.service).toEqual({
        name: 'kube-overcommit',
        namespace: 'kube-overcommit',
        path: `/mutate/${entry.name.split('.')[0]}`,
        port: 443,
      });
    }
    // The pod-policy entry sends the cap every review it reads: pod CREATE, kube-scheduler's binding, an in-place resize.
    expect(webhook?.webhooks.find((entry: Doc) => entry.name === 'pod-policy.kube-overcommit.io').rules).toEqual([
      { apiGroups: [''], apiVersions: ['v1'], operations: ['CREATE'], resources: ['pods', 'pods/binding'], scope: 'Namespaced' },
      { apiGroups: [''], apiVersions: ['v1'], operations: ['UPDATE'], resources: ['pods/resize'], scope: 'Namespaced' },
    ]);
    // The sidecars entry before the pod-policy entry: the pod policy sees the injected containers, as /mutate runs them.
    expect(webhook?.webhooks.map((entry: Doc) => entry.name)).toEqual([
      'nodes.kube-overcommit.io',
      'sidecars.kube-overcommit.io',
      'pod-policy.kube-overcommit.io',
    ]);
  });

  it("the reconciler's RBAC: its Lease shipped, read and renewed by name only; patch on nodes/status its one write to nodes", () => {
    const docs = kustomize('k8s');
    expect(find(docs, 'Lease', 'kube-overcommit-reconciler')).toMatchObject({ metadata: { namespace: 'kube-overcommit' }, spec: {} });
    const rules = (kind: string) => find(docs, kind, 'kube-overcommit')!.rules as Doc[];
    expect(rules('Role').filter((r) => r.resources.includes('leases'))).toEqual([
      { apiGroups: ['coordination.k8s.io'], resources: ['leases'], resourceNames: ['kube-overcommit-reconciler'], verbs: ['get', 'update'] },
    ]);
    const nodeRules = docs
      .filter((d) => d.kind === 'ClusterRole')
      .flatMap((d) => d.rules as Doc[])
      // Core Nodes (metrics.k8s.io's NodeMetrics, read for usage-aware ratios, are another resource).
      .filter((r) => r.apiGroups.includes('') && r.resources.some((resource: string) => resource.startsWith('nodes')));
    expect(nodeRules).toEqual([
      { apiGroups: [''], resources: ['namespaces', 'nodes', 'pods', 'limitranges'], verbs: ['list', 'watch'] },
      { apiGroups: [''], resources: ['nodes/status'], verbs: ['patch'] },
    ]);
  });

  it('the Deployment is hardened and highly available', () => {
    const docs = kustomize('k8s');
    const deployment = find(docs, 'Deployment', 'kube-overcommit')!;
    const pod = deployment.spec.template.spec;
    const container = pod.containers[0];
    expect(deployment.spec.replicas).toBeGreaterThanOrEqual(2);
    expect(pod.topologySpreadConstraints[0].topologyKey).toBe('kubernetes.io/hostname');
    // Drains: never blocked, even by an overlay scaled to one replica; scheduled ahead of workloads.
    expect(find(docs, 'PodDisruptionBudget')?.spec).toMatchObject({ maxUnavailable: 1, unhealthyPodEvictionPolicy: 'AlwaysAllow' });
    expect(find(docs, 'PodDisruptionBudget')?.spec.minAvailable).toBeUndefined();
    expect(pod.priorityClassName).toBe('system-cluster-critical');
    expect(pod.securityContext).toMatchObject({ runAsNonRoot: true, seccompProfile: { type: 'RuntimeDefault' } });
    expect(container.securityContext).toMatchObject({ allowPrivilegeEscalation: false, readOnlyRootFilesystem: true, capabilities: { drop: ['ALL'] } });
    expect(container.resources.requests).toBeDefined();
    expect(container.resources.limits.memory).toBeDefined();
    expect(container.readinessProbe.httpGet.path).toBe('/readyz');
    expect(container.livenessProbe.httpGet.path).toBe('/healthz');
    // V8's young generation sized for node reviews (docs/performance.md); the e2e webhook and the
    // benchmarks run with these options too. Node exits 9 on an option NODE_OPTIONS may not carry.
    const nodeOptions = container.env.find((e: Doc) => e.name === 'NODE_OPTIONS')?.value;
    expect(nodeOptions).toMatch(/--max-semi-space-size=\d+/);
    expect(() => execFileSync(process.execPath, ['-e', ''], { env: { NODE_OPTIONS: nodeOptions }, stdio: 'pipe' })).not.toThrow();
  });

  it('k8s/ deploys the image the release workflow publishes (and `npm run image` builds); its `images:` entry switches it, as `kustomize edit set image` writes it', () => {
    const image = (dir: string) => find(kustomize(dir), 'Deployment', 'kube-overcommit')!.spec.template.spec.containers[0].image;
    const { version } = JSON.parse(readFileSync('package.json', 'utf8'));
    const registry = parse(readFileSync(join('.github', 'workflows', 'release.yml'), 'utf8')).env.REGISTRY;
    expect(image('k8s')).toBe(`${registry}/kube-overcommit:${version}`);
    expect(image('k8s/base')).toBe(`${registry}/kube-overcommit:${version}`);
    expect(readFileSync(join('scripts', 'image.sh'), 'utf8')).toContain('image=$registry/kube-overcommit:');
    // `kustomize edit set image kube-overcommit=ghcr.io/example/kube-overcommit:9.9.9` on a copy.
    const copy = join(mkdtempSync(join(tmpdir(), 'kube-overcommit-k8s-')), 'k8s');
    cpSync('k8s', copy, { recursive: true });
    const kustomization = parseDocument(readFileSync(join(copy, 'kustomization.yaml'), 'utf8'));
    kustomization.set('images', [{ name: `${registry}/kube-overcommit`, newName: 'ghcr.io/example/kube-overcommit', newTag: '9.9.9' }]);
    writeFileSync(join(copy, 'kustomization.yaml'), kustomization.toString());
    expect(image(copy)).toBe('ghcr.io/example/kube-overcommit:9.9.9');
  });

  it('k8s/monitoring adds a ServiceMonitor and PrometheusRule whose rules pass promtool check and unit tests', () => {
    const docs = kustomize('k8s/monitoring');
    expect(find(docs, 'ServiceMonitor')?.spec.endpoints[0].port).toBe('http-metrics');
    const rule = find(docs, 'PrometheusRule')!;
    const alerts = rule.spec.groups.flatMap((g: Doc) => g.rules.filter((r: Doc) => r.alert).map((r: Doc) => r.alert));
    expect(alerts).toEqual([
      'KubeOvercommitWebhookAbsent',
      'KubeOvercommitWebhookFailingOpen',
      'KubeOvercommitAdmissionErrors',
      'KubeOvercommitAdmissionLatencyHigh',
      'KubeOvercommitConfigInvalid',
      'KubeOvercommitBackgroundErrors',
      'KubeOvercommitNodeMetricsDropped',
      'KubeOvercommitNodeOverCap',
      'KubeOvercommitInflatedNodesUnprotected',
      'KubeOvercommitCertificateExpiresSoon',
      'KubeOvercommitCertificateExpiresVerySoon',
      'KubeOvercommitReconcilerLeaderMissing',
      'KubeOvercommitUsageLeaderMissing',
      'KubeOvercommitNodeTargetWritesFailing',
      'KubeOvercommitNodeTargetsLeftBehind',
      'KubeOvercommitNodePolicyLeaderMissing',
    ]);
    // Every alert links its section of docs/runbook.md, which has one for each.
    const runbook = readFileSync(join('docs', 'runbook.md'), 'utf8');
    for (const r of rule.spec.groups.flatMap((g: Doc) => g.rules.filter((r: Doc) => r.alert))) {
      expect(r.annotations.runbook_url, r.alert).toBe(`https://github.com/kube-overcommit/kube-overcommit/blob/main/docs/runbook.md#${r.alert.toLowerCase()}`);
      expect(runbook.split('\n'), r.alert).toContain(`## ${r.alert}`);
    }
    const dir = mkdtempSync(join(tmpdir(), 'kube-overcommit-rules-'));
    writeFileSync(join(dir, 'rules.yaml'), JSON.stringify({ groups: rule.spec.groups }));
    copyFileSync(join('test', 'e2e', 'prometheus', 'alerts.test.yaml'), join(dir, 'alerts.test.yaml'));
    // promtool, built from its Go module by control-plane/build.sh. Non-zero exit throws with its output.
    const promtool = join(e2eEnv().binDir, 'promtool');
    const check = execFileSync(promtool, ['check', 'rules', join(dir, 'rules.yaml')], { encoding: 'utf8' });
    expect(check).toMatch(/SUCCESS: 28 rules found/); // 16 alerts, 12 recording rules (monitoring.test.ts)
    const unit = execFileSync(promtool, ['test', 'rules', join(dir, 'alerts.test.yaml')], { encoding: 'utf8', cwd: dir });
    expect(unit).toMatch(/SUCCESS/);
  });

  it('every object, certificate and monitoring objects included, carries the app.kubernetes.io labels', () => {
    for (const dir of ['k8s', 'k8s/monitoring']) {
      for (const doc of kustomize(dir)) {
        expect(doc.metadata.labels, `${dir}: ${doc.kind} ${doc.metadata.name}`).toMatchObject(APP_LABELS);
      }
    }
  });

  it("the cert-manager component adds its annotation to the webhook configuration's, keeping the others", () => {
    const { repoRoot, runDir } = e2eEnv();
    const overlay = mkdtempSync(join(runDir, 'overlay-annotated-'));
    // An annotation of the user's own, on the webhook configuration before the component runs.
    mkdirSync(join(overlay, 'annotated'));
    writeFileSync(
      join(overlay, 'annotated', 'kustomization.yaml'),
      JSON.stringify({
        resources: [relative(join(overlay, 'annotated'), join(repoRoot, 'k8s', 'base'))],
        commonAnnotations: { 'example.com/owner': 'platform-team' },
      }),
    );
    writeFileSync(
      join(overlay, 'kustomization.yaml'),
      JSON.stringify({ resources: ['annotated'], components: [relative(overlay, join(repoRoot, 'k8s', 'cert-manager'))] }),
    );
    const webhook = find(kustomize(overlay), 'MutatingWebhookConfiguration', 'kube-overcommit')!;
    expect(webhook.metadata.annotations).toEqual({
      'example.com/owner': 'platform-team',
      'cert-manager.io/inject-ca-from': 'kube-overcommit/kube-overcommit-ca',
    });
  });

  it('an overlay with another namespace moves every reference with the objects: RBAC subjects, webhook Service, exclusions, cert-manager names', () => {
    const { repoRoot, runDir } = e2eEnv();
    const overlay = (kustomization: { resources: string[]; components?: string[] }) => {
      const dir = mkdtempSync(join(runDir, 'overlay-namespace-'));
      const rel = (path: string) => relative(dir, join(repoRoot, path));
      writeFileSync(
        join(dir, 'kustomization.yaml'),
        JSON.stringify({ namespace: 'platform', resources: kustomization.resources.map(rel), components: (kustomization.components ?? []).map(rel) }),
      );
      return kustomize(dir);
    };
    for (const docs of [
      overlay({ resources: ['k8s'] }),
      overlay({ resources: ['k8s/base'], components: ['k8s/cert-manager'] }),
      overlay({ resources: ['k8s/base'], components: ['k8s/node-policy'] }),
    ]) {
      const text = JSON.stringify(docs);
      // Nothing names the base's namespace any more, in any form.
      expect(text).not.toMatch(/"namespace":"kube-overcommit"|kube-overcommit\.kube-overcommit\.svc|"kube-overcommit\//);
      expect(find(docs, 'Namespace')?.metadata.name).toBe('platform');
      for (const doc of docs.filter((d) => d.metadata.namespace !== undefined))
        expect(doc.metadata.namespace, `${doc.kind} ${doc.metadata.name}`).toBe('platform');
      for (const binding of docs.filter((d) => d.kind === 'RoleBinding' || d.kind === 'ClusterRoleBinding'))
        expect(binding.subjects, `${binding.kind} ${binding.metadata.name}`).toEqual([
          { kind: 'ServiceAccount', name: 'kube-overcommit', namespace: 'platform' },
        ]);
      const webhook = find(docs, 'MutatingWebhookConfiguration')!;
      for (const entry of webhook.webhooks) expect(entry.clientConfig.service.namespace, entry.name).toBe('platform');
      for (const entry of webhook.webhooks.slice(1))
        expect(entry.namespaceSelector.matchExpressions[0].values, entry.name).toEqual(['kube-system', 'kube-node-lease', 'kube-public', 'platform']);
      // The node-status policy reads its params, each shard by name, in the platform's namespace, and guards them there.
      const bindings = docs.filter((d) => d.kind === 'MutatingAdmissionPolicyBinding');
      if (bindings.length > 0) {
        expect(bindings.map((b) => [b.spec.paramRef.name, b.spec.paramRef.namespace])).toEqual(
          Array.from({ length: 16 }, (_, i) => [`kube-overcommit-node-targets-${String(i).padStart(2, '0')}`, 'platform']),
        );
        expect(find(docs, 'ValidatingAdmissionPolicyBinding')!.spec.matchResources.namespaceSelector.matchExpressions[0].values).toEqual(['platform']);
      }
      const certificate = find(docs, 'Certificate', 'kube-overcommit');
      if (certificate) {
        expect(certificate.spec.dnsNames).toEqual(['kube-overcommit.platform.svc', 'kube-overcommit.platform.svc.cluster.local']);
        expect(webhook.metadata.annotations['cert-manager.io/inject-ca-from']).toBe('platform/kube-overcommit-ca');
      }
    }
    // Without an overlay, the base's own namespace everywhere.
    const base = find(kustomizeOf(['k8s/base'], ['k8s/cert-manager']), 'Certificate', 'kube-overcommit')!;
    expect(base.spec.dnsNames).toEqual(['kube-overcommit.kube-overcommit.svc', 'kube-overcommit.kube-overcommit.svc.cluster.local']);
  });

  it('k8s/monitoring: the one-line label for kube-prometheus-stack is there, commented, and valid once uncommented', () => {
    const { repoRoot, runDir } = e2eEnv();
    const text = readFileSync(join(repoRoot, 'k8s', 'monitoring', 'kustomization.yaml'), 'utf8');
    const line = '  # - pairs: { release: kube-prometheus-stack }';
    expect(text.split('\n')).toContain(line);
    const copy = mkdtempSync(join(runDir, 'monitoring-release-'));
    for (const file of ['servicemonitor.yaml', 'prometheusrule.yaml', 'kube-overcommit-dashboard.json'])
      copyFileSync(join(repoRoot, 'k8s', 'monitoring', file), join(copy, file));
    writeFileSync(join(copy, 'kustomization.yaml'), text.replace(line, line.replace('# ', '')));
    const docs = kustomize(copy);
    expect(docs.map((d) => d.kind).sort()).toEqual(['ConfigMap', 'PrometheusRule', 'ServiceMonitor']);
    for (const doc of docs) expect(doc.metadata.labels).toMatchObject({ ...APP_LABELS, release: 'kube-prometheus-stack' });
  });
});
