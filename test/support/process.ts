import { spawn } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, rmdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { createServer } from 'node:net';

export type Log = (message: string) => void;

/**
 * A memory cgroup that holds one process (the webhook, a benchmarked server) at its
 * Deployment's memory limit. In a pod, Node sizes its V8 heap from the container's limit (under
 * 512 Mi a 259 MiB heap with a 1 MiB young-generation semi-space, against 4.2 GiB and up to
 * 32 MiB unconstrained on this 24 GiB host), so RSS and GC work match production only under the
 * same limit. Needs root and a cgroup v1 or v2 memory controller.
 */
export interface MemoryCgroup {
  path: string;
  limitMiB: number;
  remove(): void;
}

/** A memory cgroup at `limitMiB`; undefined for a limit of 0, or where none can be made. */
export function createMemoryCgroup(name: string, limitMiB: number): MemoryCgroup | undefined {
  if (limitMiB === 0) return undefined;
  const v2 = existsSync('/sys/fs/cgroup/cgroup.controllers');
  const path = v2 ? join('/sys/fs/cgroup', name) : join('/sys/fs/cgroup/memory', name);
  const remove = () => {
    try {
      rmdirSync(path);
    } catch {
      // Not there, or a process still in it: nothing to clean here.
    }
  };
  try {
    mkdirSync(path, { recursive: true });
    writeFileSync(join(path, v2 ? 'memory.max' : 'memory.limit_in_bytes'), String(limitMiB * 1024 * 1024));
  } catch {
    remove();
    return undefined;
  }
  return { path, limitMiB, remove };
}

/**
 * The command and arguments that run `command args…` inside `cgroup` (when given): a shell
 * joins the cgroup, then execs the command, so the pid stays the command's.
 */
export function inCgroup(cgroup: MemoryCgroup | undefined, command: string, args: string[]): [string, string[]] {
  return cgroup ? ['/bin/sh', ['-c', 'echo $$ > "$0/cgroup.procs" && exec "$@"', cgroup.path, command, ...args]] : [command, args];
}

/**
 * Runs a command to completion, streaming its output through `log` line by line (prefixed),
 * and rejects with the end of its output when it exits non-zero.
 */
export function run(
  command: string,
  args: string[],
  options: { cwd?: string; env?: NodeJS.ProcessEnv; log?: Log; prefix?: string; input?: string; timeoutMs?: number } = {},
): Promise<string> {
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, { cwd: options.cwd, env: options.env ?? process.env, stdio: ['pipe', 'pipe', 'pipe'] });
    let output = '';
    let pending = '';
    const onData = (chunk: Buffer) => {
      const text = chunk.toString('utf8');
      output += text;
      if (output.length > 2_000_000) output = output.slice(-1_000_000);
      if (!options.log) return;
      pending += text;
      const lines = pending.split('\n');
      pending = lines.pop()!;
      for (const line of lines) options.log(`${options.prefix ?? ''}${line}`);
    };
    child.stdout.on('data', onData);
    child.stderr.on('data', onData);
    const timer = options.timeoutMs
      ? setTimeout(() => {
          child.kill('SIGTERM');
        }, options.timeoutMs)
      : undefined;
    child.on('error', (error) => {
      clearTimeout(timer);
      reject(error);
    });
    child.on('close', (code, signal) => {
      clearTimeout(timer);
      if (pending && options.log) options.log(`${options.prefix ?? ''}${pending}`);
      if (code === 0) resolve(output);
      else {
        const tail = output.trim().split('\n').slice(-30).join('\n');
        reject(Object.assign(new Error(`${command} ${args.join(' ')} exited with ${signal ?? code}:\n${tail}`), { output }));
      }
    });
    child.stdin.end(options.input ?? '');
  });
}

function canListen(port: number, host: string): Promise<boolean> {
  return new Promise((resolve) => {
    const server = createServer();
    server.unref();
    server.once('error', () => resolve(false));
    server.listen(port, host, () => server.close(() => resolve(true)));
  });
}

/**
 * A TCP port free right now on every interface, below the kernel's ephemeral range (as
 * cluster.sh picks its ports: 20000-31999), so that no outgoing connection takes it while the
 * webhook that will listen there is stopped.
 */
export async function freePort(): Promise<number> {
  for (let attempt = 0; attempt < 200; attempt++) {
    const port = 20_000 + Math.floor(Math.random() * 12_000);
    if ((await canListen(port, '0.0.0.0')) && (await canListen(port, '127.0.0.1'))) return port;
  }
  throw new Error('no free port found in 20000-31999');
}

/** True if a process with this pid exists (and is not a zombie). */
export function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
  } catch {
    return false;
  }
  try {
    return !/^State:\s+Z/m.test(readFileSync(`/proc/${pid}/status`, 'utf8'));
  } catch {
    return true;
  }
}
