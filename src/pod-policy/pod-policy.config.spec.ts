import { describe, expect, it } from 'vitest';
import { DEFAULT_CONFIG, parseConfig } from '../overcommit.config.js';
import { mutatesResources } from './pod-policy.config.js';

describe('parseConfig: pods', () => {
  it('defaults to off: opt-in label selector, no defaults, no percentages, cap off', () => {
    for (const config of [DEFAULT_CONFIG, (parseConfig('pods: {}') as { value: typeof DEFAULT_CONFIG }).value]) {
      expect(config.pods.namespaceSelector).toEqual({ matchLabels: { 'kube-overcommit.io/pod-policy': 'enabled' } });
      expect(config.pods.defaultRequests).toBeUndefined();
      expect(config.pods.limitToRequest).toBeUndefined();
      expect(config.pods.cap.mode).toBe('off');
      expect(mutatesResources(config.pods)).toBe(false);
    }
  });

  it('accepts the documented example', () => {
    const result = parseConfig(`
pods:
  namespaceSelector:
    matchExpressions: [{ key: kube-overcommit.io/pod-policy, operator: In, values: [enabled, strict] }]
  defaultRequests: { cpu: 100m, memory: 128Mi }
  limitToRequest: { memoryRequestPercent: 50, cpuLimitPerGiBPercent: 200, cpuRequestPercent: 25 }
  cap: { mode: deny }
`);
    expect(result.ok).toBe(true);
    if (!result.ok) return;
    expect(result.value.pods.defaultRequests).toEqual({ cpu: '100m', memory: '128Mi' });
    expect(result.value.pods.limitToRequest).toEqual({ memoryRequestPercent: 50, cpuLimitPerGiBPercent: 200, cpuRequestPercent: 25 });
    expect(result.value.pods.cap.mode).toBe('deny');
    expect(mutatesResources(result.value.pods)).toBe(true);
    expect(Object.isFrozen(result.value.pods.limitToRequest)).toBe(true);
  });

  it('accepts YAML numbers as quantities and fractional percentages', () => {
    const result = parseConfig('pods: { defaultRequests: { cpu: 0.5, memory: 134217728 }, limitToRequest: { cpuRequestPercent: 12.5 } }');
    expect(result.ok).toBe(true);
  });

  it('names every bad field by its path', () => {
    const result = parseConfig(`
pods:
  namespaceSelector: { matchLabels: { "bad key!": x } }
  defaultRequests: { cpu: lots, memory: 0, gpu: 1 }
  limitToRequest: { memoryRequestPercent: 0, cpuLimitPerGiBPercent: 20000, cpuRequestPercent: "50" }
  cap: { mode: block }
  quota: {}
`);
    expect(result.ok).toBe(false);
    if (result.ok) return;
    const text = result.errors.join('\n');
    expect(text).toMatch(/pods\.namespaceSelector\.matchLabels: matchLabels must map label keys/);
    expect(text).toMatch(/pods\.defaultRequests\.cpu: cpu must be a positive cpu quantity/);
    expect(text).toMatch(/pods\.defaultRequests\.memory: memory must be a positive memory quantity/);
    expect(text).toMatch(/pods\.defaultRequests\.gpu: property gpu should not exist/);
    expect(text).toMatch(/pods\.limitToRequest\.memoryRequestPercent: memoryRequestPercent must not be less than 1/);
    expect(text).toMatch(/pods\.limitToRequest\.cpuLimitPerGiBPercent: cpuLimitPerGiBPercent must not be greater than 10000/);
    expect(text).toMatch(/pods\.limitToRequest\.cpuRequestPercent: cpuRequestPercent must be a number/);
    expect(text).toMatch(/pods\.cap\.mode: mode must be one of the following values: off, deny, warn/);
    expect(text).toMatch(/pods\.quota: property quota should not exist/);
  });

  it('rejects a percentage above 100 where one is a fraction of a limit', () => {
    const result = parseConfig('pods: { limitToRequest: { memoryRequestPercent: 101, cpuRequestPercent: 150 } }');
    expect(result.ok).toBe(false);
    if (result.ok) return;
    expect(result.errors).toEqual([
      'pods.limitToRequest.memoryRequestPercent: memoryRequestPercent must not be greater than 100',
      'pods.limitToRequest.cpuRequestPercent: cpuRequestPercent must not be greater than 100',
    ]);
  });
});
