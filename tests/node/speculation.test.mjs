// Speculative decoding with n-gram drafts (--draft-kind ngram) through the HTTP API: the same
// text as a server without drafts for greedy and seeded sampled completions sent concurrently
// (batched rows with drafts); usage.speculation, /stats and /metrics count what was drafted and
// accepted; with the draft length left to the measured step cost (auto) the text is the same.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { getJson, LOOM_BIN, postJson, skipReason, startServer } from './helpers.mjs';

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
    return { text: r.body.choices[0].text, usage: r.body.usage };
  }));
}

// Starts a server with `args`, runs fn(server), stops it (exit 0 expected); returns fn's result.
async function onServer(args, fn) {
  const server = await startServer(['--batch', '4', ...args]);
  try {
    return await fn(server);
  } finally {
    assert.equal(await server.stop(), 0, server.log());
  }
}

test('--draft-kind ngram: the same completions as without drafts, drafts counted', { skip, timeout: 120000 }, async () => {
  const want = await onServer([], async (plain) => {
    const w = await completions(plain);
    for (const x of w) assert.equal(x.usage.speculation, undefined);
    return w;
  });
  // --draft-token-cost 0: every row drafts 4 (on this CPU the measured cost says drafts do not
  // pay, and rows would mostly draft nothing).
  await onServer(['--draft-kind', 'ngram', '--num-draft-tokens', '4',
    '--draft-token-cost', '0'], async (spec) => {
    const got = await completions(spec);
    for (let i = 0; i < REQUESTS.length; ++i) assert.equal(got[i].text, want[i].text, `request ${i}`);
    const stats = (await getJson(`${spec.url}/stats`)).body;
    const s = stats.batch.speculation;
    assert.ok(s.drafted > 0, JSON.stringify(s));
    assert.ok(s.accepted > 0 && s.accepted <= s.drafted, JSON.stringify(s));
    assert.equal(s.token_cost, 0);
    // Each reply's usage.speculation: its own rows; together, the server's totals.
    const sum = { drafted: 0, accepted: 0 };
    for (const g of got) {
      const u = g.usage.speculation;
      assert.ok(u.accepted <= u.drafted && u.accepted <= g.usage.completion_tokens, JSON.stringify(u));
      sum.drafted += u.drafted;
      sum.accepted += u.accepted;
    }
    assert.deepEqual(sum, { drafted: s.drafted, accepted: s.accepted });
    const metrics = await (await fetch(`${spec.url}/metrics`)).text();
    assert.match(metrics, new RegExp(`loom_spec_draft_tokens_total ${s.drafted}\\b`));
    assert.match(metrics, new RegExp(`loom_spec_accepted_tokens_total ${s.accepted}\\b`));
    console.log(`# ngram drafts: ${s.accepted} of ${s.drafted} accepted`);
  });
});

test('--draft-token-cost auto: the step cost is measured and the text is unchanged', { skip, timeout: 120000 }, async () => {
  const want = await onServer([], completions);
  await onServer(['--draft-kind', 'ngram'], async (spec) => {
    const got = await completions(spec);
    for (let i = 0; i < REQUESTS.length; ++i) assert.equal(got[i].text, want[i].text, `request ${i}`);
    const s = (await getJson(`${spec.url}/stats`)).body.batch.speculation;
    // Steps of different sizes (prefill, drafts) give the fit its slope.
    assert.equal(typeof s.token_cost, 'number', JSON.stringify(s));
    assert.ok(s.token_cost >= 0, JSON.stringify(s));
    console.log(`# auto: token cost ${s.token_cost.toFixed(3)}; ${s.accepted} of ${s.drafted} drafts accepted`);
  });
  // A bad value is refused at startup, naming the flag.
  const r = spawnSync(LOOM_BIN, ['serve', '--port', '0', '--no-open', '--draft-token-cost', 'cheap'],
    { encoding: 'utf8', timeout: 30000 });
  assert.notEqual(r.status, 0);
  assert.match(r.stderr + r.stdout, /--draft-token-cost must be auto or a number/);
});

test('drafts under a json_schema grammar: the same replies as without drafts, valid JSON', { skip, timeout: 120000 }, async () => {
  const schema = { type: 'array', items: { type: 'string', maxLength: 24 }, minItems: 2, maxItems: 5 };
  const bodies = [0, 0.9].map((temperature) => ({
    messages: [{ role: 'user', content: `${STORY} ${STORY} List the names.` }],
    max_tokens: 120, temperature, seed: 4,
    response_format: { type: 'json_schema', json_schema: { name: 'names', schema, strict: true } },
  }));
  const ask = async (server) => Promise.all(bodies.map(async (b) => {
    const r = await postJson(`${server.url}/v1/chat/completions`, b);
    assert.equal(r.status, 200, JSON.stringify(r.body));
    return r.body.choices[0].message.content;
  }));
  const want = await onServer([], ask);
  await onServer(['--draft-kind', 'ngram', '--num-draft-tokens', '4',
    '--draft-token-cost', '0'], async (spec) => {
    const got = await ask(spec);
    assert.deepEqual(got, want);
    for (const text of got) {
      const doc = JSON.parse(text);
      assert.ok(Array.isArray(doc) && doc.length >= 2 && doc.length <= 5, text);
    }
    const s = (await getJson(`${spec.url}/stats`)).body.batch.speculation;
    assert.ok(s.drafted > 0, JSON.stringify(s));
    console.log(`# json_schema rows: ${s.accepted} of ${s.drafted} drafts accepted`);
  });
});
