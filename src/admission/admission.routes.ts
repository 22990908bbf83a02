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
 */
import type { AdmissionRequest, StrategyMetadata } from './admission.types.js';

/** The label value of every resource and operation that no strategy registers. */
export const OTHER = 'other';

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

/** The route of a decoded review: a lookup in the table, nothing allocated. */
export function readRoute<S>(table: RouteTable<S>, request: AdmissionRequest): Route<S> {
  const byOperation = table.byResource.get(request.resource.resource)?.get(request.subResource ?? '') ?? table.other;
  return byOperation.get(request.operation) ?? byOperation.get(OTHER)!;
}
