import { Type } from 'class-transformer';
import { IsArray, IsDefined, IsOptional, Matches, ValidateBy, ValidateNested, type ValidationArguments } from 'class-validator';
import { LabelSelector } from '../domain/label-selector.js';
import { isRecord } from '../common/is-record.js';
import { DNS_LABEL, containerProblems, envVarProblems, namedListProblems, volumeProblems, type KubeObject } from '../domain/kube-objects.js';

/** The namespace label that opts a namespace in to sidecar injection, by default. */
export const SIDECARS_NAMESPACE_LABEL = 'kube-overcommit.io/sidecars';

/**
 * A list of Kubernetes objects, checked by `problems` and otherwise kept exactly as given.
 * class-validator yields one message per constraint, so every problem of the list goes in
 * that message, each with its path relative to the property:
 * `sidecars.templates[0].containers: [1].image must be a non-empty string ...; [2].name ...`.
 */
function KubeList(name: string, problems: (value: unknown[], template: SidecarTemplate) => string[]): PropertyDecorator {
  // Absent or null (`volumes:` with every entry commented out) is an empty list.
  const all = (args: ValidationArguments): string[] =>
    args.value === undefined || args.value === null
      ? []
      : Array.isArray(args.value)
        ? problems(args.value, args.object as SidecarTemplate)
        : ['must be an array'];
  return ValidateBy({
    name,
    validator: {
      validate: (value: unknown, args?: ValidationArguments) => args !== undefined && all({ ...args, value }).length === 0,
      defaultMessage: (args?: ValidationArguments) => (args ? all(args).join('; ') : 'invalid'),
    },
  });
}

function names(list: unknown): Map<string, number> {
  const found = new Map<string, number>();
  if (!Array.isArray(list)) return found;
  list.forEach((item, i) => {
    if (isRecord(item) && typeof item.name === 'string' && DNS_LABEL.test(item.name) && !found.has(item.name)) found.set(item.name, i);
  });
  return found;
}

/**
 * One sidecar template. Containers, init containers and volumes are core/v1 objects, kept as
 * written (required fields checked); `env` is added to every app container of the pod that
 * does not already set that variable.
 */
export class SidecarTemplate {
  @Matches(DNS_LABEL, { message: 'name must be a DNS label (at most 63 lower-case letters, digits and -)' })
  name: string;

  /** Appended after the pod's own containers. */
  @KubeList('sidecarContainers', (list) => namedListProblems(list, (c) => containerProblems(c, false)))
  containers: KubeObject[] | null = [];

  /**
   * Inserted, in this order, before the pod's own init containers: native sidecars
   * (`restartPolicy: Always`) and run-to-completion init containers (e.g. network setup).
   */
  @KubeList('sidecarInitContainers', (list, template) => {
    const problems = namedListProblems(list, (c) => containerProblems(c, true));
    // Container names are unique across containers and init containers of a pod.
    const regular = names(template.containers);
    for (const [name, i] of names(list)) {
      if (regular.has(name)) problems.push(`[${i}].name "${name}" is also the name of containers[${regular.get(name)}]`);
    }
    return problems;
  })
  initContainers: KubeObject[] | null = [];

  /** Appended to the pod's volumes. */
  @KubeList('sidecarVolumes', (list) => namedListProblems(list, volumeProblems))
  volumes: KubeObject[] | null = [];

  /** core/v1 EnvVars added to every app container (the pod's own containers) that does not set them. */
  @KubeList('sidecarEnv', (list) => envVarProblems(list))
  @ValidateBy({
    name: 'templateNotEmpty',
    validator: {
      validate: (_: unknown, args?: ValidationArguments) => {
        const t = args?.object as SidecarTemplate | undefined;
        return [t?.containers, t?.initContainers, t?.volumes, t?.env].some((list) => Array.isArray(list) && list.length > 0);
      },
      defaultMessage: () => 'a template must define at least one of containers, initContainers, volumes or env',
    },
  })
  env: KubeObject[] | null = [];
}

export class SidecarConfig {
  /** Namespaces that opt in (evaluated on the namespace's labels). An empty selector matches every namespace. */
  @IsDefined()
  @ValidateNested()
  @Type(() => LabelSelector)
  namespaceSelector: LabelSelector = Object.assign(new LabelSelector(), { matchLabels: { [SIDECARS_NAMESPACE_LABEL]: 'enabled' } });

  @IsOptional()
  @IsArray()
  @ValidateNested({ each: true })
  @Type(() => SidecarTemplate)
  @ValidateBy({
    name: 'uniqueTemplateNames',
    validator: {
      validate: (templates: unknown) => {
        if (!Array.isArray(templates)) return true;
        const named = templates.map((t: SidecarTemplate) => t?.name).filter((n) => typeof n === 'string');
        return new Set(named).size === named.length;
      },
      defaultMessage: () => 'template names must be unique',
    },
  })
  templates: SidecarTemplate[] = [];
}
