import { parse, YAMLParseError } from 'yaml';
import { validateAs, type Validated } from '../common/validation.js';

/**
 * What the config module is given: the root schema's defaults and parser. The root and its
 * sections belong to the features (src/overcommit.config.ts); the config module knows none.
 */
export interface ConfigSchema<C> {
  readonly defaults: C;
  parse(text: string): Validated<C>;
}

export const CONFIG_SCHEMA = Symbol('CONFIG_SCHEMA');

/** A config as shared by concurrent requests: frozen all the way down. */
export function deepFreeze<T>(value: T): T {
  if (typeof value === 'object' && value !== null && !Object.isFrozen(value)) {
    Object.freeze(value);
    for (const child of Object.values(value)) deepFreeze(child);
  }
  return value;
}

/** Parses and validates config.yaml as a `schema`, deep-frozen. Errors name every bad field by its path. */
export function parseConfigAs<C extends object>(schema: new () => C, text: string): Validated<C> {
  let plain: unknown;
  try {
    plain = parse(text, { prettyErrors: true, uniqueKeys: true }) ?? {};
  } catch (error) {
    const message = error instanceof YAMLParseError ? error.message.split('\n')[0] : String(error);
    return { ok: false, errors: [`(yaml): ${message}`] };
  }
  try {
    const result = validateAs(schema, plain);
    return result.ok ? { ok: true, value: deepFreeze(result.value) } : result;
  } catch (error) {
    // Nothing a config holds may end the process: what the checks above did not foresee
    // (a document nested deeper than the stack) rejects it like any other error.
    return { ok: false, errors: [`(config): ${error instanceof Error ? error.message : String(error)}`] };
  }
}
