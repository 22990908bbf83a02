import { Test, type TestingModule } from '@nestjs/testing';
import { IncomingMessage, ServerResponse } from 'node:http';
import { Socket } from 'node:net';
import { Counter, Histogram, register, Registry } from 'prom-client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AdmissionHttpMetrics, admissionMetrics, HTTP_DURATION, HTTP_REQUESTS, IN_FLIGHT, ObservationBuffer, Tally } from './admission.metrics.js';
import { SERVED_PATHS } from './admission.routes.js';

describe('ObservationBuffer', () => {
  const histograms = () => {
    const registry = new Registry();
    const make = (name: string) => new Histogram({ name, help: 'h', labelNames: ['path'], buckets: [0.001, 0.01, 0.1], registers: [registry] });
    return { registry, buffered: make('buffered_seconds'), direct: make('direct_seconds') };
  };
  const series = async (histogram: Histogram<string>) =>
    (await histogram.get()).values.map(({ labels, value, metricName }) => `${metricName}${JSON.stringify(labels)} ${value}`.replace(/^[a-z]+_/, ''));

  it('observes into the histogram, once flushed, what observing each value directly does', async () => {
    const { buffered, direct } = histograms();
    const buffer = new ObservationBuffer('path');
    const calls: [string, number][] = [
      ['/mutate', 0.0004],
      ['/mutate', 0.02],
      ['other', 0.5],
      ['/mutate', 0.004],
    ];
    for (const [path, seconds] of calls) {
      buffer.observe(buffered, path, seconds);
      direct.observe({ path }, seconds);
    }
    expect((await buffered.get()).values).toEqual([]);
    buffer.flushInto(buffered);
    buffer.flushInto(buffered);
    expect(await series(buffered)).toEqual(await series(direct));
    expect(await series(buffered)).toContain('seconds_count{"path":"/mutate"} 3');
  });

  it('observes the values kept under a label value as soon as its buffer is full, without waiting for a flush', async () => {
    const { buffered } = histograms();
    const buffer = new ObservationBuffer('path');
    for (let i = 0; i < 511; i++) buffer.observe(buffered, '/mutate', 0.002);
    expect((await buffered.get()).values).toEqual([]);
    buffer.observe(buffered, '/mutate', 0.002);
    expect(await series(buffered)).toContain('seconds_count{"path":"/mutate"} 512');
    buffer.observe(buffered, '/mutate', 0.002);
    buffer.flushInto(buffered);
    expect(await series(buffered)).toContain('seconds_count{"path":"/mutate"} 513');
  });
});

describe('Tally', () => {
  const counterIn = (registry: Registry) => new Counter({ name: 'answers_total', help: 'h', labelNames: ['path', 'code'], registers: [registry] });
  const tally = () => new Tally<string, number>((path, code) => ({ path, code: String(code) }));

  it('adds to the counter what was counted since the last flush, under the labels of its keys', async () => {
    const registry = new Registry();
    const counter = counterIn(registry);
    const answers = tally();
    for (let i = 0; i < 3; i++) answers.add('/mutate', 200);
    answers.add('/mutate', 400);
    answers.add('other', 404);
    answers.flushInto(counter);
    answers.flushInto(counter);
    expect(await registry.metrics()).toContain(
      ['answers_total{path="/mutate",code="200"} 3', 'answers_total{path="/mutate",code="400"} 1', 'answers_total{path="other",code="404"} 1'].join('\n'),
    );
    answers.add('/mutate', 200);
    answers.flushInto(counter);
    const values = (await counter.get()).values.map(({ labels, value }) => [labels.path, labels.code, value]);
    expect(values).toEqual([
      ['/mutate', '200', 4],
      ['/mutate', '400', 1],
      ['other', '404', 1],
    ]);
  });

  it('adds nothing to the counter before the first count', async () => {
    const counter = counterIn(new Registry());
    tally().flushInto(counter);
    expect((await counter.get()).values).toEqual([]);
  });
});

describe('AdmissionHttpMetrics', () => {
  let moduleRef: TestingModule;
  let edge: AdmissionHttpMetrics;

  beforeAll(async () => {
    register.clear();
    moduleRef = await Test.createTestingModule({
      providers: [
        ...admissionMetrics,
        AdmissionHttpMetrics,
        { provide: SERVED_PATHS, useValue: { paths: ['/mutate', '/mutate/nodes', '/mutate/pod-policy', '/mutate/sidecars'] } },
      ],
    }).compile();
    edge = moduleRef.get(AdmissionHttpMetrics);
  });
  afterAll(async () => {
    await moduleRef.close();
    register.clear();
  });

  /** A call on `url`, tracked as the HTTPS server tracks it; answered with `code` unless undefined. */
  const call = (url: string, code?: number) => {
    const req = new IncomingMessage(new Socket());
    req.url = url;
    const res = new ServerResponse(req);
    edge.track(req, res);
    if (code !== undefined) res.writeHead(code);
    return () => void res.emit('close');
  };
  const scrape = async (name: string) => (await register.getSingleMetricAsString(name)).split('\n').filter((line) => !line.startsWith('#'));

  it('counts every answer by path and code at the scrape, times it, and the in-flight gauge falls back to 0', async () => {
    const open = call('/mutate/nodes', 200);
    const unanswered = call('/mutate');
    const closes = [
      ...Array.from({ length: 3 }, () => call('/mutate/nodes?timeout=10s', 200)),
      call('/mutate', 400),
      call('/mutate', 401),
      call('/mutate', 401),
      call('/mutate/pod-policy', 413),
      call('/mutate/sidecars', 503),
      call('/mutate/made-up', 404),
    ];
    expect(await scrape(IN_FLIGHT)).toEqual([`${IN_FLIGHT} 11`]);
    for (const close of closes) close();
    // A call closed without an answer leaves the gauge and is not counted.
    unanswered();
    const answered = [
      `${HTTP_REQUESTS}{path="/mutate/nodes",code="200"} 3`,
      `${HTTP_REQUESTS}{path="/mutate",code="400"} 1`,
      `${HTTP_REQUESTS}{path="/mutate",code="401"} 2`,
      `${HTTP_REQUESTS}{path="/mutate/pod-policy",code="413"} 1`,
      `${HTTP_REQUESTS}{path="/mutate/sidecars",code="503"} 1`,
      `${HTTP_REQUESTS}{path="other",code="404"} 1`,
    ];
    expect(await scrape(HTTP_REQUESTS)).toEqual(answered);
    // A second scrape counts nothing twice.
    expect(await scrape(HTTP_REQUESTS)).toEqual(answered);
    expect(await scrape(IN_FLIGHT)).toEqual([`${IN_FLIGHT} 1`]);
    open();
    expect(await scrape(IN_FLIGHT)).toEqual([`${IN_FLIGHT} 0`]);
    expect((await scrape(HTTP_REQUESTS))[0]).toBe(`${HTTP_REQUESTS}{path="/mutate/nodes",code="200"} 4`);
    const counts = (await scrape(HTTP_DURATION)).filter((line) => line.startsWith(`${HTTP_DURATION}_count`));
    expect(counts).toEqual([
      `${HTTP_DURATION}_count{path="/mutate/nodes"} 4`,
      `${HTTP_DURATION}_count{path="/mutate"} 3`,
      `${HTTP_DURATION}_count{path="/mutate/pod-policy"} 1`,
      `${HTTP_DURATION}_count{path="/mutate/sidecars"} 1`,
      `${HTTP_DURATION}_count{path="other"} 1`,
    ]);
  });
});
