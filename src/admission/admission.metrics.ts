import { Inject, Injectable } from '@nestjs/common';
import { InjectMetric, makeCounterProvider, makeGaugeProvider, makeHistogramProvider } from '@willsoto/nestjs-prometheus';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Counter, Histogram } from 'prom-client';
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
 * included, well beyond a Map update ("what the metrics cost per call", 2026-11-25: git log -p
 * docs/performance.md).
 * Counts are kept until that scrape, and every key ever counted keeps its entry: the key sets
 * must be bounded (as the label values are).
 * Histograms are kept apart the same way (ObservationBuffer).
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

/** How many observations one label value keeps before they are observed into the Histogram. */
const OBSERVATIONS_PER_FLUSH = 512;

interface PendingObservations {
  readonly values: Float64Array;
  length: number;
}

/**
 * A Histogram's per-call observations kept, per value of its one label, in a fixed buffer, and
 * observed into the Histogram in one loop when the registry collects it (its `collect()`, at
 * every scrape) or when the buffer fills. The same values reach the same buckets by the time
 * anything reads them; what moves is when observe() runs: once per call on the admission path,
 * where the code is cold after TLS and the kernel ran, it cost several times what it costs in a
 * loop (issue 26's "Fourth pass": git log -p docs/performance.md). prom-client has no public
 * way to add counts to buckets, so the values themselves are kept; at most
 * OBSERVATIONS_PER_FLUSH per label value, and the label values must be bounded (as for Tally).
 */
export class ObservationBuffer {
  private readonly pending = new Map<string, PendingObservations>();

  constructor(private readonly labelName: string) {}

  /** Keeps `value` under `labelValue`, observed into `histogram` by the next collect (now, when the buffer is full). */
  observe(histogram: Histogram<string>, labelValue: string, value: number): void {
    let buffer = this.pending.get(labelValue);
    if (!buffer) this.pending.set(labelValue, (buffer = { values: new Float64Array(OBSERVATIONS_PER_FLUSH), length: 0 }));
    buffer.values[buffer.length++] = value;
    if (buffer.length === OBSERVATIONS_PER_FLUSH) this.observeInto(histogram, labelValue, buffer);
  }

  /** Observes into `histogram` every value kept since the last call. */
  flushInto(histogram: Histogram<string>): void {
    for (const [labelValue, buffer] of this.pending) if (buffer.length > 0) this.observeInto(histogram, labelValue, buffer);
  }

  private observeInto(histogram: Histogram<string>, labelValue: string, buffer: PendingObservations): void {
    const child = histogram.labels({ [this.labelName]: labelValue });
    for (let i = 0; i < buffer.length; i++) child.observe(buffer.values[i]);
    buffer.length = 0;
  }
}

/** Review durations by `resource` label: ADMISSION_DURATION. */
@Injectable()
export class ReviewDurations extends ObservationBuffer {
  constructor() {
    super('resource');
  }
}

/** Webhook call durations by `path` label: HTTP_DURATION. */
@Injectable()
export class HttpDurations extends ObservationBuffer {
  constructor() {
    super('path');
  }
}

/**
 * Calls on the webhook paths in flight, as a plain count: IN_FLIGHT is set from it when the
 * registry collects (a Gauge's inc() and dec() hash their labels on every call).
 */
@Injectable()
export class InFlightCount {
  count = 0;
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
    inject: [ReviewDurations],
    collect(durations: ReviewDurations) {
      durations.flushInto(this);
    },
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
    inject: [HttpDurations],
    collect(durations: HttpDurations) {
      durations.flushInto(this);
    },
  }),
  makeGaugeProvider({
    name: IN_FLIGHT,
    help: 'Calls on the webhook paths received and not yet answered or closed.',
    inject: [InFlightCount],
    collect(inFlight: InFlightCount) {
      this.set(inFlight.count);
    },
  }),
  ReviewTally,
  HttpAnswerTally,
  ReviewDurations,
  HttpDurations,
  InFlightCount,
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
    private readonly durations: HttpDurations,
    private readonly inFlight: InFlightCount,
    @Inject(SERVED_PATHS) private readonly served: ServedPaths,
  ) {}

  /** Call as the request arrives: it is in flight until its response closes, then counted if it was answered. */
  track(req: IncomingMessage, res: ServerResponse): void {
    const started = process.hrtime.bigint();
    const path = readPathLabel(req.url ?? '', this.served.paths);
    this.inFlight.count += 1;
    res.once('close', () => {
      this.inFlight.count -= 1;
      // A connection that closed before any answer (client gone, request timeout) has no code.
      if (!res.headersSent) return;
      this.answers.add(path, res.statusCode);
      this.durations.observe(this.duration, path, Number(process.hrtime.bigint() - started) / 1e9);
    });
  }
}
