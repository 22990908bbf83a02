/**
 * Validation of input nobody vetted (config.yaml, AdmissionReview envelopes) into class
 * instances. Invariants:
 *
 * 1. Instances are built by `instantiate`, which follows only the nested classes the schema
 *    declares (`@Type`). class-transformer's plainToInstance is not used: it reads an object's
 *    type from its `constructor` key (a TypeError for `{"constructor": "x"}`), recurses into
 *    every value without bound, visits every element of every array, and silently drops keys
 *    named like Object.prototype members (`toString`, `hasOwnProperty`), which are legal label keys.
 * 2. Every other value (scalars, label maps, Kubernetes objects in sidecar templates) is kept
 *    exactly as parsed, every key kept; its validators look at it, and none of them recurses.
 * 3. An undeclared key is reported by its path with class-validator's own message, at the cost
 *    of one `Object.keys`, never one validation error object per key. So is an array where the
 *    schema has one object, or an object where it has a list, without looking inside.
 * 4. At most MAX_PROBLEMS problems are listed, the rest counted in a last line.
 */
import { createRequire } from 'node:module';
import { getMetadataStorage, validateSync, type ValidationError } from 'class-validator';
import { isRecord } from './is-record.js';

export const MAX_PROBLEMS = 20;

type Plain = Record<string, unknown>;
type Class = new () => object;

// class-transformer keeps the targets of @Type in this store and exports no accessor for it.
const typeStore: { findTypeMetadata(target: Function, property: string): { typeFunction?: (options?: unknown) => Class } | undefined } = createRequire(
  import.meta.url,
)('class-transformer/cjs/storage.js').defaultMetadataStorage;

const declaredCache = new Map<Function, ReadonlySet<string>>();
function declaredProperties(cls: Function): ReadonlySet<string> {
  let declared = declaredCache.get(cls);
  if (!declared) {
    declared = new Set(
      getMetadataStorage()
        .getTargetValidationMetadatas(cls, '', true, false)
        .map((m) => m.propertyName),
    );
    declaredCache.set(cls, declared);
  }
  return declared;
}

const child = (path: string, key: string | number) => (typeof key === 'number' ? `${path}[${key}]` : path === '' ? key : `${path}.${key}`);

class ProblemList {
  readonly lines: string[] = [];
  private more = 0;
  add(line: string): void {
    if (this.lines.length < MAX_PROBLEMS) this.lines.push(line);
    else this.more++;
  }
  all(): string[] {
    return this.more === 0 ? this.lines : [...this.lines, `... and ${this.more} more problems`];
  }
}

/** `plain` as a `cls`: invariants 1–3. */
function instantiate(plain: Plain, cls: Class, path: string, problems: ProblemList): object {
  const instance = new cls() as Plain;
  const declared = declaredProperties(cls);
  for (const key of Object.keys(plain)) {
    const at = child(path, key);
    if (!declared.has(key)) {
      problems.add(`${at}: property ${key} should not exist`);
      continue;
    }
    const value = plain[key];
    const nested = typeStore.findTypeMetadata(cls, key)?.typeFunction?.();
    const list = Reflect.getMetadata('design:type', cls.prototype, key) === Array;
    if (!nested || typeof value !== 'object' || value === null) instance[key] = value;
    else if (list !== Array.isArray(value)) problems.add(`${at}: ${key} must be ${list ? 'an array' : 'an object'}`);
    else if (Array.isArray(value)) instance[key] = value.map((item, i) => (isRecord(item) ? instantiate(item, nested, child(at, i), problems) : item));
    else instance[key] = instantiate(value as Plain, nested, at, problems);
  }
  return instance;
}

/** class-validator nests errors under `children`; flatten them to `path: message` lines. */
export function flattenValidationErrors(errors: ValidationError[], parent = ''): string[] {
  return errors.flatMap((error) => {
    const path = parent === '' ? error.property : /^\d+$/.test(error.property) ? `${parent}[${error.property}]` : `${parent}.${error.property}`;
    const own = Object.values(error.constraints ?? {}).map((message) => `${path}: ${message}`);
    return [...own, ...flattenValidationErrors(error.children ?? [], path)];
  });
}

export type Validated<T> = { ok: true; value: T } | { ok: false; errors: string[] };

/** Builds and validates a `cls`, naming every bad field by its path (at most MAX_PROBLEMS of them). */
export function validateAs<T extends object>(cls: new () => T, plain: unknown): Validated<T> {
  if (!isRecord(plain)) return { ok: false, errors: ['(root): must be an object'] };
  const problems = new ProblemList();
  const value = instantiate(plain, cls, '', problems) as T;
  const errors = validateSync(value, { whitelist: true, forbidNonWhitelisted: true, forbidUnknownValues: true });
  for (const line of flattenValidationErrors(errors)) problems.add(line);
  return problems.lines.length === 0 ? { ok: true, value } : { ok: false, errors: problems.all() };
}
