/**
 * plainToInstance + validateSync for input nobody vetted: config.yaml and AdmissionReview
 * envelopes. Invariants:
 *
 * 1. class-transformer only ever sees a copy holding the properties a class declares, as deep
 *    as the classes nest (`shapedCopy`). It reads an object's type from its `constructor` key,
 *    recurses without bound and silently drops keys named like Object.prototype members
 *    (`toString`, `hasOwnProperty`); none of that can be reached from input this way.
 * 2. An undeclared key is reported by its path with class-validator's own message, whatever its
 *    name, at the cost of one `Object.keys`: never one validation error object per key.
 * 3. A value under an undeclared type (a scalar field) keeps only its outer shape: `{}` or an
 *    array of scalars and empty shapes. Its validators (IsString, IsNumber, ...) decide on that
 *    shape alone, so their messages are unchanged and no depth reaches them.
 * 4. A field marked `@AsWritten()` (label maps, Kubernetes objects) is never walked by
 *    class-transformer: it is put back as parsed, every key kept, and left to its validators.
 * 5. At most MAX_PROBLEMS problems are listed, the rest counted in a last line.
 */
import { createRequire } from 'node:module';
import { Exclude, plainToInstance } from 'class-transformer';
import { getMetadataStorage, validateSync, type ValidationError } from 'class-validator';

export const MAX_PROBLEMS = 20;

type Plain = Record<string, unknown>;

// class-transformer keeps the targets of @Type in this store and exports no accessor for it.
const typeStore: { findTypeMetadata(target: Function, property: string): { typeFunction?: (options?: unknown) => Function } | undefined } =
  createRequire(import.meta.url)('class-transformer/cjs/storage.js').defaultMetadataStorage;

const asWrittenFields = new WeakMap<Function, Set<string>>();

/** A field kept exactly as parsed (see invariant 4); its validators check it. */
export function AsWritten(): PropertyDecorator {
  return (target, key) => {
    const fields = asWrittenFields.get(target.constructor) ?? new Set<string>();
    asWrittenFields.set(target.constructor, fields.add(String(key)));
    Exclude({ toClassOnly: true })(target, key);
  };
}

function isAsWritten(cls: Function, key: string): boolean {
  for (let c: Function | null = cls; c; c = Object.getPrototypeOf(c)) if (asWrittenFields.get(c)?.has(key)) return true;
  return false;
}

const declaredCache = new Map<Function, ReadonlySet<string>>();
function declaredProperties(cls: Function): ReadonlySet<string> {
  let declared = declaredCache.get(cls);
  if (!declared) {
    declared = new Set(getMetadataStorage().getTargetValidationMetadatas(cls, '', true, false).map((m) => m.propertyName));
    declaredCache.set(cls, declared);
  }
  return declared;
}

const isPlainObject = (value: unknown): value is Plain => typeof value === 'object' && value !== null && !Array.isArray(value);
const emptyShape = (value: unknown) => (Array.isArray(value) ? [] : isPlainObject(value) ? {} : value);
const scalarShape = (value: unknown) => (Array.isArray(value) ? value.map(emptyShape) : emptyShape(value));
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

/** Invariants 1–4: what class-transformer may see of `plain` as a `cls`. */
function shapedCopy(plain: Plain, cls: Function, path: string, problems: ProblemList): Plain {
  const declared = declaredProperties(cls);
  const copy: Plain = {};
  for (const key of Object.keys(plain)) {
    const at = child(path, key);
    if (!declared.has(key)) {
      problems.add(`${at}: property ${key} should not exist`);
      continue;
    }
    const value = plain[key];
    if (isAsWritten(cls, key)) {
      copy[key] = value;
      continue;
    }
    const nested = typeStore.findTypeMetadata(cls, key)?.typeFunction?.();
    if (nested && isPlainObject(value)) copy[key] = shapedCopy(value, nested, at, problems);
    else if (nested && Array.isArray(value)) {
      copy[key] = value.map((item, i) => (isPlainObject(item) ? shapedCopy(item, nested, child(at, i), problems) : emptyShape(item)));
    } else copy[key] = scalarShape(value);
  }
  return copy;
}

/** Puts the `@AsWritten()` fields of `copy` back on the instance class-transformer built from it. */
function restoreAsWritten(copy: unknown, instance: unknown): void {
  if (Array.isArray(copy) && Array.isArray(instance)) copy.forEach((item, i) => restoreAsWritten(item, instance[i]));
  if (!isPlainObject(copy) || typeof instance !== 'object' || instance === null) return;
  for (const key of Object.keys(copy)) {
    if (isAsWritten(instance.constructor, key)) (instance as Plain)[key] = copy[key];
    else restoreAsWritten(copy[key], (instance as Plain)[key]);
  }
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

/** plainToInstance + validate, with every bad field named by its path (at most MAX_PROBLEMS of them). */
export function validateAs<T extends object>(cls: new () => T, plain: unknown): Validated<T> {
  if (!isPlainObject(plain)) return { ok: false, errors: ['(root): must be an object'] };
  const problems = new ProblemList();
  const copy = shapedCopy(plain, cls, '', problems);
  const value = plainToInstance(cls, copy);
  restoreAsWritten(copy, value);
  const errors = validateSync(value, { whitelist: true, forbidNonWhitelisted: true, forbidUnknownValues: true });
  for (const line of flattenValidationErrors(errors)) problems.add(line);
  return problems.lines.length === 0 ? { ok: true, value } : { ok: false, errors: problems.all() };
}
