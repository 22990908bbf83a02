import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { podReview } from '../fixtures/pods.js';
import { deploymentPod, mirrorPod } from '../fixtures/sidecar-pods.js';
import { LEVEL, admitted, eventually, metricValue, startServer, type TestServer } from './harness.js';

const TEMPLATES = `
sidecars:
  templates:
    - name: mesh
      initContainers:
        - name: mesh-init
          image: registry.example.com/mesh/init:1.24.0
          args: [--redirect, "15001"]
          securityContext: { capabilities: { add: [NET_ADMIN, NET_RAW] } }
        - name: mesh-proxy
          image: registry.example.com/mesh/proxy:1.24.0
          restartPolicy: Always
          ports: [{ name: mesh-metrics, containerPort: 15090, protocol: TCP }]
          startupProbe: { httpGet: { path: /healthz/ready, port: 15021 }, periodSeconds: 1, failureThreshold: 60 }
          resources: { requests: { cpu: 50m, memory: 64Mi }, limits: { memory: 256Mi } }
          volumeMounts: [{ name: mesh-certs, mountPath: /etc/mesh/certs }]
      volumes:
        - { name: mesh-certs, emptyDir: { medium: Memory } }
      env:
        - { name: HTTP_PROXY, value: "http://127.0.0.1:15001" }
    - name: logging
      containers:
        - name: log-shipper
          image: registry.example.com/obs/fluent-bit:3.2.1
          volumeMounts: [{ name: app-logs, mountPath: /var/log/app, readOnly: true }]
      volumes:
        - { name: app-logs, emptyDir: {} }
`;

type Json = Record<string, any>;
const names = (items: Json[] | undefined) => (items ?? []).map((item) => item.name);

describe('sidecar injection over HTTPS', () => {
  let server: TestServer;
  const admit = async (pod: Json, options?: Parameters<typeof podReview>[1]) => {
    const review = podReview(pod, options);
    const reply = await server.mutate(review);
    expect(reply.status).toBe(200);
    const { object, patch, warnings } = admitted(review, reply.json());
    return { pod: object, patch, warnings };
  };

  beforeAll(async () => {
    server = await startServer(TEMPLATES);
  });
  afterAll(async () => {
    await server?.stop();
  });

  it("injects into a Deployment's pod: native sidecar before its init containers, sidecar after its containers", async () => {
    const original = deploymentPod({ inject: 'mesh, logging' });
    const { pod, warnings } = await admit(original);
    expect(warnings).toEqual([]);
    expect(names(pod.spec.initContainers)).toEqual(['mesh-init', 'mesh-proxy', 'migrate']);
    expect(pod.spec.initContainers[1].restartPolicy).toBe('Always');
    expect(names(pod.spec.containers)).toEqual(['web', 'log-shipper']);
    expect(names(pod.spec.volumes)).toEqual(['config', 'kube-api-access-x7k2p', 'mesh-certs', 'app-logs']);
    expect(pod.spec.containers[0].env.map((e: Json) => e.name)).toEqual(['LOG_LEVEL', 'POD_IP', 'HTTP_PROXY']);
    expect(pod.metadata.annotations['kube-overcommit.io/injected']).toBe('mesh,logging');
    // Everything else is as the ReplicaSet controller and the ServiceAccount plugin left it.
    expect(pod.metadata.generateName).toBe('web-7d9c8b6f5d-');
    expect(pod.metadata.ownerReferences).toEqual(original.metadata.ownerReferences);
    expect(pod.spec.volumes[1]).toEqual(original.spec.volumes[1]);
    expect(pod.spec.initContainers[2]).toEqual(original.spec.initContainers[0]);
    expect(pod.spec.tolerations).toEqual(original.spec.tolerations);
  });

  it('changes nothing when reinvoked on its own output', async () => {
    const { pod } = await admit(deploymentPod({ inject: 'mesh,logging' }));
    const again = await admit(pod);
    expect(again.patch).toEqual([]);
    expect(again.warnings).toEqual([]);
  });

  it('creates initContainers and volumes on a pod that has none (kubectl run)', async () => {
    const bare = deploymentPod({ inject: 'mesh,logging', initContainers: null, volumes: null, containers: [{ name: 'shell', image: 'busybox:1.37' }] });
    const { pod, patch } = await admit(bare);
    expect(patch.map((op) => op.path)).toEqual(expect.arrayContaining(['/spec/initContainers', '/spec/volumes', '/spec/containers/-']));
    expect(names(pod.spec.initContainers)).toEqual(['mesh-init', 'mesh-proxy']);
    expect(names(pod.spec.volumes)).toEqual(['mesh-certs', 'app-logs']);
    expect(pod.spec.containers[0].env).toEqual([{ name: 'HTTP_PROXY', value: 'http://127.0.0.1:15001' }]);
  });

  it('admits with a warning naming an unknown template, and still injects the known ones', async () => {
    const { pod, warnings } = await admit(deploymentPod({ inject: 'tracing,mesh' }));
    expect(warnings).toEqual(['kube-overcommit.io/inject: unknown sidecar template "tracing"; not injected']);
    expect(pod.metadata.annotations['kube-overcommit.io/injected']).toBe('mesh');
    const only = await admit(deploymentPod({ inject: 'tracing' }));
    expect(only.patch).toEqual([]);
    expect(only.warnings).toEqual(['kube-overcommit.io/inject: unknown sidecar template "tracing"; not injected']);
  });

  it('skips a template whose container name clashes with one of the pod, with a warning', async () => {
    const own = deploymentPod({
      inject: 'logging,mesh',
      containers: [
        { name: 'web', image: 'web:1' },
        { name: 'log-shipper', image: 'timberio/vector:0.40.0' },
      ],
    });
    const { pod, warnings } = await admit(own);
    expect(warnings).toEqual(['sidecar template "logging" not injected: the pod already has a different container named "log-shipper"']);
    expect(names(pod.spec.containers)).toEqual(['web', 'log-shipper']);
    expect(pod.spec.containers[1].image).toBe('timberio/vector:0.40.0');
    expect(names(pod.spec.volumes)).not.toContain('app-logs');
    expect(pod.metadata.annotations['kube-overcommit.io/injected']).toBe('mesh');
  });

  it('leaves alone pods that do not ask, updates, mirror pods and system namespaces', async () => {
    for (const [pod, options] of [
      [deploymentPod(), undefined],
      [deploymentPod({ inject: 'mesh' }), { operation: 'UPDATE' as const }],
      [mirrorPod('mesh'), undefined],
    ] as const) {
      const result = await admit(pod, options);
      expect(result.patch).toEqual([]);
      expect(result.warnings).toEqual([]);
    }
    for (const [namespace, why] of [
      ['kube-system', 'is a system namespace'],
      ['kube-overcommit', "is the platform's own"],
    ]) {
      const result = await admit(deploymentPod({ namespace, inject: 'mesh' }));
      expect(result.patch).toEqual([]);
      expect(result.warnings).toEqual([`kube-overcommit.io/inject ignored: namespace "${namespace}" ${why}, never in scope`]);
    }
  });

  it('counts injections by template and outcome', async () => {
    const before = await server.metrics();
    const at = (text: string, labels: Record<string, string>) => metricValue(text, 'kube_overcommit_sidecar_injections_total', labels) ?? 0;
    const { pod } = await admit(deploymentPod({ inject: 'mesh,nope' }));
    await admit(pod);
    await admit(deploymentPod({ inject: 'logging', containers: [{ name: 'log-shipper', image: 'x:1' }] }));
    await admit(deploymentPod({ inject: 'logging' }), { dryRun: true });
    const after = await server.metrics();
    const delta = (labels: Record<string, string>) => at(after, labels) - at(before, labels);
    expect(delta({ template: 'mesh', outcome: 'injected' })).toBe(1);
    expect(delta({ template: 'mesh', outcome: 'already_present' })).toBe(1);
    expect(delta({ template: '_unknown', outcome: 'unknown_template' })).toBe(2);
    expect(delta({ template: 'logging', outcome: 'conflict' })).toBe(1);
    expect(delta({ template: 'logging', outcome: 'injected' })).toBe(0);
    expect(after).toContain('# TYPE kube_overcommit_sidecar_injections_total counter');
  });
});

describe('sidecar templates from a reloaded config', () => {
  let server: TestServer;
  beforeAll(async () => {
    server = await startServer(TEMPLATES);
  });
  afterAll(async () => {
    await server?.stop();
  });

  const shipperImage = async () => {
    const review = podReview(deploymentPod({ inject: 'logging' }));
    const { object: pod } = admitted(review, (await server.mutate(review)).json());
    return pod.spec.containers.find((c: Json) => c.name === 'log-shipper')?.image;
  };

  it('rejects an invalid template whole, keeps the last good one, and applies a valid edit to the next pod', async () => {
    expect(await shipperImage()).toBe('registry.example.com/obs/fluent-bit:3.2.1');
    server.writeConfig(
      TEMPLATES.replace('image: registry.example.com/obs/fluent-bit:3.2.1', 'imagePullPolicy: Always').replace('- name: logging', '- name: Logging'),
    );
    await eventually(async () => metricValue(await server.metrics(), 'kube_overcommit_config_reloads_total', { result: 'failure' }) === 1);
    expect(server.logs(LEVEL.error).map((line) => line.errors)).toContainEqual([
      'sidecars.templates[1].name: name must be a DNS label (at most 63 lower-case letters, digits and -)',
      'sidecars.templates[1].containers: [0].image must be a non-empty string without surrounding whitespace',
    ]);
    expect(await shipperImage()).toBe('registry.example.com/obs/fluent-bit:3.2.1');

    server.writeConfig(TEMPLATES.replace('fluent-bit:3.2.1', 'fluent-bit:3.2.2'));
    await eventually(async () => (await shipperImage()) === 'registry.example.com/obs/fluent-bit:3.2.2');
  });
});

describe('sidecar injection with pod policies on (order 10, then 20)', () => {
  let server: TestServer;
  beforeAll(async () => {
    server = await startServer(`${TEMPLATES}\npods:\n  defaultRequests: { cpu: 100m, memory: 128Mi }\n`);
  });
  afterAll(async () => {
    await server?.stop();
  });

  it('gives the injected sidecar default requests in the same response, and keeps the template ones', async () => {
    const review = podReview(deploymentPod({ inject: 'mesh,logging' }));
    const { object: pod } = admitted(review, (await server.mutate(review)).json());
    const shipper = pod.spec.containers.find((c: Json) => c.name === 'log-shipper');
    expect(shipper.resources.requests).toEqual({ cpu: '100m', memory: '128Mi' });
    const proxy = pod.spec.initContainers.find((c: Json) => c.name === 'mesh-proxy');
    expect(proxy.resources.requests).toEqual({ cpu: '50m', memory: '64Mi' });
    // Reinvoked on the result, neither strategy changes anything.
    const again = podReview(pod);
    const reply = (await server.mutate(again)).json();
    expect(reply.response.patch).toBeUndefined();
  });
});
