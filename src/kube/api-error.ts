import { ApiException } from '@kubernetes/client-node';

/**
 * One line naming the API server and the cause of a client-node failure. Its own messages do
 * not: a connection failure is undici's bare "fetch failed" (the cause is in `error.cause`), an
 * HTTP error carries the whole response, headers included, over several lines.
 */
export function describeApiError(error: unknown, server: string | undefined): string {
  const at = server ?? 'the API server';
  if (error instanceof ApiException) {
    const reason = statusMessage(error.body);
    return `${at} answered ${error.code}${reason ? `: ${reason}` : ''}`;
  }
  if (!(error instanceof Error)) return `${at}: ${String(error)}`;
  const cause = error.cause as { code?: string; message?: string } | undefined;
  if (cause && error.message === 'fetch failed') return `cannot reach ${at}: ${cause.code ?? cause.message}`;
  const status = (error as { statusCode?: number }).statusCode;
  return status ? `${at} answered ${status} ${error.message}` : `${at}: ${error.message}`;
}

/** The `message` of a metav1.Status body (an object, or the JSON text of one). */
function statusMessage(body: unknown): string | undefined {
  let status = body;
  if (typeof body === 'string') {
    try {
      status = JSON.parse(body);
    } catch {
      return body.slice(0, 200) || undefined;
    }
  }
  const message = (status as { message?: unknown } | undefined)?.message;
  return typeof message === 'string' ? message : undefined;
}

/** The HTTP status the API server answered with, or undefined when it gave none (no connection, a timeout). */
export function apiErrorCode(error: unknown): number | undefined {
  return error instanceof ApiException ? error.code : undefined;
}
