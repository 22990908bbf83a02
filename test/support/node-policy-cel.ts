/**
 * The node-status policy's CEL evaluated by kube-apiserver's own MutatingAdmissionPolicy plugin:
 * test/e2e/control-plane/cel/ (a package of the control plane's Go module, so the same pinned
 * k8s.io/apiserver), built once into test/e2e/.bin/ and reused while its inputs are the same, and
 * driven over its stdin and stdout, one JSON line a case.
 */
import { execFileSync, spawn, type ChildProcessWithoutNullStreams } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
const MODULE = join(ROOT, 'test/e2e/control-plane');
const BINARY = join(ROOT, 'test/e2e/.bin/node-policy-cel');
const STAMP = join(ROOT, 'test/e2e/.bin/.stamp-node-policy-cel');

/** One case: a nodes/status UPDATE and the shard ConfigMaps that exist (name → data). */
export interface CelCase {
  object: Record<string, any>;
  oldObject: Record<string, any>;
  username: string;
  groups: string[];
  params: Record<string, Record<string, string>>;
}

/** The Nodes as kube-apiserver decodes them, the Node after the policy, and whether the webhook's nodes matchCondition calls it. */
export interface CelResult {
  object: Record<string, any>;
  oldObject: Record<string, any>;
  mutated: Record<string, any>;
  webhookCalled: boolean;
}

/** The go command: $GO, `go` on PATH, or /usr/local/go/bin/go (as pin.sh); undefined when there is none. */
export function goCommand(): string | undefined {
  for (const candidate of [process.env.GO, 'go', '/usr/local/go/bin/go']) {
    if (!candidate) continue;
    try {
      execFileSync(candidate, ['version'], { stdio: 'ignore' });
      return candidate;
    } catch {
      // not this one
    }
  }
  return undefined;
}

/**
 * Builds the harness unless test/e2e/.bin holds one built from the same sources, module files and
 * Go: with the control plane built (Go's build cache holds its packages) a link of about a minute.
 */
export function buildCelHarness(go: string): { built: boolean; seconds: number } {
  const t0 = Date.now();
  const inputs = createHash('sha256');
  for (const file of ['cel/main.go', 'go.mod', 'go.sum']) inputs.update(readFileSync(join(MODULE, file)));
  inputs.update(execFileSync(go, ['env', 'GOVERSION', 'GOOS', 'GOARCH']));
  const stamp = inputs.digest('hex');
  if (existsSync(BINARY) && existsSync(STAMP) && readFileSync(STAMP, 'utf8') === stamp) return { built: false, seconds: 0 };
  mkdirSync(dirname(BINARY), { recursive: true });
  // The control plane's flags (build.sh), so that Go's build cache serves its packages.
  execFileSync(go, ['build', '-p', process.env.GO_BUILD_P ?? '2', '-trimpath', '-o', `${BINARY}.new`, './cel'], {
    cwd: MODULE,
    env: { ...process.env, CGO_ENABLED: '0', GOWORK: 'off', GOFLAGS: '-buildvcs=false -mod=readonly' },
    stdio: ['ignore', 'inherit', 'inherit'],
  });
  renameSync(`${BINARY}.new`, BINARY);
  writeFileSync(STAMP, stamp);
  return { built: true, seconds: (Date.now() - t0) / 1000 };
}

/** The running harness over the shipped k8s/node-policy (policy.yaml and the kustomization's matchCondition). */
export class CelHarness {
  private readonly child: ChildProcessWithoutNullStreams;
  private readonly waiting: Array<(line: string) => void> = [];
  private stderr = '';

  constructor() {
    const component = join(ROOT, 'k8s/node-policy');
    this.child = spawn(BINARY, ['-policy', join(component, 'policy.yaml'), '-kustomization', join(component, 'kustomization.yaml')]);
    this.child.stderr.on('data', (chunk: Buffer) => (this.stderr += chunk.toString()));
    createInterface({ input: this.child.stdout }).on('line', (line) => this.waiting.shift()?.(line));
  }

  /** One case, answered in order. */
  evaluate(input: CelCase): Promise<CelResult> {
    return new Promise((resolvePromise, reject) => {
      const onExit = () => reject(new Error(`node-policy-cel exited: ${this.stderr}`));
      this.child.once('exit', onExit);
      this.waiting.push((line) => {
        this.child.off('exit', onExit);
        const answer = JSON.parse(line) as CelResult | { error: string };
        if ('error' in answer) reject(new Error(`node-policy-cel: ${answer.error}`));
        else resolvePromise(answer);
      });
      this.child.stdin.write(`${JSON.stringify(input)}\n`);
    });
  }

  close(): Promise<void> {
    return new Promise((resolvePromise) => {
      if (this.child.exitCode !== null) return resolvePromise();
      this.child.once('exit', () => resolvePromise());
      this.child.stdin.end();
    });
  }
}
