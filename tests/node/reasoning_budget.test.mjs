// Reasoning budgets (issue 22 item 5): Anthropic thinking.budget_tokens, OpenAI (vLLM)
// thinking_token_budget and --reasoning-budget end the reply's <think> section after that many
// tokens: loom then writes the close ("\n</think>\n\n") itself and the model answers. On the tiny
// random Qwen3 (helpers.mjs) with testdata/think_chat.jinja, whose generation prompt opens the
// section: the random reply never closes it, so without a budget all of it is reasoning.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import path from 'node:path';
import OpenAI from 'openai';
import Anthropic from '@anthropic-ai/sdk';
import { HERE, postJson, startServer, tinyQwen3Args, tinyQwen3Skip, waitIdle } from './helpers.mjs';

const skip = tinyQwen3Skip();
const THINK_TEMPLATE = path.join(HERE, 'testdata/think_chat.jinja');
let server, openai, anthropic;

before(async () => {
  if (skip) return;
  // A server default of 3; requests below set their own budgets (1000: in effect none).
  server = await startServer([...tinyQwen3Args(), '--chat-template', THINK_TEMPLATE,
    '--reasoning-budget', '3']);
  openai = new OpenAI({ apiKey: 'unused', baseURL: `${server.url}/v1`, maxRetries: 0 });
  anthropic = new Anthropic({ apiKey: 'unused', baseURL: server.url, maxRetries: 0 });
});
after(async () => { if (server) assert.equal(await server.stop(), 0, server.log()); });

// A prompt whose greedy random reply is not all newlines (most are), so the split is visible.
const messages = [{ role: 'user', content: 'x y z' }];

// The greedy reply's first n tokens, all reasoning (no budget spent within them): what a budget
// of n keeps, before the forced "\n</think>".
async function firstReasoningTokens(n) {
  const c = await openai.chat.completions.create({ model: 'm', messages, max_tokens: n,
    temperature: 0, thinking_token_budget: 1000 });
  assert.equal(c.usage.completion_tokens, n);
  assert.equal(c.choices[0].message.content, '');
  return c.choices[0].message.reasoning_content;
}

test('anthropic thinking.budget_tokens ends the thinking block after that many tokens', { skip }, async () => {
  const five = await firstReasoningTokens(5);
  const long = await firstReasoningTokens(24);
  assert.ok(long.startsWith(five) && long.length > five.length + 1, 'unbudgeted: all reasoning');
  const req = { model: 'm', max_tokens: 24, temperature: 0, messages,
    thinking: { type: 'enabled', budget_tokens: 5 } };
  const m = await anthropic.messages.create(req);
  assert.deepEqual(m.content.map((b) => b.type), ['thinking', 'text'], JSON.stringify(m.content));
  // 5 reasoning tokens, then the forced "\n</think>\n\n" (its "\n" belongs to the section).
  assert.equal(m.content[0].thinking, five + '\n');
  assert.ok(m.content[1].text.trim().length > 0, JSON.stringify(m.content));
  assert.equal(m.usage.output_tokens, 24);
  // Streaming gives the same blocks (accumulated by hand: this SDK version's finalMessage drops
  // thinking_delta).
  const blocks = [];
  for await (const e of await anthropic.messages.create({ ...req, stream: true })) {
    if (e.type === 'content_block_start') blocks[e.index] = [e.content_block.type, ''];
    if (e.type === 'content_block_delta') {
      blocks[e.index][1] += e.delta.thinking ?? e.delta.text ?? '';
    }
  }
  assert.deepEqual(blocks, m.content.map((b) => [b.type, b.thinking ?? b.text]));
  // The same budget through OpenAI chat's thinking_token_budget.
  const c = await openai.chat.completions.create({ model: 'm', messages, max_tokens: 24,
    temperature: 0, thinking_token_budget: 5 });
  assert.equal(c.choices[0].message.reasoning_content, five + '\n');
  assert.equal(c.choices[0].message.content, m.content[1].text);
  let reasoning = '', content = '';
  for await (const chunk of await openai.chat.completions.create({ model: 'm', messages,
    max_tokens: 24, temperature: 0, thinking_token_budget: 5, stream: true })) {
    reasoning += chunk.choices[0]?.delta?.reasoning_content ?? '';
    content += chunk.choices[0]?.delta?.content ?? '';
  }
  assert.equal(reasoning, five + '\n');
  assert.equal(content, c.choices[0].message.content);
  const s = await waitIdle(server.url);
  assert.equal(s.kv.blocks_used, 0);
});

test('--reasoning-budget is the default; budget 0 closes the section at once', { skip }, async () => {
  const three = await firstReasoningTokens(3);
  const m = await anthropic.messages.create({ model: 'm', max_tokens: 16, temperature: 0, messages });
  assert.equal(m.content[0].type, 'thinking');
  assert.equal(m.content[0].thinking, three + '\n');
  const zero = await openai.chat.completions.create({ model: 'm', messages, max_tokens: 12,
    temperature: 0, thinking_token_budget: 0 });
  assert.equal(zero.choices[0].message.reasoning_content, '\n');
  assert.ok(zero.choices[0].message.content.length > 0);
  // Thinking off: the template closes the section, no budget applies, all of it is text.
  const off = await anthropic.messages.create({ model: 'm', max_tokens: 8, temperature: 0,
    messages, thinking: { type: 'disabled' } });
  assert.deepEqual(off.content.map((b) => b.type), ['text']);
});

test('bad budgets are a 400 naming the field', { skip }, async () => {
  const cases = [
    [{ type: 'enabled', budget_tokens: 'many' }, 24, /thinking.budget_tokens must be an integer/],
    [{ type: 'enabled', budget_tokens: 2.5 }, 24, /thinking.budget_tokens must be an integer/],
    [{ type: 'enabled', budget_tokens: 0 }, 24, /thinking.budget_tokens must be >= 1/],
    [{ type: 'enabled', budget_tokens: 24 }, 24, /must be less than max_tokens \(24\)/],
  ];
  for (const [thinking, maxTokens, message] of cases) {
    const r = await postJson(`${server.url}/v1/messages`, { model: 'm', max_tokens: maxTokens,
      messages, thinking });
    assert.equal(r.status, 400, JSON.stringify(r.body));
    assert.equal(r.body.type, 'error');
    assert.match(r.body.error.message, message);
  }
  for (const budget of [-1, 'x', 1.5]) {
    const r = await postJson(`${server.url}/v1/chat/completions`, { model: 'm', messages,
      max_tokens: 4, thinking_token_budget: budget });
    assert.equal(r.status, 400, JSON.stringify(r.body));
    assert.equal(r.body.error.param, 'thinking_token_budget');
  }
});
