import { Inject, Injectable } from '@nestjs/common';
import { InjectMetric, makeCounterProvider, makeGaugeProvider, makeHistogramProvider } from '@willsoto/nestjs-prometheus';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Counter, Gauge, Histogram } from 'prom-client';
import { readPathLabel, type Route, SERVED_PATHS, type ServedPaths } from './admission.routes.js';

export const ADMISSION_REQUESTS = 'kube_overcommit_admission_requests_total';
export const ADMISSION_DURATION = 'kube_overcommit_admission_duration_seconds';
export const STRATEGY_ERRORS = 'kube_overcommit_admission_strategy_errors_total';
export const HTTP_REQUESTS = 'kube_overcommit_admission_http_requests_total';
export const HTTP_DURATION = 'kube_overcommit_admission_http_request_duration_seconds';
export const IN_FLIGHT = 'kube_overcommit_admission_in_flight_requests';

/**
 * A Counter's per-call counts kept as plain numbers, keyed by two bounded values, and added to
 * the Counter when the registry collects it (its `collect()`, at every scrape): prom-client
 * builds a key string from the label set and checks it on every `inc()`, its `labels()` children
 * included, well beyond a Map update (docs/performance.md, "what the metrics cost per call").
 * Counts are kept until that scrape, and every key ever counted keeps its entry: the key sets
 * must be bounded (as the label values are).
 * Histograms still observe per call: prom-client has no public way to add counts to their buckets.
 */
export class Tally<A, B> {
  private readonly counts = new Map<A, Map<B, number>>();

  constructor(private readonly labelsOf: (a: A, b: B) => Record<string, string>) {}

  add(a: A, b: B): void {
    let byB = this.counts.get(a);
    if (!byB) this.counts.set(a, (byB = new Map()));
    byB.set(b, (byB.get(b) ?? 0) + 1);
  }

  /** Adds to `counter` what was counted since the last call. */
  flushInto(counter: Counter<string>): void {
    for (const [a, byB] of this.counts) {
      for (const [b, count] of byB) {
        if (count === 0) continue;
        counter.inc(this.labelsOf(a, b), count);
        byB.set(b, 0);
      }
    }
  }
}

/** Reviews answered, by route (its `resource` and `operation` labels) and outcome: ADMISSION_REQUESTS. */
@Injectable()
export class ReviewTally extends Tally<Pick<Route<unknown>, 'resource' | 'operation'>, string> {
  constructor() {
    super(({ resource, operation }, outcome) => ({ resource, operation, outcome }));
  }
}

/** Answers on the webhook paths, by `path` label and status code: HTTP_REQUESTS. */
@Injectable()
export class HttpAnswerTally extends Tally<string, number> {
  constructor() {
    super((path, code) => ({ path, code: String(code) }));
  }
}

export const admissionMetrics = [
  makeCounterProvider({
    name: ADMISSION_REQUESTS,
    help: 'Admission reviews answered, by resource (with subresource), operation and outcome (patched, unchanged, denied, error).',
    labelNames: ['resource', 'operation', 'outcome'],
    inject: [ReviewTally],
    collect(reviews: ReviewTally) {
      reviews.flushInto(this);
    },
  }),
  makeHistogramProvider({
    name: ADMISSION_DURATION,
    help: 'Time to decide an admission review, from decoded body to response, in seconds.',
    labelNames: ['resource'],
    buckets: [0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25],
  }),
  makeCounterProvider({
    name: STRATEGY_ERRORS,
    help: 'Strategies that threw or returned an unusable patch; the request was admitted without their changes.',
    labelNames: ['strategy'],
  }),
  makeCounterProvider({
    name: HTTP_REQUESTS,
    help: 'HTTPS answers on the webhook paths, by path (/mutate, /mutate/nodes, /mutate/pod-policy, /mutate/sidecars, or other) and status code, refusals (400, 401, 404, 413, 415, 503) included.',
    labelNames: ['path', 'code'],
    inject: [HttpAnswerTally],
    collect(answers: HttpAnswerTally) {
      answers.flushInto(this);
    },
  }),
  makeHistogramProvider({
    name: HTTP_DURATION,
    help: 'Time of a call on the webhook paths, from its headers received to its answer written (body receipt and parsing included), in seconds.',
    labelNames: ['path'],
    buckets: [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 10],
  }),
  makeGaugeProvider({
    name: IN_FLIGHT,
    help: 'Calls on the webhook paths received and not yet answered or closed.',
  }),
  ReviewTally,
  HttpAnswerTally,
];

/**
 * Counts and times every call on the webhook paths at the HTTPS server, before anything answers
 * it (client-certificate check, body budget, the admission server), so refusals count too.
 */
@Injectable()
export class AdmissionHttpMetrics {
  constructor(
    private readonly answers: HttpAnswerTally,
    @InjectMetric(HTTP_DURATION) private readonly duration: Histogram<string>,
    @InjectMetric(IN_FLIGHT) private readonly inFlight: Gauge<string>,
    @Inject(SERVED_PATHS) private readonly served: ServedPaths,
  ) {}

  /** Call as the request arrives: it is in flight until its response closes, then counted if it was answered. */
  track(req: IncomingMessage, res: ServerResponse): void {
    const started = process.hrtime.bigint();
    const path = readPathLabel(req.url ?? '', this.served.paths);
    this.inFlight.inc();
    res.once('close', () => {
      this.inFlight.dec();
      // A connection that closed before any answer (client gone, request timeout) has no code.
      if (!res.headersSent) return;
      this.answers.add(path, res.statusCode);
      this.duration.observe({ path }, Number(process.hrtime.bigint() - started) / 1e9);
    });
  }
}
