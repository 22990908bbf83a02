/**
 * Which strategies a review reaches, and the labels it is counted under, as pure functions:
 *
 *   1. Everything is decided by the (resource, subresource, operation) rules the strategies
 *      register, once at bootstrap (planRoutes); a review only looks its route up (readRoute).
 *   2. Label values and table keys come from those rules only, never from a request: a
 *      resource (with its subresource) or an operation that no strategy registers is counted
 *      as `other` and reaches no strategy. The series count and the table are fixed at
 *      bootstrap, whatever the bodies say.
 *   3. The `resource` label includes the subresource (`nodes/status`).
 *   4. A webhook entry's path (`/mutate/nodes`, …) runs only the strategies of that entry, in the
 *      same order and under the same labels as `/mutate`, which runs them all (planEntryRoutes).
 *   5. The `path` label of an HTTP answer is `/mutate` or an entry's path; any other target
 *      under `/mutate` (answered 404) is counted as `other` (readPathLabel).
 */
import type { AdmissionRequest, StrategyMetadata, WebhookEntry } from './admission.types.js';

/** The label value of every resource and operation that no strategy registers, and of every unserved path. */
export const OTHER = 'other';

/** Runs every strategy, in order. */
export const ADMISSION_PATH = '/mutate';

/** The path of one webhook entry (invariant 4). */
export const entryPath = (entry: WebhookEntry): string => `${ADMISSION_PATH}/${entry}`;

/** The entries the strategies declare, each once, in the order of the strategies. */
export function webhookEntries(strategies: readonly { meta: StrategyMetadata }[]): WebhookEntry[] {
  return [...new Set(strategies.map(({ meta }) => meta.entry))];
}

/** Every path the webhook answers reviews on: `/mutate` and one per entry. */
export function admissionPaths(entries: readonly WebhookEntry[]): string[] {
  return [ADMISSION_PATH, ...entries.map(entryPath)];
}

/** Where AdmissionHttpMetrics reads the paths served (the pipeline's, once the strategies are known). */
export const SERVED_PATHS = Symbol('SERVED_PATHS');
export interface ServedPaths {
  readonly paths: readonly string[];
}

/** Whether a request target is for the webhook: `/mutate`, a path under it, or either with a query string. */
export function isAdmissionTarget(url: string | undefined): boolean {
  if (url === undefined || !url.startsWith(ADMISSION_PATH)) return false;
  const next = url.charCodeAt(ADMISSION_PATH.length);
  return Number.isNaN(next) || next === 0x2f /* / */ || next === 0x3f; /* ? */
}

/** The `path` label of a webhook target (invariant 5): the path without its query if among `served`, else OTHER. */
export function readPathLabel(url: string, served: readonly string[]): string {
  const query = url.indexOf('?');
  const path = query === -1 ? url : url.slice(0, query);
  return served.includes(path) ? path : OTHER;
}

export interface Route<S> {
  /** `resource` label: `nodes`, `nodes/status`, … or `other`. */
  readonly resource: string;
  /** `operation` label: an operation some strategy registers, or `other`. */
  readonly operation: string;
  /** The strategies that handle it, in the order given to planRoutes. */
  readonly strategies: readonly S[];
}

type RoutesByOperation<S> = ReadonlyMap<string, Route<S>>;

export interface RouteTable<S> {
  /** resource → subresource ('' for none) → operation (or OTHER) → route. */
  readonly byResource: ReadonlyMap<string, ReadonlyMap<string, RoutesByOperation<S>>>;
  /** For a resource no strategy registers. */
  readonly other: RoutesByOperation<S>;
}

/** Every route the strategies' rules allow (invariants 1 and 2). `strategies` in the order they run. */
export function planRoutes<S extends { meta: StrategyMetadata }>(strategies: readonly S[]): RouteTable<S> {
  const rules = strategies.flatMap((strategy) => strategy.meta.rules.map((rule) => ({ strategy, rule, subResource: rule.subResource ?? '' })));
  const operations = [...new Set(rules.flatMap(({ rule }) => rule.operations)), OTHER];
  const routesFor = (resource: string, select: (operation: string) => S[]): RoutesByOperation<S> =>
    new Map(operations.map((operation) => [operation, { resource, operation, strategies: select(operation) }]));

  const byResource = new Map<string, Map<string, RoutesByOperation<S>>>();
  for (const { rule, subResource } of rules) {
    let bySubResource = byResource.get(rule.resource);
    if (!bySubResource) byResource.set(rule.resource, (bySubResource = new Map()));
    if (bySubResource.has(subResource)) continue;
    const label = subResource ? `${rule.resource}/${subResource}` : rule.resource;
    const handling = rules.filter((r) => r.rule.resource === rule.resource && r.subResource === subResource);
    bySubResource.set(
      subResource,
      routesFor(label, (operation) => [...new Set(handling.filter((r) => (r.rule.operations as string[]).includes(operation)).map((r) => r.strategy))]),
    );
  }
  return { byResource, other: routesFor(OTHER, () => []) };
}

/** The table of one webhook entry: `table`'s routes and labels, with only the strategies of `entry` (invariant 4). */
export function planEntryRoutes<S extends { meta: StrategyMetadata }>(table: RouteTable<S>, entry: WebhookEntry): RouteTable<S> {
  const keep = (byOperation: RoutesByOperation<S>): RoutesByOperation<S> =>
    new Map([...byOperation].map(([operation, route]) => [operation, { ...route, strategies: route.strategies.filter((s) => s.meta.entry === entry) }]));
  const byResource = new Map(
    [...table.byResource].map(([resource, bySubResource]) => [resource, new Map([...bySubResource].map(([sub, routes]) => [sub, keep(routes)]))]),
  );
  return { byResource, other: table.other };
}

/** The route of a decoded review: a lookup in the table, nothing allocated. */
export function readRoute<S>(table: RouteTable<S>, request: AdmissionRequest): Route<S> {
  const byOperation = table.byResource.get(request.resource.resource)?.get(request.subResource ?? '') ?? table.other;
  return byOperation.get(request.operation) ?? byOperation.get(OTHER)!;
}
