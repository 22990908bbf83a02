/**
 * Leader election through a coordination.k8s.io Lease, the algorithm of client-go's
 * leaderelection package. @kubernetes/client-node ships none, and what it needs is small: read
 * the Lease, take it when it is free or its holder stopped renewing, renew it, release it.
 *
 *   1. A Lease held by another is expired when its record (holder, renewTime) has not changed
 *      for leaseDurationSeconds on OUR clock since we first saw it: clocks of replicas may differ.
 *   2. Every write is a PUT with the resourceVersion read: of two candidates only one wins.
 *   3. A leader that could not renew for `renewDeadlineMs` stops acting as leader, before any
 *      other replica may take the Lease (`renewDeadlineMs` < `leaseDurationMs`).
 */
import { hostname } from 'node:os';
import { randomBytes } from 'node:crypto';
import { Logger } from '@nestjs/common';
import { CoordinationV1Api, type V1Lease, V1MicroTime } from '@kubernetes/client-node';

export interface LeaseTiming {
  leaseDurationMs: number;
  renewDeadlineMs: number;
  retryPeriodMs: number;
}
/** client-go's defaults. */
export const DEFAULT_LEASE_TIMING: LeaseTiming = { leaseDurationMs: 15_000, renewDeadlineMs: 10_000, retryPeriodMs: 2_000 };

/** This replica's identity as a Lease holder: the pod's name (downward API), else a unique one. */
export function leaseIdentity(env: NodeJS.ProcessEnv): string {
  return env.POD_NAME || `${hostname()}-${randomBytes(4).toString('hex')}`;
}

export interface ObservedLease {
  /** holder and renewTime as read: a change of either restarts the expiry clock. */
  record: string;
  /** When (our monotonic clock, ms) we first saw `record`. */
  since: number;
}

/** What to do with the Lease as read (`now` is our monotonic clock). */
export function planLease(lease: V1Lease, identity: string, observed: ObservedLease | undefined, now: number): { take: boolean; observed: ObservedLease } {
  const holder = lease.spec?.holderIdentity ?? '';
  const record = `${holder}@${String(lease.spec?.renewTime ?? '')}`;
  const next = observed?.record === record ? observed : { record, since: now };
  const durationMs = (lease.spec?.leaseDurationSeconds ?? 0) * 1000;
  const free = holder === '' || holder === identity || now - next.since >= durationMs;
  return { take: free, observed: next };
}

/** The Lease as written by `identity` taking or renewing it. */
export function leaseTaken(lease: V1Lease, identity: string, timing: LeaseTiming, now: Date): V1Lease {
  const renewing = lease.spec?.holderIdentity === identity;
  return {
    ...lease,
    spec: {
      ...lease.spec,
      holderIdentity: identity,
      leaseDurationSeconds: Math.ceil(timing.leaseDurationMs / 1000),
      renewTime: new V1MicroTime(now.getTime()),
      acquireTime: renewing && lease.spec?.acquireTime ? new V1MicroTime(new Date(lease.spec.acquireTime).getTime()) : new V1MicroTime(now.getTime()),
      leaseTransitions: (lease.spec?.leaseTransitions ?? 0) + (renewing || !lease.spec?.holderIdentity ? 0 : 1),
    },
  };
}

/** client-go's timing and the monotonic clock unless given. */
export interface LeaderLeaseOptions {
  timing?: LeaseTiming;
  clock?: () => number;
}

export class LeaderLease {
  private readonly logger = new Logger('LeaderLease');
  private observed?: ObservedLease;
  private leader = false;
  private lastRenew = 0;
  private timer?: NodeJS.Timeout;
  private stopped = true;
  private running?: Promise<void>;
  private lastError = '';
  private readonly timing: LeaseTiming;
  /** Monotonic milliseconds. */
  private readonly clock: () => number;

  constructor(
    private readonly api: CoordinationV1Api,
    private readonly ref: { namespace: string; name: string },
    readonly identity: string,
    private readonly onChange: (leader: boolean) => void,
    { timing = DEFAULT_LEASE_TIMING, clock = () => performance.now() }: LeaderLeaseOptions = {},
  ) {
    this.timing = timing;
    this.clock = clock;
  }

  isLeader(): boolean {
    return this.leader;
  }

  start(): void {
    this.stopped = false;
    this.tick();
  }

  /** Stops, and releases the Lease if held so that another replica takes over at once. */
  async stop(): Promise<void> {
    this.stopped = true;
    clearTimeout(this.timer);
    await this.running;
    if (!this.leader) return;
    this.setLeader(false);
    try {
      const lease = await this.api.readNamespacedLease(this.ref);
      if (lease.spec?.holderIdentity !== this.identity) return;
      const spec = { ...lease.spec, holderIdentity: undefined, leaseDurationSeconds: 1, renewTime: new V1MicroTime(Date.now()) };
      await this.api.replaceNamespacedLease({ ...this.ref, body: { ...lease, spec } });
    } catch (error) {
      this.logger.warn(`could not release Lease ${this.describe()}: ${(error as Error).message}`);
    }
  }

  private tick(): void {
    if (this.stopped) return;
    this.running = this.tryAcquireOrRenew().finally(() => {
      this.running = undefined;
      if (!this.stopped) this.timer = setTimeout(() => this.tick(), this.timing.retryPeriodMs);
    });
  }

  private async tryAcquireOrRenew(): Promise<void> {
    try {
      const lease = await this.api.readNamespacedLease(this.ref);
      const { take, observed } = planLease(lease, this.identity, this.observed, this.clock());
      this.observed = observed;
      if (!take) {
        this.setLeader(false);
        return;
      }
      await this.api.replaceNamespacedLease({ ...this.ref, body: leaseTaken(lease, this.identity, this.timing, new Date()) });
      this.lastRenew = this.clock();
      this.lastError = '';
      this.setLeader(true);
    } catch (error) {
      const message = (error as Error).message;
      if (this.leader && this.clock() - this.lastRenew >= this.timing.renewDeadlineMs) {
        this.logger.warn(`could not renew Lease ${this.describe()} for ${this.timing.renewDeadlineMs} ms: ${message}`);
        this.setLeader(false);
      } else if (message !== this.lastError && (error as { code?: number }).code !== 409) {
        // A conflict is another candidate winning; anything else (403, 404) is said once.
        this.logger.warn(`Lease ${this.describe()}: ${message}`);
      }
      this.lastError = message;
    }
  }

  private setLeader(leader: boolean): void {
    if (leader === this.leader) return;
    this.leader = leader;
    this.logger.log(`${this.identity} ${leader ? 'is now' : 'is no longer'} the leader (Lease ${this.describe()})`);
    this.onChange(leader);
  }

  private describe(): string {
    return `${this.ref.namespace}/${this.ref.name}`;
  }
}
