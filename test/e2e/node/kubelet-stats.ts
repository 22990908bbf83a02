/**
 * The kubelet's own measure of a container's CPU and memory: its summary API
 * (`/api/v1/nodes/<node>/proxy/stats/summary`, through kube-apiserver), the source of
 * metrics-server's `kubectl top` and of the eviction manager's signals.
 */
import { median, round } from '../../../bench/lib.js';
import type { KubeClient } from '../../support/kube-client.js';

export const summaryPath = (node: string) => `/api/v1/nodes/${node}/proxy/stats/summary`;

/** One reading of a container: its cumulative CPU time and working set at the kubelet's sample time. */
interface Reading {
  atMs: number;
  cpuCoreNanoSeconds: number;
  workingSetBytes: number;
}

/** What one window of readings says: CPU as a rate between consecutive readings of a container, as metrics-server computes it. */
export interface UsageWindow {
  seconds: number;
  /** Summaries read, and those kube-apiserver or the kubelet did not answer. */
  polls: number;
  failedPolls: number;
  /** Distinct containers seen (a pod replaced by a rollout is another one). */
  containers: number;
  cpuMillicores: { median: number; max: number; intervals: number };
  workingSetMiB: { median: number; max: number; readings: number };
  /** The same per container, with its pod and start. */
  perContainer: Array<{ pod: string; startedAt: string; cpuMillicores: { median: number; max: number }; workingSetMiB: { median: number; max: number } }>;
}

/**
 * Polls the summary every `intervalMs` for `container` of the pods of `namespace` whose names
 * start with `podPrefix`, until stop(). Readings are keyed by pod uid and container start, and
 * deduplicated by the kubelet's sample time (it refreshes them every few seconds).
 */
export class ContainerUsageSampler {
  private readonly readings = new Map<string, { pod: string; startedAt: string; byTime: Map<number, Reading> }>();
  private polls = 0;
  private failedPolls = 0;
  private stopped = false;
  private readonly startedMs = Date.now();
  private readonly loop: Promise<void>;

  constructor(
    private readonly admin: KubeClient,
    private readonly node: string,
    private readonly target: { namespace: string; podPrefix: string; container: string },
    intervalMs = 2_000,
  ) {
    this.loop = (async () => {
      while (!this.stopped) {
        await this.poll();
        await new Promise((r) => setTimeout(r, intervalMs));
      }
    })();
  }

  private async poll(): Promise<void> {
    this.polls++;
    const summary = await this.admin.get(summaryPath(this.node)).catch(() => undefined);
    if (summary === undefined) {
      this.failedPolls++;
      return;
    }
    for (const pod of summary.pods ?? []) {
      if (pod.podRef.namespace !== this.target.namespace || !pod.podRef.name.startsWith(this.target.podPrefix)) continue;
      const c = (pod.containers ?? []).find((x: any) => x.name === this.target.container);
      if (!c?.cpu?.time || c.cpu.usageCoreNanoSeconds === undefined || c.memory?.workingSetBytes === undefined) continue;
      const key = `${pod.podRef.uid}/${c.startTime}`;
      const atMs = Date.parse(c.cpu.time);
      if (!this.readings.has(key)) this.readings.set(key, { pod: pod.podRef.name, startedAt: c.startTime, byTime: new Map() });
      this.readings.get(key)!.byTime.set(atMs, { atMs, cpuCoreNanoSeconds: c.cpu.usageCoreNanoSeconds, workingSetBytes: c.memory.workingSetBytes });
    }
  }

  async stop(): Promise<UsageWindow> {
    this.stopped = true;
    await this.loop;
    const rates: number[] = [];
    const workingSets: number[] = [];
    const perContainer: UsageWindow['perContainer'] = [];
    for (const { pod, startedAt, byTime } of this.readings.values()) {
      const series = [...byTime.values()].sort((a, b) => a.atMs - b.atMs);
      const own = { rates: [] as number[], workingSets: series.map((r) => r.workingSetBytes / 2 ** 20) };
      for (let i = 1; i < series.length; i++) {
        const dtNs = (series[i].atMs - series[i - 1].atMs) * 1e6;
        const used = series[i].cpuCoreNanoSeconds - series[i - 1].cpuCoreNanoSeconds;
        if (used >= 0) own.rates.push((used / dtNs) * 1000);
      }
      rates.push(...own.rates);
      workingSets.push(...own.workingSets);
      perContainer.push({
        pod,
        startedAt,
        cpuMillicores: { median: round(median(own.rates), 1), max: round(Math.max(...own.rates), 1) },
        workingSetMiB: { median: round(median(own.workingSets), 1), max: round(Math.max(...own.workingSets), 1) },
      });
    }
    return {
      seconds: round((Date.now() - this.startedMs) / 1000, 1),
      polls: this.polls,
      failedPolls: this.failedPolls,
      containers: this.readings.size,
      cpuMillicores: { median: round(median(rates), 1), max: round(Math.max(...rates), 1), intervals: rates.length },
      workingSetMiB: { median: round(median(workingSets), 1), max: round(Math.max(...workingSets), 1), readings: workingSets.length },
      perContainer,
    };
  }
}
