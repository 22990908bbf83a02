import { Inject, Injectable } from '@nestjs/common';
import { InjectMetric } from '@willsoto/nestjs-prometheus';
import type { Counter } from 'prom-client';
import { AdmissionStrategyProvider } from '../admission/admission-strategy.decorator.js';
import type { AdmissionRequest, AdmissionStrategy, StrategyResult } from '../admission/admission.types.js';
import type { RequestLog } from '../admission/request-log.js';
import type { OvercommitConfig } from '../overcommit.config.js';
import { NamespaceCache, type NamespaceScope, type NamespaceScoper } from '../kube/namespace-cache.service.js';
import { isRecord } from '../common/is-record.js';
import { SIDECAR_CACHE_UNSYNCED, SIDECAR_INJECTIONS, UNKNOWN_TEMPLATE_LABEL } from './sidecar.metrics.js';
import { MIRROR_POD_ANNOTATION, type PodLike } from '../domain/pod-resources.js';
import { STRATEGY_ORDER } from '../admission/strategy-order.js';
import { INJECT_ANNOTATION, parseTemplateList, planInjection, type TemplateDecision } from './sidecar.merge.js';
import { SidecarConfig } from './sidecar.config.js';

const NO_SIDECARS = new SidecarConfig();

/**
 * Injects the sidecar templates a pod asks for (`kube-overcommit.io/inject: "a,b"`) at pod
 * CREATE, in namespaces that opted in. The decision is `planInjection`'s; this class only
 * scopes the request (NamespaceCache.scope, the rule shared with the pod policies) and counts
 * outcomes.
 */
@Injectable()
@AdmissionStrategyProvider({
  name: 'sidecar',
  entry: 'sidecars',
  rules: [{ resource: 'pods', subResource: '', operations: ['CREATE'] }],
  order: STRATEGY_ORDER.sidecar,
})
export class SidecarStrategy implements AdmissionStrategy {
  constructor(
    @Inject(NamespaceCache) private readonly namespaces: NamespaceScoper,
    @InjectMetric(SIDECAR_INJECTIONS) private readonly injections: Counter<string>,
    @InjectMetric(SIDECAR_CACHE_UNSYNCED) private readonly cacheUnsynced: Counter<string>,
  ) {}

  admit(request: AdmissionRequest, config: OvercommitConfig, log: RequestLog): StrategyResult {
    const pod = request.object as PodLike | undefined;
    if (!isRecord(pod) || !isRecord(pod.metadata)) return {};
    const requested = requestedTemplates(pod.metadata);
    if (requested.length === 0) return {};

    const sidecars = config.sidecars ?? NO_SIDECARS;
    const namespace = request.namespace || (pod.metadata.namespace as string | undefined) || '';
    const scope = this.namespaces.scope(namespace, sidecars.namespaceSelector, 'sidecars.namespaceSelector');
    const ref = `${namespace}/${pod.metadata.name || `${pod.metadata.generateName ?? ''}*`}`;
    if (!scope.inScope) return this.ignored(request, ref, scope, log);

    const plan = planInjection(pod, requested, sidecars.templates ?? []);
    this.record(request, ref, plan.decisions, log);
    return {
      ...(plan.patch.length > 0 ? { patch: plan.patch } : {}),
      ...(plan.warnings.length > 0 ? { warnings: plan.warnings } : {}),
    };
  }

  /**
   * A pod out of scope: unknown labels (in a cluster) are counted, and logged above debug because
   * the pod asked for sidecars; a call on /mutate may come from the pod-policy entry, not ours, so
   * the pod gets no sidecars either way.
   */
  private ignored(request: AdmissionRequest, ref: string, scope: NamespaceScope & { inScope: false }, log: RequestLog): StrategyResult {
    if (scope.unknown && !request.dryRun) this.cacheUnsynced.inc({ cache: 'namespaces' });
    const message = `${ref}: ${INJECT_ANNOTATION} ignored: ${scope.reason}`;
    if (scope.unknown) log.warn(message);
    else log.debug(message);
    return { warnings: [`${INJECT_ANNOTATION} ignored: ${scope.reason}`] };
  }

  /** Each template's decision, counted (not on a dry run) and logged. */
  private record(request: AdmissionRequest, ref: string, decisions: readonly TemplateDecision[], log: RequestLog): void {
    for (const { template, outcome, reason } of decisions) {
      if (!request.dryRun) this.injections.inc({ template: outcome === 'unknown_template' ? UNKNOWN_TEMPLATE_LABEL : template, outcome });
      log.debug(`${ref}: sidecar template "${template}": ${outcome}${reason ? ` (${reason})` : ''}`);
    }
  }
}

/** The templates the pod asks for; none for a static pod's mirror (the kubelet owns it, the API server only mirrors it). */
function requestedTemplates(metadata: Record<string, unknown>): string[] {
  const annotations = (isRecord(metadata.annotations) ? metadata.annotations : {}) as Record<string, string>;
  const requested = parseTemplateList(annotations[INJECT_ANNOTATION]);
  if (requested.length === 0 || annotations[MIRROR_POD_ANNOTATION] !== undefined) return [];
  return requested;
}
