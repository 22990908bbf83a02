import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { kubeadmNode } from '../../test/fixtures/nodes.js';
import { planNodeStatus, resolveNodePolicy } from '../domain/node-rules/node-oversell.rules.js';
import { parseConfig } from '../overcommit.config.js';

/** `config.yaml` of k8s/base/configmap.yaml, as `kubectl apply -k k8s/` ships it. */
const shipped: string = parse(readFileSync(new URL('../../k8s/base/configmap.yaml', import.meta.url), 'utf8')).data['config.yaml'];

/** The README's one edit: `pools: []` replaced by the commented pool below it, uncommented. */
function withExamplePool(text: string): string {
  const lines = text.split('\n');
  const at = lines.findIndex((line) => line.trim() === 'pools: []');
  const example = lines.slice(at + 1).filter((line) => line.trim().startsWith('#'));
  return [...lines.slice(0, at), ...example.map((line) => line.replace(/^(\s*)# /, '$1'))].join('\n');
}

const CONTROL_PLANE = { 'node-role.kubernetes.io/control-plane': '' };

function inflatedCpu(config: string, labels: Record<string, string>): string | undefined {
  const result = parseConfig(config);
  if (!result.ok) throw new Error(result.errors.join('; '));
  const node = kubeadmNode({ labels });
  const plan = planNodeStatus(node, resolveNodePolicy(node.metadata.labels, result.value.nodes));
  return plan?.allocatable.cpu?.toString();
}

describe('the shipped ConfigMap', () => {
  it('is a valid no-op: every ratio 1, no node changed, control plane or worker', () => {
    const result = parseConfig(shipped);
    expect(result.ok).toBe(true);
    if (!result.ok) return;
    expect(result.value.nodes.pools).toEqual([]);
    expect(Object.values(result.value.nodes.defaultRatios).filter((ratio) => ratio !== undefined && ratio !== 1)).toEqual([]);
    expect(inflatedCpu(shipped, {})).toBe('4000');
    expect(inflatedCpu(shipped, CONTROL_PLANE)).toBe('4000');
  });

  it('its commented example pool, uncommented, overcommits workers and leaves control-plane nodes alone', () => {
    const edited = withExamplePool(shipped);
    expect(edited).not.toContain('pools: []');
    expect(inflatedCpu(edited, {})).toBe('6000');
    expect(inflatedCpu(edited, CONTROL_PLANE)).toBe('4000');
  });
});
