/**
 * Structural checks of the Kubernetes objects a sidecar template carries (core/v1 Container,
 * Volume, EnvVar). Only what the API server would reject, or what injection relies on, is
 * checked; every other field is kept exactly as given, so templates can use any field of the
 * cluster's Kubernetes version. Each problem is `<relative path> <message>`, e.g.
 * `[1].ports[0].containerPort must be an integer from 1 to 65535`.
 *
 * Messages never quote a value that failed its check (class-validator interpolates `$…`
 * tokens in messages); names are quoted only once they are valid DNS labels.
 */

import { isRecord } from '../common/is-record.js';

export type KubeObject = Record<string, any>;

/** RFC 1123 label: container, volume and template names. */
export const DNS_LABEL = /^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/;
/** IANA service name: a container port's name. */
const PORT_NAME = /^(?=.*[a-z])[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;

const nonEmptyString = (value: unknown): value is string => typeof value === 'string' && value.length > 0;

function stringArray(value: unknown): boolean {
  return Array.isArray(value) && value.every((item) => typeof item === 'string');
}

/** core/v1 EnvVar list: name set, not containing `=`, unique; value or valueFrom, not both. */
export function envVarProblems(list: unknown): string[] {
  if (!Array.isArray(list)) return [' must be an array of env vars'];
  const problems: string[] = [];
  const seen = new Map<string, number>();
  list.forEach((item, i) => {
    const at = `[${i}]`;
    if (!isRecord(item)) {
      problems.push(`${at} must be an object with name and value or valueFrom`);
      return;
    }
    if (!nonEmptyString(item.name) || item.name.includes('=') || /[\s]/.test(item.name)) {
      problems.push(`${at}.name must be a non-empty string without '=' or whitespace`);
    } else if (seen.has(item.name)) {
      problems.push(`${at}.name duplicates [${seen.get(item.name)}].name`);
    } else {
      seen.set(item.name, i);
    }
    if (item.value !== undefined && typeof item.value !== 'string') problems.push(`${at}.value must be a string (quote numbers and booleans)`);
    if (item.valueFrom !== undefined && !isRecord(item.valueFrom)) problems.push(`${at}.valueFrom must be an object`);
    if (item.value !== undefined && item.valueFrom !== undefined) problems.push(`${at} must set value or valueFrom, not both`);
  });
  return problems;
}

function portProblems(list: unknown): string[] {
  if (!Array.isArray(list)) return [' must be an array'];
  const problems: string[] = [];
  list.forEach((port, i) => {
    const at = `[${i}]`;
    if (!isRecord(port)) {
      problems.push(`${at} must be an object`);
      return;
    }
    const valid = (n: unknown) => Number.isInteger(n) && (n as number) >= 1 && (n as number) <= 65535;
    if (!valid(port.containerPort)) problems.push(`${at}.containerPort must be an integer from 1 to 65535`);
    if (port.hostPort !== undefined && !valid(port.hostPort)) problems.push(`${at}.hostPort must be an integer from 1 to 65535`);
    if (port.name !== undefined && !(typeof port.name === 'string' && port.name.length <= 15 && PORT_NAME.test(port.name))) {
      problems.push(`${at}.name must be an IANA service name (at most 15 lower-case letters, digits and '-', with a letter)`);
    }
    if (port.protocol !== undefined && !['TCP', 'UDP', 'SCTP'].includes(port.protocol as string)) problems.push(`${at}.protocol must be TCP, UDP or SCTP`);
  });
  return problems;
}

function volumeMountProblems(list: unknown): string[] {
  if (!Array.isArray(list)) return [' must be an array'];
  const problems: string[] = [];
  const paths = new Map<string, number>();
  list.forEach((mount, i) => {
    const at = `[${i}]`;
    if (!isRecord(mount)) {
      problems.push(`${at} must be an object with name and mountPath`);
      return;
    }
    if (!nonEmptyString(mount.name)) problems.push(`${at}.name must be a non-empty string`);
    if (!nonEmptyString(mount.mountPath)) {
      problems.push(`${at}.mountPath must be a non-empty string`);
    } else if (paths.has(mount.mountPath)) {
      problems.push(`${at}.mountPath duplicates [${paths.get(mount.mountPath)}].mountPath`);
    } else {
      paths.set(mount.mountPath, i);
    }
  });
  return problems;
}

const PROBES_AND_HOOKS = ['livenessProbe', 'readinessProbe', 'startupProbe', 'lifecycle'] as const;
const OBJECT_FIELDS = [...PROBES_AND_HOOKS, 'resources', 'securityContext'] as const;

/**
 * One core/v1 Container of a template. `init`: an entry of `initContainers` — a native
 * sidecar (`restartPolicy: Always`) or a run-to-completion init container.
 */
export function containerProblems(container: unknown, init: boolean): string[] {
  if (!isRecord(container)) return [' must be an object (a core/v1 Container)'];
  const problems: string[] = [];
  if (!(typeof container.name === 'string' && DNS_LABEL.test(container.name))) {
    problems.push('.name must be a DNS label (at most 63 lower-case letters, digits and -)');
  }
  if (!nonEmptyString(container.image) || container.image.trim() !== container.image) {
    problems.push('.image must be a non-empty string without surrounding whitespace');
  }
  problems.push(...restartPolicyProblems(container, init));
  for (const field of ['command', 'args'] as const) {
    if (container[field] !== undefined && !stringArray(container[field])) problems.push(`.${field} must be an array of strings`);
  }
  for (const field of OBJECT_FIELDS) {
    if (container[field] !== undefined && !isRecord(container[field])) problems.push(`.${field} must be an object`);
  }
  problems.push(...containerListProblems(container));
  return problems;
}

/**
 * A container's restartPolicy: absent on a regular container; on an init container, Always (a
 * native sidecar, which alone may have probes and lifecycle hooks) or absent.
 */
function restartPolicyProblems(container: Record<string, unknown>, init: boolean): string[] {
  if (!init) {
    return container.restartPolicy === undefined
      ? []
      : ['.restartPolicy is not allowed here: native sidecars go under initContainers with restartPolicy: Always'];
  }
  const problems: string[] = [];
  if (container.restartPolicy !== undefined && container.restartPolicy !== 'Always') {
    problems.push('.restartPolicy must be Always (a native sidecar) or absent (a run-to-completion init container)');
  }
  if (container.restartPolicy !== 'Always') {
    for (const field of PROBES_AND_HOOKS) {
      if (container[field] !== undefined)
        problems.push(`.${field} is only allowed on native sidecars (restartPolicy: Always), not on run-to-completion init containers`);
    }
  }
  return problems;
}

/** A container's env, ports and volumeMounts, each item checked, by path. */
function containerListProblems(container: Record<string, unknown>): string[] {
  const problems: string[] = [];
  if (container.env !== undefined) problems.push(...envVarProblems(container.env).map((p) => `.env${p}`));
  if (container.ports !== undefined) problems.push(...portProblems(container.ports).map((p) => `.ports${p}`));
  if (container.volumeMounts !== undefined) problems.push(...volumeMountProblems(container.volumeMounts).map((p) => `.volumeMounts${p}`));
  return problems;
}

/** One core/v1 Volume: a DNS-label name and exactly one volume source. */
export function volumeProblems(volume: unknown): string[] {
  if (!isRecord(volume)) return [' must be an object (a core/v1 Volume)'];
  const problems: string[] = [];
  if (!(typeof volume.name === 'string' && DNS_LABEL.test(volume.name))) {
    problems.push('.name must be a DNS label (at most 63 lower-case letters, digits and -)');
  }
  const sources = Object.keys(volume).filter((key) => key !== 'name');
  if (sources.length !== 1 || !isRecord(volume[sources[0]])) {
    problems.push('must set exactly one volume source (emptyDir, configMap, secret, projected, ...) as an object');
  }
  return problems;
}

/** Checks every item of a list and that item names are unique within it. */
export function namedListProblems(list: unknown, itemProblems: (item: unknown) => string[]): string[] {
  if (!Array.isArray(list)) return ['must be an array'];
  const problems: string[] = [];
  const seen = new Map<string, number>();
  list.forEach((item, i) => {
    problems.push(...itemProblems(item).map((p) => (p.startsWith('.') || p.startsWith(' ') ? `[${i}]${p}` : `[${i}] ${p}`)));
    const name = isRecord(item) ? item.name : undefined;
    if (typeof name === 'string' && DNS_LABEL.test(name)) {
      if (seen.has(name)) problems.push(`[${i}].name "${name}" duplicates [${seen.get(name)}].name`);
      else seen.set(name, i);
    }
  });
  return problems;
}
