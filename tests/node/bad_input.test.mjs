// Bad input over HTTP: every case gets the right status and an OpenAI- (or Anthropic-) shaped
// error naming the field; afterwards the server is healthy and no KV block is leaked. The
// server runs the default model without its chat template, with --api-key, a 1 MiB body cap and a
// 256-token context.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { skipReason, startServer, getJson, waitIdle, defaultModelWithoutTemplate } from './helpers.mjs';

const skip = skipReason() || false;
const KEY = 'sk-bad-input';
const AUTH = { Authorization: `Bearer ${KEY}` };
let server;

before(async () => {
  if (skip) return;
  server = await startServer(['--api-key', KEY, '--max-body-mb', '1', '--max-model-len', '256'],
    defaultModelWithoutTemplate());
});
after(async () => { if (server) assert.equal(await server.stop(), 0, server.log()); });

const msgs = [{ role: 'user', content: 'hi' }];
const long = 'And God said, Let there be light: and there was light. '.repeat(40);  // > 256 tokens

// [name, method, path, body (object → JSON, string → raw), expected status, param or message
//  regex, headers]
const CASES = [
  ['malformed json', 'POST', '/v1/chat/completions', '{"messages": [', 400, /not valid JSON/],
  ['invalid utf-8', 'POST', '/v1/chat/completions', Buffer.from('{"messages":[{"role":"user","content":"\xff"}]}', 'latin1'), 400, /UTF-8/],
  ['body not an object', 'POST', '/v1/completions', '[1]', 400, /JSON object/],
  ['empty body', 'POST', '/v1/completions', '', 400, /empty/],
  ['missing messages', 'POST', '/v1/chat/completions', {}, 400, 'messages'],
  ['messages not array', 'POST', '/v1/chat/completions', { messages: 'hi' }, 400, 'messages'],
  ['empty messages', 'POST', '/v1/chat/completions', { messages: [] }, 400, 'messages'],
  ['unknown role', 'POST', '/v1/chat/completions', { messages: [{ role: 'robot', content: 'x' }] }, 400, 'messages[0].role'],
  ['empty content', 'POST', '/v1/chat/completions', { messages: [{ role: 'user', content: '' }] }, 400, 'messages[0].content'],
  ['image part', 'POST', '/v1/chat/completions', { messages: [{ role: 'user', content: [{ type: 'image_url', image_url: { url: 'http://x' } }] }] }, 400, 'messages[0].content[0]'],
  ['tools, no tool-call format in the template', 'POST', '/v1/chat/completions', { messages: msgs, tools: [{ type: 'function', function: { name: 'f' } }] }, 400, 'tools'],
  ['response_format type', 'POST', '/v1/chat/completions', { messages: msgs, response_format: { type: 'xml' } }, 400, 'response_format.type'],
  ['chat without template', 'POST', '/v1/chat/completions', { messages: msgs }, 400, 'messages'],
  ['temperature -1', 'POST', '/v1/completions', { prompt: 'a', temperature: -1 }, 400, 'temperature'],
  ['temperature string', 'POST', '/v1/completions', { prompt: 'a', temperature: 'hot' }, 400, 'temperature'],
  ['top_p 2', 'POST', '/v1/completions', { prompt: 'a', top_p: 2 }, 400, 'top_p'],
  ['negative max_tokens', 'POST', '/v1/completions', { prompt: 'a', max_tokens: -5 }, 400, 'max_tokens'],
  ['huge max_tokens', 'POST', '/v1/completions', { prompt: 'a', max_tokens: 1000000 }, 400, 'max_tokens'],
  ['n=0', 'POST', '/v1/completions', { prompt: 'a', n: 0 }, 400, 'n'],
  ['n=1000', 'POST', '/v1/completions', { prompt: 'a', n: 1000 }, 400, 'n'],
  ['logit_bias out of vocab', 'POST', '/v1/completions', { prompt: 'a', logit_bias: { 99999: 5 } }, 400, 'logit_bias'],
  ['prompt ids out of vocab', 'POST', '/v1/completions', { prompt: [1, 99999] }, 400, 'prompt'],
  ['prompt longer than context', 'POST', '/v1/completions', { prompt: long, max_tokens: 4 }, 400, 'prompt'],
  ['prompt + max_tokens over context', 'POST', '/v1/completions', { prompt: 'Once', max_tokens: 256 }, 400, 'max_tokens'],
  ['suffix', 'POST', '/v1/completions', { prompt: 'a', suffix: 'b' }, 400, 'suffix'],
  ['stop wrong type', 'POST', '/v1/completions', { prompt: 'a', stop: 3 }, 400, 'stop'],
  ['stream_options without stream', 'POST', '/v1/completions', { prompt: 'a', stream_options: { include_usage: true } }, 400, 'stream_options'],
  ['body over the cap', 'POST', '/v1/completions', JSON.stringify({ prompt: 'x'.repeat(2 << 20) }), 413, /exceeds/],
  ['wrong content type', 'POST', '/v1/completions', '{"prompt":"a"}', 415, /Content-Type/, { 'Content-Type': 'application/xml' }],
  ['wrong method', 'GET', '/v1/chat/completions', null, 405, /not allowed/],
  ['wrong method (POST on GET route)', 'POST', '/v1/models', {}, 405, /not allowed/],
  ['unknown route', 'GET', '/v1/nothing', null, 404, /unknown route/],
  ['missing api key', 'POST', '/v1/completions', { prompt: 'a' }, 401, /missing API key/, { Authorization: '' }],
  ['bad api key', 'POST', '/v1/completions', { prompt: 'a' }, 401, /invalid API key/, { Authorization: 'Bearer nope' }],
  ['tokenize without content', 'POST', '/tokenize', {}, 400, 'content'],
  ['detokenize bad ids', 'POST', '/detokenize', { tokens: [-1] }, 400, 'tokens'],
  ['anthropic: missing max_tokens', 'POST', '/v1/messages?beta=true', { messages: msgs }, 400, /max_tokens is required/],
  ['anthropic: bad role', 'POST', '/v1/messages', { max_tokens: 4, messages: [{ role: 'tool', content: 'x' }] }, 400, /messages\[0\]\.role/],
  ['anthropic: tool without input_schema', 'POST', '/v1/messages', { max_tokens: 4, messages: msgs, tools: [{ name: 'f' }] }, 400, /tools\[0\]\.input_schema is required/],
  ['anthropic: bad key', 'POST', '/v1/messages', { max_tokens: 4, messages: msgs }, 401, /invalid API key/, { Authorization: '', 'x-api-key': 'wrong' }],
  // Numbers JSON.stringify cannot write (beyond a double, beyond 64 bits), sent as raw text.
  ['max_tokens 1e999', 'POST', '/v1/completions', '{"prompt":"a","max_tokens":1e999}', 400, 'max_tokens'],
  ['max_tokens 1e999 (message)', 'POST', '/v1/completions', '{"prompt":"a","max_tokens":1e999}', 400, /^max_tokens: the number 1e999 is out of range/],
  ['chat: temperature -1e999', 'POST', '/v1/chat/completions', '{"messages":[{"role":"user","content":"hi"}],"temperature":-1e999}', 400, 'temperature'],
  ['chat: nested 1e999', 'POST', '/v1/chat/completions', '{"messages":[{"role":"user","content":"hi","x":1e999}]}', 400, 'messages[0].x'],
  ['max_tokens huge integer', 'POST', '/v1/completions', '{"prompt":"a","max_tokens":12345678901234567890123}', 400, 'max_tokens'],
  ['seed huge integer', 'POST', '/v1/completions', '{"prompt":"a","seed":12345678901234567890123}', 400, 'seed'],
  ['anthropic: max_tokens 1e999', 'POST', '/v1/messages', '{"max_tokens":1e999,"messages":[{"role":"user","content":"hi"}]}', 400, /max_tokens: the number 1e999 is out of range/],
  ['anthropic: temperature -1e999', 'POST', '/v1/messages', '{"max_tokens":4,"temperature":-1e999,"messages":[{"role":"user","content":"hi"}]}', 400, /temperature: the number -1e999/],
  ['anthropic: count_tokens 1e999', 'POST', '/v1/messages/count_tokens', '{"messages":[{"role":"user","content":"hi"}],"top_k":1e999}', 400, /top_k: the number 1e999/],
  ['tokenize: add_special 1e999', 'POST', '/tokenize', '{"content":"a","add_special":1e999}', 400, 'add_special'],
  ['detokenize: -1e999', 'POST', '/detokenize', '{"tokens":[-1e999]}', 400, 'tokens[0]'],
  ['detokenize: huge integer', 'POST', '/detokenize', '{"tokens":[12345678901234567890123]}', 400, 'tokens'],
];

for (const [name, method, path, body, status, expect, headers] of CASES) {
  test(`bad input: ${name}`, { skip }, async () => {
    const h = { 'Content-Type': 'application/json', ...AUTH, ...(headers || {}) };
    if (h.Authorization === '') delete h.Authorization;
    const init = { method, headers: h };
    if (body !== null && method !== 'GET') {
      init.body = typeof body === 'string' || Buffer.isBuffer(body) ? body : JSON.stringify(body);
    }
    const r = await getJson(`${server.url}${path}`, init);
    assert.equal(r.status, status, JSON.stringify(r.body));
    const anthropic = path.startsWith('/v1/messages');
    let message;
    if (anthropic) {
      assert.equal(r.body.type, 'error');
      assert.equal(typeof r.body.error.type, 'string');
      message = r.body.error.message;
    } else {
      assert.deepEqual(Object.keys(r.body.error).sort(), ['code', 'message', 'param', 'type']);
      message = r.body.error.message;
      if (typeof expect === 'string') assert.equal(r.body.error.param, expect, message);
    }
    if (typeof expect !== 'string') assert.match(message, expect);
    assert.ok(message.length > 10, message);
  });
}

test('bad input table has >= 40 HTTP cases', { skip }, () => assert.ok(CASES.length >= 40));

test('after the table: healthy, serving, no leaked KV blocks', { skip }, async () => {
  assert.equal((await getJson(`${server.url}/health`)).status, 200);
  const ok = await getJson(`${server.url}/v1/completions`, { method: 'POST',
    headers: { 'Content-Type': 'application/json', ...AUTH },
    body: JSON.stringify({ prompt: 'Once upon a time', max_tokens: 8, temperature: 0, ignore_eos: true }) });
  assert.equal(ok.status, 200);
  assert.equal(ok.body.usage.completion_tokens, 8);
  const s = await waitIdle(server.url, AUTH);
  assert.equal(s.kv.blocks_used, 0);
  assert.equal(s.batch.active_rows, 0);
  assert.equal(s.batch.kv_bytes, 0);
  const m = await (await fetch(`${server.url}/metrics`, { headers: AUTH })).text();
  assert.match(m, /loom_requests_total\{route="\/v1\/completions",status="400"\} [1-9]/);
});
