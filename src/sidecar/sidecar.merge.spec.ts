import fc from 'fast-check';
import fastJsonPatch from 'fast-json-patch';
import { describe, expect, it } from 'vitest';
import { Outcomes, propertyTimeout, runs } from '../../test/support/property.js';
import { deploymentPod } from '../../test/fixtures/sidecar-pods.js';
import type { KubeObject } from '../domain/kube-objects.js';
import { containsFields, INJECTED_ANNOTATION, parseTemplateList, planInjection, type InjectionPlan, type TemplateLike } from './sidecar.merge.js';
import type { ContainerLike, PodLike } from '../domain/pod-resources.js';

const MESH: TemplateLike = {
  name: 'mesh',
  initContainers: [
    {
      name: 'mesh-init',
      image: 'registry.example.com/mesh/init:1.24.0',
      command: ['mesh-iptables', '--redirect', '15001'],
      securityContext: { capabilities: { add: ['NET_ADMIN', 'NET_RAW'] } },
    },
    {
      name: 'mesh-proxy',
      image: 'registry.example.com/mesh/proxy:1.24.0',
      restartPolicy: 'Always',
      ports: [{ name: 'mesh-metrics', containerPort: 15090 }],
      startupProbe: { httpGet: { path: '/healthz/ready', port: 15021 }, periodSeconds: 1, failureThreshold: 60 },
      resources: { requests: { cpu: '50m', memory: '64Mi' }, limits: { memory: '256Mi' } },
      volumeMounts: [{ name: 'mesh-certs', mountPath: '/etc/mesh/certs' }],
    },
  ],
  volumes: [{ name: 'mesh-certs', emptyDir: { medium: 'Memory' } }],
  env: [
    { name: 'HTTP_PROXY', value: 'http://127.0.0.1:15001' },
    { name: 'LOG_LEVEL', value: 'debug' },
  ],
};

const LOGGING: TemplateLike = {
  name: 'logging',
  containers: [
    {
      name: 'log-shipper',
      image: 'registry.example.com/obs/fluent-bit:3.2.1',
      args: ['--config', '/fluent-bit/etc/fluent-bit.yaml'],
      volumeMounts: [{ name: 'app-logs', mountPath: '/var/log/app', readOnly: true }],
    },
  ],
  volumes: [{ name: 'app-logs', emptyDir: {} }],
  env: [{ name: 'LOG_DIR', value: '/var/log/app' }],
};

const TEMPLATES = [MESH, LOGGING];

function apply(pod: PodLike, plan: InjectionPlan): PodLike {
  // validate=true: every operation must apply cleanly, as the API server requires.
  return fastJsonPatch.applyPatch(structuredClone(pod), plan.patch, true, false).newDocument;
}

const names = (items: KubeObject[] | null | undefined) => (items ?? []).map((c) => c.name);

describe('parseTemplateList', () => {
  it('trims, drops empties and duplicates, keeps order', () => {
    expect(parseTemplateList(' mesh, logging,,mesh , ')).toEqual(['mesh', 'logging']);
    expect(parseTemplateList('')).toEqual([]);
    expect(parseTemplateList(undefined)).toEqual([]);
    expect(parseTemplateList(42)).toEqual([]);
  });
});

describe('containsFields', () => {
  it('allows extra fields (API-server defaults), not different values or lengths', () => {
    expect(containsFields({ name: 'v', configMap: { name: 'c', defaultMode: 420 } }, { name: 'v', configMap: { name: 'c' } })).toBe(true);
    expect(containsFields({ name: 'v', configMap: { name: 'd' } }, { name: 'v', configMap: { name: 'c' } })).toBe(false);
    expect(containsFields({ args: ['a', 'b'] }, { args: ['a'] })).toBe(false);
    expect(containsFields({ ports: [{ containerPort: 1, protocol: 'TCP' }] }, { ports: [{ containerPort: 1 }] })).toBe(true);
  });
});

describe('planInjection', () => {
  it('injects into a Deployment pod: native sidecars before its init containers, containers and volumes appended, env, record', () => {
    const pod = deploymentPod({ inject: 'mesh,logging' });
    const plan = planInjection(pod, ['mesh', 'logging'], TEMPLATES);
    expect(plan.warnings).toEqual([]);
    expect(plan.decisions).toEqual([
      { template: 'mesh', outcome: 'injected' },
      { template: 'logging', outcome: 'injected' },
    ]);
    const out = apply(pod, plan) as any;
    expect(names(out.spec.initContainers)).toEqual(['mesh-init', 'mesh-proxy', 'migrate']);
    expect(names(out.spec.containers)).toEqual(['web', 'log-shipper']);
    expect(names(out.spec.volumes)).toEqual(['config', 'kube-api-access-x7k2p', 'mesh-certs', 'app-logs']);
    // Kept as given, including restartPolicy: Always.
    expect(out.spec.initContainers[1]).toEqual(MESH.initContainers![1]);
    // Env added to the app container only, and never over a name it sets (LOG_LEVEL stays info).
    expect(out.spec.containers[0].env).toEqual([
      { name: 'LOG_LEVEL', value: 'info' },
      { name: 'POD_IP', valueFrom: { fieldRef: { apiVersion: 'v1', fieldPath: 'status.podIP' } } },
      { name: 'HTTP_PROXY', value: 'http://127.0.0.1:15001' },
      { name: 'LOG_DIR', value: '/var/log/app' },
    ]);
    expect(out.spec.containers[1].env).toBeUndefined();
    expect(out.spec.initContainers[2].env).toHaveLength(1);
    expect(out.metadata.annotations[INJECTED_ANNOTATION]).toBe('mesh,logging');
    expect(out.metadata.annotations['kubectl.kubernetes.io/restartedAt']).toBe('2026-11-20T09:12:44Z');
    expect(plan.patch.map((op) => op.path)).toContain('/metadata/annotations/kube-overcommit.io~1injected');
  });

  it('changes nothing on reinvocation, even after a later strategy edited the sidecar', () => {
    const pod = deploymentPod({ inject: 'mesh,logging' });
    const once = apply(pod, planInjection(pod, ['mesh', 'logging'], TEMPLATES)) as any;
    // pod-policy (order 20) gives the log shipper default requests.
    once.spec.containers[1].resources = { requests: { cpu: '100m', memory: '128Mi' } };
    const again = planInjection(once, ['mesh', 'logging'], TEMPLATES);
    expect(again.patch).toEqual([]);
    expect(again.warnings).toEqual([]);
    expect(again.decisions.map((d) => d.outcome)).toEqual(['already_present', 'already_present']);
  });

  it('creates initContainers, volumes, env and annotations when the pod has none', () => {
    const pod: PodLike = {
      metadata: { name: 'bare', namespace: 'shop' },
      spec: { containers: [{ name: 'app', image: 'app:1' }] },
    };
    const plan = planInjection(pod, ['mesh', 'logging'], TEMPLATES);
    expect(plan.patch.filter((op) => op.op === 'add' && !op.path.endsWith('/-')).map((op) => op.path)).toEqual([
      '/spec/containers/0/env',
      '/spec/initContainers',
      '/spec/volumes',
      '/metadata/annotations',
    ]);
    const out = apply(pod, plan) as any;
    expect(names(out.spec.initContainers)).toEqual(['mesh-init', 'mesh-proxy']);
    expect(names(out.spec.volumes)).toEqual(['mesh-certs', 'app-logs']);
    expect(names(out.spec.containers[0].env)).toEqual(['HTTP_PROXY', 'LOG_LEVEL', 'LOG_DIR']);
    expect(out.metadata.annotations).toEqual({ [INJECTED_ANNOTATION]: 'mesh,logging' });
  });

  it('warns about an unknown template and injects the others', () => {
    const pod = deploymentPod({ inject: 'nope,logging' });
    const plan = planInjection(pod, ['nope', 'logging'], TEMPLATES);
    expect(plan.decisions.map((d) => [d.template, d.outcome])).toEqual([
      ['nope', 'unknown_template'],
      ['logging', 'injected'],
    ]);
    expect(plan.warnings).toEqual(['kube-overcommit.io/inject: unknown sidecar template "nope"; not injected']);
    expect((apply(pod, plan) as any).metadata.annotations[INJECTED_ANNOTATION]).toBe('logging');
  });

  it('skips a template entirely on a clash with a different container of the pod', () => {
    const pod = deploymentPod({
      containers: [
        { name: 'web', image: 'web:1' },
        { name: 'log-shipper', image: 'vector:0.40' },
      ],
    });
    const plan = planInjection(pod, ['logging', 'mesh'], TEMPLATES);
    expect(plan.decisions.map((d) => d.outcome)).toEqual(['conflict', 'injected']);
    expect(plan.warnings).toEqual(['sidecar template "logging" not injected: the pod already has a different container named "log-shipper"']);
    const out = apply(pod, plan) as any;
    // Nothing of logging: not its volume, not its env.
    expect(names(out.spec.volumes)).not.toContain('app-logs');
    expect(names(out.spec.containers[0].env)).not.toContain('LOG_DIR');
    expect(names(out.spec.containers[1].env)).toEqual(['HTTP_PROXY', 'LOG_LEVEL']);
    expect(out.metadata.annotations[INJECTED_ANNOTATION]).toBe('mesh');
  });

  it('treats a clash across container lists and a different volume as conflicts', () => {
    const pod = deploymentPod({
      containers: [
        { name: 'web', image: 'web:1' },
        { name: 'mesh-proxy', image: 'envoy:1.31' },
      ],
      volumes: [{ name: 'app-logs', hostPath: { path: '/var/log/web', type: '' } }],
    });
    const plan = planInjection(pod, ['mesh', 'logging'], TEMPLATES);
    expect(plan.decisions.map((d) => d.outcome)).toEqual(['conflict', 'conflict']);
    expect(plan.warnings[0]).toBe('sidecar template "mesh" not injected: the pod already has a container named "mesh-proxy"');
    expect(plan.warnings[1]).toBe('sidecar template "logging" not injected: the pod already has a different volume named "app-logs"');
    expect(plan.patch).toEqual([]);
  });

  it('skips the second of two templates that inject different containers of the same name; shares identical volumes', () => {
    const other: TemplateLike = { name: 'other-logging', containers: [{ name: 'log-shipper', image: 'vector:0.40' }], volumes: LOGGING.volumes };
    const shared: TemplateLike = {
      name: 'log-reader',
      containers: [{ name: 'log-reader', image: 'busybox:1.37', volumeMounts: [{ name: 'app-logs', mountPath: '/logs' }] }],
      volumes: LOGGING.volumes,
    };
    const pod = deploymentPod();
    const plan = planInjection(pod, ['logging', 'other-logging', 'log-reader'], [...TEMPLATES, other, shared]);
    expect(plan.decisions.map((d) => d.outcome)).toEqual(['injected', 'conflict', 'injected']);
    expect(plan.warnings).toEqual(['sidecar template "other-logging" not injected: container "log-shipper" clashes with a container of template "logging"']);
    const out = apply(pod, plan) as any;
    expect(names(out.spec.volumes).filter((n: string) => n === 'app-logs')).toHaveLength(1);
    expect(out.metadata.annotations[INJECTED_ANNOTATION]).toBe('logging,log-reader');
  });

  it('recognises its own output without the annotation when the pod carries every templated field (defaults on top)', () => {
    const pod = deploymentPod();
    const out = apply(pod, planInjection(pod, ['logging'], TEMPLATES)) as any;
    delete out.metadata.annotations[INJECTED_ANNOTATION];
    out.spec.containers[1].terminationMessagePath = '/dev/termination-log';
    out.spec.volumes[2].emptyDir = {};
    const plan = planInjection(out, ['logging'], TEMPLATES);
    expect(plan.decisions).toEqual([{ template: 'logging', outcome: 'already_present' }]);
    expect(plan.patch).toEqual([{ op: 'add', path: '/metadata/annotations/kube-overcommit.io~1injected', value: 'logging' }]);
  });

  it('drops the record of a template that an earlier pass claims but that now conflicts', () => {
    const pod = deploymentPod({
      annotations: { [INJECTED_ANNOTATION]: 'logging,mesh' },
      containers: [
        { name: 'web', image: 'web:1' },
        { name: 'log-shipper', image: 'vector:0.40' },
      ],
    });
    const plan = planInjection(pod, ['logging'], TEMPLATES);
    // Recorded, so the pod's log-shipper counts as ours — but its volume is missing and absent volumes are added.
    expect(plan.decisions).toEqual([{ template: 'logging', outcome: 'injected' }]);
    // Here the pod's log-shipper is an init container: whatever the record says, not ours.
    const clash = deploymentPod({
      annotations: { [INJECTED_ANNOTATION]: 'logging' },
      initContainers: [{ name: 'log-shipper', image: 'vector:0.40', restartPolicy: 'Always' }],
    });
    const skipped = planInjection(clash, ['logging'], TEMPLATES);
    expect(skipped.decisions.map((d) => d.outcome)).toEqual(['conflict']);
    expect(skipped.patch).toEqual([{ op: 'remove', path: '/metadata/annotations/kube-overcommit.io~1injected' }]);
  });

  it('on reinvocation with one more template, inserts its init containers after those injected before', () => {
    const extra: TemplateLike = { name: 'vault', initContainers: [{ name: 'vault-agent', image: 'vault:1.18', restartPolicy: 'Always' }] };
    const pod = deploymentPod();
    const once = apply(pod, planInjection(pod, ['mesh'], [MESH, extra])) as any;
    const twice = apply(once, planInjection(once, ['mesh', 'vault'], [MESH, extra])) as any;
    const single = apply(pod, planInjection(pod, ['mesh', 'vault'], [MESH, extra])) as any;
    expect(names(twice.spec.initContainers)).toEqual(['mesh-init', 'mesh-proxy', 'vault-agent', 'migrate']);
    expect(twice.spec).toEqual(single.spec);
    expect(twice.metadata.annotations[INJECTED_ANNOTATION]).toBe('mesh,vault');
  });

  it('refuses a template whose container mounts a volume nobody defines, accepts one the pod defines', () => {
    const needsData: TemplateLike = {
      name: 'backup',
      containers: [{ name: 'backup', image: 'restic:0.17', volumeMounts: [{ name: 'data', mountPath: '/data' }] }],
    };
    const usesConfig: TemplateLike = {
      name: 'reloader',
      containers: [{ name: 'reloader', image: 'reloader:1', volumeMounts: [{ name: 'config', mountPath: '/watch' }] }],
    };
    const pod = deploymentPod();
    const plan = planInjection(pod, ['backup', 'reloader'], [needsData, usesConfig]);
    expect(plan.decisions.map((d) => d.outcome)).toEqual(['conflict', 'injected']);
    expect(plan.warnings[0]).toBe(
      'sidecar template "backup" not injected: container "backup" mounts volume "data", which neither the template nor the pod defines',
    );
  });

  it('never adds env to injected containers, to init containers, or over a name the container sets', () => {
    const envOnly: TemplateLike = { name: 'proxy-env', env: [{ name: 'NO_PROXY', value: '.svc,.cluster.local' }] };
    const pod = deploymentPod({
      containers: [
        { name: 'web', image: 'web:1' },
        { name: 'worker', image: 'worker:1', env: [{ name: 'NO_PROXY', value: '*' }] },
      ],
    });
    const out = apply(pod, planInjection(pod, ['logging', 'proxy-env'], [LOGGING, envOnly])) as any;
    expect(out.spec.containers.map((c: any) => names(c.env))).toEqual([['LOG_DIR', 'NO_PROXY'], ['NO_PROXY', 'LOG_DIR'], []]);
    expect(out.spec.containers[1].env[0].value).toBe('*');
    expect(planInjection(out, ['logging', 'proxy-env'], [LOGGING, envOnly]).patch).toEqual([]);
  });

  // Found by the idempotence property: the env of one template would have made the pod's own
  // container a copy of the conflicting template's, which the next pass then took for its sidecar.
  it("adds no env that would make an app container a copy of a conflicting template's container", () => {
    const vault: TemplateLike = {
      name: 'vault',
      containers: [{ name: 'logs', image: 'img:2', env: [{ name: 'A', value: '1' }] }],
      initContainers: [{ name: 'vault-init', image: 'img:1' }],
    };
    const envOnly: TemplateLike = { name: 'env', env: [{ name: 'A', value: '1' }] };
    const pod = deploymentPod({ containers: [{ name: 'logs', image: 'img:2' }] });
    const plan = planInjection(pod, ['vault', 'env'], [vault, envOnly]);
    expect(plan.decisions.map((d) => d.outcome)).toEqual(['conflict', 'already_present']);
    const out = apply(pod, plan) as any;
    expect(out.spec.containers[0].env).toBeUndefined();
    expect(planInjection(out, ['vault', 'env'], [vault, envOnly]).patch).toEqual([]);
    // A value that differs from the template's container is still added.
    const other = { ...envOnly, env: [{ name: 'A', value: '2' }] };
    expect(names((apply(pod, planInjection(pod, ['vault', 'env'], [vault, other])) as any).spec.containers[0].env)).toEqual(['A']);
    // So is env on a container that was already a copy, of a template that conflicts elsewhere.
    const onVolume: TemplateLike = {
      name: 'vault',
      containers: [{ name: 'logs', image: 'img:2' }],
      volumes: [{ name: 'data', emptyDir: { medium: 'Memory' } }],
    };
    const withVolume = deploymentPod({ containers: [{ name: 'logs', image: 'img:2' }], volumes: [{ name: 'data', emptyDir: {} }] });
    const out2 = apply(withVolume, planInjection(withVolume, ['vault', 'env'], [onVolume, envOnly])) as any;
    expect(names(out2.spec.containers[0].env)).toEqual(['A']);
    expect(planInjection(out2, ['vault', 'env'], [onVolume, envOnly]).patch).toEqual([]);
  });

  it('does not mutate its inputs and never shares template objects with the patch', () => {
    const pod = deploymentPod();
    const before = structuredClone(pod);
    const frozen = structuredClone(MESH);
    const plan = planInjection(pod, ['mesh'], [frozen]);
    expect(pod).toEqual(before);
    const added = plan.patch.find((op) => op.path === '/spec/initContainers/0') as any;
    expect(added.value).toEqual(frozen.initContainers![0]);
    expect(added.value).not.toBe(frozen.initContainers![0]);
  });
});

// ---------------------------------------------------------------------------------------------
// Properties, over pods and templates drawn from small name pools so that clashes are common.

const CONTAINER_NAMES = ['app', 'proxy', 'logs', 'init', 'agent'];
const VOLUME_NAMES = ['data', 'certs', 'logs', 'tmp'];
const ENV_NAMES = ['A', 'B', 'C'];
const TEMPLATE_NAMES = ['mesh', 'logging', 'vault', 'x'];

const image = fc.constantFrom('img:1', 'img:2');
const envList = fc.uniqueArray(fc.record({ name: fc.constantFrom(...ENV_NAMES), value: fc.constantFrom('1', '2') }), { selector: (e) => e.name, maxLength: 3 });
const mounts = fc.uniqueArray(fc.record({ name: fc.constantFrom(...VOLUME_NAMES), mountPath: fc.constantFrom('/a', '/b', '/c') }), {
  selector: (m) => m.mountPath,
  maxLength: 2,
});
const container = (name: string, native: boolean) =>
  fc.record({ image, env: fc.option(envList, { nil: undefined }), volumeMounts: fc.option(mounts, { nil: undefined }) }).map((c) => {
    const out: KubeObject = { name, image: c.image };
    if (native) out.restartPolicy = 'Always';
    if (c.env) out.env = c.env;
    if (c.volumeMounts) out.volumeMounts = c.volumeMounts;
    return out;
  });
const volume = (name: string) => fc.constantFrom({ emptyDir: {} }, { emptyDir: { medium: 'Memory' } }).map((source) => ({ name, ...source }));

/** Container names split between two lists, unique across both (at most `maxNames` of them). */
const containerLists = (minRegular: number, maxNames = CONTAINER_NAMES.length) =>
  fc
    .shuffledSubarray(CONTAINER_NAMES, { maxLength: maxNames })
    .chain((pool) =>
      fc
        .integer({ min: Math.min(minRegular, pool.length), max: pool.length })
        .chain((split) =>
          fc.tuple(
            fc.tuple(...pool.slice(0, split).map((n) => container(n, false))),
            fc.tuple(...pool.slice(split).map((n) => fc.boolean().chain((native) => container(n, native)))),
          ),
        ),
    );
const volumes = fc.shuffledSubarray(VOLUME_NAMES).chain((pool) => fc.tuple(...pool.map(volume)));

// A template of at most two containers, and most templates defined: with any number of the five
// names and half the templates, two in three decisions were unknown templates or conflicts and
// a container was added in 5 % of the pods.
const templateArb = (name: string): fc.Arbitrary<TemplateLike> =>
  fc.record({ lists: containerLists(0, 2), volumes, env: envList }).map(({ lists: [containers, initContainers], volumes, env }) => ({
    name,
    containers,
    initContainers,
    volumes,
    env,
  }));
const templatesArb = fc.shuffledSubarray(TEMPLATE_NAMES, { minLength: 3 }).chain((pool) => fc.tuple(...pool.map(templateArb)));

const podArb = fc
  .record({
    lists: containerLists(1),
    volumes: fc.option(volumes, { nil: undefined }),
    hasInit: fc.boolean(),
    recorded: fc.option(fc.subarray(TEMPLATE_NAMES), { nil: undefined }),
    annotations: fc.boolean(),
  })
  .map(({ lists: [containers, initContainers], volumes, hasInit, recorded, annotations }) => {
    const pod: PodLike = { metadata: { generateName: 'p-', namespace: 'ns' }, spec: { containers: containers as ContainerLike[] } };
    if (hasInit || initContainers.length > 0) pod.spec!.initContainers = initContainers as ContainerLike[];
    if (volumes) pod.spec!.volumes = volumes;
    if (annotations || recorded) pod.metadata!.annotations = recorded ? { [INJECTED_ANNOTATION]: recorded.join(',') } : {};
    return pod;
  });
const requestedArb = fc.subarray([...TEMPLATE_NAMES, 'nope']).chain((names) => fc.shuffledSubarray(names, { minLength: names.length }));

const allContainerNames = (pod: any) => [...names(pod.spec.containers), ...names(pod.spec.initContainers), ...names(pod.spec.ephemeralContainers)];
const unique = (list: unknown[]) => new Set(list).size === list.length;

/** The first pass's decisions, counted: the properties fail if one never occurs. */
const decisionOutcomes = () => new Outcomes('injected', 'already_present', 'conflict', 'unknown_template');

describe('planInjection properties', () => {
  it(
    'is idempotent: inject(inject(p)) = inject(p), and the second pass asks for no change',
    () => {
      const seen = decisionOutcomes();
      fc.assert(
        fc.property(podArb, templatesArb, requestedArb, (pod, templates, requested) => {
          const first = planInjection(pod, requested, templates);
          for (const d of first.decisions) seen.add(d.outcome);
          const once = apply(pod, first);
          const second = planInjection(once, requested, templates);
          expect(second.patch).toEqual([]);
          expect(apply(once, second)).toEqual(once);
          expect(second.decisions.map((d) => d.outcome)).not.toContain('injected');
        }),
        runs(500),
      );
      // About 29 % of the decisions inject (two seeds).
      seen.expectEach();
      seen.expectShare('injected', 0.15);
    },
    propertyTimeout(60_000),
  );

  it(
    'never duplicates a container or volume name, and every patch applies cleanly',
    () => {
      const seen = new Outcomes('patched', 'left as it was');
      fc.assert(
        fc.property(podArb, templatesArb, requestedArb, (pod, templates, requested) => {
          const plan = planInjection(pod, requested, templates);
          seen.add(plan.patch.length > 0 ? 'patched' : 'left as it was');
          const out = apply(pod, plan) as any;
          expect(unique(allContainerNames(out))).toBe(true);
          expect(unique(names(out.spec.volumes))).toBe(true);
          for (const c of [...out.spec.containers, ...(out.spec.initContainers ?? [])]) expect(unique(names(c.env))).toBe(true);
        }),
        runs(500),
      );
      seen.expectShare('patched', 0.3);
      seen.expectShare('left as it was', 0.05);
    },
    propertyTimeout(60_000),
  );

  it(
    "keeps the pod's own containers, in order, only adding env; injected init containers come first",
    () => {
      // Per pod, what the injection added (not exclusive).
      const seen = new Outcomes('container added', 'init container added', "env added to the pod's own container", 'volume added');
      const parameters = runs(500);
      fc.assert(
        fc.property(podArb, templatesArb, requestedArb, (pod, templates, requested) => {
          const plan = planInjection(pod, requested, templates);
          const out = apply(pod, plan) as any;
          const own = pod.spec!.containers! as KubeObject[];
          own.forEach((c, i) => {
            const { env: outEnv, ...rest } = out.spec.containers[i];
            const { env: inEnv, ...inRest } = c;
            expect(rest).toEqual(inRest);
            expect((outEnv ?? []).slice(0, (inEnv ?? []).length)).toEqual(inEnv ?? []);
          });
          const ownInit = names(pod.spec!.initContainers);
          const outInit = names(out.spec.initContainers);
          expect(outInit.filter((n) => ownInit.includes(n))).toEqual(ownInit);
          // Injected init containers go before the pod's own (when no earlier pass is recorded).
          if (!pod.metadata?.annotations?.[INJECTED_ANNOTATION]) expect(outInit.slice(outInit.length - ownInit.length)).toEqual(ownInit);
          expect(names(out.spec.volumes).slice(0, names(pod.spec!.volumes).length)).toEqual(names(pod.spec!.volumes));
          if (out.spec.containers.length > own.length) seen.add('container added');
          if (outInit.length > ownInit.length) seen.add('init container added');
          if (own.some((c, i) => (out.spec.containers[i].env ?? []).length > (c.env ?? []).length)) seen.add("env added to the pod's own container");
          if (names(out.spec.volumes).length > names(pod.spec!.volumes).length) seen.add('volume added');
        }),
        parameters,
      );
      // Per run over two seeds: 0.11 a container, 0.12-0.13 an init container, 0.24-0.27 env, 0.35 a volume.
      seen.expectPerRun('container added', 0.05, parameters);
      seen.expectPerRun('init container added', 0.05, parameters);
      seen.expectPerRun("env added to the pod's own container", 0.12, parameters);
      seen.expectPerRun('volume added', 0.17, parameters);
    },
    propertyTimeout(60_000),
  );

  it(
    'decides every template asked for once; an injected template is fully present and recorded, a skipped one added nothing',
    () => {
      const seen = decisionOutcomes();
      fc.assert(
        fc.property(podArb, templatesArb, requestedArb, (pod, templates, requested) => {
          const plan = planInjection(pod, requested, templates);
          for (const d of plan.decisions) seen.add(d.outcome);
          const out = apply(pod, plan) as any;
          expect(plan.decisions.map((d) => d.template)).toEqual(requested);
          expect(plan.warnings).toHaveLength(plan.decisions.filter((d) => d.outcome === 'conflict' || d.outcome === 'unknown_template').length);
          const recorded = parseTemplateList(out.metadata?.annotations?.[INJECTED_ANNOTATION]);
          const present = new Set(allContainerNames(out));
          for (const { template, outcome } of plan.decisions) {
            const t = templates.find((x) => x.name === template);
            if (outcome === 'unknown_template') expect(t).toBeUndefined();
            if (outcome === 'injected' || outcome === 'already_present') {
              expect(recorded).toContain(template);
              for (const c of [...(t!.containers ?? []), ...(t!.initContainers ?? [])]) expect(present.has(c.name)).toBe(true);
              for (const v of t!.volumes ?? []) expect(names(out.spec.volumes)).toContain(v.name);
            }
          }
          // Whatever is new comes from a template that was injected.
          const fromInjected = (pick: (t: TemplateLike) => KubeObject[] | readonly KubeObject[] | null | undefined) =>
            new Set(
              plan.decisions
                .filter((d) => d.outcome === 'injected' || d.outcome === 'already_present')
                .flatMap((d) => names(pick(templates.find((x) => x.name === d.template)!) as KubeObject[])),
            );
          const injectedContainers = new Set([...fromInjected((t) => t.containers), ...fromInjected((t) => t.initContainers)]);
          for (const name of allContainerNames(out)) expect(allContainerNames(pod).includes(name) || injectedContainers.has(name)).toBe(true);
          for (const name of names(out.spec.volumes)) expect(names(pod.spec!.volumes).includes(name) || fromInjected((t) => t.volumes).has(name)).toBe(true);
          // Every mount of every container resolves to a volume of the pod.
          const vols = new Set(names(out.spec.volumes));
          const injected = [...out.spec.containers.slice(pod.spec!.containers!.length), ...(out.spec.initContainers ?? [])];
          for (const c of injected) {
            if (allContainerNames(pod).includes(c.name)) continue;
            for (const m of c.volumeMounts ?? []) expect(vols.has(m.name)).toBe(true);
          }
        }),
        runs(500),
      );
      // About 29 % of the decisions inject (two seeds).
      seen.expectEach();
      seen.expectShare('injected', 0.15);
    },
    propertyTimeout(60_000),
  );
});
