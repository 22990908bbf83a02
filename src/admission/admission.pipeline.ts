import { Injectable, Logger, type OnApplicationBootstrap } from '@nestjs/common';
import { DiscoveryService } from '@nestjs/core';
import { InjectMetric } from '@willsoto/nestjs-prometheus';
import { PinoLogger } from 'nestjs-pino';
import { pino } from 'pino';
import type { Counter, Histogram } from 'prom-client';
import { ConfigStore } from '../config/config.store.js';
import type { OvercommitConfig } from '../overcommit.config.js';
import { AdmissionStrategyProvider } from './admission-strategy.decorator.js';
import { decodeAdmissionReview } from './admission-review.decoder.js';
import {
  type AdmissionRequest,
  type AdmissionResponse,
  type AdmissionReviewResponse,
  type AdmissionStrategy,
  type PatchOperation,
  type StrategyMetadata,
  type StrategyResult,
  type WebhookEntry,
} from './admission.types.js';
import { ADMISSION_DURATION, ReviewDurations, ReviewTally, STRATEGY_ERRORS } from './admission.metrics.js';
import { admissionPaths, planEntryRoutes, planRoutes, readRoute, type RouteTable, type ServedPaths, webhookEntries } from './admission.routes.js';
import { applyInPlace, applyToCopy, patchError } from './patch-error.js';
import { RequestLog } from './request-log.js';

interface RegisteredStrategy {
  meta: StrategyMetadata;
  strategy: AdmissionStrategy;
}

/** Whether a strategy runs under `config` (AdmissionStrategy.isActive). */
function runsUnder(config: OvercommitConfig, { strategy }: RegisteredStrategy): boolean {
  return strategy.isActive?.(config) ?? true;
}

export type Outcome = 'patched' | 'unchanged' | 'denied' | 'error';

/** The route a body that is not an AdmissionReview v1 is counted under. */
const UNDECODED = { resource: 'unknown', operation: 'unknown' };

// Only unit specs build the pipeline without nestjs-pino (whose root logger the app always has).
const NO_ROOT_LOGGER = pino({ level: 'silent' });

/**
 * decode → select strategies (all of them for `/mutate`, one webhook entry's for its path) → run
 * each against one config snapshot, with the review's RequestLog → merge → respond. Strategies
 * are pure; this is the one place that builds patches and responses.
 */
@Injectable()
export class AdmissionPipeline implements OnApplicationBootstrap, ServedPaths {
  private readonly logger = new Logger('Admission');
  private strategies: RegisteredStrategy[] = [];
  // Selection and labels depend only on (entry, resource, subresource, operation): fixed at bootstrap.
  private routes = planRoutes<RegisteredStrategy>([]);
  private entryRoutes = new Map<WebhookEntry, RouteTable<RegisteredStrategy>>();
  /** The webhook entries the strategies declare, and the paths served: set at bootstrap. */
  entries: readonly WebhookEntry[] = [];
  paths: readonly string[] = admissionPaths([]);

  // eslint-disable-next-line max-params -- Nest resolves each parameter by its token: the list counts the provider's dependencies.
  constructor(
    private readonly discovery: DiscoveryService,
    private readonly config: ConfigStore,
    private readonly reviews: ReviewTally,
    @InjectMetric(ADMISSION_DURATION) private readonly duration: Histogram<string>,
    private readonly durations: ReviewDurations,
    @InjectMetric(STRATEGY_ERRORS) private readonly strategyErrors: Counter<string>,
  ) {}

  onApplicationBootstrap(): void {
    this.strategies = this.discovery
      .getProviders({ metadataKey: AdmissionStrategyProvider.KEY })
      .filter((wrapper) => wrapper.instance)
      .map((wrapper) => ({
        meta: this.discovery.getMetadataByDecorator(AdmissionStrategyProvider, wrapper) as StrategyMetadata,
        strategy: wrapper.instance as AdmissionStrategy,
      }))
      .sort((a, b) => (a.meta.order ?? 0) - (b.meta.order ?? 0));
    this.routes = planRoutes(this.strategies);
    this.entries = webhookEntries(this.strategies);
    this.paths = admissionPaths(this.entries);
    this.entryRoutes = new Map(this.entries.map((entry) => [entry, planEntryRoutes(this.routes, entry)]));
    // Every series at 0 from the start, so the first failure shows in rate() and increase().
    for (const { meta } of this.strategies) this.strategyErrors.inc({ strategy: meta.name }, 0);
    this.logger.log(`admission strategies: ${this.strategies.map((s) => s.meta.name).join(', ') || 'none'}`);
  }

  /**
   * Runs the strategies of `entry` (every strategy without one). Throws InvalidAdmissionReview
   * for a body that is not an AdmissionReview v1. `body` is left as it is unless `ownBody` says
   * that nobody else holds it (the admission server's parse of the request): then a strategy's
   * patch that certainly applies is applied to `request.object` itself for the next strategy to
   * see, instead of to a copy of its path.
   */
  review(body: unknown, entry?: WebhookEntry, ownBody = false): AdmissionReviewResponse {
    const started = process.hrtime.bigint();
    let request: AdmissionRequest;
    try {
      request = decodeAdmissionReview(body);
    } catch (error) {
      this.reviews.add(UNDECODED, 'error');
      throw error;
    }
    const route = readRoute((entry && this.entryRoutes.get(entry)) || this.routes, request);
    const log = new RequestLog(PinoLogger.root ?? NO_ROOT_LOGGER, request);
    const { response, outcome } = this.run(request, route.strategies, log, ownBody);
    const seconds = Number(process.hrtime.bigint() - started) / 1e9;
    this.reviews.add(route, outcome);
    this.durations.observe(this.duration, route.resource, seconds);
    if (log.isLevelEnabled('debug')) log.debug('admission decided', { outcome, patchOps: response.patchOps });
    return {
      apiVersion: 'admission.k8s.io/v1',
      kind: 'AdmissionReview',
      response: response.body,
    };
  }

  /** Mutation fails open: this strategy's changes are dropped, the request goes on; counted and logged. */
  private failOpen(strategy: string, log: RequestLog, what: string, error: unknown): void {
    this.strategyErrors.inc({ strategy });
    log.error(`strategy ${strategy} ${what}`, { strategy, err: error });
  }

  private run(request: AdmissionRequest, selected: readonly RegisteredStrategy[], log: RequestLog, ownBody: boolean): PipelineResult {
    const config = this.config.snapshot().config;
    const merged: MergedPatches = { ops: 0, encoded: [], warnings: [], failed: false };
    // A later strategy sees the object as the earlier ones left it: changed only when there is a
    // later strategy to see it, on a copy unless the body is ours.
    let working = request;
    const last = lastRunning(config, selected);
    // Indexed: entries() made an iterator and a pair per strategy on every review.
    for (let index = 0; index <= last; index++) {
      const registered = selected[index];
      if (!runsUnder(config, registered)) continue;
      const { meta, strategy } = registered;
      let result: StrategyResult;
      let json: string | undefined;
      try {
        result = strategy.admit(working, config, log.forStrategy(meta.name));
        if (result.patch?.length) json = JSON.stringify(result.patch);
      } catch (error) {
        merged.failed = true;
        this.failOpen(meta.name, log, 'failed; admitting unchanged', error);
        continue;
      }
      if (result.deny) return denied(request.uid, result.deny, merged.warnings);
      if (result.warnings) merged.warnings.push(...result.warnings);
      if (!result.patch?.length) continue;
      try {
        working = applyStrategyPatch(working, result.patch, index === last, ownBody);
      } catch (error) {
        merged.failed = true;
        this.failOpen(meta.name, log, 'returned a patch that does not apply; dropped', error);
        continue;
      }
      merged.ops += result.patch.length;
      merged.encoded.push(json!);
    }
    return allowed(request.uid, merged);
  }
}

interface PipelineResult {
  outcome: Outcome;
  response: { patchOps: number; body: AdmissionResponse };
}

/** What the strategies run so far contributed to the response. */
interface MergedPatches {
  /** How many operations the patches hold. */
  ops: number;
  // Each strategy's patch as JSON: serialised inside its own try, so a value too deep to
  // serialise fails that strategy only.
  encoded: string[];
  warnings: string[];
  failed: boolean;
}

/** The index of the last strategy of `selected` that runs under `config`; -1 for none. */
function lastRunning(config: OvercommitConfig, selected: readonly RegisteredStrategy[]): number {
  let last = selected.length - 1;
  while (last >= 0 && !runsUnder(config, selected[last])) last--;
  return last;
}

/**
 * A strategy's patch applies to request.object: it is tried on the object as the earlier ones
 * left it, and the request with the result is what a later strategy sees. Only the containers
 * the patch goes through are copied: the rest of the object may be nested arbitrarily deep. The
 * last strategy's patch is only checked (patchError: most patches without a copy). With `ownBody`
 * a patch that certainly applies (a node heartbeat's) is applied to the object itself: the copies
 * were most of a node review's patch handling (issue 26's "Fourth pass": git log -p
 * docs/performance.md). Throws when the patch does not apply.
 */
function applyStrategyPatch(working: AdmissionRequest, patch: PatchOperation[], isLast: boolean, ownBody: boolean): AdmissionRequest {
  if (isLast) {
    const error = patchError(working.object, patch);
    if (error) throw error;
    return working;
  }
  if (ownBody && applyInPlace(working.object, patch)) return working;
  const applied = applyToCopy(working.object, patch);
  if ('error' in applied) throw applied.error;
  return { ...working, object: applied.document as AdmissionRequest['object'] };
}

/** The response of a strategy's denial: the warnings gathered before it, no patch. */
function denied(uid: string, deny: NonNullable<StrategyResult['deny']>, warnings: string[]): PipelineResult {
  const code = deny.code ?? 403;
  return {
    outcome: 'denied',
    response: {
      patchOps: 0,
      body: { uid, allowed: false, status: { code, message: deny.message }, ...(warnings.length ? { warnings } : {}) },
    },
  };
}

/** One JSON patch of the strategies' patches (each a JSON array), in order: most reviews have one, taken as it is. */
function joinPatches(encoded: readonly string[]): string {
  return encoded.length === 1 ? encoded[0] : `[${encoded.map((json) => json.slice(1, -1)).join(',')}]`;
}

/** The allowed response: every patch that applied, in strategy order, and every warning. */
function allowed(uid: string, { ops, encoded, warnings, failed }: MergedPatches): PipelineResult {
  const outcome: Outcome = ops > 0 ? 'patched' : failed ? 'error' : 'unchanged';
  // Keys set one by one, in the order they are written out (spreads of optional parts cost a generic copy each).
  const body: AdmissionResponse = { uid, allowed: true };
  if (ops > 0) {
    body.patchType = 'JSONPatch';
    body.patch = Buffer.from(joinPatches(encoded)).toString('base64');
  }
  if (warnings.length > 0) body.warnings = warnings;
  return { outcome, response: { patchOps: ops, body } };
}
