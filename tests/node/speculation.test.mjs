// Speculative decoding with n-gram drafts (--draft-kind ngram) through the HTTP API: the same
// text as a server without drafts for greedy and seeded sampled completions sent concurrently
// (batched rows with drafts), and /stats and /metrics count what was drafted and accepted.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { getJson, postJson, skipReason, startServer } from './helpers.mjs';

const skip = skipReason() || false;

// Prompts that repeat themselves, so that their continuations find n-gram matches.
const STORY = 'Once upon a time there was a little girl named Lily. She loved to play in the park ' +
  'with her friend Tom. One day Lily and Tom saw a big red ball.';
const REQUESTS = [
  { prompt: `${STORY} ${STORY} Once upon a time there was`, max_tokens: 60, temperature: 0 },
  { prompt: `${STORY} Again: ${STORY} Again:`, max_tokens: 60, temperature: 0 },
  { prompt: `${STORY} ${STORY}`, max_tokens: 60, temperature: 0.8, top_p: 0.95, seed: 7 },
  { prompt: 'Lily and Tom. Lily and Tom. Lily and', max_tokens: 40, temperature: 1.0, seed: 3,
    frequency_penalty: 0.2 },
];

async function completions(server) {
  return Promise.all(REQUESTS.map(async (body) => {
    const r = await postJson(`${server.url}/v1/completions`, { ...body, ignore_eos: true });
    assert.equal(r.status, 200, JSON.stringify(r.body));
    return r.body.choices[0].text;
  }));
}

test('--draft-kind ngram: the same completions as without drafts, drafts counted', { skip, timeout: 120000 }, async () => {
  const plain = await startServer(['--batch', '4']);
  let want;
  try {
    want = await completions(plain);
  } finally {
    assert.equal(await plain.stop(), 0, plain.log());
  }
  const spec = await startServer(['--batch', '4', '--draft-kind', 'ngram', '--num-draft-tokens', '4']);
  try {
    const got = await completions(spec);
    for (let i = 0; i < REQUESTS.length; ++i) assert.equal(got[i], want[i], `request ${i}`);
    const stats = (await getJson(`${spec.url}/stats`)).body;
    const s = stats.batch.speculation;
    assert.ok(s.drafted > 0, JSON.stringify(s));
    assert.ok(s.accepted > 0 && s.accepted <= s.drafted, JSON.stringify(s));
    const metrics = await (await fetch(`${spec.url}/metrics`)).text();
    assert.match(metrics, new RegExp(`loom_spec_draft_tokens_total ${s.drafted}\\b`));
    assert.match(metrics, new RegExp(`loom_spec_accepted_tokens_total ${s.accepted}\\b`));
    console.log(`# ngram drafts: ${s.accepted} of ${s.drafted} accepted`);
  } finally {
    assert.equal(await spec.stop(), 0, spec.log());
  }
});
