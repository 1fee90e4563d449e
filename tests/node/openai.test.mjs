// The official `openai` npm client against `loom serve` with the embedded default model (real
// weights and tokenizer, in the repo). Oracle for greedy text: transformers' 32-token greedy
// trajectory in models/default/golden.json (written by tools/train_default_model/train.py).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import OpenAI from 'openai';
import { skipReason, startServer, getJson, postJson, waitIdle, DEFAULT_GOLDEN, DEFAULT_ID } from './helpers.mjs';

const skip = skipReason() || false;
const KEY = 'sk-loom-test';
let server, client;

before(async () => {
  if (skip) return;
  server = await startServer(['--api-key', KEY]);
  client = new OpenAI({ apiKey: KEY, baseURL: `${server.url}/v1`, maxRetries: 0 });
});
after(async () => { if (server) assert.equal(await server.stop(), 0, server.log()); });

// "<|endoftext|>And God said," → " Blessed be the LORD God of Israel, which brought you out ..."
const greedy = DEFAULT_GOLDEN.greedy;
const PROMPT = greedy.prompt;

test('models list', { skip }, async () => {
  const models = await client.models.list();
  assert.equal(models.data.length, 1);
  assert.equal(models.data[0].id, DEFAULT_ID);
  assert.equal(models.data[0].object, 'model');
});

test('greedy completion matches transformers', { skip }, async () => {
  const n = greedy.generated_ids.length;  // 32, none of them an end-of-sequence token
  const r = await client.completions.create({
    model: DEFAULT_ID, prompt: PROMPT, max_tokens: n, temperature: 0,
  });
  assert.equal(r.object, 'text_completion');
  assert.equal(r.choices[0].finish_reason, 'length');
  assert.equal(r.choices[0].text, greedy.generated_text);
  assert.equal(r.usage.prompt_tokens, greedy.prompt_ids.length);
  assert.equal(r.usage.completion_tokens, n);
  assert.equal(r.usage.total_tokens, n + greedy.prompt_ids.length);
  // The same prompt as token ids gives the same text.
  const ids = await client.completions.create({
    model: 'x', prompt: greedy.prompt_ids, max_tokens: n, temperature: 0,
  });
  assert.equal(ids.choices[0].text, r.choices[0].text);
});

test('streaming completion equals the non-streaming text; include_usage', { skip }, async () => {
  const args = { model: 'm', prompt: PROMPT, max_tokens: 30, temperature: 0 };
  const whole = await client.completions.create(args);
  const stream = await client.completions.create({ ...args, stream: true,
    stream_options: { include_usage: true } });
  let text = '', finish = null, usage = null, chunks = 0;
  for await (const c of stream) {
    chunks++;
    if (c.usage) usage = c.usage;
    for (const ch of c.choices) {
      text += ch.text;
      if (ch.finish_reason) finish = ch.finish_reason;
    }
  }
  assert.ok(chunks >= 3);
  assert.equal(text, whole.choices[0].text);
  assert.equal(finish, 'length');
  assert.equal(usage.completion_tokens, 30);
  assert.equal(usage.prompt_tokens, greedy.prompt_ids.length);
});

test('stop strings are never emitted, also across chunk boundaries', { skip }, async () => {
  const cont = greedy.generated_text;
  const stop = ' Israel';  // " Blessed be the LORD God of Israel, ..."
  const expected = cont.slice(0, cont.indexOf(stop));
  const r = await client.completions.create({ model: 'm', prompt: PROMPT,
    max_tokens: 32, temperature: 0, stop: [stop, 'zzz'] });
  assert.equal(r.choices[0].text, expected);
  assert.equal(r.choices[0].finish_reason, 'stop');
  const stream = await client.completions.create({ model: 'm', prompt: PROMPT,
    max_tokens: 32, temperature: 0, stop: stop, stream: true });
  let text = '', finish = null;
  for await (const c of stream) for (const ch of c.choices) {
    text += ch.text;
    if (ch.finish_reason) finish = ch.finish_reason;
  }
  assert.equal(text, expected);
  assert.equal(finish, 'stop');
});

test('n=2 and seed reproducibility', { skip }, async () => {
  const args = { model: 'm', prompt: PROMPT, max_tokens: 24, temperature: 1.0, seed: 1234, n: 2,
    ignore_eos: true };
  const a = await client.completions.create(args);
  const b = await client.completions.create(args);
  assert.equal(a.choices.length, 2);
  assert.deepEqual(a.choices.map((c) => c.index).sort(), [0, 1]);
  assert.deepEqual(a.choices.map((c) => c.text), b.choices.map((c) => c.text));
  assert.equal(a.usage.completion_tokens, 48);
  const texts = new Set();
  for (const seed of [1, 2, 3, 4]) {
    const r = await client.completions.create({ ...args, n: 1, seed });
    texts.add(r.choices[0].text);
  }
  assert.ok(texts.size > 1, 'different seeds should give different samples');
});

test('completions logprobs and echo', { skip }, async () => {
  const r = await client.completions.create({ model: 'm', prompt: 'And God said,',
    max_tokens: 6, temperature: 0, logprobs: 3, ignore_eos: true });
  const lp = r.choices[0].logprobs;
  assert.equal(lp.tokens.length, 6);
  assert.equal(lp.tokens.join(''), r.choices[0].text);
  assert.equal(lp.token_logprobs.length, 6);
  assert.equal(lp.top_logprobs.length, 6);
  for (let i = 0; i < 6; i++) {
    assert.ok(lp.token_logprobs[i] <= 0);
    const alts = lp.top_logprobs[i];
    assert.ok(Object.keys(alts).length >= 1 && Object.keys(alts).length <= 3);
    // Greedy: the chosen token is the most likely one.
    assert.equal(Math.max(...Object.values(alts)), lp.token_logprobs[i]);
  }
  assert.deepEqual(lp.text_offset, lp.tokens.map((_, i) => lp.tokens.slice(0, i).join('').length));
  const echo = await client.completions.create({ model: 'm', prompt: 'And God said,',
    max_tokens: 6, temperature: 0, echo: true, ignore_eos: true });
  assert.equal(echo.choices[0].text, 'And God said,' + r.choices[0].text);
});

test('cached_tokens on a repeated prefix', { skip }, async () => {
  const prompt = 'In the beginning God created the heaven and the earth. And the earth was ' +
    'without form, and void; and darkness was upon the face of the deep.';
  await client.completions.create({ model: 'm', prompt, max_tokens: 2, temperature: 0 });
  const r = await client.completions.create({ model: 'm', prompt, max_tokens: 2, temperature: 0 });
  assert.ok(r.usage.prompt_tokens > 32, `prompt has ${r.usage.prompt_tokens} tokens`);
  assert.ok(r.usage.prompt_tokens_details.cached_tokens >= 16,
    JSON.stringify(r.usage));
  assert.ok(r.usage.prompt_tokens_details.cached_tokens < r.usage.prompt_tokens);
});

test('chat completions (the model\'s own template), streaming and not', { skip }, async () => {
  const messages = [{ role: 'system', content: 'Tell a story.' }, { role: 'user', content: 'Who made the earth?' }];
  const r = await client.chat.completions.create({ model: 'm', messages, max_tokens: 20,
    temperature: 0, ignore_eos: true });
  assert.equal(r.object, 'chat.completion');
  assert.equal(r.choices[0].message.role, 'assistant');
  assert.equal(typeof r.choices[0].message.content, 'string');
  assert.ok(r.choices[0].message.content.length > 0);
  assert.equal(r.choices[0].finish_reason, 'length');
  assert.equal(r.usage.completion_tokens, 20);
  // Prompt = models/default's template (golden.json chat_template_check) rendered, tokenized.
  const rendered = '<|endoftext|><|system|>\nTell a story.<|end|>\n<|user|>\nWho made the earth?<|end|>\n<|assistant|>\n';
  const tok = await postJson(`${server.url}/tokenize`, { content: rendered, add_special: false },
    { Authorization: `Bearer ${KEY}` });
  assert.equal(tok.status, 200);
  assert.equal(r.usage.prompt_tokens, tok.body.tokens.length);

  const stream = await client.chat.completions.create({ model: 'm', messages, max_tokens: 20,
    temperature: 0, ignore_eos: true, stream: true, stream_options: { include_usage: true } });
  let text = '', roles = 0, finish = null, usage = null;
  for await (const c of stream) {
    assert.equal(c.object, 'chat.completion.chunk');
    if (c.usage) usage = c.usage;
    for (const ch of c.choices) {
      if (ch.delta.role) roles++;
      if (ch.delta.content) text += ch.delta.content;
      if (ch.finish_reason) finish = ch.finish_reason;
    }
  }
  assert.equal(roles, 1);
  assert.equal(text, r.choices[0].message.content);
  assert.equal(finish, 'length');
  assert.equal(usage.completion_tokens, 20);
});

test('chat logprobs in OpenAI shape', { skip }, async () => {
  const r = await client.chat.completions.create({ model: 'm', max_tokens: 5, temperature: 0,
    messages: [{ role: 'user', content: 'Hi' }], logprobs: true, top_logprobs: 2, ignore_eos: true });
  const content = r.choices[0].logprobs.content;
  assert.equal(content.length, 5);
  assert.equal(content.map((e) => e.token).join(''), r.choices[0].message.content);
  for (const e of content) {
    assert.deepEqual(e.bytes, [...Buffer.from(e.token, 'utf8')]);
    assert.equal(e.top_logprobs.length, 2);
    assert.equal(e.top_logprobs[0].logprob, e.logprob);
  }
});

test('tokenize / detokenize round trip', { skip }, async () => {
  const h = { Authorization: `Bearer ${KEY}` };
  const t = await postJson(`${server.url}/tokenize`, { content: PROMPT }, h);
  assert.deepEqual(t.body.tokens, greedy.prompt_ids);
  for (const c of DEFAULT_GOLDEN.tokenization) {  // transformers' ids, special tokens verbatim
    const r = await postJson(`${server.url}/tokenize`, { content: c.text }, h);
    assert.deepEqual(r.body.tokens, c.ids, c.text);
  }
  const d = await postJson(`${server.url}/detokenize`, { tokens: greedy.generated_ids }, h);
  assert.equal(d.body.content, greedy.generated_text);
});

test('/stats, /metrics and /health', { skip }, async () => {
  const h = { Authorization: `Bearer ${KEY}` };
  const s = await waitIdle(server.url, h);
  for (const k of ['server', 'model', 'prompt_cache', 'admission', 'batch']) assert.ok(k in s, k);
  for (const k of ['mode', 'active_rows', 'pending_rows', 'submitted_rows', 'kv_bytes', 'kv_budget_bytes']) {
    assert.ok(k in s.batch, k);
  }
  assert.ok(s.batch.submitted_rows > 0);
  assert.equal(s.kv.blocks_used, 0);
  const m = await fetch(`${server.url}/metrics`, { headers: h });
  const text = await m.text();
  assert.match(text, /loom_requests_total\{route="\/v1\/completions",status="200"\} \d+/);
  assert.match(text, /loom_time_to_first_token_seconds_count [1-9]/);
  assert.match(text, /loom_generation_tokens_total [1-9]/);
  assert.match(text, /loom_prefix_cache_hit_rate /);
  assert.equal((await getJson(`${server.url}/health`)).status, 200);  // public, no key
});

test('CORS preflight and the chat page', { skip }, async () => {
  // Loopback origins are allowed (echoed); others are refused (tests/node/security.test.mjs).
  const preflight = (origin) => fetch(`${server.url}/v1/chat/completions`, { method: 'OPTIONS',
    headers: { Origin: origin, 'Access-Control-Request-Method': 'POST',
      'Access-Control-Request-Headers': 'content-type,authorization' } });
  const pre = await preflight('http://localhost:5173');
  assert.equal(pre.status, 204);
  assert.equal(pre.headers.get('access-control-allow-origin'), 'http://localhost:5173');
  assert.match(pre.headers.get('access-control-allow-headers'), /authorization/);
  const cross = await preflight('http://example.com');
  assert.equal(cross.status, 403);
  assert.equal(cross.headers.get('access-control-allow-origin'), null);
  const page = await fetch(`${server.url}/`);
  assert.equal(page.status, 200);
  assert.match(page.headers.get('content-type'), /text\/html/);
  const html = await page.text();
  assert.match(html, /\/v1\/chat\/completions/);
  assert.doesNotMatch(html, /https?:\/\/(?!127\.0\.0\.1)/, 'the page must not load anything external');
  assert.ok(page.headers.get('x-request-id').startsWith('req-'));
});
