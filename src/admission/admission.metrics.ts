import { makeCounterProvider, makeHistogramProvider } from '@willsoto/nestjs-prometheus';

export const ADMISSION_REQUESTS = 'kube_overcommit_admission_requests_total';
export const ADMISSION_DURATION = 'kube_overcommit_admission_duration_seconds';
export const STRATEGY_ERRORS = 'kube_overcommit_admission_strategy_errors_total';

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
];
