import type { Operation as JsonPatchOperation } from 'fast-json-patch';
import type { OvercommitConfig } from '../overcommit.config.js';
import type { RequestLog } from './request-log.js';

export type Operation = 'CREATE' | 'UPDATE' | 'DELETE' | 'CONNECT';
export const OPERATIONS: readonly Operation[] = ['CREATE', 'UPDATE', 'DELETE', 'CONNECT'];

export interface GroupVersionResource {
  group: string;
  version: string;
  resource: string;
}

/** The `request` of an admission.k8s.io/v1 AdmissionReview; `object` and `oldObject` stay as sent. */
export interface AdmissionRequest<T = Record<string, any>> {
  uid: string;
  kind: { group: string; version: string; kind: string };
  resource: GroupVersionResource;
  subResource?: string;
  name?: string;
  namespace?: string;
  operation: Operation;
  userInfo?: { username?: string; uid?: string; groups?: string[] };
  object?: T;
  oldObject?: T;
  dryRun?: boolean;
}

export type PatchOperation = JsonPatchOperation;

/** What a strategy decides for one request. An empty result admits the object unchanged. */
export interface StrategyResult {
  patch?: PatchOperation[];
  warnings?: string[];
  /** An explicit policy denial: the only way a request is refused. */
  deny?: { message: string; code?: number };
}

/** Which requests a strategy handles; `subResource: ''` means the main resource only. */
export interface StrategyRule {
  resource: string;
  subResource?: string;
  operations: Operation[];
}

/**
 * A webhook entry of k8s/base/webhook.yaml, served at `/mutate/<entry>` and running only its own
 * strategies; `/mutate` runs every strategy. Each strategy declares its entry: the entries served
 * are those the strategies found at bootstrap declare (AdmissionPipeline.entries).
 */
export type WebhookEntry = string;

export interface StrategyMetadata {
  name: string;
  /** The webhook entry whose path runs it. */
  entry: WebhookEntry;
  rules: StrategyRule[];
  /** Lower runs first; a later strategy sees the object as the earlier ones patched it. */
  order?: number;
}

export interface AdmissionStrategy {
  /** `log`: this review's logger (uid, resource, name, namespace, user, operation on every line). */
  admit(request: AdmissionRequest, config: OvercommitConfig, log: RequestLog): StrategyResult;
  /**
   * False when, under `config`, `admit` would return `{}` for every review without reading it:
   * the pipeline then does not run it, nor copy the object for it. Absent: always runs.
   */
  isActive?(config: OvercommitConfig): boolean;
}

export interface AdmissionResponse {
  uid: string;
  allowed: boolean;
  patchType?: 'JSONPatch';
  patch?: string;
  warnings?: string[];
  status?: { code: number; message: string };
}

export interface AdmissionReviewResponse {
  apiVersion: 'admission.k8s.io/v1';
  kind: 'AdmissionReview';
  response: AdmissionResponse;
}
