/**
 * Brings up everything the e2e tests (and `npm run demo`) run against, and tears it down.
 * Plain Node (no Vitest import): global-setup.ts wraps it for Vitest, demo.ts calls it directly.
 *
 *   const env = await setUpE2e({ log: console.log });   // build, cluster, kwok, manifests, certificates, token
 *   try { ... } finally { await tearDownE2e(env); }      // stops every process, also leftovers of crashed workers
 */
import { spawn, spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import {
  closeSync,
  cpSync,
  existsSync,
  mkdirSync,
  openSync,
  readdirSync,
  readFileSync,
  realpathSync,
  renameSync,
  rmSync,
  statSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseAllDocuments } from 'yaml';
import type { E2eEnv } from './env.js';
import { adminClient, kubectl, writeTokenKubeconfig } from './kube-client.js';
import { alive, freePort, run, type Log } from './process.js';
import { createCa, issueServingCertificate, writeSecretVolume } from './tls.js';
import { waitUntil } from './wait.js';
import { compileCacheDir } from './webhook.js';

/** The repository root (this file is test/support/setup.ts, or its compiled copy under test/e2e/.run/build/ or bench/.run/build/). */
export function repoRoot(): string {
  let dir = dirname(fileURLToPath(import.meta.url));
  while (!existsSync(join(dir, 'package.json')) || !existsSync(join(dir, 'k8s', 'base'))) {
    const parent = dirname(dir);
    if (parent === dir) throw new Error('cannot find the repository root above ' + fileURLToPath(import.meta.url));
    dir = parent;
  }
  return dir;
}

export interface SetUpOptions {
  /** Progress messages (default: none). */
  log?: Log;
  /** Name prefix of the run folder under test/e2e/.run/ (default `e2e`). */
  name?: string;
  /** `always` runs `npm run build`; `if-needed` only when src/ is newer than dist/ (default `always`). */
  build?: 'always' | 'if-needed';
  /**
   * Dependencies the webhook runs with: `production` (default) installs `npm ci --omit=dev`
   * into a cache keyed by package.json + package-lock.json, as the image's deps stage does;
   * `repo` uses the repository's node_modules (faster, offline). Env E2E_APP_DEPS overrides.
   */
  appDeps?: 'production' | 'repo';
  /** Called with the run folder as soon as it is chosen (to tear down after an interrupt). */
  onRunDir?: (runDir: string) => void;
  /**
   * The control plane's release and kube-apiserver's extra flags (default: KUBE, BIN_DIR and
   * APISERVER_EXTRA_ARGS of the environment, as build.sh and cluster.sh read them).
   */
  controlPlane?: ControlPlaneRelease & { apiserverArgs?: string };
}

/** A pinned minor (`1.36`) and the folder of its binaries (releaseBinDir). */
export interface ControlPlaneRelease {
  kube: string;
  binDir: string;
}

const KWOK_ANNOTATION = 'kwok.x-k8s.io/node=fake';
/** The node label the overlay makes the Deployment's pods select: no node carries it. */
const UNSCHEDULED_LABEL = 'e2e.kube-overcommit.io/never-scheduled';
const KWOK_TAINT = { key: 'kwok.x-k8s.io/node', value: 'fake', effect: 'NoSchedule' };
const PLATFORM_NAMESPACE = 'kube-overcommit';
const CONFIGMAP = 'kube-overcommit-config';
const SERVICE_ACCOUNT = 'kube-overcommit';

function stamp(): string {
  return new Date().toISOString().replace(/[-:]/g, '').replace('T', '-').slice(0, 15);
}

/** Old run folders: keep the newest `keep`; never touch one whose processes still run (another run in progress). */
function pruneRuns(runsDir: string, keep: number, log: Log): void {
  if (!existsSync(runsDir)) return;
  const runs = readdirSync(runsDir)
    .filter((name) => /^(e2e|demo|upgrade)-\d{8}-\d{6}-\d+$/.test(name))
    .map((name) => ({ name, mtime: statSync(join(runsDir, name)).mtimeMs }))
    .sort((a, b) => b.mtime - a.mtime);
  for (const { name } of runs.slice(keep)) {
    const pidDir = join(runsDir, name, 'pids');
    const live = (existsSync(pidDir) ? readdirSync(pidDir) : []).some((f) => {
      const pid = Number(readFileSync(join(pidDir, f), 'utf8').trim());
      return Number.isInteger(pid) && pid > 0 && alive(pid);
    });
    if (live) continue;
    log(`removing old run folder ${name}`);
    rmSync(join(runsDir, name), { recursive: true, force: true });
  }
}

/** Production-dependency caches other than `keep`, unless a run folder still links to one (a run in progress). */
function pruneDeps(runsDir: string, keep: string, log: Log): void {
  const depsRoot = join(runsDir, 'deps');
  if (!existsSync(depsRoot)) return;
  const inUse = new Set<string>([keep]);
  for (const name of readdirSync(runsDir)) {
    try {
      inUse.add(realpathSync(join(runsDir, name, 'app', 'node_modules', '..')));
    } catch {
      // no app folder
    }
  }
  for (const name of readdirSync(depsRoot)) {
    const dir = join(depsRoot, name);
    if (inUse.has(dir) || name.includes('.tmp-')) continue;
    log(`removing old production dependencies ${name}`);
    rmSync(dir, { recursive: true, force: true });
  }
}

function newestMtime(path: string): number {
  const st = statSync(path);
  if (!st.isDirectory()) return st.mtimeMs;
  let newest = st.mtimeMs;
  for (const entry of readdirSync(path)) newest = Math.max(newest, newestMtime(join(path, entry)));
  return newest;
}

/**
 * Runs `task` holding a lock folder (atomic mkdir) shared by every e2e run, demo and benchmark
 * of this checkout: two runs must not rebuild dist/ (nest build empties it first) under each other.
 * A lock whose owner process is gone is taken over.
 */
async function withLock<T>(lockDir: string, log: Log, task: () => Promise<T>): Promise<T> {
  const deadline = Date.now() + 5 * 60_000;
  let announced = false;
  for (;;) {
    try {
      mkdirSync(lockDir);
      writeFileSync(join(lockDir, 'pid'), String(process.pid));
      break;
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
      let owner = NaN;
      try {
        owner = Number(readFileSync(join(lockDir, 'pid'), 'utf8'));
      } catch {
        // being written or removed
      }
      const age = Date.now() - (existsSync(lockDir) ? statSync(lockDir).mtimeMs : Date.now());
      if ((Number.isInteger(owner) && owner > 0 && !alive(owner)) || (Number.isNaN(owner) && age > 10_000)) {
        rmSync(lockDir, { recursive: true, force: true });
        continue;
      }
      if (Date.now() > deadline) throw new Error(`${lockDir} held by pid ${owner} for over 5 minutes`);
      if (!announced) log(`waiting for another e2e run (pid ${owner}) to finish building`);
      announced = true;
      await new Promise((r) => setTimeout(r, 500));
    }
  }
  try {
    return await task();
  } finally {
    rmSync(lockDir, { recursive: true, force: true });
  }
}

/** Environment for npm/node children: the Node running us first on PATH (the system one may be too old). */
function nodeEnv(): NodeJS.ProcessEnv {
  return { ...process.env, PATH: `${dirname(process.execPath)}:${process.env.PATH ?? ''}` };
}

async function buildProduct(root: string, mode: 'always' | 'if-needed', log: Log): Promise<void> {
  const main = join(root, 'dist', 'main.js');
  if (mode === 'if-needed' && existsSync(main)) {
    const inputs = Math.max(
      newestMtime(join(root, 'src')),
      ...['package.json', 'package-lock.json', 'tsconfig.json', 'nest-cli.json', 'scripts/bundle.js', 'scripts/bundle-plugins.js'].map(
        (f) => statSync(join(root, f)).mtimeMs,
      ),
    );
    if (statSync(main).mtimeMs >= inputs) {
      log('dist/ is up to date');
      return;
    }
  }
  const t0 = Date.now();
  await run('npm', ['run', 'build'], { cwd: root, env: nodeEnv() });
  log(`npm run build: ${((Date.now() - t0) / 1000).toFixed(1)}s`);
}

/**
 * `npm run build` under the build lock (a benchmark's build); `if-needed` builds only when src/
 * or a build input is newer than dist/main.js.
 */
export async function buildDist(mode: 'always' | 'if-needed', log: Log): Promise<void> {
  const root = repoRoot();
  const runsDir = join(root, 'test', 'e2e', '.run');
  mkdirSync(runsDir, { recursive: true });
  await withLock(join(runsDir, '.build.lock'), log, () => buildProduct(root, mode, log));
}

/**
 * node_modules with the production dependencies only, like the image's `deps` stage:
 * test/e2e/.run/deps/<hash of package.json + package-lock.json>/node_modules, made once.
 */
async function productionDependencies(root: string, log: Log): Promise<string> {
  const pkg = readFileSync(join(root, 'package.json'));
  const lock = readFileSync(join(root, 'package-lock.json'));
  // Keyed by what decides the installed tree (a new npm script does not).
  const { name, version, dependencies, optionalDependencies, overrides } = JSON.parse(pkg.toString('utf8'));
  const hash = createHash('sha256')
    .update(JSON.stringify({ name, version, dependencies, optionalDependencies, overrides }))
    .update('\0')
    .update(lock)
    .digest('hex')
    .slice(0, 16);
  const depsDir = join(root, 'test', 'e2e', '.run', 'deps', hash);
  if (existsSync(join(depsDir, '.complete'))) {
    pruneDeps(dirname(dirname(depsDir)), depsDir, log);
    return join(depsDir, 'node_modules');
  }
  const tmp = `${depsDir}.tmp-${process.pid}`;
  rmSync(tmp, { recursive: true, force: true });
  mkdirSync(tmp, { recursive: true });
  writeFileSync(join(tmp, 'package.json'), pkg);
  writeFileSync(join(tmp, 'package-lock.json'), lock);
  const t0 = Date.now();
  const flags = ['--omit=dev', '--no-audit', '--no-fund', '--prefer-offline'];
  try {
    await run('npm', ['ci', ...flags], { cwd: tmp, env: nodeEnv() });
  } catch (error) {
    // The image runs `npm ci --omit=dev`; if the lock file is refused, the image build would
    // fail the same way: say so loudly, and still test the product with `npm install`.
    const reason = String((error as { output?: string }).output ?? (error as Error).message)
      .split('\n')
      .filter((l) => /npm error (code|.*can only install|Missing:|Invalid:)/.test(l))
      .slice(0, 8)
      .join('\n');
    log(
      `WARNING: \`npm ci --omit=dev\` refused package-lock.json (the Dockerfile's deps stage would fail too):\n${reason}\nfalling back to \`npm install --omit=dev\``,
    );
    await run('npm', ['install', ...flags], { cwd: tmp, env: nodeEnv() });
  }
  writeFileSync(join(tmp, '.complete'), new Date().toISOString());
  if (existsSync(join(depsDir, '.complete'))) {
    // Another run installed the same meanwhile, and may be using it: keep that one.
    rmSync(tmp, { recursive: true, force: true });
    return join(depsDir, 'node_modules');
  }
  rmSync(depsDir, { recursive: true, force: true });
  mkdirSync(dirname(depsDir), { recursive: true });
  renameSync(tmp, depsDir);
  log(`production dependencies installed in ${((Date.now() - t0) / 1000).toFixed(1)}s (${depsDir})`);
  return join(depsDir, 'node_modules');
}

/** The app folder, like the image's /app: dist/ (a copy, so a later rebuild does not matter) and package.json ... */
function copyBuild(root: string, appDir: string): void {
  if (!existsSync(join(root, 'dist', 'main.js'))) throw new Error('dist/main.js is missing after npm run build');
  mkdirSync(appDir, { recursive: true });
  cpSync(join(root, 'dist'), join(appDir, 'dist'), { recursive: true });
  cpSync(join(root, 'package.json'), join(appDir, 'package.json'));
}

/** What cluster.sh wrote to runDir/env.json: its ports, pids and files. */
export function readClusterEnv(runDir: string): Record<string, string> {
  return JSON.parse(readFileSync(join(runDir, 'env.json'), 'utf8'));
}

/** Starts kwok as smoke.sh does: only nodes annotated kwok.x-k8s.io/node=fake, admin kubeconfig, its own Leases. */
function startKwok(binDir: string, runDir: string, kubeconfig: string): number {
  const fd = openSync(join(runDir, 'logs', 'kwok.log'), 'a');
  const child = spawn(
    join(binDir, 'kwok'),
    [
      `--kubeconfig=${kubeconfig}`,
      '--manage-all-nodes=false',
      `--manage-nodes-with-annotation-selector=${KWOK_ANNOTATION}`,
      '--node-ip=127.0.0.1',
      '--node-lease-duration-seconds=40',
      '--cidr=10.244.0.1/16',
    ],
    { stdio: ['ignore', fd, fd], detached: true },
  );
  closeSync(fd);
  child.unref();
  writeFileSync(join(runDir, 'pids', 'kwok.pid'), String(child.pid));
  return child.pid!;
}

/**
 * k8s/base as shipped, through an overlay in the run folder that replaces only each webhook
 * entry's clientConfig (one JSON6902 patch per entry, guarded by a `test` of its name): `url`
 * (the webhook's /mutate here) with the entry's own service path in its place.
 */
async function writeOverlay(root: string, runDir: string, binDir: string, url: string, caBundle: string) {
  const base = join(root, 'k8s', 'base');
  const rendered = await run(join(binDir, 'kubectl'), ['kustomize', base]);
  const docs = parseAllDocuments(rendered).map((d) => d.toJS());
  const mwc = docs.filter((d) => d?.kind === 'MutatingWebhookConfiguration');
  if (mwc.length !== 1) throw new Error(`k8s/base renders ${mwc.length} MutatingWebhookConfigurations, expected 1`);
  const configurationName: string = mwc[0].metadata.name;
  const webhooks: Array<{ name: string; clientConfig: { service: { path: string } } }> = mwc[0].webhooks ?? [];
  const entries = webhooks.map((w) => w.name);
  const overlayDir = join(runDir, 'overlay');
  mkdirSync(overlayDir, { recursive: true });
  const ops = (index: number, name: string) =>
    JSON.stringify([
      { op: 'test', path: `/webhooks/${index}/name`, value: name },
      { op: 'replace', path: `/webhooks/${index}/clientConfig`, value: { url: new URL(webhooks[index]!.clientConfig.service.path, url).href, caBundle } },
    ]);
  // The Deployment's pods are admitted (PodSecurity) but never scheduled, whatever the nodes'
  // taints: a hollow kubelet registered without one would otherwise run them.
  const deployments = docs.filter((d) => d?.kind === 'Deployment').map((d) => d.metadata.name as string);
  const pinPending = JSON.stringify([{ op: 'add', path: '/spec/template/spec/nodeSelector', value: { [UNSCHEDULED_LABEL]: 'true' } }]);
  const kustomization = [
    "# Generated by test/support/setup.ts: the shipped base, with only each webhook entry's",
    '# clientConfig pointed at its path on the webhook running on this machine, and the',
    "# Deployment's pods selecting a node label no node has (they stay Pending).",
    'apiVersion: kustomize.config.k8s.io/v1beta1',
    'kind: Kustomization',
    'resources:',
    `  - ${relative(overlayDir, base)}`,
    'patches:',
    ...entries.map(
      (name, i) =>
        `  - target: { group: admissionregistration.k8s.io, version: v1, kind: MutatingWebhookConfiguration, name: ${configurationName} }\n    patch: '${ops(i, name)}'`,
    ),
    ...deployments.map((name) => `  - target: { group: apps, version: v1, kind: Deployment, name: ${name} }\n    patch: '${pinPending}'`),
    '',
  ].join('\n');
  writeFileSync(join(overlayDir, 'kustomization.yaml'), kustomization);
  return { overlayDir, configurationName, entries };
}

/**
 * A new ServiceAccount token into env.webhook.kubeconfig: needed after the ServiceAccount was
 * deleted and created again (a token is bound to the ServiceAccount's uid).
 */
export async function renewWebhookToken(env: E2eEnv): Promise<void> {
  const token = (await kubectl(env, ['-n', PLATFORM_NAMESPACE, 'create', 'token', SERVICE_ACCOUNT, '--duration=24h'])).trim();
  writeTokenKubeconfig(env.webhook.kubeconfig, env.apiserverUrl, env.caFile, `system:serviceaccount:${PLATFORM_NAMESPACE}:${SERVICE_ACCOUNT}`, token);
}

/** Runs `cluster.sh down DIR`: stops every process with a pid file there (webhooks, kwok, control plane). */
export function clusterDown(runDir: string): void {
  const root = repoRoot();
  spawnSync(join(root, 'test', 'e2e', 'control-plane', 'cluster.sh'), ['down', runDir], { stdio: 'inherit' });
}

/** The environment build.sh and cluster.sh read the release from. */
function releaseEnv(release: ControlPlaneRelease, apiserverArgs?: string): NodeJS.ProcessEnv {
  return { ...process.env, KUBE: release.kube, BIN_DIR: release.binDir, ...(apiserverArgs === undefined ? {} : { APISERVER_EXTRA_ARGS: apiserverArgs }) };
}

/** Where build.sh puts a pinned minor's binaries (release.sh's DEFAULT_BIN_DIR); fails for a minor not pinned. */
export async function releaseBinDir(minor: string): Promise<string> {
  const here = join(repoRoot(), 'test', 'e2e', 'control-plane');
  const script = 'HERE=$1; KUBE=$2; source "$HERE/release.sh"; echo "$DEFAULT_BIN_DIR"';
  return (await run('bash', ['-c', script, 'release', here, minor])).trim();
}

/**
 * `cluster.sh restart DIR` with another release's binaries: kube-apiserver, then
 * kube-controller-manager, then kube-scheduler stopped and started again from `release.binDir`
 * on the same flags, ports, certificates and etcd data (an upgrade); everything else keeps running.
 */
export async function clusterRestart(runDir: string, release: ControlPlaneRelease, log?: Log): Promise<void> {
  await run(join(repoRoot(), 'test', 'e2e', 'control-plane', 'cluster.sh'), ['restart', runDir], { env: releaseEnv(release), log, prefix: '  ' });
}

export async function setUpE2e(options: SetUpOptions = {}): Promise<E2eEnv> {
  const log: Log = options.log ?? (() => undefined);
  const root = repoRoot();
  const runsDir = join(root, 'test', 'e2e', '.run');
  mkdirSync(runsDir, { recursive: true });
  pruneRuns(runsDir, 8, log);
  const runDir = join(runsDir, `${options.name ?? 'e2e'}-${stamp()}-${process.pid}`);
  options.onRunDir?.(runDir);
  const t0 = Date.now();
  const step = (what: string) => log(`[${((Date.now() - t0) / 1000).toFixed(1)}s] ${what}`);

  const controlPlane = join(root, 'test', 'e2e', 'control-plane');
  const clusterEnv = options.controlPlane ? releaseEnv(options.controlPlane, options.controlPlane.apiserverArgs) : process.env;
  await run(join(controlPlane, 'build.sh'), [], { env: clusterEnv, log, prefix: '  ' });
  await run(join(root, 'test', 'e2e', 'helm', 'build.sh'), [], { log, prefix: '  ' });
  step('control-plane binaries and helm ready');
  mkdirSync(runDir, { recursive: true });
  const appDir = join(runDir, 'app');
  await withLock(join(runsDir, '.build.lock'), log, async () => {
    await buildProduct(root, options.build ?? 'always', log);
    copyBuild(root, appDir);
  });
  const appDeps = (process.env.E2E_APP_DEPS as SetUpOptions['appDeps']) ?? options.appDeps ?? 'production';
  // ... and node_modules: the production dependencies only (or the repository's).
  symlinkSync(appDeps === 'repo' ? join(root, 'node_modules') : await productionDependencies(root, log), join(appDir, 'node_modules'));
  // ... and the compile cache, filled as the Dockerfile fills it (WebhookProcess points at it).
  const warmEnv = {
    ...nodeEnv(),
    NODE_COMPILE_CACHE: compileCacheDir(appDir),
    WARM_HTTPS_PORT: String(await freePort()),
    WARM_HTTP_PORT: String(await freePort()),
  };
  await run(process.execPath, [join(root, 'scripts', 'warm-compile-cache.js'), appDir], { env: warmEnv, log, prefix: '  ' });
  step(`product built (dependencies: ${appDeps}; compile cache warmed)`);

  try {
    await run(join(controlPlane, 'cluster.sh'), ['up', runDir], { env: clusterEnv, log, prefix: '  ' });
    step('control plane up');
    const c = readClusterEnv(runDir);
    const binDir = c.BIN_DIR!;
    const kwokPid = startKwok(binDir, runDir, c.KUBECONFIG!);

    const webhookDir = join(runDir, 'webhook');
    const ca = await createCa(webhookDir, 'kube-overcommit-e2e-webhook-ca');
    const leaf = await issueServingCertificate(ca, join(webhookDir, 'work'), { ips: ['127.0.0.1'], commonName: 'kube-overcommit.kube-overcommit.svc' });
    const tlsDir = join(webhookDir, 'tls');
    writeSecretVolume(tlsDir, { 'tls.crt': leaf.cert, 'tls.key': leaf.key });
    const httpsPort = await freePort();
    let httpPort = await freePort();
    while (httpPort === httpsPort) httpPort = await freePort();
    const url = `https://127.0.0.1:${httpsPort}/mutate`;
    const caBundle = readFileSync(ca.certFile).toString('base64');

    const overlay = await writeOverlay(root, runDir, binDir, url, caBundle);
    const kubectlArgs = [`--kubeconfig=${c.KUBECONFIG}`, `--cache-dir=${join(runDir, 'kube-cache')}`, '--request-timeout=30s'];
    await run(join(binDir, 'kubectl'), [...kubectlArgs, 'apply', '-k', overlay.overlayDir], { log, prefix: '  kubectl: ' });
    step(`k8s/base applied through ${relative(root, overlay.overlayDir)}`);

    const admin = adminClient({ apiserverUrl: c.APISERVER_URL!, adminToken: c.ADMIN_TOKEN!, caFile: c.CA_FILE! } as E2eEnv);
    try {
      const applied = await admin.get(`/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations/${overlay.configurationName}`);
      for (const w of applied.webhooks) {
        if (w.clientConfig?.url !== `${url}/${w.name.slice(0, w.name.indexOf('.'))}` || w.clientConfig?.service)
          throw new Error(`webhook entry ${w.name} has clientConfig ${JSON.stringify(w.clientConfig)}`);
      }
      await waitUntil('ServiceAccount kube-overcommit/kube-overcommit', () =>
        admin.get(`/api/v1/namespaces/${PLATFORM_NAMESPACE}/serviceaccounts/${SERVICE_ACCOUNT}`),
      );
    } finally {
      admin.close();
    }
    const token = (await run(join(binDir, 'kubectl'), [...kubectlArgs, '-n', PLATFORM_NAMESPACE, 'create', 'token', SERVICE_ACCOUNT, '--duration=24h'])).trim();
    const webhookKubeconfig = join(webhookDir, 'kubeconfig');
    writeTokenKubeconfig(webhookKubeconfig, c.APISERVER_URL!, c.CA_FILE!, `system:serviceaccount:${PLATFORM_NAMESPACE}:${SERVICE_ACCOUNT}`, token);
    step('webhook certificate, kubeconfig (ServiceAccount token) and app folder ready');

    const env: E2eEnv = {
      repoRoot: root,
      runDir,
      binDir,
      k8sVersion: c.K8S_VERSION!,
      kubeletVersion: c.KUBELET_VERSION!,
      apiserverUrl: c.APISERVER_URL!,
      caFile: c.CA_FILE!,
      caKeyFile: c.CA_KEY_FILE!,
      webhookClientCaFile: c.WEBHOOK_CLIENT_CA_FILE!,
      adminToken: c.ADMIN_TOKEN!,
      adminKubeconfig: c.KUBECONFIG!,
      logDir: c.LOG_DIR!,
      pidDir: c.PID_DIR!,
      kwok: { pid: kwokPid, annotation: KWOK_ANNOTATION, taint: KWOK_TAINT },
      webhook: {
        namespace: PLATFORM_NAMESPACE,
        configMap: CONFIGMAP,
        configurationName: overlay.configurationName,
        entries: overlay.entries,
        url,
        httpsPort,
        httpPort,
        tlsDir,
        kubeconfig: webhookKubeconfig,
        appDir,
      },
    };
    writeFileSync(join(runDir, 'e2e-env.json'), JSON.stringify(env, null, 2));
    const kubelet =
      env.kubeletVersion === env.k8sVersion
        ? ''
        : env.kubeletVersion
          ? `, hollow kubelet: kubemark ${env.kubeletVersion} (${env.k8sVersion} has none)`
          : ', no kubemark';
    step(`ready: ${env.apiserverUrl} (Kubernetes ${env.k8sVersion}${kubelet}), run folder ${relative(root, runDir)}`);
    return env;
  } catch (error) {
    log(`set-up failed; stopping what was started (logs in ${runDir}/logs)`);
    clusterDown(runDir);
    throw error;
  }
}

/**
 * Stops every process of the run (cluster.sh down: kwok, webhooks left by workers, the control
 * plane), then deletes `remove`: `bulky` (default: etcd data, the app copy, kubectl's cache;
 * logs stay in runDir/logs), `all` (the whole run folder) or `nothing`.
 */
export async function tearDownE2e(env: Pick<E2eEnv, 'runDir'>, options: { remove?: 'nothing' | 'bulky' | 'all'; log?: Log } = {}): Promise<void> {
  const log = options.log ?? (() => undefined);
  const remove = options.remove ?? 'bulky';
  const t0 = Date.now();
  clusterDown(env.runDir);
  if (remove === 'all') rmSync(env.runDir, { recursive: true, force: true });
  else if (remove === 'bulky') for (const bulky of ['etcd-data', 'app', 'kube-cache']) rmSync(join(env.runDir, bulky), { recursive: true, force: true });
  log(`torn down in ${((Date.now() - t0) / 1000).toFixed(1)}s${remove === 'all' ? '' : `; logs in ${resolve(env.runDir, 'logs')}`}`);
}
