import { execFileSync } from 'node:child_process';
import { mkdtempSync, readdirSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parse, parseAllDocuments } from 'yaml';
import { adminClient, claimNodeNames, e2eEnv, entryUrl, getNode, kubectl, resetConfig, SimKubelet, waitUntil, WebhookProcess } from './harness/index.js';

type Doc = Record<string, any>;

const env = e2eEnv();
const CHART = join('charts', 'kube-overcommit');
/** Labels only the chart sets (Helm's conventions); everything else must be what k8s/ renders. */
const CHART_ONLY_LABELS = ['helm.sh/chart', 'app.kubernetes.io/managed-by', 'app.kubernetes.io/instance', 'app.kubernetes.io/version'];

/** The helm built by test/e2e/helm/build.sh, as admin of the e2e cluster, its state in the run folder. */
function helm(args: string[]): string {
  const home = join(env.runDir, 'helm');
  return execFileSync(join(env.binDir, 'helm'), args, {
    encoding: 'utf8',
    stdio: ['ignore', 'pipe', 'pipe'],
    env: {
      ...process.env,
      KUBECONFIG: env.adminKubeconfig,
      HELM_CACHE_HOME: join(home, 'cache'),
      HELM_CONFIG_HOME: join(home, 'config'),
      HELM_DATA_HOME: join(home, 'data'),
    },
  });
}

const docsOf = (text: string): Doc[] =>
  parseAllDocuments(text)
    .map((d) => d.toJS() as Doc)
    .filter((d) => d);

/** `helm template kube-overcommit` in namespace kube-overcommit, as k8s/ installs it. */
function template(...values: string[]): Doc[] {
  return docsOf(helm(['template', 'kube-overcommit', CHART, '--namespace', 'kube-overcommit', ...values.flatMap((v) => ['--set', v])]));
}

function kustomize(dir: string): Doc[] {
  return docsOf(execFileSync(join(env.binDir, 'kubectl'), ['kustomize', dir], { encoding: 'utf8' }));
}

/** A kustomization in a scratch folder over the repository's k8s/ folders (`resources`, `components`). */
function kustomizeOf(kustomization: { resources: string[]; components?: string[] }): Doc[] {
  const dir = mkdtempSync(join(tmpdir(), 'kube-overcommit-kustomize-'));
  const rel = (path: string) => relative(dir, join(env.repoRoot, path));
  writeFileSync(
    join(dir, 'kustomization.yaml'),
    JSON.stringify({ resources: kustomization.resources.map(rel), components: (kustomization.components ?? []).map(rel) }),
  );
  return kustomize(dir);
}

const key = (d: Doc) => `${d.kind} ${d.metadata.namespace ? `${d.metadata.namespace}/` : ''}${d.metadata.name}`;
const byName = (a: Doc, b: Doc) => String(a.name).localeCompare(String(b.name));

/**
 * One object in a comparable form: without the chart-only labels; config.yaml parsed (k8s/ keeps
 * comments in it); container env sorted by name (a kustomize strategic-merge patch moves the
 * variable it sets first; order only matters for $(VAR) references, checked separately).
 */
function normalise(doc: Doc): Doc {
  const d = structuredClone(doc);
  for (const label of CHART_ONLY_LABELS) delete d.metadata.labels?.[label];
  if (d.kind === 'ConfigMap' && typeof d.data?.['config.yaml'] === 'string') d.data['config.yaml'] = parse(d.data['config.yaml']);
  for (const c of d.spec?.template?.spec?.containers ?? []) c.env?.sort(byName);
  return d;
}

const objects = (docs: Doc[]) => Object.fromEntries(docs.map((d) => [key(d), normalise(d)]));

const find = (docs: Doc[], kind: string, name?: string) => docs.find((d) => d.kind === kind && (!name || d.metadata.name === name));

describe('Helm chart charts/kube-overcommit', () => {
  it('passes helm lint --strict, by default and with every option on', () => {
    expect(helm(['lint', '--strict', CHART])).toMatch(/1 chart\(s\) linted, 0 chart\(s\) failed/);
    const all = [
      'certificates.mode=cert-manager',
      'monitoring.serviceMonitor.enabled=true',
      'monitoring.prometheusRule.enabled=true',
      'monitoring.dashboard.enabled=true',
      'namespace.create=true',
    ];
    expect(helm(['lint', '--strict', CHART, ...all.flatMap((v) => ['--set', v])])).toMatch(/0 chart\(s\) failed/);
  });

  it('renders with default values exactly what `kubectl kustomize k8s/` renders, object by object', () => {
    const chart = template('namespace.create=true');
    expect(objects(chart)).toEqual(objects(kustomize('k8s')));
    // The Namespace only when asked for (`helm install --create-namespace` makes an unlabelled one).
    expect(find(template(), 'Namespace')).toBeUndefined();
    // Every object carries Helm's labels, and the pods pass Pod Security `restricted` as in k8s/.
    for (const doc of chart)
      expect(doc.metadata.labels).toMatchObject({ 'app.kubernetes.io/managed-by': 'Helm', 'app.kubernetes.io/instance': 'kube-overcommit' });
    const env = find(chart, 'Deployment')!.spec.template.spec.containers[0].env.map((e: Doc) => e.name);
    expect(env.indexOf('POD_NAMESPACE')).toBeLessThan(env.indexOf('OVERCOMMIT_CONFIGMAP'));
  });

  it('certificates.mode=cert-manager renders k8s/base with the k8s/cert-manager component', () => {
    expect(objects(template('certificates.mode=cert-manager', 'namespace.create=true'))).toEqual(
      objects(kustomizeOf({ resources: ['k8s/base'], components: ['k8s/cert-manager'] })),
    );
    // values.schema.json: a clear error for a value the chart does not know.
    expect(() => template('certificates.mode=vault')).toThrow(/at '\/certificates\/mode': value must be one of 'auto', 'self-managed', 'cert-manager'/);
    expect(() => template('webhook.url=http://203.0.113.7/mutate')).toThrow(/at '\/webhook\/url'/);
  });

  it('nodePolicy: auto renders k8s/base with the k8s/node-policy component where the API server serves MutatingAdmissionPolicy v1, k8s/base alone where it does not; true and false by name', () => {
    const withPolicy = objects(kustomizeOf({ resources: ['k8s/base'], components: ['k8s/node-policy'] }));
    const served = ['--api-versions', 'admissionregistration.k8s.io/v1/MutatingAdmissionPolicy'];
    const auto = docsOf(helm(['template', 'kube-overcommit', CHART, '--namespace', 'kube-overcommit', '--set', 'namespace.create=true', ...served]));
    expect(objects(auto)).toEqual(withPolicy);
    expect(objects(template('nodePolicy.enabled=true', 'namespace.create=true'))).toEqual(withPolicy);
    // This helm's own API versions (client-go 0.34) have no MutatingAdmissionPolicy v1: auto renders none.
    expect(find(template(), 'MutatingAdmissionPolicy')).toBeUndefined();
    const off = docsOf(
      helm([
        'template',
        'kube-overcommit',
        CHART,
        '--namespace',
        'kube-overcommit',
        '--set',
        'nodePolicy.enabled=false',
        '--set',
        'namespace.create=true',
        ...served,
      ]),
    );
    expect(objects(off)).toEqual(objects(kustomize('k8s')));
    expect(() => template('nodePolicy.enabled=sometimes')).toThrow(/at '\/nodePolicy\/enabled'/);
  });

  it('monitoring.* renders what `kubectl kustomize k8s/monitoring` renders: ServiceMonitor, PrometheusRule, dashboard ConfigMap', () => {
    const chart = template('monitoring.serviceMonitor.enabled=true', 'monitoring.prometheusRule.enabled=true', 'monitoring.dashboard.enabled=true');
    const monitoring = chart.filter((d) => ['ServiceMonitor', 'PrometheusRule'].includes(d.kind) || d.metadata.name === 'kube-overcommit-dashboard');
    expect(monitoring).toHaveLength(3);
    expect(objects(monitoring)).toEqual(objects(kustomize(join('k8s', 'monitoring'))));
    // Off by default: the CRDs may not be installed.
    expect(template().filter((d) => ['ServiceMonitor', 'PrometheusRule'].includes(d.kind) || d.metadata.name === 'kube-overcommit-dashboard')).toEqual([]);
  });

  it('values reach the objects: scheduling, resources, environment, labels, annotations, selector labels, webhook URL', () => {
    const docs = docsOf(
      helm([
        'template',
        'ko',
        CHART,
        '--namespace',
        'platform',
        '--values',
        writeValues({
          replicas: 3,
          image: { repository: 'registry.example.com/kube-overcommit', tag: '9.9.9' },
          nodeOptions: '--max-semi-space-size=32',
          logLevel: 'debug',
          extraEnv: [{ name: 'OVERCOMMIT_NODE_METRICS_MAX_NODES', value: '20000' }],
          resources: { requests: { cpu: '1', memory: '1Gi' }, limits: { memory: '2Gi' } },
          priorityClassName: 'system-cluster-critical',
          nodeSelector: { 'node-role.kubernetes.io/control-plane': '' },
          tolerations: [{ key: 'node-role.kubernetes.io/control-plane', operator: 'Exists', effect: 'NoSchedule' }],
          affinity: {
            nodeAffinity: {
              requiredDuringSchedulingIgnoredDuringExecution: {
                nodeSelectorTerms: [{ matchExpressions: [{ key: 'kubernetes.io/os', operator: 'In', values: ['linux'] }] }],
              },
            },
          },
          podAnnotations: { 'example.com/scrape': 'yes' },
          podLabels: { team: 'platform' },
          commonLabels: { 'example.com/owner': 'platform' },
          commonAnnotations: { 'example.com/contact': 'platform@example.com' },
          config: {
            nodes: { defaultRatios: { cpu: 2 }, pools: [{ name: 'batch', nodeSelector: { matchLabels: { pool: 'batch' } }, ratios: { cpu: 3 } }] },
            pods: {},
          },
          webhook: { url: 'https://203.0.113.7:8443/mutate', caBundle: 'Q0E=', timeoutSeconds: 1 },
          monitoring: {
            labels: { release: 'kube-prometheus-stack' },
            serviceMonitor: { enabled: true, interval: '15s' },
            prometheusRule: { enabled: true },
            dashboard: { enabled: true, annotations: { grafana_folder: 'Platform' } },
          },
        }),
      ]),
    );
    for (const doc of docs) {
      expect(doc.metadata.labels['example.com/owner'], key(doc)).toBe('platform');
      expect(doc.metadata.annotations?.['example.com/contact'], key(doc)).toBe('platform@example.com');
      if (!['ClusterRole', 'ClusterRoleBinding', 'MutatingWebhookConfiguration'].includes(doc.kind)) expect(doc.metadata.namespace, key(doc)).toBe('platform');
    }
    const deployment = find(docs, 'Deployment')!;
    const pod = deployment.spec.template.spec;
    const container = pod.containers[0];
    expect(deployment.spec.replicas).toBe(3);
    expect(deployment.spec.template.metadata).toEqual({
      labels: { 'app.kubernetes.io/name': 'kube-overcommit', team: 'platform' },
      annotations: { 'example.com/scrape': 'yes' },
    });
    expect(pod).toMatchObject({
      priorityClassName: 'system-cluster-critical',
      nodeSelector: { 'node-role.kubernetes.io/control-plane': '' },
      tolerations: [{ key: 'node-role.kubernetes.io/control-plane', operator: 'Exists', effect: 'NoSchedule' }],
      affinity: { nodeAffinity: expect.anything() },
    });
    expect(container.image).toBe('registry.example.com/kube-overcommit:9.9.9');
    expect(container.resources).toEqual({ requests: { cpu: '1', memory: '1Gi' }, limits: { memory: '2Gi' } });
    expect(Object.fromEntries(container.env.map((e: Doc) => [e.name, e.value]))).toMatchObject({
      NODE_OPTIONS: '--max-semi-space-size=32',
      LOG_LEVEL: 'debug',
      OVERCOMMIT_NODE_METRICS_MAX_NODES: '20000',
    });
    // Helm merges maps with the defaults (memory: 1 stays) and replaces lists.
    expect(parse(find(docs, 'ConfigMap', 'kube-overcommit-config')!.data['config.yaml'])).toEqual({
      nodes: {
        defaultRatios: { cpu: 2, memory: 1 },
        coalesceStatusWrites: true,
        pools: [{ name: 'batch', nodeSelector: { matchLabels: { pool: 'batch' } }, ratios: { cpu: 3 } }],
      },
      pods: {},
    });
    const webhook = find(docs, 'MutatingWebhookConfiguration')!;
    for (const entry of webhook.webhooks) {
      expect(entry.clientConfig).toEqual({ url: `https://203.0.113.7:8443/mutate/${entry.name.split('.')[0]}`, caBundle: 'Q0E=' });
      expect(entry.timeoutSeconds).toBe(1);
      expect(entry.failurePolicy).toBe('Ignore');
    }
    // The pod entries never call the webhook for pods of its own namespace.
    expect(webhook.webhooks[1].namespaceSelector.matchExpressions[0].values).toContain('platform');
    expect(find(docs, 'RoleBinding', 'kube-overcommit')!.subjects[0].namespace).toBe('platform');
    expect(find(docs, 'ClusterRoleBinding', 'kube-overcommit')!.subjects[0].namespace).toBe('platform');
    for (const kind of ['ServiceMonitor', 'PrometheusRule']) expect(find(docs, kind)!.metadata.labels.release, kind).toBe('kube-prometheus-stack');
    expect(find(docs, 'ServiceMonitor')!.spec.endpoints[0].interval).toBe('15s');
    const dashboard = find(docs, 'ConfigMap', 'kube-overcommit-dashboard')!;
    expect(dashboard.metadata.labels.grafana_dashboard).toBe('1');
    expect(dashboard.metadata.annotations.grafana_folder).toBe('Platform');
  });
});

describe('chart values platform teams set (ci/*-values.yaml)', () => {
  const ciValues = readdirSync(join(CHART, 'ci')).filter((f) => f.endsWith('-values.yaml'));
  const render = (...args: string[]) => docsOf(helm(['template', 'kube-overcommit', CHART, '--namespace', 'kube-overcommit', ...args]));

  it('helm lint --strict and helm template pass for the default values and every ci/*-values.yaml', () => {
    expect(ciValues).toEqual(
      expect.arrayContaining(['openshift-values.yaml', 'single-replica-values.yaml', 'knobs-values.yaml', 'cert-manager-issuer-values.yaml']),
    );
    for (const file of ['', ...ciValues]) {
      const values = file ? ['--values', join(CHART, 'ci', file)] : [];
      expect(helm(['lint', '--strict', CHART, ...values]), file || 'defaults').toMatch(/1 chart\(s\) linted, 0 chart\(s\) failed/);
      expect(find(render(...values), 'Deployment'), file || 'defaults').toBeDefined();
    }
  });

  it('drains and priority: system-cluster-critical by default; a PDB that allows a drain, none at 1 replica', () => {
    const docs = render();
    expect(find(docs, 'Deployment')!.spec.template.spec.priorityClassName).toBe('system-cluster-critical');
    expect(find(docs, 'PodDisruptionBudget')!.spec).toMatchObject({ maxUnavailable: 1, unhealthyPodEvictionPolicy: 'AlwaysAllow' });
    expect(find(render('--values', join(CHART, 'ci', 'single-replica-values.yaml')), 'PodDisruptionBudget')).toBeUndefined();
    expect(() => render('--set', 'podDisruptionBudget.minAvailable=1')).toThrow(/additional properties 'minAvailable' not allowed/);
  });

  it('a config the webhook would reject fails helm template: a ratio of 50, a misspelt key', () => {
    expect(() => render('--set', 'config.nodes.defaultRatios.cpu=50')).toThrow(/at '\/config\/nodes\/defaultRatios\/cpu': maximum: got 50, want 10/);
    expect(() => render('--set', 'config.nodes.defaultRatio.cpu=2')).toThrow(/at '\/config\/nodes': additional properties 'defaultRatio' not allowed/);
    expect(() => render('--set', 'config.nodes.pools[0].name=Batch')).toThrow(/\/config\/nodes\/pools\/0/);
    // And an unknown chart value.
    expect(() => render('--set', 'replica=3')).toThrow(/additional properties 'replica' not allowed/);
  });

  it('OpenShift values render no fixed UID or GID, the rest of the restricted securityContext kept', () => {
    const pod = find(render('--values', join(CHART, 'ci', 'openshift-values.yaml')), 'Deployment')!.spec.template.spec;
    expect(pod.securityContext).toEqual({ runAsNonRoot: true, seccompProfile: { type: 'RuntimeDefault' } });
    expect(pod.containers[0].securityContext).toEqual({ allowPrivilegeEscalation: false, readOnlyRootFilesystem: true, capabilities: { drop: ['ALL'] } });
  });

  it('the knobs reach the objects: names, probes, ServiceAccount annotations, NetworkPolicy, ServiceMonitor, exclusions', () => {
    const docs = render('--values', join(CHART, 'ci', 'knobs-values.yaml'));
    const deployment = find(docs, 'Deployment')!;
    expect(deployment.metadata.name).toBe('platform-overcommit');
    expect(deployment.spec.selector.matchLabels).toEqual({ 'app.kubernetes.io/name': 'overcommit' });
    const pod = deployment.spec.template.spec;
    expect(pod.priorityClassName).toBeUndefined();
    expect(pod.serviceAccountName).toBe('platform-overcommit');
    expect(pod.containers[0].readinessProbe).toMatchObject({ periodSeconds: 5, failureThreshold: 2 });
    expect(pod.containers[0].livenessProbe).toMatchObject({ initialDelaySeconds: 10, periodSeconds: 20 });
    expect(find(docs, 'ServiceAccount')!.metadata).toMatchObject({
      name: 'platform-overcommit',
      annotations: { 'eks.amazonaws.com/role-arn': 'arn:aws:iam::111122223333:role/kube-overcommit' },
    });
    for (const kind of ['RoleBinding', 'ClusterRoleBinding'])
      for (const binding of docs.filter((d) => d.kind === kind)) expect(binding.subjects[0].name, binding.metadata.name).toBe('platform-overcommit');
    // The names the webhook looks up stay.
    expect(find(docs, 'Service')!.metadata.name).toBe('kube-overcommit');
    expect(find(docs, 'Service')!.spec.selector).toEqual({ 'app.kubernetes.io/name': 'overcommit' });
    expect(find(docs, 'MutatingWebhookConfiguration')!.metadata.name).toBe('kube-overcommit');
    expect(find(docs, 'PodDisruptionBudget')!.spec.maxUnavailable).toBe('50%');
    expect(find(docs, 'NetworkPolicy')!.spec).toEqual({
      podSelector: { matchLabels: { 'app.kubernetes.io/name': 'overcommit' } },
      policyTypes: ['Ingress'],
      ingress: [
        { ports: [{ protocol: 'TCP', port: 8443 }], from: [{ ipBlock: { cidr: '10.0.0.0/16' } }] },
        { ports: [{ protocol: 'TCP', port: 8080 }], from: [{ namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': 'monitoring' } } }] },
      ],
    });
    expect(find(docs, 'ServiceMonitor')!.spec.endpoints[0]).toMatchObject({
      interval: '15s',
      scrapeTimeout: '10s',
      relabelings: [{ sourceLabels: ['__meta_kubernetes_pod_node_name'], targetLabel: 'node' }],
      metricRelabelings: [{ sourceLabels: ['__name__'], regex: 'go_.*', action: 'drop' }],
    });
    for (const entry of find(docs, 'MutatingWebhookConfiguration')!.webhooks.slice(1))
      expect(entry.namespaceSelector.matchExpressions[0].values).toEqual([
        'kube-system',
        'kube-node-lease',
        'kube-public',
        'kube-overcommit',
        'gatekeeper-system',
        'kyverno',
      ]);
    // Off by default.
    expect(find(render(), 'NetworkPolicy')).toBeUndefined();
  });

  it('certificates.mode auto: cert-manager where cert-manager.io/v1 is served, self-managed elsewhere; issuerRef uses an issuer of yours', () => {
    const mode = (docs: Doc[]) => find(docs, 'Deployment')!.spec.template.spec.containers[0].env.find((e: Doc) => e.name === 'OVERCOMMIT_CERT_MODE').value;
    expect(mode(render())).toBe('self-managed');
    const withCertManager = render('--api-versions', 'cert-manager.io/v1');
    expect(mode(withCertManager)).toBe('files');
    expect(find(withCertManager, 'Certificate', 'kube-overcommit')!.spec.issuerRef).toEqual({ kind: 'Issuer', name: 'kube-overcommit-ca' });
    const own = render('--values', join(CHART, 'ci', 'cert-manager-issuer-values.yaml'));
    expect(own.filter((d) => d.kind === 'Issuer' || (d.kind === 'Certificate' && d.metadata.name !== 'kube-overcommit'))).toEqual([]);
    expect(find(own, 'Certificate', 'kube-overcommit')!.spec.issuerRef).toEqual({ kind: 'ClusterIssuer', name: 'corporate-ca' });
    expect(find(own, 'MutatingWebhookConfiguration')!.metadata.annotations['cert-manager.io/inject-ca-from']).toBe('kube-overcommit/kube-overcommit');
    expect(find(own, 'Secret', 'kube-overcommit-tls')).toBeUndefined();
  });
});

function writeValues(values: unknown): string {
  const dir = mkdtempSync(join(tmpdir(), 'kube-overcommit-values-'));
  writeFileSync(join(dir, 'values.json'), JSON.stringify(values));
  return join(dir, 'values.json');
}

/**
 * `helm install` on the e2e's real control plane. It takes over the objects the harness applied
 * from k8s/base (`--take-ownership`: the same names), with each webhook entry pointed at the
 * webhook running here (`webhook.url`, as the harness's overlay does): the API server then calls
 * it through the chart's configuration, and the webhook serves the chart's config.
 */
describe('helm install on the real control plane', () => {
  const admin = adminClient(env);
  const webhook = new WebhookProcess(env);
  let caBundle = '';
  const kubelets: SimKubelet[] = [];
  beforeAll(async () => {
    await webhook.start();
    const applied = await admin.get(`/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations/${env.webhook.configurationName}`);
    caBundle = applied.webhooks[0].clientConfig.caBundle;
  });
  afterAll(async () => {
    for (const k of kubelets) await k.stop({ deleteNode: true });
    await webhook.stop();
    // The harness's objects back (k8s/base through its overlay), and Helm's release records gone.
    await kubectl(env, ['apply', '-k', join(env.runDir, 'overlay')]);
    await kubectl(env, ['-n', env.webhook.namespace, 'delete', 'secret', '-l', 'owner=helm,name=kube-overcommit', '--ignore-not-found']);
    await resetConfig(env);
    admin.close();
  });

  const configMapVersion = async () =>
    (await admin.get(`/api/v1/namespaces/${env.webhook.namespace}/configmaps/${env.webhook.configMap}`)).metadata.resourceVersion as string;

  it('certificates.mode auto keeps the mode of an installed release: its Secret kube-overcommit-tls is Opaque, so self-managed even where cert-manager.io/v1 is served', async () => {
    const mode = (namespace: string) =>
      find(
        docsOf(helm(['template', 'kube-overcommit', CHART, '--namespace', namespace, '--dry-run=server', '--api-versions', 'cert-manager.io/v1'])),
        'Deployment',
      )!.spec.template.spec.containers[0].env.find((e: Doc) => e.name === 'OVERCOMMIT_CERT_MODE').value;
    const secret = await admin.get(`/api/v1/namespaces/${env.webhook.namespace}/secrets/kube-overcommit-tls`);
    expect(secret.type).toBe('Opaque');
    expect(mode(env.webhook.namespace)).toBe('self-managed');
    // Where nothing is installed, the served API versions decide.
    expect(mode('default')).toBe('files');
  });

  it("installs, serves the chart's config through the chart's webhook configuration, and a helm upgrade changes the ratio live", async () => {
    // Without the node-status policy, which auto would install here (this API server serves it)
    // and the afterAll would not remove: test/e2e/node-policy.test.ts installs it and removes it.
    const values = (cpu: number) =>
      writeValues({
        namespace: { create: true },
        config: { nodes: { defaultRatios: { cpu }, pools: [] } },
        webhook: { url: env.webhook.url, caBundle },
        nodePolicy: { enabled: false },
      });
    const install = helm(['install', 'kube-overcommit', CHART, '--namespace', env.webhook.namespace, '--take-ownership', '--values', values(2)]);
    expect(install).toMatch(/STATUS: deployed/);
    await webhook.waitForConfig(await configMapVersion());

    const mwc = await admin.get(`/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations/${env.webhook.configurationName}`);
    expect(mwc.metadata.labels['app.kubernetes.io/managed-by']).toBe('Helm');
    for (const entry of mwc.webhooks) expect(entry.clientConfig).toEqual({ url: entryUrl(env, entry.name), caBundle });
    // The chart's Deployment passed Pod Security `restricted` in the namespace it labels.
    await waitUntil("a pod of the chart's Deployment", async () => {
      const pods = await admin.get(`/api/v1/namespaces/${env.webhook.namespace}/pods`, { labelSelector: 'app.kubernetes.io/name=kube-overcommit' });
      return pods.items.length > 0;
    });
    const namespace = await admin.get(`/api/v1/namespaces/${env.webhook.namespace}`);
    expect(namespace.metadata.labels['pod-security.kubernetes.io/enforce']).toBe('restricted');
    // system-cluster-critical admitted outside kube-system, its priority resolved by the API server.
    const [pod] = (await admin.get(`/api/v1/namespaces/${env.webhook.namespace}/pods`, { labelSelector: 'app.kubernetes.io/name=kube-overcommit' })).items;
    expect(pod.spec).toMatchObject({ priorityClassName: 'system-cluster-critical', priority: 2_000_000_000 });

    const [name] = claimNodeNames(env, 'sim-node', 1);
    const kubelet = await SimKubelet.start(env, {
      name: name!,
      capacity: { cpu: '4', memory: '8Gi', pods: '110' },
      updateFrequencyMs: 1_000,
      reportFrequencyMs: 4_000,
    });
    kubelets.push(kubelet);
    await waitUntil("cpu × 2 from the chart's values", async () => (await getNode(admin, name!)).allocatable.cpu === '8');

    const upgrade = helm(['upgrade', 'kube-overcommit', CHART, '--namespace', env.webhook.namespace, '--values', values(3)]);
    expect(upgrade).toMatch(/REVISION: 2/);
    await webhook.waitForConfig(await configMapVersion());
    await waitUntil('cpu × 3 after helm upgrade', async () => (await getNode(admin, name!)).allocatable.cpu === '12', { timeoutMs: 30_000 });
    expect(helm(['status', 'kube-overcommit', '--namespace', env.webhook.namespace])).toMatch(/STATUS: deployed/);
    kubelet.assertHealthy();
  });
});
