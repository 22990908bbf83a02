import type { Level, Logger } from 'pino';
import type { AdmissionRequest } from './admission.types.js';

/** The fields that tie a line to its review; `resource` includes the subresource (`nodes/status`), as the metrics' label. */
export function requestLogFields(request: AdmissionRequest): Record<string, string | undefined> {
  const { resource, subResource } = request;
  // userInfo is not part of the checked envelope: only a string username is logged.
  const user: unknown = request.userInfo?.username;
  return {
    uid: request.uid,
    kind: request.kind.kind,
    resource: subResource ? `${resource.resource}/${subResource}` : resource.resource,
    name: request.name,
    namespace: request.namespace,
    user: typeof user === 'string' ? user : undefined,
    operation: request.operation,
  };
}

/**
 * One review's logger: a pino child of the root logger carrying `requestLogFields` (and the
 * strategy's name, for a strategy's lines), so every line can be tied to its request. The child
 * is made at the first line logged at an enabled level: a review that logs nothing costs no
 * child and no field copies.
 */
export class RequestLog {
  private child?: Logger;

  constructor(
    private readonly root: Logger,
    private readonly request: AdmissionRequest,
    private readonly strategy?: string,
  ) {}

  /** The same review's logger for one strategy: its lines also carry `strategy`. */
  forStrategy(name: string): RequestLog {
    return new RequestLog(this.root, this.request, name);
  }

  isLevelEnabled(level: Level): boolean {
    return this.root.isLevelEnabled(level);
  }

  debug(message: string, fields?: object): void {
    this.write('debug', message, fields);
  }

  info(message: string, fields?: object): void {
    this.write('info', message, fields);
  }

  warn(message: string, fields?: object): void {
    this.write('warn', message, fields);
  }

  error(message: string, fields?: object): void {
    this.write('error', message, fields);
  }

  private write(level: Level, message: string, fields: object | undefined): void {
    if (!this.root.isLevelEnabled(level)) return;
    this.child ??= this.root.child({ context: 'Admission', ...requestLogFields(this.request), ...(this.strategy ? { strategy: this.strategy } : {}) });
    this.child[level](fields ?? {}, message);
  }
}
