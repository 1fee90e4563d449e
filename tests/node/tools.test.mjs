// Tool calling and reasoning through the official `openai` and `@anthropic-ai/sdk` clients, on
// a random-weight Qwen3-shaped model with the real Qwen3 tokenizer and chat template (see
// helpers.mjs): requests with tools, tool_choice, tool-call history and tool results are
// accepted and rendered by the model's template; what cannot be honoured yet is a 400 naming the
// field. (The output is random text; the parsers' tool-call events are tested in C++ against
// real templates' transcripts.)
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import OpenAI from 'openai';
import Anthropic from '@anthropic-ai/sdk';
import path from 'node:path';
import Ajv2020 from 'ajv/dist/2020.js';
import { SHARED, sharedSkip, startServer, tinyQwen3Args, tinyQwen3Skip, waitIdle } from './helpers.mjs';

const skip = tinyQwen3Skip();
let server, openai, anthropic;

before(async () => {
  if (skip) return;
  server = await startServer([...tinyQwen3Args(), '--max-output-tokens', '200']);
  openai = new OpenAI({ apiKey: 'unused', baseURL: `${server.url}/v1`, maxRetries: 0 });
  anthropic = new Anthropic({ apiKey: 'unused', baseURL: server.url, maxRetries: 0 });
});
after(async () => { if (server) assert.equal(await server.stop(), 0, server.log()); });

const weather = {
  type: 'function',
  function: {
    name: 'get_weather',
    description: 'The weather of a city',
    parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] },
  },
};
const question = [{ role: 'user', content: 'What is the weather in Paris?' }];
const history = [
  ...question,
  { role: 'assistant', content: null, tool_calls: [
    { id: 'call_1', type: 'function', function: { name: 'get_weather', arguments: '{"city":"Paris"}' } }] },
  { role: 'tool', tool_call_id: 'call_1', content: '{"sky":"sunny","celsius":21}' },
];

test('the ready card names the tool and reasoning parsers found in the template', { skip }, () => {
  assert.match(server.log(), /tools\s+hermes \(from the chat template\); reasoning <think> sections/);
});

test('openai: tools, tool_choice auto, tool-call history; the template sees them', { skip }, async () => {
  const plain = await openai.chat.completions.create({ model: 'm', messages: question, max_tokens: 4 });
  const withTools = await openai.chat.completions.create({
    model: 'm', messages: question, tools: [weather], tool_choice: 'auto', max_tokens: 4 });
  assert.equal(withTools.choices[0].finish_reason, 'length');
  assert.equal(typeof withTools.choices[0].message.content, 'string');
  // Qwen3's template lists the tools in the system turn: the prompt grows by their JSON.
  assert.ok(withTools.usage.prompt_tokens > plain.usage.prompt_tokens + 40,
    `${withTools.usage.prompt_tokens} vs ${plain.usage.prompt_tokens}`);
  const followUp = await openai.chat.completions.create({
    model: 'm', messages: history, tools: [weather], parallel_tool_calls: false, max_tokens: 4 });
  // ...and the call and its result are rendered too (<tool_call> / <tool_response> turns).
  assert.ok(followUp.usage.prompt_tokens > withTools.usage.prompt_tokens + 20);
  // tool_choice none: the tools are not shown.
  const none = await openai.chat.completions.create({
    model: 'm', messages: question, tools: [weather], tool_choice: 'none', max_tokens: 4 });
  assert.equal(none.usage.prompt_tokens, plain.usage.prompt_tokens);
});

test('openai: streaming with tools ends with a finish reason and usage', { skip }, async () => {
  const stream = await openai.chat.completions.create({
    model: 'm', messages: history, tools: [weather], max_tokens: 8, stream: true,
    stream_options: { include_usage: true } });
  let finish = null, usage = null, text = '';
  for await (const chunk of stream) {
    if (chunk.usage) usage = chunk.usage;
    for (const c of chunk.choices) {
      text += c.delta?.content ?? '';
      if (c.finish_reason) finish = c.finish_reason;
    }
  }
  assert.equal(finish, 'length');
  assert.equal(usage.completion_tokens, 8);
});

// A tool whose arguments a random model can finish within the output cap.
const booking = {
  type: 'function',
  function: {
    name: 'book_table',
    description: 'Book a table',
    parameters: {
      type: 'object',
      properties: {
        city: { enum: ['Paris', 'Rome', 'Oslo'] },
        guests: { type: 'integer', minimum: 1, maximum: 12 },
        outdoor: { type: 'boolean' },
      },
      required: ['city', 'guests'],
      additionalProperties: false,
    },
  },
};
const lookup = { type: 'function', function: { name: 'lookup', parameters: { type: 'object',
  properties: { id: { type: 'integer', minimum: 0, maximum: 999 } }, required: ['id'] } } };
const ajv = new Ajv2020({ strict: false });
const validBooking = ajv.compile(booking.function.parameters);
const validLookup = ajv.compile(lookup.function.parameters);

test('openai: tool_choice required / named forces a valid call, streamed and not', { skip }, async () => {
  for (const tool_choice of ['required', { type: 'function', function: { name: 'book_table' } }]) {
    for (const seed of [1, 2, 3]) {
      // reasoning_effort none: Qwen3's template then closes the think section in the prompt, so
      // the grammar starts at the first token (with thinking on, a <think> section may come
      // first, which a random model may not end within the cap).
      // parallel_tool_calls false: one call (with parallel calls the grammar allows more, which a
      // random model rarely stops writing within the cap).
      const c = await openai.chat.completions.create({ model: 'm', messages: question,
        tools: [lookup, booking], tool_choice, seed, max_tokens: 200, reasoning_effort: 'none',
        parallel_tool_calls: false });
      const choice = c.choices[0];
      assert.equal(choice.finish_reason, 'tool_calls', JSON.stringify(choice));
      assert.equal(choice.message.content, null);
      assert.equal(choice.message.tool_calls.length, 1);
      const call = choice.message.tool_calls[0];
      assert.match(call.id, /^call_/);
      if (typeof tool_choice === 'object') assert.equal(call.function.name, 'book_table');
      const args = JSON.parse(call.function.arguments);
      if (call.function.name === 'book_table') assert.ok(validBooking(args), JSON.stringify(ajv.errors));
      else assert.ok(validLookup(args), JSON.stringify(args));
    }
  }
  // Streamed: the SDK's accumulated deltas give the same call as the non-streamed reply.
  const req = { model: 'm', messages: question, tools: [booking], tool_choice: 'required',
    seed: 5, max_tokens: 200, reasoning_effort: 'none', parallel_tool_calls: false };
  const whole = (await openai.chat.completions.create(req)).choices[0].message.tool_calls[0];
  let name = '', args = '', id = null, finish = null;
  for await (const chunk of await openai.chat.completions.create({ ...req, stream: true })) {
    const d = chunk.choices[0]?.delta;
    for (const tc of d?.tool_calls ?? []) {
      assert.equal(tc.index, 0);
      if (tc.id) id = tc.id;
      name += tc.function?.name ?? '';
      args += tc.function?.arguments ?? '';
    }
    assert.ok(!d?.content, `content leaked: ${JSON.stringify(d)}`);
    if (chunk.choices[0]?.finish_reason) finish = chunk.choices[0].finish_reason;
  }
  assert.equal(finish, 'tool_calls');
  assert.match(id, /^call_/);
  assert.equal(name, whole.function.name);
  assert.equal(args, whole.function.arguments);
  assert.ok(validBooking(JSON.parse(args)));
});

// Every tool-call format's grammar on the same random model (--tool-parser picks the format, not
// the template): a forced call comes out in that format's markup, its parser reads it back, and
// its arguments validate, streamed and not.
test('every tool-call format: tool_choice required gives a valid call the parser reads back', { skip }, async () => {
  // Gemma 4's and tool_code's arguments are literals of their own syntax, read back as JSON;
  // harmony's one call follows no analysis message here (reasoning_effort none).
  const formats = ['qwen3_coder', 'llama3_json', 'mistral', 'glm45', 'phi4_mini', 'deepseek_v3',
    'deepseek_v31', 'gemma4', 'gemma_tool_code', 'harmony'];
  for (const format of formats) {
    const s = await startServer([...tinyQwen3Args(), '--max-output-tokens', '200',
      '--tool-parser', format]);
    try {
      const oa = new OpenAI({ apiKey: 'unused', baseURL: `${s.url}/v1`, maxRetries: 0 });
      const req = { model: 'm', messages: question, tools: [lookup, booking],
        tool_choice: 'required', max_tokens: 200, reasoning_effort: 'none',
        parallel_tool_calls: false };
      for (const seed of [1, 2]) {
        const choice = (await oa.chat.completions.create({ ...req, seed })).choices[0];
        assert.equal(choice.finish_reason, 'tool_calls', `${format}: ${JSON.stringify(choice)}`);
        assert.equal(choice.message.tool_calls.length, 1, format);
        const call = choice.message.tool_calls[0];
        const args = JSON.parse(call.function.arguments);
        const valid = call.function.name === 'book_table' ? validBooking : validLookup;
        assert.ok(valid(args), `${format}: ${call.function.name} ${call.function.arguments}`);
      }
      const named = { ...req, seed: 3, tool_choice: { type: 'function', function: { name: 'book_table' } } };
      const whole = (await oa.chat.completions.create(named)).choices[0].message.tool_calls[0];
      assert.equal(whole.function.name, 'book_table', format);
      let name = '', args = '';
      for await (const chunk of await oa.chat.completions.create({ ...named, stream: true })) {
        const d = chunk.choices[0]?.delta;
        for (const tc of d?.tool_calls ?? []) {
          name += tc.function?.name ?? '';
          args += tc.function?.arguments ?? '';
        }
        assert.ok(!d?.content, `${format}: content leaked: ${JSON.stringify(d)}`);
      }
      assert.equal(name, 'book_table', format);
      assert.deepEqual(JSON.parse(args), JSON.parse(whole.function.arguments), format);
      assert.ok(validBooking(JSON.parse(args)), `${format}: ${args}`);
    } finally {
      assert.equal(await s.stop(), 0, s.log());
    }
  }
});

test('openai: tool_choice auto: a call the model opens is a valid call (the lazy grammar)', { skip }, async () => {
  // logit_bias pushes Qwen3's <tool_call> token (151657), so the random model opens a call at
  // once; from there the grammar must make it one of the tools with valid arguments, and without
  // parallel_tool_calls the model cannot open a second one.
  for (const seed of [1, 2, 3, 4]) {
    const c = await openai.chat.completions.create({ model: 'm', messages: question,
      tools: [lookup, booking], tool_choice: 'auto', parallel_tool_calls: false, seed,
      max_tokens: 200, reasoning_effort: 'none', logit_bias: { 151657: 100 } });
    const choice = c.choices[0];
    assert.equal(choice.message.tool_calls?.length, 1, JSON.stringify(choice));
    assert.ok(['tool_calls', 'length'].includes(choice.finish_reason), choice.finish_reason);
    const call = choice.message.tool_calls[0];
    const args = JSON.parse(call.function.arguments);
    if (call.function.name === 'book_table') assert.ok(validBooking(args), JSON.stringify(ajv.errors));
    else assert.equal(call.function.name, 'lookup'), assert.ok(validLookup(args), JSON.stringify(args));
  }
});

test('openai: tool_choice auto with a schema the grammar cannot express still answers', { skip }, async () => {
  // A non-integer bound on a number is refused under tool_choice required (below), but must not fail an
  // agent's ordinary request: the lazy grammar is then left out.
  const timer = { type: 'function', function: { name: 'wait', parameters: { type: 'object',
    properties: { seconds: { type: 'number', maximum: 2.5 } } } } };
  const c = await openai.chat.completions.create({ model: 'm', messages: question,
    tools: [timer, weather], tool_choice: 'auto', max_tokens: 4 });
  assert.ok(c.choices[0].finish_reason);
  await assert.rejects(openai.chat.completions.create({ model: 'm', messages: question,
    tools: [timer], tool_choice: 'required', max_tokens: 4 }),
  (e) => e.status === 400 && /maximum/.test(e.message));
});

test('openai: what cannot be honoured or is malformed is a 400 naming the field', { skip }, async () => {
  const cases = [
    [{ tools: [weather], tool_choice: 'required', response_format: { type: 'json_object' } },
      'tool_choice', /both constrain the output/],
    [{ tools: [weather], tool_choice: { type: 'function', function: { name: 'nope' } } },
      'tool_choice.function.name', /not one of the request's tools/],
    [{ tools: [{ type: 'function', function: { name: 'f', parameters: 'x' } }] },
      'tools[0].function.parameters', /JSON Schema object/],
    [{ messages: [...question, { role: 'tool', tool_call_id: 'zzz', content: 'x' }] },
      'messages[1].tool_call_id', /answers no tool call/],
    [{ tools: [{ type: 'function', function: { name: 'f', parameters: { type: 'object',
      properties: { a: { type: 'string', format: 'idn-hostname' } } } } }], tool_choice: 'required' },
    'tool_choice', /format "idn-hostname" is not supported/],
  ];
  for (const [extra, param, message] of cases) {
    await assert.rejects(
      openai.chat.completions.create({ model: 'm', messages: question, max_tokens: 4, ...extra }),
      (e) => { assert.equal(e.status, 400); assert.equal(e.param, param); assert.match(e.message, message); return true; },
      param);
  }
});

test('anthropic: tools, tool_use / tool_result history, adaptive thinking, streaming', { skip }, async () => {
  const tools = [{ name: 'get_weather', description: 'The weather of a city',
    input_schema: weather.function.parameters, cache_control: { type: 'ephemeral' } }];
  const messages = [
    { role: 'user', content: 'What is the weather in Paris?' },
    { role: 'assistant', content: [
      { type: 'thinking', thinking: 'I should call the tool.', signature: 'x' },
      { type: 'tool_use', id: 'toolu_1', name: 'get_weather', input: { city: 'Paris' } }] },
    { role: 'user', content: [
      { type: 'tool_result', tool_use_id: 'toolu_1', content: [{ type: 'text', text: 'sunny' }] },
      { type: 'text', text: 'And tomorrow?' }] },
  ];
  const base = { model: 'm', max_tokens: 128000, tools, messages,
    system: [{ type: 'text', text: 'You are terse.', cache_control: { type: 'ephemeral' } }],
    tool_choice: { type: 'auto', disable_parallel_tool_use: true },
    thinking: { type: 'adaptive' }, metadata: { user_id: 'u' } };
  const m = await anthropic.messages.create(base);
  // max_tokens is a cap for Anthropic clients; --max-output-tokens 200 cuts it here.
  assert.equal(m.stop_reason, 'max_tokens');
  assert.equal(m.usage.output_tokens, 200);
  const final = await anthropic.messages.stream(base).finalMessage();
  assert.equal(final.stop_reason, 'max_tokens');
  assert.ok(final.content.length >= 1);
  const counted = await anthropic.messages.countTokens({ model: 'm', messages, tools });
  const bare = await anthropic.messages.countTokens({ model: 'm', messages: [messages[0]] });
  assert.ok(counted.input_tokens > bare.input_tokens + 40);
  // tool_choice any: a tool_use block whose input the SDK parsed, stop_reason tool_use.
  const forced = await anthropic.messages.create({ ...base, max_tokens: 200, thinking: { type: 'disabled' },
    tools: [...tools, { name: 'book_table', input_schema: booking.function.parameters }],
    tool_choice: { type: 'tool', name: 'book_table', disable_parallel_tool_use: true } });
  assert.equal(forced.stop_reason, 'tool_use', JSON.stringify(forced.content));
  const use = forced.content.find((b) => b.type === 'tool_use');
  assert.match(use.id, /^toolu_/);
  assert.equal(use.name, 'book_table');
  assert.ok(validBooking(use.input), JSON.stringify(use.input));
  const streamed = await anthropic.messages.stream({ ...base, max_tokens: 200, temperature: 0,
    thinking: { type: 'disabled' },
    tools: [{ name: 'book_table', input_schema: booking.function.parameters }],
    tool_choice: { type: 'any', disable_parallel_tool_use: true } }).finalMessage();
  assert.equal(streamed.stop_reason, 'tool_use');
  const suse = streamed.content.find((b) => b.type === 'tool_use');
  assert.ok(validBooking(suse.input), JSON.stringify(streamed.content));
  await assert.rejects(anthropic.messages.create({ ...base,
    tools: [{ type: 'web_search_20250305', name: 'web_search' }], tool_choice: undefined }),
  (e) => e.status === 400 && /server tool/.test(e.message));
  const s = await waitIdle(server.url);
  assert.equal(s.kv.blocks_used, 0);
});

// A template that opens <think> in the generation prompt (DeepSeek-R1's, llama.cpp's copy: it
// closes the section again unless enable_thinking, which --thinking true sets): the reply starts
// in reasoning, so the random text, never closed, is all reasoning_content / a thinking block.
const R1 = path.join(SHARED, 'data/chat-templates/chat-templates-llamacpp/deepseek-ai-DeepSeek-R1-Distill-Qwen-32B.jinja');
const r1Skip = skip || sharedSkip(R1);
test('reasoning: a template-opened <think> section streams as reasoning_content and thinking', { skip: r1Skip }, async () => {
  const r1 = await startServer([...tinyQwen3Args(), '--chat-template', R1, '--thinking', 'true',
    '--max-output-tokens', '12']);
  try {
    const oa = new OpenAI({ apiKey: 'unused', baseURL: `${r1.url}/v1`, maxRetries: 0 });
    const c = await oa.chat.completions.create({ model: 'm', messages: question, max_tokens: 12 });
    const msg = c.choices[0].message;
    assert.ok(msg.reasoning_content?.length > 0, JSON.stringify(msg));
    assert.equal(msg.content, '');
    // reasoning_effort none turns thinking off: the template closes the section, all is content.
    const off = await oa.chat.completions.create({ model: 'm', messages: question, max_tokens: 12,
      reasoning_effort: 'none' });
    assert.equal(off.choices[0].message.reasoning_content, undefined);
    assert.ok(off.choices[0].message.content.length > 0);
    let reasoning = '', content = '';
    for await (const chunk of await oa.chat.completions.create({
      model: 'm', messages: question, max_tokens: 12, stream: true, temperature: 0 })) {
      reasoning += chunk.choices[0]?.delta?.reasoning_content ?? '';
      content += chunk.choices[0]?.delta?.content ?? '';
    }
    const greedy = await oa.chat.completions.create({ model: 'm', messages: question, max_tokens: 12, temperature: 0 });
    assert.equal(reasoning, greedy.choices[0].message.reasoning_content);
    assert.equal(content, '');
    const an = new Anthropic({ apiKey: 'unused', baseURL: r1.url, maxRetries: 0 });
    const m = await an.messages.create({ model: 'm', max_tokens: 12, temperature: 0, messages: question });
    assert.equal(m.content[0].type, 'thinking');
    assert.equal(m.content[0].thinking, greedy.choices[0].message.reasoning_content);
  } finally {
    assert.equal(await r1.stop(), 0, r1.log());
  }
});
