/**
 * The shipped webhook entries (k8s/base/webhook.yaml) send each strategy exactly the reviews it
 * registers: a rule missing from an entry is a review the API server never sends (the pod cap
 * would never see a resize), one the strategies do not register reaches none of them.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { AdmissionStrategyProvider } from '../../src/admission/admission-strategy.decorator.js';
import type { StrategyMetadata } from '../../src/admission/admission.types.js';
import { NodeOversellStrategy } from '../../src/node-oversell/node-oversell.strategy.js';
import { PodPolicyStrategy } from '../../src/pod-policy/pod-policy.strategy.js';
import { SidecarStrategy } from '../../src/sidecar/sidecar.strategy.js';
import { StatusCoalescingStrategy } from '../../src/status-coalescing/status-coalescing.strategy.js';

const STRATEGIES = [NodeOversellStrategy, StatusCoalescingStrategy, SidecarStrategy, PodPolicyStrategy];

/** `resource[/subresource] OPERATION` of every rule, sorted, without repeats. */
const keys = (rules: Array<{ resources: string[]; operations: string[] }>) =>
  [...new Set(rules.flatMap((rule) => rule.resources.flatMap((resource) => rule.operations.map((operation) => `${resource} ${operation}`))))].sort();

describe('k8s/base/webhook.yaml against the strategies', () => {
  const manifest = parse(readFileSync(join(import.meta.dirname, '../../k8s/base/webhook.yaml'), 'utf8'));
  const metadata: StrategyMetadata[] = STRATEGIES.map((strategy) => Reflect.getMetadata(AdmissionStrategyProvider.KEY, strategy));

  it('each entry sends the rules its strategies register, and only those', () => {
    const shipped = Object.fromEntries(manifest.webhooks.map((entry: any) => [entry.name.split('.')[0], keys(entry.rules)]));
    const entries = [...new Set(metadata.map(({ entry }) => entry))];
    const registered = Object.fromEntries(
      entries.map((entry) => [
        entry,
        keys(
          metadata
            .filter((meta) => meta.entry === entry)
            .flatMap(({ rules }) =>
              rules.map((rule) => ({ resources: [[rule.resource, rule.subResource].filter(Boolean).join('/')], operations: rule.operations })),
            ),
        ),
      ]),
    );
    expect(shipped).toEqual(registered);
    expect(shipped['pod-policy']).toEqual(['pods CREATE', 'pods/binding CREATE', 'pods/resize UPDATE']);
  });
});
