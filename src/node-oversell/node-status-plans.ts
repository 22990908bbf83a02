/**
 * Each node's last plan, reused while its next status update reads the same.
 *
 * A kubelet's heartbeat repeats its node's quantities, our annotations on both sides and its
 * policy, so its plan (node-oversell.rules.ts planNodeStatus) is the one the last heartbeat got.
 * Planning is cheap in a loop (about 2 µs) but not on the admission path under load: parsing and
 * formatting bigint quantities and the two annotations' JSON cost about 16 µs of a bare node's
 * review there (docs/adr/0009-node-plan-reuse.md).
 *
 * Invariants:
 *  1. A plan is reused only when every input planNodeStatus reads (planInputs) is the same, by
 *     Object.is: it is then the plan planNodeStatus would return.
 *  2. A reused plan is shared by the reviews it is returned to: it is frozen, with its parts.
 *  3. An input planNodeStatus throws on is never remembered: the next call throws again.
 *  4. At most `limit` nodes are remembered; past that the memory is emptied (as Memo does) and
 *     refills with the nodes that call. `forget` drops a node (the strategy's silent nodes).
 *
 * Written here: a memo keyed by node name whose entry is valid while a list of inputs is
 * unchanged, compared value by value with no key built, is no library's cache (lru-cache and
 * Memo look up by a key made from the inputs).
 */
import { type NodeStatusPlan, planInputs, planNodeStatus } from '../domain/node-rules/node-oversell.rules.js';

interface RememberedPlan {
  inputs: readonly unknown[];
  plan: NodeStatusPlan | null;
}

export class NodeStatusPlans {
  private readonly plans = new Map<string, RememberedPlan>();

  constructor(private readonly limit: number) {}

  get size(): number {
    return this.plans.size;
  }

  /** planNodeStatus(...args) for the node named `name` (invariants 1–4). */
  plan(name: string, ...args: Parameters<typeof planNodeStatus>): NodeStatusPlan | null {
    const inputs = planInputs(...args);
    const remembered = this.plans.get(name);
    if (remembered !== undefined && sameInputs(remembered.inputs, inputs)) return remembered.plan;
    const plan = planNodeStatus(...args);
    if (remembered === undefined && this.plans.size >= this.limit) this.plans.clear();
    const shared = plan === null ? null : freezePlan(plan);
    this.plans.set(name, { inputs, plan: shared });
    return shared;
  }

  forget(name: string): void {
    this.plans.delete(name);
  }
}

function sameInputs(a: readonly unknown[], b: readonly unknown[]): boolean {
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (!Object.is(a[i], b[i])) return false;
  return true;
}

function freezePlan(plan: NodeStatusPlan): NodeStatusPlan {
  for (const part of Object.values(plan)) Object.freeze(part);
  return Object.freeze(plan);
}
