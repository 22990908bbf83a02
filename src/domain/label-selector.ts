import { Type } from 'class-transformer';
import { ArrayNotEmpty, IsArray, IsIn, IsOptional, IsString, Matches, ValidateBy, ValidateIf, ValidateNested, type ValidationOptions } from 'class-validator';

export const LABEL_VALUE = /^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$/;
export const LABEL_KEY = /^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*\/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$/;

/** A map of label keys to label values, as metav1.LabelSelector.matchLabels holds. */
function IsLabelMap(options?: ValidationOptions) {
  return ValidateBy(
    {
      name: 'isLabelMap',
      validator: {
        validate: (value: unknown) =>
          typeof value === 'object' &&
          value !== null &&
          !Array.isArray(value) &&
          Object.entries(value).every(([k, v]) => LABEL_KEY.test(k) && typeof v === 'string' && v.length <= 63 && LABEL_VALUE.test(v)),
        defaultMessage: () => '$property must map label keys to label values (strings of at most 63 characters)',
      },
    },
    options,
  );
}

export class LabelSelectorRequirement {
  @Matches(LABEL_KEY, { message: 'key must be a valid label key' }) key: string;
  @IsIn(['In', 'NotIn', 'Exists', 'DoesNotExist']) operator: 'In' | 'NotIn' | 'Exists' | 'DoesNotExist';
  @ValidateIf((r: LabelSelectorRequirement) => r.operator === 'In' || r.operator === 'NotIn' || r.values !== undefined)
  @IsArray()
  @ArrayNotEmpty({ message: 'values must be non-empty for In and NotIn' })
  @IsString({ each: true })
  @ValidateBy({
    name: 'valuesOnlyForSetOperators',
    validator: {
      validate: (_: unknown, args) => {
        const op = (args?.object as LabelSelectorRequirement).operator;
        return op === 'In' || op === 'NotIn';
      },
      defaultMessage: () => 'values must be empty for Exists and DoesNotExist',
    },
  })
  values?: string[];
}

/** metav1.LabelSelector. An empty selector matches every object. */
export class LabelSelector {
  @IsOptional() @IsLabelMap() matchLabels?: Record<string, string>;
  @IsOptional()
  @IsArray()
  @ValidateNested({ each: true })
  @Type(() => LabelSelectorRequirement)
  matchExpressions?: LabelSelectorRequirement[];
}

/**
 * Evaluates a LabelSelector with the semantics of k8s.io/apimachinery labels.Selector. Label
 * keys such as `constructor` or `toString` are legal, so a label is only ever an own property.
 */
export function matchesLabelSelector(selector: LabelSelector, labels: Readonly<Record<string, string>> | undefined): boolean {
  const have = labels ?? {};
  for (const [key, value] of Object.entries(selector.matchLabels ?? {})) {
    if (!Object.hasOwn(have, key) || have[key] !== value) return false;
  }
  for (const requirement of selector.matchExpressions ?? []) if (!meetsRequirement(requirement, have)) return false;
  return true;
}

/** One matchExpressions requirement against the labels `have`. */
function meetsRequirement({ key, operator, values = [] }: LabelSelectorRequirement, have: Readonly<Record<string, string>>): boolean {
  const present = Object.hasOwn(have, key);
  switch (operator) {
    case 'In':
      return present && values.includes(have[key]);
    case 'NotIn':
      return !(present && values.includes(have[key]));
    case 'Exists':
      return present;
    case 'DoesNotExist':
      return !present;
  }
  return true;
}
