// The official `@anthropic-ai/sdk` client against `loom serve` (the embedded default model, its
// template overridden by --chat-template with a plain one): messages streaming and not, stop
// sequences, token counting, errors.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import Anthropic from '@anthropic-ai/sdk';
import { skipReason, startServer, postJson, CHAT_TEMPLATE } from './helpers.mjs';

const skip = skipReason() || false;
let server, client;

before(async () => {
  if (skip) return;
  server = await startServer(['--chat-template', CHAT_TEMPLATE]);
  client = new Anthropic({ apiKey: 'unused', baseURL: server.url, maxRetries: 0 });
});
after(async () => { if (server) assert.equal(await server.stop(), 0, server.log()); });

// ignore_eos (a loom extension) keeps the lengths exact whatever the small model says.
const base = { model: 'loom-default', max_tokens: 16, temperature: 0, ignore_eos: true,
  system: 'Tell a story.', messages: [{ role: 'user', content: 'Who made the earth?' }] };

test('messages: non-streaming', { skip }, async () => {
  const m = await client.messages.create(base);
  assert.equal(m.type, 'message');
  assert.equal(m.role, 'assistant');
  assert.match(m.id, /^msg_/);
  assert.equal(m.content.length, 1);
  assert.equal(m.content[0].type, 'text');
  assert.ok(m.content[0].text.length > 0);
  assert.equal(m.stop_reason, 'max_tokens');
  assert.equal(m.stop_sequence, null);
  assert.equal(m.usage.output_tokens, 16);
  assert.ok(m.usage.input_tokens > 0);
  assert.equal(typeof m.usage.cache_read_input_tokens, 'number');
});

test('messages: streaming event sequence and text', { skip }, async () => {
  const whole = await client.messages.create(base);
  const stream = await client.messages.create({ ...base, stream: true });
  const types = [];
  let text = '', stopReason = null, outputTokens = null;
  for await (const ev of stream) {
    types.push(ev.type);
    if (ev.type === 'content_block_delta') text += ev.delta.text;
    if (ev.type === 'message_delta') {
      stopReason = ev.delta.stop_reason;
      outputTokens = ev.usage.output_tokens;
    }
  }
  assert.equal(types[0], 'message_start');
  assert.equal(types[1], 'content_block_start');
  assert.ok(types.includes('content_block_delta'));
  assert.deepEqual(types.slice(-3), ['content_block_stop', 'message_delta', 'message_stop']);
  assert.equal(text, whole.content[0].text);
  assert.equal(stopReason, 'max_tokens');
  assert.equal(outputTokens, 16);
  // The SDK's helper assembles the same message.
  const final = await client.messages.stream(base).finalMessage();
  assert.equal(final.content[0].text, whole.content[0].text);
});

test('messages: stop_sequences → stop_reason stop_sequence', { skip }, async () => {
  const whole = await client.messages.create({ ...base, max_tokens: 30 });
  const full = whole.content[0].text;
  const words = full.trim().split(' ');
  assert.ok(words.length > 4, full);
  const stop = ' ' + words[3];
  const expected = full.slice(0, full.indexOf(stop));
  const m = await client.messages.create({ ...base, max_tokens: 30, stop_sequences: [stop] });
  assert.equal(m.content[0].text, expected);
  assert.equal(m.stop_reason, 'stop_sequence');
  assert.equal(m.stop_sequence, stop);
});

test('messages: repeated prefix reads the cache', { skip }, async () => {
  const long = { ...base, max_tokens: 2,
    system: 'In the beginning God created the heaven and the earth. And the earth was without ' +
            'form, and void; and darkness was upon the face of the deep.' };
  await client.messages.create(long);
  const m = await client.messages.create(long);
  assert.ok(m.usage.cache_read_input_tokens >= 16, JSON.stringify(m.usage));
});

test('count_tokens (with ?beta=true) equals the prompt the model sees', { skip }, async () => {
  const m = await client.messages.create(base);
  const c = await postJson(`${server.url}/v1/messages/count_tokens?beta=true`,
    { model: 'x', system: base.system, messages: base.messages });
  assert.equal(c.status, 200);
  assert.equal(c.body.input_tokens, m.usage.input_tokens + m.usage.cache_read_input_tokens);
  const viaSdk = await client.messages.countTokens({ model: 'x', system: base.system, messages: base.messages });
  assert.equal(viaSdk.input_tokens, c.body.input_tokens);
});

test('errors have the Anthropic shape', { skip }, async () => {
  await assert.rejects(client.messages.create({ ...base, temperature: 5 }), (e) => {
    assert.equal(e.status, 400);
    assert.equal(e.error.type, 'error');
    assert.equal(e.error.error.type, 'invalid_request_error');
    assert.match(e.error.error.message, /temperature/);
    return true;
  });
  const r = await postJson(`${server.url}/v1/messages`, { messages: base.messages });
  assert.equal(r.status, 400);
  assert.match(r.body.error.message, /max_tokens is required/);
});
