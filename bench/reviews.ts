/**
 * The AdmissionReviews the admission benchmark sends, at the sizes issue 4 names. Node reviews
 * come from the shared fixtures (test/fixtures/nodes.ts), so the bench sends what the app tests
 * and the e2e scenarios send. Every body is built once, with a fixed uid, so two runs send the
 * same bytes.
 */
import { kubeadmNode, kwokNode, nodeReview } from '../test/fixtures/nodes.js';
import { podReview } from '../test/fixtures/pods.js';

type Json = Record<string, any>;

export interface BenchReview {
  /** Key in the results JSON. */
  name: 'bare-node' | 'kubeadm-node' | 'large-node' | 'pod';
  description: string;
  /** A node review: ours must answer with a patch (the config gives cpu a ratio of 1.5). */
  expectPatch: boolean;
  body: Buffer;
}

const uid = (n: number) => `b3ac0000-0000-4000-8000-${n.toString().padStart(12, '0')}`;

/**
 * A pod CREATE as the ReplicaSet controller sends it for a Deployment: two containers (the
 * app and a log shipper) with env, probes, resources and mounts, configMap/secret/projected
 * service-account volumes, the default tolerations and a spread constraint. About 6 KB.
 */
export function deploymentPodReview(): Json {
  const namespace = 'shop';
  const labels = { app: 'checkout', 'app.kubernetes.io/name': 'checkout', 'app.kubernetes.io/part-of': 'shop', 'pod-template-hash': '7d9c5b8f4d' };
  const env = [
    ['NODE_ENV', 'production'],
    ['LOG_LEVEL', 'info'],
    ['HTTP_PORT', '8080'],
    ['METRICS_PORT', '9090'],
    ['DB_HOST', 'checkout-db.shop.svc.cluster.local'],
    ['DB_PORT', '5432'],
    ['DB_NAME', 'checkout'],
    ['REDIS_URL', 'redis://checkout-cache.shop.svc.cluster.local:6379/0'],
    ['PAYMENTS_URL', 'https://payments.shop.svc.cluster.local:8443'],
    ['OTEL_EXPORTER_OTLP_ENDPOINT', 'http://otel-collector.observability.svc.cluster.local:4317'],
    ['OTEL_SERVICE_NAME', 'checkout'],
    ['FEATURE_FLAGS', 'new-cart,express-checkout,gift-cards'],
  ].map(([name, value]) => ({ name, value }));
  const pod = {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: {
      generateName: 'checkout-7d9c5b8f4d-',
      namespace,
      labels,
      annotations: {
        'kubectl.kubernetes.io/restartedAt': '2026-11-20T09:12:44Z',
        'prometheus.io/scrape': 'true',
        'prometheus.io/port': '9090',
        'checksum/config': 'f1e2d3c4b5a6978812345678901234567890abcdefabcdefabcdefabcdefabcd',
      },
      ownerReferences: [
        {
          apiVersion: 'apps/v1',
          kind: 'ReplicaSet',
          name: 'checkout-7d9c5b8f4d',
          uid: '5c1d2e3f-4a5b-4c6d-8e7f-9a0b1c2d3e4f',
          controller: true,
          blockOwnerDeletion: true,
        },
      ],
      managedFields: [
        {
          manager: 'kube-controller-manager',
          operation: 'Update',
          apiVersion: 'v1',
          time: '2026-11-22T10:00:00Z',
          fieldsType: 'FieldsV1',
          fieldsV1: {
            'f:metadata': { 'f:generateName': {}, 'f:labels': { '.': {}, 'f:app': {}, 'f:pod-template-hash': {} }, 'f:ownerReferences': {} },
            'f:spec': { 'f:containers': {}, 'f:volumes': {} },
          },
        },
      ],
    },
    spec: {
      serviceAccountName: 'checkout',
      automountServiceAccountToken: true,
      enableServiceLinks: false,
      terminationGracePeriodSeconds: 30,
      dnsPolicy: 'ClusterFirst',
      restartPolicy: 'Always',
      schedulerName: 'default-scheduler',
      priority: 0,
      preemptionPolicy: 'PreemptLowerPriority',
      securityContext: { runAsNonRoot: true, runAsUser: 10001, runAsGroup: 10001, fsGroup: 10001, seccompProfile: { type: 'RuntimeDefault' } },
      containers: [
        {
          name: 'checkout',
          image: 'registry.example.com/shop/checkout:v3.14.2@sha256:9f8e7d6c5b4a39281706f5e4d3c2b1a09f8e7d6c5b4a39281706f5e4d3c2b1a0',
          imagePullPolicy: 'IfNotPresent',
          args: ['--config=/etc/checkout/config.yaml', '--listen=:8080'],
          ports: [
            { name: 'http', containerPort: 8080, protocol: 'TCP' },
            { name: 'metrics', containerPort: 9090, protocol: 'TCP' },
          ],
          env: [
            ...env,
            { name: 'DB_PASSWORD', valueFrom: { secretKeyRef: { name: 'checkout-db', key: 'password' } } },
            { name: 'POD_NAME', valueFrom: { fieldRef: { apiVersion: 'v1', fieldPath: 'metadata.name' } } },
            { name: 'POD_IP', valueFrom: { fieldRef: { apiVersion: 'v1', fieldPath: 'status.podIP' } } },
            { name: 'GOMAXPROCS', valueFrom: { resourceFieldRef: { containerName: 'checkout', resource: 'limits.cpu', divisor: '1' } } },
          ],
          envFrom: [{ configMapRef: { name: 'checkout-env' } }],
          resources: { requests: { cpu: '500m', memory: '512Mi' }, limits: { cpu: '2', memory: '1Gi' } },
          readinessProbe: {
            httpGet: { path: '/readyz', port: 'http', scheme: 'HTTP' },
            periodSeconds: 5,
            timeoutSeconds: 1,
            successThreshold: 1,
            failureThreshold: 3,
          },
          livenessProbe: {
            httpGet: { path: '/healthz', port: 'http', scheme: 'HTTP' },
            initialDelaySeconds: 10,
            periodSeconds: 10,
            timeoutSeconds: 1,
            successThreshold: 1,
            failureThreshold: 3,
          },
          startupProbe: {
            httpGet: { path: '/healthz', port: 'http', scheme: 'HTTP' },
            periodSeconds: 2,
            timeoutSeconds: 1,
            successThreshold: 1,
            failureThreshold: 30,
          },
          volumeMounts: [
            { name: 'config', mountPath: '/etc/checkout', readOnly: true },
            { name: 'tls', mountPath: '/etc/checkout/tls', readOnly: true },
            { name: 'tmp', mountPath: '/tmp' },
            { name: 'kube-api-access-x7k2p', mountPath: '/var/run/secrets/kubernetes.io/serviceaccount', readOnly: true },
          ],
          securityContext: { allowPrivilegeEscalation: false, readOnlyRootFilesystem: true, capabilities: { drop: ['ALL'] } },
          terminationMessagePath: '/dev/termination-log',
          terminationMessagePolicy: 'File',
        },
        {
          name: 'log-shipper',
          image: 'registry.example.com/platform/fluent-bit:3.2.4',
          imagePullPolicy: 'IfNotPresent',
          args: ['--config=/fluent-bit/etc/fluent-bit.yaml'],
          env: [
            { name: 'NODE_NAME', valueFrom: { fieldRef: { apiVersion: 'v1', fieldPath: 'spec.nodeName' } } },
            { name: 'LOKI_URL', value: 'http://loki-gateway.observability.svc.cluster.local/loki/api/v1/push' },
          ],
          resources: { requests: { cpu: '50m', memory: '64Mi' }, limits: { memory: '128Mi' } },
          volumeMounts: [
            { name: 'log-shipper-config', mountPath: '/fluent-bit/etc', readOnly: true },
            { name: 'tmp', mountPath: '/var/log/app', readOnly: true },
            { name: 'kube-api-access-x7k2p', mountPath: '/var/run/secrets/kubernetes.io/serviceaccount', readOnly: true },
          ],
          securityContext: { allowPrivilegeEscalation: false, readOnlyRootFilesystem: true, capabilities: { drop: ['ALL'] } },
          terminationMessagePath: '/dev/termination-log',
          terminationMessagePolicy: 'File',
        },
      ],
      volumes: [
        { name: 'config', configMap: { name: 'checkout-config', defaultMode: 420 } },
        { name: 'log-shipper-config', configMap: { name: 'checkout-fluent-bit', defaultMode: 420 } },
        { name: 'tls', secret: { secretName: 'checkout-tls', defaultMode: 420 } },
        { name: 'tmp', emptyDir: { sizeLimit: '256Mi' } },
        {
          name: 'kube-api-access-x7k2p',
          projected: {
            defaultMode: 420,
            sources: [
              { serviceAccountToken: { expirationSeconds: 3607, path: 'token' } },
              { configMap: { name: 'kube-root-ca.crt', items: [{ key: 'ca.crt', path: 'ca.crt' }] } },
              { downwardAPI: { items: [{ path: 'namespace', fieldRef: { apiVersion: 'v1', fieldPath: 'metadata.namespace' } }] } },
            ],
          },
        },
      ],
      tolerations: [
        { key: 'node.kubernetes.io/not-ready', operator: 'Exists', effect: 'NoExecute', tolerationSeconds: 300 },
        { key: 'node.kubernetes.io/unreachable', operator: 'Exists', effect: 'NoExecute', tolerationSeconds: 300 },
      ],
      topologySpreadConstraints: [
        { maxSkew: 1, topologyKey: 'topology.kubernetes.io/zone', whenUnsatisfiable: 'ScheduleAnyway', labelSelector: { matchLabels: { app: 'checkout' } } },
      ],
    },
    status: { phase: 'Pending', qosClass: 'Burstable' },
  };
  return podReview(pod, { uid: uid(4) });
}

const encode = (review: Json) => Buffer.from(JSON.stringify(review));

/** The four reviews, smallest first. */
export function benchReviews(): BenchReview[] {
  return [
    {
      name: 'bare-node',
      description: 'kwok node, nodes/status UPDATE (object + oldObject)',
      expectPatch: true,
      body: encode(nodeReview(kwokNode(), { uid: uid(1) })),
    },
    {
      name: 'kubeadm-node',
      description: 'kubeadm node, 50 images, full conditions, nodes/status UPDATE',
      expectPatch: true,
      body: encode(nodeReview(kubeadmNode({ images: 50 }), { uid: uid(2) })),
    },
    {
      // nodeStatusMaxImages raised to 100, long registry paths.
      name: 'large-node',
      description: 'kubeadm node, 100 images with 180-char names, nodes/status UPDATE',
      expectPatch: true,
      body: encode(nodeReview(kubeadmNode({ images: 100, imageNameLength: 180 }), { uid: uid(3) })),
    },
    {
      name: 'pod',
      description: 'Deployment pod CREATE, 2 containers, env, probes, 5 volumes',
      expectPatch: false,
      body: encode(deploymentPodReview()),
    },
  ];
}
