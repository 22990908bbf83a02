/**
 * The pure core of sidecar injection: (pod, requested template names, templates) → JSON Patch,
 * admission warnings and one decision per requested template. No I/O, no clock, no metrics.
 *
 * Rules (docs/sidecars.md):
 * - A template's `containers` are appended after the pod's containers; its `initContainers`
 *   (native sidecars and run-to-completion init containers) are inserted, in order, before
 *   the pod's own init containers — after those of templates injected earlier; its volumes
 *   are appended; its env is added to every app container that does not set that name, unless
 *   that would make the container a copy of a conflicting template's container.
 * - An item already in the pod by name is "the same injected one" when the template is
 *   recorded in `kube-overcommit.io/injected`, or when the pod's item carries every field
 *   the template sets with the same value (API-server defaults on top are fine). Then it is
 *   not added again. Any other item of that name is a conflict: warning, template skipped.
 * - What was injected is recorded in `kube-overcommit.io/injected`, so reinvocation (and
 *   any later pass) changes nothing.
 */
import type { PatchOperation } from '../admission/admission.types.js';
import { annotationPatch } from '../admission/annotation-patch.js';
import { isRecord } from '../common/is-record.js';
import type { KubeObject } from '../domain/kube-objects.js';
import type { PodLike } from '../domain/pod-resources.js';

export const INJECT_ANNOTATION = 'kube-overcommit.io/inject';
export const INJECTED_ANNOTATION = 'kube-overcommit.io/injected';

export type InjectionOutcome = 'injected' | 'already_present' | 'conflict' | 'unknown_template';

/** What a template must provide (SidecarTemplate from the config satisfies it). */
export interface TemplateLike {
  readonly name: string;
  readonly containers?: readonly KubeObject[] | null;
  readonly initContainers?: readonly KubeObject[] | null;
  readonly volumes?: readonly KubeObject[] | null;
  readonly env?: readonly KubeObject[] | null;
}

export interface TemplateDecision {
  template: string;
  outcome: InjectionOutcome;
  /** Why a template was not injected (conflict, unknown_template). */
  reason?: string;
}

export interface InjectionPlan {
  patch: PatchOperation[];
  warnings: string[];
  decisions: TemplateDecision[];
}

/** `"a, b,,a"` → `['a', 'b']`: trimmed, empties ignored, first occurrence kept. */
export function parseTemplateList(value: unknown): string[] {
  if (typeof value !== 'string') return [];
  return [
    ...new Set(
      value
        .split(',')
        .map((name) => name.trim())
        .filter((name) => name !== ''),
    ),
  ];
}

/**
 * True when `actual` carries everything `expected` sets: objects field by field (extra
 * fields in `actual` allowed), arrays element by element with the same length, scalars equal.
 */
export function containsFields(actual: unknown, expected: unknown): boolean {
  if (Array.isArray(expected)) {
    return Array.isArray(actual) && actual.length === expected.length && expected.every((item, i) => containsFields(actual[i], item));
  }
  if (isRecord(expected)) {
    return isRecord(actual) && Object.entries(expected).every(([key, value]) => containsFields(Object.hasOwn(actual, key) ? actual[key] : undefined, value));
  }
  return actual === expected;
}

type ContainerList = 'containers' | 'initContainers' | 'ephemeralContainers';
const NOUN: Record<ContainerList, string> = { containers: 'container', initContainers: 'init container', ephemeralContainers: 'ephemeral container' };
const A_NOUN: Record<ContainerList, string> = { containers: 'a container', initContainers: 'an init container', ephemeralContainers: 'an ephemeral container' };

interface Entry {
  item: KubeObject;
  /** The template that added it in this pass; undefined for what the pod already had. */
  addedBy?: string;
}

const list = <T>(value: readonly T[] | null | undefined): readonly T[] => (Array.isArray(value) ? value : []);
const nameOf = (item: unknown): string | undefined => (isRecord(item) && typeof item.name === 'string' ? item.name : undefined);
const clone = <T>(value: T): T => structuredClone(value) as T;

/** The named `pick(template)` items of the templates named in `among`. */
function templateItems(
  templates: ReadonlyMap<string, TemplateLike>,
  among: Iterable<string>,
  pick: (t: TemplateLike) => readonly KubeObject[] | null | undefined,
): KubeObject[] {
  const items: KubeObject[] = [];
  for (const name of among) {
    const template = templates.get(name);
    if (template) for (const item of list(pick(template))) if (nameOf(item) !== undefined) items.push(item);
  }
  return items;
}

/** Names of `pick(template)` items over the templates named in `among`. */
function templateItemNames(
  templates: ReadonlyMap<string, TemplateLike>,
  among: Iterable<string>,
  pick: (t: TemplateLike) => readonly KubeObject[] | null | undefined,
): Set<string> {
  return new Set(templateItems(templates, among, pick).map((item) => nameOf(item)!));
}

type ContainerIndex = Map<string, { list: ContainerList; entry: Entry }>;
type VolumeIndex = Map<string, Entry>;
type Added = { containers: KubeObject[]; initContainers: KubeObject[]; volumes: KubeObject[] };

interface Accepted {
  template: TemplateLike;
  addedItems: number;
}

/** Pass 1's result: the templates accepted, what they add, and the decisions on the others. */
interface TemplateChoice {
  added: Added;
  accepted: Accepted[];
  decisions: TemplateDecision[];
  warnings: string[];
}

export function planInjection(pod: PodLike, requestedNames: readonly string[], templates: readonly TemplateLike[]): InjectionPlan {
  const requested = [...new Set(requestedNames)];
  if (!isRecord(pod.spec)) return { patch: [], warnings: [], decisions: [] };
  const templatesByName = new Map(templates.map((t) => [t.name, t]));
  const recorded = parseTemplateList(pod.metadata?.annotations?.[INJECTED_ANNOTATION]);
  const spec = pod.spec;

  const choice = chooseTemplates(spec, requested, templatesByName, recorded);
  // A template recorded by an earlier pass that now conflicts was not (or no longer is)
  // injected: the record is dropped, so that the next pass decides it as this one did.
  const conflicted = new Set(choice.decisions.filter((d) => d.outcome === 'conflict').map((d) => d.template));
  const newlyRecorded = choice.accepted.map((a) => a.template.name).filter((name) => !recorded.includes(name));
  const finalRecorded = [...recorded.filter((name) => !conflicted.has(name)), ...newlyRecorded];
  const { envAdds, decisions } = planEnv(
    spec,
    choice.accepted,
    templateItemNames(templatesByName, finalRecorded, (t) => t.containers),
    templateItems(templatesByName, conflicted, (t) => t.containers),
  );
  // Decisions in the order asked.
  const allDecisions = [...choice.decisions, ...decisions].sort((a, b) => requested.indexOf(a.template) - requested.indexOf(b.template));

  const patch = injectionPatch(
    spec,
    choice.added,
    envAdds,
    templateItemNames(templatesByName, recorded, (t) => t.initContainers),
  );
  if (newlyRecorded.length > 0 || finalRecorded.length < recorded.length) {
    const value = finalRecorded.length > 0 ? finalRecorded.join(',') : null;
    patch.push(...annotationPatch(pod.metadata, { [INJECTED_ANNOTATION]: value }, { existing: 'add', malformed: 'overwrite' }));
  }
  return { patch, warnings: choice.warnings, decisions: allDecisions };
}

/** Pass 1: per template, in the order asked, decide against the pod as injected so far. */
function chooseTemplates(
  spec: NonNullable<PodLike['spec']>,
  requested: readonly string[],
  templatesByName: ReadonlyMap<string, TemplateLike>,
  recorded: readonly string[],
): TemplateChoice {
  // Every container name of the pod lives in one namespace across the three lists.
  const containersByName: ContainerIndex = new Map();
  for (const which of ['containers', 'initContainers', 'ephemeralContainers'] as const) {
    for (const item of list(spec[which])) {
      const name = nameOf(item);
      if (name !== undefined && !containersByName.has(name)) containersByName.set(name, { list: which, entry: { item } });
    }
  }
  const volumesByName: VolumeIndex = new Map();
  for (const item of list(spec.volumes)) {
    const name = nameOf(item);
    if (name !== undefined && !volumesByName.has(name)) volumesByName.set(name, { item });
  }
  // The pod's own volumes: those no template could have injected.
  const templateVolumes = templateItemNames(templatesByName, templatesByName.keys(), (t) => t.volumes);
  const podOwnVolumes = [...volumesByName.keys()].filter((name) => !templateVolumes.has(name));

  const choice: TemplateChoice = { added: { containers: [], initContainers: [], volumes: [] }, accepted: [], decisions: [], warnings: [] };
  for (const name of requested) {
    const template = templatesByName.get(name);
    if (!template) {
      choice.decisions.push({ template: name, outcome: 'unknown_template', reason: 'no such template in the sidecars config' });
      choice.warnings.push(`${INJECT_ANNOTATION}: unknown sidecar template "${name}"; not injected`);
      continue;
    }
    const { toAdd, problems } = compareTemplate(template, recorded.includes(name), containersByName, volumesByName, podOwnVolumes);
    if (problems.length > 0) {
      const more = problems.length > 1 ? ` (and ${problems.length - 1} more)` : '';
      choice.decisions.push({ template: name, outcome: 'conflict', reason: problems.join('; ') });
      choice.warnings.push(`sidecar template "${name}" not injected: ${problems[0]}${more}`);
      continue;
    }
    for (const which of ['containers', 'initContainers'] as const) {
      for (const item of toAdd[which]) {
        containersByName.set(nameOf(item)!, { list: which, entry: { item, addedBy: name } });
        choice.added[which].push(item);
      }
    }
    for (const item of toAdd.volumes) {
      volumesByName.set(nameOf(item)!, { item, addedBy: name });
      choice.added.volumes.push(item);
    }
    choice.accepted.push({ template, addedItems: toAdd.containers.length + toAdd.initContainers.length + toAdd.volumes.length });
  }
  return choice;
}

/** One template against the pod as injected so far: what it would add, and why it cannot be. */
function compareTemplate(
  template: TemplateLike,
  ours: boolean,
  containersByName: ContainerIndex,
  volumesByName: VolumeIndex,
  podOwnVolumes: readonly string[],
): { toAdd: Added; problems: string[] } {
  const problems: string[] = [];
  const toAdd: Added = { containers: [], initContainers: [], volumes: [] };
  for (const which of ['containers', 'initContainers'] as const) {
    for (const wanted of list(template[which])) {
      const found = containersByName.get(nameOf(wanted)!);
      if (!found) toAdd[which].push(wanted);
      else problems.push(...containerClashes(which, wanted, found, ours));
    }
  }
  for (const wanted of list(template.volumes)) {
    const found = volumesByName.get(nameOf(wanted)!);
    if (!found) toAdd.volumes.push(wanted);
    else problems.push(...volumeClashes(wanted, found, ours));
  }
  problems.push(...undefinedMounts(template, toAdd, podOwnVolumes));
  return { toAdd, problems };
}

/**
 * Why a template's container cannot go in beside the pod's one of the same name (`found`, as
 * injected so far): none when that one is it already.
 */
function containerClashes(which: 'containers' | 'initContainers', wanted: KubeObject, found: { list: ContainerList; entry: Entry }, ours: boolean): string[] {
  const cname = nameOf(wanted)!;
  if (found.list === which && ((ours && found.entry.addedBy === undefined) || containsFields(found.entry.item, wanted))) return [];
  if (found.entry.addedBy !== undefined) return [`${NOUN[which]} "${cname}" clashes with ${A_NOUN[found.list]} of template "${found.entry.addedBy}"`];
  if (found.list !== which) return [`the pod already has ${A_NOUN[found.list]} named "${cname}"`];
  return [`the pod already has a different ${NOUN[which]} named "${cname}"`];
}

/** Why a template's volume cannot go in beside the pod's one of the same name (`found`): none when that one is it already. */
function volumeClashes(wanted: KubeObject, found: Entry, ours: boolean): string[] {
  const vname = nameOf(wanted)!;
  if ((ours && found.addedBy === undefined) || containsFields(found.item, wanted)) return [];
  if (found.addedBy !== undefined) return [`volume "${vname}" clashes with a volume of template "${found.addedBy}"`];
  return [`the pod already has a different volume named "${vname}"`];
}

/**
 * A mount of a volume that nothing defines would make the API server reject the pod. A
 * template's containers may mount the template's own volumes and the pod's own ones — not a
 * volume another template injects (declare it in both templates: identical volumes are shared).
 * This keeps the decision independent of order and of earlier passes.
 */
function undefinedMounts(template: TemplateLike, toAdd: Added, podOwnVolumes: readonly string[]): string[] {
  const problems: string[] = [];
  const available = new Set([...podOwnVolumes, ...list(template.volumes).map(nameOf)]);
  for (const container of [...toAdd.initContainers, ...toAdd.containers]) {
    for (const mount of list(container.volumeMounts as KubeObject[] | undefined)) {
      if (!available.has(nameOf(mount))) {
        problems.push(`container "${nameOf(container)}" mounts volume "${String(mount?.name)}", which neither the template nor the pod defines`);
      }
    }
  }
  return problems;
}

/**
 * Pass 2: env, on app containers: the pod's containers that no recorded or accepted template
 * injected (`injectedContainerNames`). Each accepted template is decided injected or already present.
 * No env goes to a container that it would turn into a copy of a conflicting template's container
 * (`conflictingContainers`) that it was not before: the next pass would take it for that sidecar,
 * injected, and decide the template otherwise.
 */
function planEnv(
  spec: NonNullable<PodLike['spec']>,
  accepted: readonly Accepted[],
  injectedContainerNames: ReadonlySet<string>,
  conflictingContainers: readonly KubeObject[],
): { envAdds: Map<number, KubeObject[]>; decisions: TemplateDecision[] } {
  const envAdds = new Map<number, KubeObject[]>();
  const envAddedBy = new Map<string, number>();
  list(spec.containers).forEach((container, index) => {
    const cname = nameOf(container);
    if (!isRecord(container) || (cname !== undefined && injectedContainerNames.has(cname))) return;
    const own = list(container.env as KubeObject[] | undefined);
    const names = new Set(own.map(nameOf));
    const adds: Array<{ template: string; variable: KubeObject }> = [];
    for (const { template } of accepted) {
      for (const variable of list(template.env)) {
        if (names.has(nameOf(variable))) continue;
        names.add(nameOf(variable));
        adds.push({ template: template.name, variable });
      }
    }
    if (adds.length === 0) return;
    const variables = adds.map((a) => a.variable);
    const withEnv = { ...container, env: [...own, ...variables] };
    const copies = (wanted: KubeObject) => !containsFields(container, wanted) && containsFields(withEnv, wanted);
    if (conflictingContainers.some((wanted) => nameOf(wanted) === cname && copies(wanted))) return;
    envAdds.set(index, variables);
    for (const { template } of adds) envAddedBy.set(template, (envAddedBy.get(template) ?? 0) + 1);
  });
  const decisions = accepted.map(({ template, addedItems }): TemplateDecision => ({
    template: template.name,
    outcome: addedItems + (envAddedBy.get(template.name) ?? 0) > 0 ? 'injected' : 'already_present',
  }));
  return { envAdds, decisions };
}

/**
 * Pass 3: the patch of env, containers, init containers and volumes (the record is added by
 * the caller). Appends never shift the indices of the pod's own containers.
 */
function injectionPatch(
  spec: NonNullable<PodLike['spec']>,
  added: Added,
  envAdds: ReadonlyMap<number, KubeObject[]>,
  injectedInit: ReadonlySet<string>,
): PatchOperation[] {
  const patch: PatchOperation[] = [];
  const podContainers = list(spec.containers);
  for (const [index, variables] of [...envAdds].sort(([a], [b]) => a - b)) {
    if (Array.isArray(podContainers[index].env)) {
      for (const variable of variables) patch.push({ op: 'add', path: `/spec/containers/${index}/env/-`, value: clone(variable) });
    } else {
      patch.push({ op: 'add', path: `/spec/containers/${index}/env`, value: variables.map(clone) });
    }
  }
  appendAll(patch, spec, 'containers', added.containers);
  if (added.initContainers.length > 0) {
    const existing = spec.initContainers;
    if (!Array.isArray(existing)) {
      patch.push({ op: 'add', path: '/spec/initContainers', value: added.initContainers.map(clone) });
    } else {
      // After the init containers of templates injected before (reinvocation with a new
      // template keeps the order of a single pass), before the pod's own.
      let at = 0;
      existing.forEach((item, i) => {
        if (injectedInit.has(nameOf(item)!)) at = i + 1;
      });
      added.initContainers.forEach((item, k) => patch.push({ op: 'add', path: `/spec/initContainers/${at + k}`, value: clone(item) }));
    }
  }
  appendAll(patch, spec, 'volumes', added.volumes);
  return patch;
}

function appendAll(patch: PatchOperation[], spec: NonNullable<PodLike['spec']>, field: 'containers' | 'volumes', items: KubeObject[]): void {
  if (items.length === 0) return;
  if (Array.isArray(spec[field])) {
    for (const item of items) patch.push({ op: 'add', path: `/spec/${field}/-`, value: clone(item) });
  } else {
    patch.push({ op: 'add', path: `/spec/${field}`, value: items.map(clone) });
  }
}
