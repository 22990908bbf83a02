import { Inject, Injectable } from '@nestjs/common';
import { InjectMetric } from '@willsoto/nestjs-prometheus';
import fastJsonPatch from 'fast-json-patch';
import type { Counter } from 'prom-client';
import { AdmissionStrategyProvider } from '../admission/admission-strategy.decorator.js';
import type { AdmissionRequest, AdmissionStrategy, PatchOperation, StrategyResult } from '../admission/admission.types.js';
import type { RequestLog } from '../admission/request-log.js';
import type { OvercommitConfig } from '../overcommit.config.js';
import { NamespaceCache, type NamespaceScoper } from '../kube/namespace-cache.service.js';
import type { ResourceAmounts } from '../domain/resources.js';
import { formatResourceQuantity } from '../domain/quantity.js';
import { policySettings, type PolicySettings } from './container-policy.js';
import { containerBounds, type ContainerBounds } from './limit-range.js';
import { capMessage, capViolations, exclusiveCpuViolation, nodeCap, type CapViolation } from './node-cap.js';
import { planPodMutation, type ResourceChange } from './pod-mutation.js';
import { planResize } from './pod-resize.js';
import { POD_FACTS, type FactsCache, type PodFacts } from './pod-facts.js';
import { mutatesResources, type CapMode, type PodPolicyConfig } from './pod-policy.config.js';
import { CACHE_UNSYNCED, CAP_DENIALS, CAP_SKIPPED, CAP_WARNINGS, LIMITS_CHANGED, PODS_MUTATED, REQUESTS_CHANGED } from './pod-policy.metrics.js';
import { scheduledPodRequests, exclusiveCpus, isMirrorPod, type PodLike } from '../domain/pod-resources.js';
import { resolveNodePolicy } from '../domain/node-rules/node-oversell.rules.js';
import { isRecord } from '../common/is-record.js';
import { STRATEGY_ORDER } from '../admission/strategy-order.js';

/** The counters, bundled so the strategy can be built by hand in tests. */
@Injectable()
export class PodPolicyMetrics {
  // eslint-disable-next-line max-params -- Nest resolves each parameter by its token: the list counts the provider's dependencies.
  constructor(
    @InjectMetric(PODS_MUTATED) readonly podsMutated: Counter<string>,
    @InjectMetric(REQUESTS_CHANGED) readonly requestsChanged: Counter<string>,
    @InjectMetric(LIMITS_CHANGED) readonly limitsChanged: Counter<string>,
    @InjectMetric(CAP_DENIALS) readonly capDenials: Counter<string>,
    @InjectMetric(CAP_WARNINGS) readonly capWarnings: Counter<string>,
    @InjectMetric(CAP_SKIPPED) readonly capSkipped: Counter<string>,
    @InjectMetric(CACHE_UNSYNCED) readonly cacheUnsynced: Counter<string>,
  ) {}
}

/**
 * Pod policies: default requests and request-to-limit percentages on pod CREATE,
 * and the per-node cap when a pod's node becomes known (pods/binding, or CREATE with
 * spec.nodeName) and when a bound pod's requests grow in place (pods/resize, never rewritten:
 * pod-resize.ts). Runs at order 20: after node-oversell (0) and sidecar injection (10), so
 * injected containers get defaults and count toward the cap.
 */
@Injectable()
@AdmissionStrategyProvider({
  name: 'pod-policy',
  entry: 'pod-policy',
  order: STRATEGY_ORDER['pod-policy'],
  rules: [
    { resource: 'pods', subResource: '', operations: ['CREATE'] },
    { resource: 'pods', subResource: 'binding', operations: ['CREATE'] },
    { resource: 'pods', subResource: 'resize', operations: ['UPDATE'] },
  ],
})
export class PodPolicyStrategy implements AdmissionStrategy {
  /** Settings parsed once per config snapshot (snapshots are immutable and replaced whole). */
  private readonly settings = new WeakMap<PodPolicyConfig, PolicySettings>();

  constructor(
    @Inject(POD_FACTS) private readonly facts: PodFacts,
    @Inject(NamespaceCache) private readonly namespaces: NamespaceScoper,
    private readonly metrics: PodPolicyMetrics,
  ) {}

  admit(request: AdmissionRequest, config: OvercommitConfig, log: RequestLog): StrategyResult {
    const policy = config.pods;
    if (!isRecord(policy)) return {};
    const mutate = mutatesResources(policy);
    const cap: CapMode = policy.cap?.mode ?? 'off';
    if (!mutate && cap === 'off') return {};
    const object = request.object;
    if (!isRecord(object)) return {};
    const namespace = request.namespace || (object as PodLike).metadata?.namespace;
    if (!namespace || !this.inScope(request, namespace, policy, log)) return {};
    const review: PodReview = { request, namespace, cap, nodes: config.nodes, log };
    if (request.subResource === 'binding') return cap === 'off' ? {} : this.admitBinding(review, object);
    if (request.subResource === 'resize') return cap === 'off' ? {} : this.admitResize(review, object as PodLike);
    return this.admitPod(review, object as PodLike, policy, mutate);
  }

  /** NamespaceCache.scope with pods.namespaceSelector; unknown labels (in a cluster) leave the pod alone, counted. */
  private inScope(request: AdmissionRequest, namespace: string, policy: PodPolicyConfig, log: RequestLog): boolean {
    const scope = this.namespaces.scope(namespace, policy.namespaceSelector ?? {}, 'pods.namespaceSelector');
    if (scope.inScope) return true;
    if (scope.unknown) {
      this.unsynced(request, 'namespaces');
      log.debug(`${namespace}: pod policies skipped: ${scope.reason}`);
    }
    return false;
  }

  private admitPod(review: PodReview, pod: PodLike, policy: PodPolicyConfig, mutate: boolean): StrategyResult {
    const { request, namespace, log } = review;
    if (isMirrorPod(pod)) return {};
    const { patch, changes } = mutate ? this.mutation(review, pod, policy) : { patch: [], changes: [] };
    const verdict = this.capOnCreate(review, pod, patch);
    if (verdict.deny) return verdict;
    if (patch.length > 0 && !request.dryRun) this.countMutation(changes);
    if (patch.length > 0) log.debug(`${podRef(namespace, pod, request.name)}: ${changes.length} resource changes`);
    return { ...(patch.length > 0 ? { patch } : {}), ...(verdict.warnings ? { warnings: verdict.warnings } : {}) };
  }

  /** The pod's defaults and percentages within its namespace's LimitRanges; none while those are not synced. */
  private mutation(review: PodReview, pod: PodLike, policy: PodPolicyConfig): { patch: PatchOperation[]; changes: ResourceChange[] } {
    const bounds = this.bounds(review.namespace, review.request);
    return bounds === undefined ? { patch: [], changes: [] } : planPodMutation(pod, this.settingsOf(policy), bounds);
  }

  /**
   * The cap at CREATE, on the pod as our patch leaves it, when its node is known already
   * (spec.nodeName). Its status is left out: the API server drops the one a CREATE carries, so
   * none sent can lower what is counted.
   */
  private capOnCreate(review: PodReview, pod: PodLike, patch: PatchOperation[]): StrategyResult {
    const nodeName = pod.spec?.nodeName;
    if (review.cap === 'off' || typeof nodeName !== 'string' || nodeName === '' || !this.capCachesReady(review.request)) return {};
    const mutated: PodLike = patch.length > 0 ? fastJsonPatch.applyPatch(pod, patch, false, false).newDocument : pod;
    const created: PodLike = { ...mutated, status: undefined };
    const requests = { ...scheduledPodRequests(created), exclusiveCpu: exclusiveCpus(created) };
    return this.checkCap(review, { pod: podRef(review.namespace, pod, review.request.name), nodeName, requests, uid: pod.metadata?.uid });
  }

  private admitBinding(review: PodReview, binding: Record<string, any>): StrategyResult {
    const { request, namespace } = review;
    const nodeName = binding.target?.name;
    const podName = request.name || binding.metadata?.name;
    if (typeof nodeName !== 'string' || !nodeName || typeof podName !== 'string' || !podName) return {};
    if (!this.capCachesReady(request)) return {};
    const pod = this.facts.pod(namespace, podName);
    if (pod === undefined) return this.skip(request, 'pod-unknown');
    if (isMirrorPod(pod)) return {};
    const requests = { ...pod.requests, exclusiveCpu: pod.exclusiveCpu ?? 0n };
    return this.checkCap(review, { pod: `${namespace}/${podName}`, nodeName, requests, uid: pod.metadata?.uid });
  }

  /** The cap on a resize of a bound pod (pod-resize.ts): only what it raises is checked. Never rewritten. */
  private admitResize(review: PodReview, sent: PodLike): StrategyResult {
    if (!isRecord(review.request.oldObject)) return {};
    const stored = review.request.oldObject as PodLike;
    const nodeName = stored.spec?.nodeName;
    // Not bound yet: the scheduler fits the new requests, and the binding is checked.
    if (isMirrorPod(stored) || typeof nodeName !== 'string' || nodeName === '' || !this.capCachesReady(review.request)) return {};
    const plan = planResize(stored, sent);
    if (plan === null) return {};
    const pod = podRef(review.namespace, stored, review.request.name);
    return this.checkCap(review, { pod, nodeName, requests: { ...plan.resized, exclusiveCpu: 0n }, uid: stored.metadata?.uid, held: plan.held });
  }

  private capCachesReady(request: AdmissionRequest): boolean {
    if (!this.facts.available) {
      this.skip(request, 'no-cluster');
      return false;
    }
    for (const cache of ['pods', 'nodes'] as const) {
      if (!this.facts.isSynced(cache)) {
        this.unsynced(request, cache);
        return false;
      }
    }
    return true;
  }

  /** Fail open: admit, count. */
  private skip(request: AdmissionRequest, reason: 'no-cluster' | 'pod-unknown' | 'node-unknown'): StrategyResult {
    if (!request.dryRun) this.metrics.capSkipped.inc({ reason });
    return {};
  }

  private unsynced(request: AdmissionRequest, cache: FactsCache | 'namespaces'): void {
    if (!request.dryRun) this.metrics.cacheUnsynced.inc({ cache });
  }

  /** Call only once capCachesReady() said yes. */
  private checkCap({ request, cap: mode, nodes, log }: PodReview, { pod, nodeName, requests, uid, held }: CapCandidate): StrategyResult {
    const node = this.facts.node(nodeName);
    if (node === undefined) return this.skip(request, 'node-unknown');
    const usage = this.facts.nodeUsage(nodeName, uid);
    const cap = nodeCap(node);
    const violations = capViolations(cap, usage, requests, held);
    const exclusive = resolveNodePolicy(node.metadata?.labels, nodes)?.exclusiveCpus ? exclusiveCpuViolation(cap, usage, requests.exclusiveCpu) : null;
    if (violations.length === 0 && exclusive === null) return {};
    const counter = mode === 'deny' ? this.metrics.capDenials : this.metrics.capWarnings;
    if (!request.dryRun) {
      for (const { resource } of violations) counter.inc({ resource });
      if (exclusive !== null) counter.inc({ resource: 'exclusive-cpu' });
    }
    const message = capMessage(nodeName, pod, violations, usage, exclusive);
    if (mode === 'deny') {
      log.info(message);
      return { deny: { message, code: 403 } };
    }
    log.debug(message);
    const warnings = violations.map((v) => shortWarning(nodeName, v));
    if (exclusive !== null)
      warnings.push(
        `node ${nodeName} over its raw cpu for exclusive cpus: ${formatResourceQuantity('cpu', exclusive.total)} requested > raw ${formatResourceQuantity('cpu', exclusive.raw)}`,
      );
    return { warnings };
  }

  /** The namespace's LimitRange bounds; undefined (counted) when the cache has not synced yet. */
  private bounds(namespace: string, request: AdmissionRequest): ContainerBounds | undefined {
    if (!this.facts.available) return {};
    if (!this.facts.isSynced('limitranges')) {
      // Without the LimitRanges, what we write could make LimitRanger refuse the pod: leave it alone.
      this.unsynced(request, 'limitranges');
      return undefined;
    }
    return containerBounds(this.facts.limitRanges(namespace));
  }

  private settingsOf(policy: PodPolicyConfig): PolicySettings {
    let settings = this.settings.get(policy);
    if (!settings) this.settings.set(policy, (settings = policySettings(policy)));
    return settings;
  }

  private countMutation(changes: readonly ResourceChange[]): void {
    this.metrics.podsMutated.inc();
    for (const { field, resource, change } of changes) {
      (field === 'requests' ? this.metrics.requestsChanged : this.metrics.limitsChanged).inc({ resource, change });
    }
  }
}

/** What each step of one pod review reads: the request, the pod's namespace, the cap mode and node pools of the config, the review's log. */
interface PodReview {
  request: AdmissionRequest;
  namespace: string;
  cap: CapMode;
  nodes: OvercommitConfig['nodes'] | undefined;
  log: RequestLog;
}

/**
 * The pod the cap is checked for: its name in the messages, its node, what it will request
 * there; its uid (a pod the node's usage may count already is left out of it) and, on a resize,
 * what it holds now (only what it raises is checked).
 */
interface CapCandidate {
  pod: string;
  nodeName: string;
  requests: ResourceAmounts & { exclusiveCpu: bigint };
  uid: string | undefined;
  held?: ResourceAmounts;
}

function podRef(namespace: string, pod: PodLike, requestName: string | undefined): string {
  const name = pod.metadata?.name || requestName || (pod.metadata?.generateName ? `${pod.metadata.generateName}*` : '(unnamed)');
  return `${namespace}/${name}`;
}

/** Admission warnings should stay within 120 characters. */
function shortWarning(nodeName: string, v: CapViolation): string {
  const f = (amount: bigint) => formatResourceQuantity(v.resource, amount);
  return `node ${nodeName} over its overcommit cap for ${v.resource}: ${f(v.total)} requested > cap ${f(v.cap)}`;
}
