import { describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { parseConfig } from '../overcommit.config.js';
import { matchesLabelSelector } from '../domain/label-selector.js';

const VALID = `
sidecars:
  templates:
    - name: mesh
      initContainers:
        - name: mesh-init
          image: registry.example.com/mesh/init:1.24.0
          args: [--redirect, "15001"]
          securityContext: { capabilities: { add: [NET_ADMIN, NET_RAW] }, runAsUser: 0 }
        - name: mesh-proxy
          image: registry.example.com/mesh/proxy:1.24.0
          restartPolicy: Always
          ports: [{ name: mesh-metrics, containerPort: 15090, protocol: TCP }]
          startupProbe: { httpGet: { path: /healthz/ready, port: 15021 }, periodSeconds: 1, failureThreshold: 60 }
          resources: { requests: { cpu: 50m, memory: 64Mi }, limits: { memory: 256Mi } }
          volumeMounts: [{ name: mesh-certs, mountPath: /etc/mesh/certs }]
          env:
            - { name: POD_NAME, valueFrom: { fieldRef: { fieldPath: metadata.name } } }
          futureField: { kept: true }
      volumes:
        - { name: mesh-certs, emptyDir: { medium: Memory, sizeLimit: 16Mi } }
      env:
        - { name: HTTP_PROXY, value: "http://127.0.0.1:15001" }
    - name: logging
      containers:
        - name: log-shipper
          image: registry.example.com/obs/fluent-bit:3.2.1
          volumeMounts: [{ name: app-logs, mountPath: /var/log/app, readOnly: true }]
      volumes:
        - { name: app-logs, emptyDir: {} }
    - name: proxy-env
      env: [{ name: NO_PROXY, value: ".svc,.cluster.local" }]
`;

function errorsOf(text: string): string {
  const result = parseConfig(text);
  expect(result.ok).toBe(false);
  return result.ok ? '' : result.errors.join('\n');
}

describe('sidecars config', () => {
  it('defaults to no templates and the opt-in namespace label', () => {
    const result = parseConfig('');
    expect(result.ok).toBe(true);
    if (!result.ok) return;
    expect(result.value.sidecars.templates).toEqual([]);
    expect(result.value.sidecars.namespaceSelector.matchLabels).toEqual({ 'kube-overcommit.io/sidecars': 'enabled' });
    expect(matchesLabelSelector(result.value.sidecars.namespaceSelector, { 'kube-overcommit.io/sidecars': 'enabled' })).toBe(true);
    expect(matchesLabelSelector(result.value.sidecars.namespaceSelector, {})).toBe(false);
  });

  it('keeps the default selector when only templates are given, and takes an explicit one', () => {
    const only = parseConfig('sidecars: { templates: [{ name: e, env: [{ name: A, value: "1" }] }] }');
    expect(only.ok && only.value.sidecars.namespaceSelector.matchLabels).toEqual({ 'kube-overcommit.io/sidecars': 'enabled' });
    const all = parseConfig('sidecars: { namespaceSelector: {} }');
    expect(all.ok && matchesLabelSelector(all.value.sidecars.namespaceSelector, { anything: 'x' })).toBe(true);
  });

  it('accepts realistic templates and keeps the Kubernetes objects exactly as written, frozen', () => {
    const result = parseConfig(VALID);
    expect(result.ok, result.ok ? '' : result.errors.join('\n')).toBe(true);
    if (!result.ok) return;
    const written = parse(VALID).sidecars.templates;
    const [mesh, logging, proxyEnv] = result.value.sidecars.templates;
    expect(mesh.initContainers).toEqual(written[0].initContainers);
    expect(mesh.initContainers![1].futureField).toEqual({ kept: true });
    expect(mesh.volumes).toEqual(written[0].volumes);
    expect(mesh.containers).toEqual([]);
    expect(logging.containers).toEqual(written[1].containers);
    expect(proxyEnv.env).toEqual([{ name: 'NO_PROXY', value: '.svc,.cluster.local' }]);
    expect(Object.isFrozen(mesh.initContainers![1].resources)).toBe(true);
  });

  it('accepts a blank list (every entry commented out)', () => {
    const result = parseConfig('sidecars:\n  templates:\n    - name: e\n      volumes:\n      env: [{ name: A, value: "1" }]\n');
    expect(result.ok).toBe(true);
  });

  it('rejects an invalid template with the path of every bad field', () => {
    const text = errorsOf(`
sidecars:
  namespaceSelector: { matchExpressions: [{ key: team, operator: In }] }
  templates:
    - name: Mesh_Proxy
      containers:
        - { name: proxy }
        - { name: proxy, image: "envoy:1.31 " }
        - name: sidecar
          image: envoy:1.31
          restartPolicy: Always
          ports: [{ containerPort: 70000, name: this-name-is-far-too-long }]
          volumeMounts: [{ name: certs }]
          env: [{ name: "A=B", value: 3 }]
      initContainers:
        - { name: proxy, image: envoy:1.31 }
        - { name: setup, image: busybox:1.37, restartPolicy: OnFailure }
        - { name: wait, image: busybox:1.37, readinessProbe: { exec: { command: ["true"] } } }
      volumes:
        - { name: certs }
        - { name: data, emptyDir: {}, hostPath: { path: /data } }
      env:
        - { name: X, value: "1", valueFrom: { fieldRef: { fieldPath: metadata.name } } }
    - name: empty
    - name: empty
      containers: { name: not-a-list }
`);
    expect(text).toMatch(/^sidecars\.namespaceSelector\.matchExpressions\[0\]\.values: values must be non-empty/m);
    expect(text).toMatch(/^sidecars\.templates\[0\]\.name: name must be a DNS label/m);
    expect(text).toMatch(/^sidecars\.templates\[0\]\.containers: .*\[0\]\.image must be a non-empty string/m);
    expect(text).toMatch(/^sidecars\.templates\[0\]\.containers: .*\[1\]\.image must be a non-empty string without surrounding whitespace/m);
    expect(text).toMatch(/^sidecars\.templates\[0\]\.containers: .*\[1\]\.name "proxy" duplicates \[0\]\.name/m);
    expect(text).toMatch(/^sidecars\.templates\[0\]\.containers: .*\[2\]\.restartPolicy is not allowed here: native sidecars go under initContainers/m);
    expect(text).toMatch(/^sidecars\.templates\[0\]\.containers: .*\[2\]\.ports\[0\]\.containerPort must be an integer from 1 to 65535/m);
    expect(text).toMatch(/^sidecars\.templates\[0\]\.containers: .*\[2\]\.ports\[0\]\.name must be an IANA service name/m);
    expect(text).toMatch(/^sidecars\.templates\[0\]\.containers: .*\[2\]\.volumeMounts\[0\]\.mountPath must be a non-empty string/m);
    expect(text).toMatch(/^sidecars\.templates\[0\]\.containers: .*\[2\]\.env\[0\]\.name must be a non-empty string without '='/m);
    expect(text).toMatch(/^sidecars\.templates\[0\]\.containers: .*\[2\]\.env\[0\]\.value must be a string/m);
    expect(text).toMatch(/^sidecars\.templates\[0\]\.initContainers: .*\[0\]\.name "proxy" is also the name of containers\[0\]/m);
    expect(text).toMatch(/^sidecars\.templates\[0\]\.initContainers: .*\[1\]\.restartPolicy must be Always \(a native sidecar\) or absent/m);
    expect(text).toMatch(/^sidecars\.templates\[0\]\.initContainers: .*\[2\]\.readinessProbe is only allowed on native sidecars/m);
    expect(text).toMatch(/^sidecars\.templates\[0\]\.volumes: .*\[0\] must set exactly one volume source/m);
    expect(text).toMatch(/^sidecars\.templates\[0\]\.volumes: .*\[1\] must set exactly one volume source/m);
    expect(text).toMatch(/^sidecars\.templates\[0\]\.env: .*\[0\] must set value or valueFrom, not both/m);
    expect(text).toMatch(/^sidecars\.templates\[1\]\.env: a template must define at least one of containers, initContainers, volumes or env/m);
    expect(text).toMatch(/^sidecars\.templates\[2\]\.containers: must be an array/m);
    expect(text).toMatch(/^sidecars\.templates: template names must be unique/m);
  });

  it('rejects unknown template fields and a null selector', () => {
    const text = errorsOf('sidecars: { namespaceSelector: null, templates: [{ name: a, env: [{ name: A, value: "1" }], containerz: [] }] }');
    expect(text).toMatch(/sidecars\.namespaceSelector: namespaceSelector should not be null or undefined/);
    expect(text).toMatch(/sidecars\.templates\[0\]\.containerz: property containerz should not exist/);
  });
});
