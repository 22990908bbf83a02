import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { httpsPoster, runCampaign } from '../fuzz/campaign.js';
import { FUZZ_CONFIG } from '../fuzz/cases.js';
import { send, startServer, type TestServer } from './harness.js';

// `npm run fuzz` runs 100,000 cases of these generators against the built server; this is a
// fixed sample of them. A failure names each defect and the cases that show it: replay one
// with `npm run fuzz -- --seed 20261123 --case INDEX`.
const SEED = 20261123;
const CASES = 2_000;

describe('fuzzing sample: hostile and malformed reviews over HTTPS', () => {
  let server: TestServer;
  let client: ReturnType<typeof httpsPoster>;
  beforeAll(async () => {
    // Strategies log every input they cannot handle (most of these): only the outcome matters here.
    server = await startServer(FUZZ_CONFIG, { LOG_LEVEL: 'fatal' });
    client = httpsPoster(`${server.https}/mutate`, { sockets: 4, timeoutMs: 10_000 });
  });
  afterAll(async () => {
    client?.close();
    await server?.stop();
  });

  it(`answers ${CASES} cases without a 5xx, with well-formed, applying, idempotent patches`, { timeout: 120_000 }, async () => {
    const result = await runCampaign({ post: client.post, seed: SEED, cases: CASES, concurrency: 4 });
    expect(result.cases).toBe(CASES);
    expect(result.findings.map(({ kind, signature, count, examples }) => ({ kind, signature, count, first: examples[0] }))).toEqual([]);
    // The sample reaches the strategies: a good share of the cases is admitted, many with a patch.
    expect(result.byStatus['200']).toBeGreaterThan(CASES / 3);
    expect(result.patched).toBeGreaterThan(CASES / 10);
    expect((await send(`${server.https}/healthz`)).status).toBe(200);
  });
});
