/**
 * An integer setting from the environment: `fallback` when the variable is unset or blank, else
 * an integer within [min, max]. Anything else throws naming the variable, the bound it breaks
 * (`expected`) and the value, so the process does not start on a setting it would misread.
 */
export function readEnvInteger(
  env: NodeJS.ProcessEnv,
  name: string,
  {
    fallback,
    min = 0,
    max = Number.MAX_SAFE_INTEGER,
    expected = 'a non-negative integer',
  }: { fallback: number; min?: number; max?: number; expected?: string },
): number {
  const text = env[name]?.trim();
  const value = text ? Number(text) : fallback;
  if (!Number.isSafeInteger(value) || value < min || value > max) throw new Error(`${name} must be ${expected}, got ${JSON.stringify(env[name])}`);
  return value;
}
