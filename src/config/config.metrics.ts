import { makeCounterProvider, makeGaugeProvider } from '@willsoto/nestjs-prometheus';

export const CONFIG_RELOADS = 'kube_overcommit_config_reloads_total';
export const CONFIG_GENERATION = 'kube_overcommit_config_generation';

export const configMetrics = [
  makeCounterProvider({
    name: CONFIG_RELOADS,
    help: 'Config updates seen, by result: success (now in force) or failure (rejected, last good config kept).',
    labelNames: ['result'],
  }),
  makeGaugeProvider({
    name: CONFIG_GENERATION,
    help: 'Generation of the config in force: 0 = built-in defaults, +1 per accepted update.',
  }),
];
