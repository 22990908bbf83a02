import { Injectable } from '@nestjs/common';
import { InjectMetric, makeCounterProvider, makeGaugeProvider, makeHistogramProvider } from '@willsoto/nestjs-prometheus';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Counter, Gauge, Histogram } from 'prom-client';
import { readPathLabel } from './admission.routes.js';

export const ADMISSION_REQUESTS = 'kube_overcommit_admission_requests_total';
export const ADMISSION_DURATION = 'kube_overcommit_admission_duration_seconds';
export const STRATEGY_ERRORS = 'kube_overcommit_admission_strategy_errors_total';
export const HTTP_REQUESTS = 'kube_overcommit_admission_http_requests_total';
export const HTTP_DURATION = 'kube_overcommit_admission_http_request_duration_seconds';
export const IN_FLIGHT = 'kube_overcommit_admission_in_flight_requests';

export const admissionMetrics = [
  makeCounterProvider({
    name: ADMISSION_REQUESTS,
    help: 'Admission reviews answered, by resource (with subresource), operation and outcome (patched, unchanged, denied, error).',
    labelNames: ['resource', 'operation', 'outcome'],
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
];

/**
 * Counts and times every call on the webhook paths at the HTTPS server, before anything answers
 * it (client-certificate check, body budget, the admission server), so refusals count too.
 */
@Injectable()
export class AdmissionHttpMetrics {
  constructor(
    @InjectMetric(HTTP_REQUESTS) private readonly requests: Counter<string>,
    @InjectMetric(HTTP_DURATION) private readonly duration: Histogram<string>,
    @InjectMetric(IN_FLIGHT) private readonly inFlight: Gauge<string>,
  ) {}

  /** Call as the request arrives: it is in flight until its response closes, then counted if it was answered. */
  track(req: IncomingMessage, res: ServerResponse): void {
    const started = process.hrtime.bigint();
    const path = readPathLabel(req.url ?? '');
    this.inFlight.inc();
    res.once('close', () => {
      this.inFlight.dec();
      // A connection that closed before any answer (client gone, request timeout) has no code.
      if (!res.headersSent) return;
      this.requests.inc({ path, code: String(res.statusCode) });
      this.duration.observe({ path }, Number(process.hrtime.bigint() - started) / 1e9);
    });
  }
}
