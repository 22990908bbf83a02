import { parse, YAMLParseError } from 'yaml';
import { validateAs, type Validated } from '../common/validation.js';
import { OvercommitConfig } from './config.schema.js';

function deepFreeze<T>(value: T): T {
  if (typeof value === 'object' && value !== null && !Object.isFrozen(value)) {
    Object.freeze(value);
    for (const child of Object.values(value)) deepFreeze(child);
  }
  return value;
}

/** Built-in defaults: every ratio 1, no policy — a no-op. */
export const DEFAULT_CONFIG: OvercommitConfig = deepFreeze(new OvercommitConfig());

/** Parses and validates config.yaml. Errors name every bad field by its path. */
export function parseConfig(text: string): Validated<OvercommitConfig> {
  let plain: unknown;
  try {
    plain = parse(text, { prettyErrors: true, uniqueKeys: true }) ?? {};
  } catch (error) {
    const message = error instanceof YAMLParseError ? error.message.split('\n')[0] : String(error);
    return { ok: false, errors: [`(yaml): ${message}`] };
  }
  try {
    const result = validateAs(OvercommitConfig, plain);
    return result.ok ? { ok: true, value: deepFreeze(result.value) } : result;
  } catch (error) {
    // Nothing a config holds may end the process: what the checks above did not foresee
    // (a document nested deeper than the stack) rejects it like any other error.
    return { ok: false, errors: [`(config): ${error instanceof Error ? error.message : String(error)}`] };
  }
}
