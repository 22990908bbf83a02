import { Inject, Injectable, Logger } from '@nestjs/common';
import { InjectMetric } from '@willsoto/nestjs-prometheus';
import type { Counter, Gauge } from 'prom-client';
import type { Validated } from '../common/validation.js';
import { CONFIG_GENERATION, CONFIG_RELOADS } from './config.metrics.js';
import type { OvercommitConfig } from '../overcommit.config.js';
import { CONFIG_SCHEMA, type ConfigSchema } from './config.loader.js';

export interface ConfigSnapshot {
  readonly config: OvercommitConfig;
  /** 0 for the built-in defaults; +1 for every accepted update. */
  readonly generation: number;
  /** Where it came from: `defaults`, `file:/path`, `configmap:ns/name@resourceVersion`. */
  readonly origin: string;
}

/**
 * Holds the config snapshot in force. A request reads `snapshot()` once and keeps that
 * object: an update swaps the reference, never mutates a snapshot in place.
 */
@Injectable()
export class ConfigStore {
  private readonly logger = new Logger('Config');
  private current: ConfigSnapshot;
  private loaded = false;
  private readonly listeners: Array<(snapshot: ConfigSnapshot) => void> = [];

  constructor(
    @InjectMetric(CONFIG_RELOADS) private readonly reloads: Counter<string>,
    @InjectMetric(CONFIG_GENERATION) private readonly generationGauge: Gauge<string>,
    @Inject(CONFIG_SCHEMA) private readonly schema: ConfigSchema<OvercommitConfig>,
  ) {
    this.current = { config: schema.defaults, generation: 0, origin: 'defaults' };
    this.generationGauge.set(0);
  }

  snapshot(): ConfigSnapshot {
    return this.current;
  }

  /** Called with each snapshot that comes into force (not for rejected configs). */
  onChange(listener: (snapshot: ConfigSnapshot) => void): void {
    this.listeners.push(listener);
  }

  /** True once the source has delivered its first state (valid or not); readiness waits for it. */
  isLoaded(): boolean {
    return this.loaded;
  }

  markLoaded(): void {
    this.loaded = true;
  }

  /**
   * Parses and, when valid, installs a new config. An invalid one is rejected whole: the last
   * good snapshot stays in force and every bad field is logged by its path.
   */
  apply(text: string, origin: string): Validated<ConfigSnapshot> {
    const parsed = this.schema.parse(text);
    if (!parsed.ok) {
      this.reloads.inc({ result: 'failure' });
      this.logger.error(
        { origin, errors: parsed.errors },
        `rejected invalid config from ${origin}; keeping generation ${this.current.generation} (${this.current.origin}):\n  ${parsed.errors.join('\n  ')}`,
      );
      return parsed;
    }
    this.current = { config: parsed.value, generation: this.current.generation + 1, origin };
    this.reloads.inc({ result: 'success' });
    this.generationGauge.set(this.current.generation);
    this.logger.log(`config generation ${this.current.generation} in force from ${origin}`);
    for (const listener of this.listeners) listener(this.current);
    return { ok: true, value: this.current };
  }
}
