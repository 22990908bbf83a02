/**
 * How much a client may hold of the webhook's servers: time, connections and body bytes.
 *
 * Invariants:
 *  1. An API server call never reaches a limit: it opens few, long-lived connections, finishes
 *     its TLS handshake and sends a whole review (≤ 3 MiB) in milliseconds, and gives up by itself
 *     after the webhook's `timeoutSeconds` (≤ 30 s). Every time limit here is above what such a
 *     call takes and, for the request itself, above 30 s would be pointless.
 *  2. A client that stalls — a handshake, headers or a body never finished — is cut off after a
 *     bounded time (handshake, headers, request timeouts) and holds at most one connection slot
 *     and its declared body meanwhile.
 *  3. The bytes of bodies being buffered are bounded (`maxBodyBytesInFlight`): a request whose
 *     declared body would pass the bound gets 503 at once, before its body is read; the rest of
 *     its body is discarded as it arrives, never buffered. A 503 rather than a closed
 *     connection: the caller sees why (a reset would tell it nothing, and would discard the
 *     answer it had not read yet), and an API server fails open on it as on any error. Past
 *     `maxConnections`, new connections are closed on accept (nothing can be answered before
 *     TLS); connections already open, such as an API server's, keep working.
 *  4. Every figure comes from the environment with a documented default; a value that is not a
 *     non-negative integer stops the start naming the variable.
 */

import { readEnvInteger } from '../common/env-integer.js';

/** Counter of what the limits refused, by `reason`: `connections` (closed on accept) or `body-bytes` (503). */
export const HTTP_REFUSED_METRIC = 'kube_overcommit_http_refused_total';
export const REFUSAL_REASONS = ['connections', 'body-bytes'] as const;

export interface ServerLimits {
  /** From the TCP connection to the end of the TLS handshake. */
  handshakeTimeoutMs: number;
  /** From a request's first byte to the end of its headers (Node's `server.headersTimeout`). */
  headersTimeoutMs: number;
  /** From a request's first byte to the end of its body (Node's `server.requestTimeout`). */
  requestTimeoutMs: number;
  /** How long an idle keep-alive connection stays open between requests. */
  keepAliveMs: number;
  /** Open connections per server; 0 for no limit. */
  maxConnections: number;
  /** Bytes of request bodies being received at once, over all connections; 0 for no limit. */
  maxBodyBytesInFlight: number;
}

/** The variable behind each limit, and its default. */
export const SERVER_LIMIT_VARIABLES: Readonly<Record<keyof ServerLimits, readonly [string, number]>> = {
  handshakeTimeoutMs: ['OVERCOMMIT_TLS_HANDSHAKE_TIMEOUT_MS', 5_000],
  headersTimeoutMs: ['OVERCOMMIT_HEADERS_TIMEOUT_MS', 5_000],
  requestTimeoutMs: ['OVERCOMMIT_REQUEST_TIMEOUT_MS', 10_000],
  // Longer than the API server's idle timeout for webhook connections (90 s), so it closes them first.
  keepAliveMs: ['OVERCOMMIT_KEEP_ALIVE_TIMEOUT_MS', 95_000],
  maxConnections: ['OVERCOMMIT_MAX_CONNECTIONS', 1_000],
  maxBodyBytesInFlight: ['OVERCOMMIT_MAX_BODY_BYTES_IN_FLIGHT', 64 * 1024 * 1024],
};

export function readServerLimits(env: NodeJS.ProcessEnv): ServerLimits {
  const limits = {} as ServerLimits;
  for (const [field, [name, fallback]] of Object.entries(SERVER_LIMIT_VARIABLES) as [keyof ServerLimits, readonly [string, number]][]) {
    limits[field] = readEnvInteger(env, name, { fallback });
  }
  if (limits.requestTimeoutMs > 0 && limits.headersTimeoutMs > limits.requestTimeoutMs) {
    throw new Error(
      `${SERVER_LIMIT_VARIABLES.headersTimeoutMs[0]} (${limits.headersTimeoutMs}) must not exceed ${SERVER_LIMIT_VARIABLES.requestTimeoutMs[0]} (${limits.requestTimeoutMs})`,
    );
  }
  return limits;
}

/** Bytes a request will hold while its body arrives: its declared length, or the body limit when chunked. */
export function readDeclaredBodyBytes(headers: { 'content-length'?: string; 'transfer-encoding'?: string }, bodyLimit: number): number {
  const declared = Number(headers['content-length']);
  if (Number.isSafeInteger(declared) && declared >= 0) return Math.min(declared, bodyLimit);
  return headers['transfer-encoding'] !== undefined ? bodyLimit : 0;
}

/** The shared budget of body bytes in flight (invariant 3). */
export class BodyBudget {
  private inFlight = 0;

  constructor(private readonly limit: number) {}

  /** Reserves `bytes`; false when that would pass the limit (a request of 0 bytes always passes). */
  tryReserve(bytes: number): boolean {
    if (bytes > 0 && this.limit > 0 && this.inFlight + bytes > this.limit) return false;
    this.inFlight += bytes;
    return true;
  }

  release(bytes: number): void {
    this.inFlight -= bytes;
  }

  get bytesInFlight(): number {
    return this.inFlight;
  }
}
