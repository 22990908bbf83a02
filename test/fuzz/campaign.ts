/**
 * The fuzzing campaign: sends the cases of test/fuzz/cases.ts to a running webhook over HTTPS
 * and checks every answer. Shared by `npm run fuzz` (a spawned `node dist/main.js`) and the
 * sample in `npm test` (the app in-process).
 *
 * What must hold for every case:
 *
 *   1. The server answers (no reset, no timeout) and stays alive.
 *   2. No 5xx.
 *   3. A 200 is an admission.k8s.io/v1 AdmissionReview whose uid echoes the request's, with a
 *      boolean `allowed` and string warnings; its patch, if any, is base64 of a JSONPatch
 *      (patchType JSONPatch).
 *   4. The patch applies to `request.object` (fast-json-patch, every operation validated).
 *   5. Mutating twice changes nothing more: the patched object sent back (same envelope, as on
 *      a reinvocation) gets a 200 with no patch, or one that leaves it as it is.
 *   6. Any other answer is a JSON error with a message, of bounded size; a body that is valid
 *      JSON is never refused as invalid JSON (whatever keys its maps hold).
 */
import https from 'node:https';
import { isDeepStrictEqual } from 'node:util';
import fastJsonPatch from 'fast-json-patch';
import { buildCase, plansAt, type FuzzCase } from './cases.js';

type Json = any;

export interface Reply {
  status: number;
  text: string;
}

/** The checks a case can fail, as named in bench/results/fuzz.json. */
export type FindingKind = 'crashes' | 'noAnswer' | 'serverErrors' | 'malformed' | 'validJsonRefused' | 'patchesNotApplying' | 'nonIdempotent';
export const FINDING_KINDS: FindingKind[] = ['crashes', 'noAnswer', 'serverErrors', 'malformed', 'validJsonRefused', 'patchesNotApplying', 'nonIdempotent'];

export interface Finding {
  kind: FindingKind;
  /** The failure with the case's particulars taken out: equal signatures are one defect. */
  signature: string;
  detail: string;
}

/** The server's body limit (docs/deploying.md, "What `/mutate` answers": a body over 3 MiB gets 413). */
const BODY_LIMIT = 3 * 1024 * 1024;

/** An error answer larger than this is a finding: a hostile body must not buy a large answer. */
const MAX_ERROR_BYTES = 64 * 1024;

const normalise = (text: string) => text.replace(/\d+/g, 'N').slice(0, 160);

const malformed = (why: string): Finding => ({ kind: 'malformed', signature: why, detail: why });

function parse(text: string): { ok: true; value: Json } | { ok: false } {
  try {
    return { ok: true, value: JSON.parse(text) };
  } catch {
    return { ok: false };
  }
}

/** The patch of an admission response, decoded and applied to a copy of `object`; a finding if any step fails. */
function applyAnswer(response: Json, object: Json): { patched: Json; patch: Json[] } | Finding {
  if (response.patch === undefined) return { patched: object, patch: [] };
  if (response.patchType !== 'JSONPatch') return malformed(`patchType ${JSON.stringify(response.patchType)}`);
  if (typeof response.patch !== 'string') return malformed('patch is not a string');
  const bytes = Buffer.from(response.patch, 'base64');
  if (bytes.toString('base64') !== response.patch) return malformed('patch is not base64');
  const patch = parse(bytes.toString('utf8'));
  if (!patch.ok || !Array.isArray(patch.value)) return malformed('patch is not a JSON array');
  try {
    return { patched: fastJsonPatch.applyPatch(object, patch.value, true, true).newDocument, patch: patch.value };
  } catch (error) {
    if (error instanceof RangeError) throw error;
    const { name, operation } = error as { name?: string; operation?: { op?: string; path?: string } };
    const where = `${operation?.op} ${String(operation?.path).replace(/\/\d+(?=\/|$)/g, '/N')}`;
    return {
      kind: 'patchesNotApplying',
      signature: `${name ?? 'Error'}: ${where}`,
      detail: `${(error as Error).message.split('\n')[0]} (${operation?.op} ${operation?.path})`,
    };
  }
}

/** Checks a 200: the envelope, the uid, the patch. Returns the review sent, its object patched, or a finding. */
function checkAdmission(requestText: string, replyText: string): { review: Json; patched: Json; patch: Json[] } | Finding {
  const sent = parse(requestText);
  if (!sent.ok) return malformed('200 for a body that is not JSON');
  const answer = parse(replyText);
  if (!answer.ok) return malformed('200 whose body is not JSON');
  const { apiVersion, kind, response } = answer.value ?? {};
  if (apiVersion !== 'admission.k8s.io/v1' || kind !== 'AdmissionReview') return malformed(`200 with apiVersion ${apiVersion}, kind ${kind}`);
  if (typeof response !== 'object' || response === null) return malformed('200 without a response');
  const uid = sent.value?.request?.uid;
  if (response.uid !== uid || typeof uid !== 'string')
    return malformed(`uid ${JSON.stringify(response.uid)?.slice(0, 40)} for a request uid ${JSON.stringify(uid)?.slice(0, 40)}`);
  if (typeof response.allowed !== 'boolean') return malformed('allowed is not a boolean');
  const { warnings } = response;
  if (warnings !== undefined && !(Array.isArray(warnings) && warnings.every((w: unknown) => typeof w === 'string')))
    return malformed('warnings is not a list of strings');
  const applied = applyAnswer(response, sent.value.request.object);
  return 'kind' in applied ? applied : { review: sent.value, ...applied };
}

function checkError(reply: Reply, requestText: string): Finding | undefined {
  if (reply.status >= 500) {
    const message = parse(reply.text);
    const text = message.ok && typeof message.value?.message === 'string' ? message.value.message : reply.text;
    return { kind: 'serverErrors', signature: `HTTP ${reply.status}: ${normalise(text)}`, detail: `HTTP ${reply.status}: ${text.slice(0, 300)}` };
  }
  if (reply.text.length > MAX_ERROR_BYTES)
    return { kind: 'malformed', signature: `HTTP ${reply.status} error of more than 64 KiB`, detail: `HTTP ${reply.status}, ${reply.text.length} bytes` };
  const body = parse(reply.text);
  if (!body.ok || typeof body.value?.message !== 'string')
    return { kind: 'malformed', signature: `HTTP ${reply.status} without a JSON error`, detail: reply.text.slice(0, 200) };
  if (/not valid JSON/i.test(body.value.message) && parse(requestText).ok) {
    return { kind: 'validJsonRefused', signature: `HTTP ${reply.status}: ${normalise(body.value.message)}`, detail: body.value.message };
  }
  return undefined;
}

export type Post = (body: Buffer, contentType: string | null) => Promise<Reply>;

export interface CaseOutcome {
  /** The first answer's status; 0 when there was none. */
  status: number;
  /** Time to the first answer. */
  ms: number;
  patched: boolean;
  findings: Finding[];
  /** The first answer, for replays. */
  reply?: Reply;
}

/** Sends one case (and, when patched, the patched object again) and checks the answers. */
export async function runCase(post: Post, fuzzCase: FuzzCase): Promise<CaseOutcome> {
  let reply: Reply;
  const sent = performance.now();
  try {
    reply = await post(fuzzCase.body, fuzzCase.contentType);
  } catch (error) {
    const ms = performance.now() - sent;
    const code = (error as NodeJS.ErrnoException).code ?? (error as Error).message;
    // Over the limit, the server answers 413 and closes without reading the rest: a client still
    // writing sees the close first.
    if (fuzzCase.body.length > BODY_LIMIT && (code === 'EPIPE' || code === 'ECONNRESET')) return { status: 413, ms, patched: false, findings: [] };
    return { status: 0, ms, patched: false, findings: [{ kind: 'noAnswer', signature: `no answer: ${normalise(code)}`, detail: String(error) }] };
  }
  const answered = { status: reply.status, ms: performance.now() - sent, reply };
  if (reply.status !== 200) {
    const finding = checkError(reply, fuzzCase.body.toString('utf8'));
    return { ...answered, patched: false, findings: finding ? [finding] : [] };
  }
  try {
    return { ...answered, ...(await checkPatched(post, fuzzCase, reply)) };
  } catch (error) {
    // Nesting deeper than this client's stack (the server's parser has no such limit): unchecked.
    if (error instanceof RangeError) return { ...answered, patched: false, findings: [] };
    throw error;
  }
}

/** A 200's checks: well-formed, its patch applies, and the patched object gets no further change. */
async function checkPatched(post: Post, fuzzCase: FuzzCase, reply: Reply): Promise<{ patched: boolean; findings: Finding[] }> {
  const requestText = fuzzCase.body.toString('utf8');
  const first = checkAdmission(requestText, reply.text);
  if ('kind' in first) return { patched: false, findings: [first] };
  if (first.patch.length === 0) return { patched: false, findings: [] };
  if (!fuzzCase.reserialises) return { patched: true, findings: [] };

  // The reinvocation: the same envelope with the patched object.
  const secondText = JSON.stringify({ ...first.review, request: { ...first.review.request, object: first.patched } });
  // A patch can grow a body near the limit past it (an original recorded under a 1 MiB container
  // name): the second pass would only measure the limit.
  if (Buffer.byteLength(secondText) > BODY_LIMIT) return { patched: true, findings: [] };
  const found = (finding: Finding) => ({ patched: true, findings: [finding] });
  let second: Reply;
  try {
    second = await post(Buffer.from(secondText), 'application/json');
  } catch (error) {
    return found({ kind: 'noAnswer', signature: `no answer on the second pass: ${(error as NodeJS.ErrnoException).code}`, detail: String(error) });
  }
  if (second.status !== 200) {
    const finding = checkError(second, secondText);
    if (finding?.kind === 'serverErrors') return found(finding);
    return found({ kind: 'nonIdempotent', signature: `second pass answered HTTP ${second.status}`, detail: second.text.slice(0, 300) });
  }
  const twice = checkAdmission(secondText, second.text);
  if ('kind' in twice) return found({ ...twice, signature: `second pass: ${twice.signature}` });
  if (twice.patch.length === 0 || isDeepStrictEqual(twice.patched, JSON.parse(secondText).request.object)) return { patched: true, findings: [] };
  const paths = twice.patch.map((operation: Json) => `${operation?.op} ${String(operation?.path).replace(/\/\d+(?=\/|$)/g, '/N')}`);
  return found({
    kind: 'nonIdempotent',
    signature: `second pass patches ${[...new Set(paths)].sort().join(', ')}`,
    detail: JSON.stringify(twice.patch).slice(0, 400),
  });
}

/** A keep-alive HTTPS client for one server (self-signed certificate accepted). */
export function httpsPoster(url: string, options: { sockets: number; timeoutMs: number }): { post: Post; close(): void } {
  const agent = new https.Agent({ keepAlive: true, maxSockets: options.sockets, rejectUnauthorized: false });
  const post: Post = (body, contentType) =>
    new Promise((resolve, reject) => {
      const headers: Record<string, string | number> = { 'content-length': body.length };
      if (contentType !== null) headers['content-type'] = contentType;
      const req = https.request(url, { method: 'POST', agent, headers, timeout: options.timeoutMs }, (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (chunk: Buffer) => chunks.push(chunk));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, text: Buffer.concat(chunks).toString('utf8') }));
        res.on('error', reject);
      });
      req.on('timeout', () => req.destroy(Object.assign(new Error(`no answer within ${options.timeoutMs} ms`), { code: 'TIMEOUT' })));
      req.on('error', reject);
      req.end(body);
    });
  return { post, close: () => agent.destroy() };
}

export interface CampaignOptions {
  post: Post;
  seed: number;
  cases: number;
  /** Requests in flight. */
  concurrency: number;
  /** Called after every `every` cases (and at the end), e.g. to sample the server's RSS. */
  every?: number;
  onMilestone?: (done: number) => void | Promise<void>;
  /** Whether the server process is still running (a case without an answer is then not a crash). */
  isAlive?: () => boolean;
}

export interface FindingSummary {
  kind: FindingKind;
  signature: string;
  count: number;
  /** The first cases that showed it: replay one with `npm run fuzz -- --seed S --case INDEX`. */
  examples: { index: number; description: string; detail: string }[];
}

export interface CampaignResult {
  seed: number;
  cases: number;
  byStatus: Record<string, number>;
  /** 200s that carried a patch (checked for idempotence). */
  patched: number;
  counts: Record<FindingKind, number>;
  findings: FindingSummary[];
  /** Time to the first answer of each case, ms (not a check: the machine may be shared). */
  latencyMs: { p50: number; p99: number; max: number };
  slowest: { index: number; ms: number; description: string }[];
  seconds: number;
}

export async function runCampaign(options: CampaignOptions): Promise<CampaignResult> {
  const started = performance.now();
  const byStatus: Record<string, number> = {};
  const counts = Object.fromEntries(FINDING_KINDS.map((kind) => [kind, 0])) as Record<FindingKind, number>;
  const findings = new Map<string, FindingSummary>();
  const every = options.every ?? Infinity;
  const batch = 500;
  let plans = plansAt(options.seed, 0, Math.min(batch, options.cases));
  let plansFrom = 0;
  let next = 0;
  let done = 0;
  let patched = 0;
  let crashed = false;
  const latencies: number[] = [];
  let slowest: CampaignResult['slowest'] = [];

  const record = (index: number, description: string, finding: Finding) => {
    counts[finding.kind]++;
    const key = `${finding.kind} ${finding.signature}`;
    const summary = findings.get(key) ?? { kind: finding.kind, signature: finding.signature, count: 0, examples: [] };
    summary.count++;
    if (summary.examples.length < 3) summary.examples.push({ index, description: description.slice(0, 400), detail: finding.detail });
    findings.set(key, summary);
  };

  const worker = async () => {
    while (!crashed && next < options.cases) {
      const index = next++;
      if (index >= plansFrom + plans.length) {
        plansFrom = index;
        plans = plansAt(options.seed, index, Math.min(batch, options.cases - index));
      }
      const fuzzCase = buildCase(plans[index - plansFrom]);
      const outcome = await runCase(options.post, fuzzCase);
      byStatus[outcome.status] = (byStatus[outcome.status] ?? 0) + 1;
      latencies.push(outcome.ms);
      if (slowest.length < 5 || outcome.ms > slowest[4].ms) {
        slowest = [...slowest, { index, ms: Math.round(outcome.ms), description: fuzzCase.description.slice(0, 200) }].sort((a, b) => b.ms - a.ms).slice(0, 5);
      }
      if (outcome.patched) patched++;
      for (const finding of outcome.findings) {
        if (finding.kind === 'noAnswer' && options.isAlive && !options.isAlive()) {
          // Once: the requests in flight when the process exited fail with it.
          if (!crashed) record(index, fuzzCase.description, { ...finding, kind: 'crashes', signature: 'the server process exited' });
          crashed = true;
        } else record(index, fuzzCase.description, finding);
      }
      done++;
      if (done % every === 0) await options.onMilestone?.(done);
    }
  };
  await Promise.all(Array.from({ length: options.concurrency }, worker));
  if (done % every !== 0) await options.onMilestone?.(done);
  latencies.sort((a, b) => a - b);
  const at = (p: number) => Math.round((latencies[Math.min(latencies.length - 1, Math.floor(p * latencies.length))] ?? NaN) * 100) / 100;
  return {
    seed: options.seed,
    cases: done,
    byStatus,
    patched,
    counts,
    findings: [...findings.values()].sort((a, b) => b.count - a.count),
    latencyMs: { p50: at(0.5), p99: at(0.99), max: at(1) },
    slowest,
    seconds: Math.round((performance.now() - started) / 100) / 10,
  };
}
