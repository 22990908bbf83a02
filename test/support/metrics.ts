/** Prometheus text exposition, parsed enough for assertions on counters and gauges. */

export interface Sample {
  name: string;
  labels: Record<string, string>;
  value: number;
}

const LINE = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})?\s+(\S+)(?:\s+\d+)?$/;
const LABEL = /([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"\s*,?\s*/gy;

function unescape(value: string): string {
  return value.replace(/\\(.)/g, (_m, c: string) => (c === 'n' ? '\n' : c));
}

export function parsePrometheus(text: string): Sample[] {
  const samples: Sample[] = [];
  for (const line of text.split('\n')) {
    if (line === '' || line.startsWith('#')) continue;
    const m = LINE.exec(line.trim());
    if (!m) continue;
    const labels: Record<string, string> = {};
    if (m[2]) {
      LABEL.lastIndex = 0;
      let l: RegExpExecArray | null;
      while ((l = LABEL.exec(m[2])) !== null) labels[l[1]!] = unescape(l[2]!);
    }
    const raw = m[3]!;
    const value = raw === '+Inf' ? Infinity : raw === '-Inf' ? -Infinity : Number(raw);
    samples.push({ name: m[1]!, labels, value });
  }
  return samples;
}

/** A label matcher: a value, or a predicate on the value (absent label = undefined). */
export type LabelMatch = Record<string, string | ((value: string | undefined) => boolean)>;

function matches(sample: Sample, name: string, labels: LabelMatch): boolean {
  if (sample.name !== name) return false;
  for (const [key, want] of Object.entries(labels)) {
    const have = sample.labels[key];
    if (typeof want === 'function' ? !want(have) : have !== want) return false;
  }
  return true;
}

/** Parsed metrics with lookups. */
export class Metrics {
  constructor(readonly samples: Sample[]) {}

  static parse(text: string): Metrics {
    return new Metrics(parsePrometheus(text));
  }

  /** Every sample of `name` whose labels match. */
  find(name: string, labels: LabelMatch = {}): Sample[] {
    return this.samples.filter((s) => matches(s, name, labels));
  }

  /** Sum over the matching samples; 0 when none (a counter not yet incremented is often absent). */
  sum(name: string, labels: LabelMatch = {}): number {
    return this.find(name, labels).reduce((total, s) => total + s.value, 0);
  }

  /** The one matching sample's value; undefined when none; throws when several match. */
  value(name: string, labels: LabelMatch = {}): number | undefined {
    const found = this.find(name, labels);
    if (found.length > 1) throw new Error(`${found.length} samples of ${name} match ${JSON.stringify(labels)}`);
    return found[0]?.value;
  }
}

/** Label predicate: any value other than `value` (e.g. `{ code: not('200') }`). */
export const not =
  (value: string) =>
  (have: string | undefined): boolean =>
    have !== undefined && have !== value;
