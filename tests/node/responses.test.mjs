// The Responses API (POST /v1/responses) through the official `openai` SDK's client.responses,
// on the random-weight tiny Qwen3 with the real Qwen3 tokenizer and chat template (helpers.mjs):
// text replies, the stream's event order and its final response, forced function calls (the
// grammar makes the random model's call valid) and the second turn that sends the call and its
// output back, text.format json_schema, previous_response_id chaining through the store, and
// bad input as 4xx errors naming the field.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import OpenAI from 'openai';
import Ajv2020 from 'ajv/dist/2020.js';
import path from 'node:path';
import { SHARED, getJson, postJson, sharedSkip, startServer, tinyQwen3Args, tinyQwen3Skip, waitIdle } from './helpers.mjs';

const skip = tinyQwen3Skip();
let server, openai;

before(async () => {
  if (skip) return;
  server = await startServer([...tinyQwen3Args(), '--max-output-tokens', '200',
    '--responses-store', '4']);
  openai = new OpenAI({ apiKey: 'unused', baseURL: `${server.url}/v1`, maxRetries: 0 });
});
after(async () => { if (server) assert.equal(await server.stop(), 0, server.log()); });

const ajv = new Ajv2020({ strict: false });
// A tool whose arguments a random model finishes within the output cap.
const booking = {
  type: 'function',
  name: 'book_table',
  description: 'Book a table',
  strict: true,
  parameters: {
    type: 'object',
    properties: {
      city: { enum: ['Paris', 'Rome', 'Oslo'] },
      guests: { type: 'integer', minimum: 1, maximum: 12 },
    },
    required: ['city', 'guests'],
    additionalProperties: false,
  },
};
const validBooking = ajv.compile(booking.parameters);
// reasoning effort none: Qwen3's template closes the think section in the prompt, so a grammar
// applies from the first token.
const noThinking = { reasoning: { effort: 'none' } };

test('responses.create: a text reply as a response object', { skip }, async () => {
  const r = await openai.responses.create({ model: 'm', input: 'Say hi.', instructions: 'Be brief.',
    max_output_tokens: 6, temperature: 0.5, metadata: { run: 't1' } });
  assert.match(r.id, /^resp_/);
  assert.equal(r.object, 'response');
  assert.equal(typeof r.created_at, 'number');
  assert.equal(r.instructions, 'Be brief.');
  assert.deepEqual(r.metadata, { run: 't1' });
  assert.equal(r.temperature, 0.5);
  assert.equal(r.max_output_tokens, 6);
  // 6 tokens of a random model: cut by max_output_tokens (or, rarely, an EOS sooner).
  if (r.status === 'incomplete') {
    assert.deepEqual(r.incomplete_details, { reason: 'max_output_tokens' });
    assert.equal(r.usage.output_tokens, 6);
  } else {
    assert.equal(r.status, 'completed');
  }
  const messages = r.output.filter((o) => o.type === 'message');
  assert.equal(messages.length, 1, JSON.stringify(r.output));
  assert.match(messages[0].id, /^msg_/);
  assert.equal(messages[0].role, 'assistant');
  assert.equal(messages[0].content[0].type, 'output_text');
  // output_text is the SDK's convenience: the message text joined.
  assert.equal(r.output_text, messages[0].content[0].text);
  const u = r.usage;
  assert.ok(u.input_tokens > 5);
  assert.equal(u.total_tokens, u.input_tokens + u.output_tokens);
  assert.equal(typeof u.input_tokens_details.cached_tokens, 'number');
  assert.equal(typeof u.output_tokens_details.reasoning_tokens, 'number');
  // Stored (store defaults to true): GET returns the same object.
  const got = await getJson(`${server.url}/v1/responses/${r.id}`);
  assert.equal(got.status, 200);
  assert.equal(got.body.id, r.id);
  assert.deepEqual(got.body.output, r.output);
});

test('responses.stream: the events arrive in order and the final response matches', { skip }, async () => {
  const stream = openai.responses.stream({ model: 'm', input: 'Tell me a story.',
    max_output_tokens: 12, ...noThinking });
  const events = [];
  for await (const e of stream) events.push(e);
  const final = await stream.finalResponse();
  const types = events.map((e) => e.type);
  assert.deepEqual(types.slice(0, 2), ['response.created', 'response.in_progress']);
  assert.ok(['response.completed', 'response.incomplete'].includes(types.at(-1)), types.at(-1));
  events.forEach((e, i) => assert.equal(e.sequence_number, i, e.type));
  // One message item: added, its part, text deltas, then done in reverse order of opening.
  const core = types.slice(2, -1).filter((t) => t !== 'response.output_text.delta');
  assert.deepEqual(core, ['response.output_item.added', 'response.content_part.added',
    'response.output_text.done', 'response.content_part.done', 'response.output_item.done']);
  const text = events.filter((e) => e.type === 'response.output_text.delta').map((e) => e.delta).join('');
  const done = events.find((e) => e.type === 'response.output_item.done');
  assert.equal(done.item.content[0].text, text);
  assert.equal(events.find((e) => e.type === 'response.output_text.done').text, text);
  const last = events.at(-1).response;
  assert.equal(final.id, last.id);
  assert.equal(final.output.find((o) => o.type === 'message').content[0].text, text);
  if (last.status === 'incomplete') assert.equal(last.usage.output_tokens, 12);
  // A streamed response is stored too.
  assert.equal((await getJson(`${server.url}/v1/responses/${last.id}`)).body.id, last.id);
  // (After response.incomplete, openai 4.x's final response is its own accumulation of the
  // events, not the event's response: compare the items by id.)
  assert.deepEqual(final.output.map((o) => o.id), last.output.map((o) => o.id));
  // A reply that completes (a one-word grammar): the final response is response.completed's.
  const done2 = openai.responses.stream({ model: 'm', input: 'Pick one.', max_output_tokens: 50,
    ...noThinking, text: { format: { type: 'json_schema', name: 'pick',
      schema: { enum: ['red', 'green'] } } } });
  const events2 = [];
  for await (const e of done2) events2.push(e);
  const final2 = await done2.finalResponse();
  assert.equal(events2.at(-1).type, 'response.completed');
  const { output_text, output_parsed, ...rest } = final2;
  assert.ok(['"red"', '"green"'].includes(output_text ?? rest.output[0].content[0].text));
  assert.equal(rest.status, 'completed');
  assert.deepEqual(rest.usage, events2.at(-1).response.usage);
  assert.equal(rest.output[0].status, 'completed');
});

test('function calls: forced by tool_choice, then the call and its output sent back', { skip }, async () => {
  const input = [{ role: 'user', content: [{ type: 'input_text', text: 'Book a table in Rome.' }] }];
  for (const tool_choice of ['required', { type: 'function', name: 'book_table' }]) {
    // parallel_tool_calls false: one call (with parallel calls a forced reply may hold several,
    // which a random model may not stop writing within the cap).
    const r = await openai.responses.create({ model: 'm', input, tools: [booking], tool_choice,
      max_output_tokens: 200, parallel_tool_calls: false, ...noThinking });
    assert.equal(r.status, 'completed', JSON.stringify(r.output));
    const calls = r.output.filter((o) => o.type === 'function_call');
    assert.equal(calls.length, 1, JSON.stringify(r.output));
    assert.match(calls[0].id, /^fc_/);
    assert.match(calls[0].call_id, /^call_/);
    assert.equal(calls[0].name, 'book_table');
    assert.ok(validBooking(JSON.parse(calls[0].arguments)), calls[0].arguments);
  }
  // Streamed: the argument deltas add up to the call of the item's done event.
  const stream = openai.responses.stream({ model: 'm', input, tools: [booking],
    tool_choice: 'required', max_output_tokens: 200, parallel_tool_calls: false, ...noThinking });
  let args = '';
  const types = [];
  for await (const e of stream) {
    types.push(e.type);
    if (e.type === 'response.function_call_arguments.delta') args += e.delta;
  }
  const final = await stream.finalResponse();
  const call = final.output.find((o) => o.type === 'function_call');
  assert.equal(call.arguments, args);
  assert.ok(types.includes('response.function_call_arguments.done'));
  assert.ok(validBooking(JSON.parse(args)), args);
  // Second turn: the call and its output as input items (no previous_response_id).
  const second = await openai.responses.create({ model: 'm', tools: [booking],
    max_output_tokens: 8, ...noThinking,
    input: [...input,
      { type: 'function_call', call_id: call.call_id, name: call.name, arguments: call.arguments },
      { type: 'function_call_output', call_id: call.call_id, output: '{"booked":true}' }] });
  assert.ok(['completed', 'incomplete'].includes(second.status));
  assert.ok(second.usage.input_tokens > final.usage.input_tokens, 'the call and output are in the prompt');
});

test('text.format json_schema: the reply validates', { skip }, async () => {
  const schema = { type: 'object', properties: { name: { type: 'string', maxLength: 10 },
    age: { type: 'integer', minimum: 0, maximum: 99 } }, required: ['name', 'age'],
  additionalProperties: false };
  const validate = ajv.compile(schema);
  for (const seed of [1, 2]) {
    const r = await openai.responses.create({ model: 'm', input: 'Describe a person.', seed,
      temperature: 1, max_output_tokens: 200, ...noThinking,
      text: { format: { type: 'json_schema', name: 'person', schema, strict: true } } });
    assert.equal(r.status, 'completed', r.output_text);
    assert.ok(validate(JSON.parse(r.output_text)), r.output_text);
    assert.equal(r.text.format.type, 'json_schema');
  }
  const obj = await openai.responses.create({ model: 'm', input: 'JSON please.', seed: 3,
    max_output_tokens: 200, ...noThinking, text: { format: { type: 'json_object' } } });
  if (obj.status === 'completed') assert.equal(typeof JSON.parse(obj.output_text), 'object');
});

test('previous_response_id continues a stored conversation; store false keeps nothing', { skip }, async () => {
  const first = await openai.responses.create({ model: 'm', input: 'My name is Ada.',
    max_output_tokens: 4, ...noThinking });
  const second = await openai.responses.create({ model: 'm', previous_response_id: first.id,
    input: 'What is my name?', max_output_tokens: 4, ...noThinking });
  assert.equal(second.previous_response_id, first.id);
  // The second prompt holds the first turn (its input and output) before the new input.
  assert.ok(second.usage.input_tokens > first.usage.input_tokens + 4,
    `${second.usage.input_tokens} vs ${first.usage.input_tokens}`);
  const third = await openai.responses.create({ model: 'm', previous_response_id: second.id,
    input: 'And again?', max_output_tokens: 4, ...noThinking });
  assert.ok(third.usage.input_tokens > second.usage.input_tokens);
  // A forced call, then only its output with previous_response_id: the call comes from the store.
  const called = await openai.responses.create({ model: 'm', input: 'Book Oslo.', tools: [booking],
    tool_choice: 'required', max_output_tokens: 200, parallel_tool_calls: false, ...noThinking });
  const call = called.output.find((o) => o.type === 'function_call');
  const answered = await openai.responses.create({ model: 'm', previous_response_id: called.id,
    tools: [booking], max_output_tokens: 4, ...noThinking,
    input: [{ type: 'function_call_output', call_id: call.call_id, output: 'ok' }] });
  assert.ok(['completed', 'incomplete'].includes(answered.status));
  // store: false: not kept, so neither GET nor previous_response_id finds it.
  const unstored = await openai.responses.create({ model: 'm', input: 'x', store: false,
    max_output_tokens: 2 });
  assert.equal(unstored.store, false);
  assert.equal((await getJson(`${server.url}/v1/responses/${unstored.id}`)).status, 404);
  await assert.rejects(openai.responses.create({ model: 'm', previous_response_id: unstored.id,
    input: 'y', max_output_tokens: 2 }),
  (e) => { assert.equal(e.status, 404); assert.equal(e.param, 'previous_response_id');
    assert.match(e.message, new RegExp(unstored.id)); return true; });
  // --responses-store 4: the oldest responses are evicted.
  for (let i = 0; i < 4; ++i) {
    await openai.responses.create({ model: 'm', input: `fill ${i}`, max_output_tokens: 1 });
  }
  assert.equal((await getJson(`${server.url}/v1/responses/${first.id}`)).status, 404);
  // DELETE drops a stored one.
  const kept = await openai.responses.create({ model: 'm', input: 'keep', max_output_tokens: 1 });
  const del = await getJson(`${server.url}/v1/responses/${kept.id}`, { method: 'DELETE' });
  assert.equal(del.status, 200);
  assert.deepEqual(del.body, { id: kept.id, object: 'response.deleted', deleted: true });
  assert.equal((await getJson(`${server.url}/v1/responses/${kept.id}`)).status, 404);
});

test('bad input is a 4xx naming the field; the server keeps serving', { skip }, async () => {
  const cases = [
    [{ input: [{ type: 'banana' }] }, 400, 'input[0].type', /unknown/],
    [{ input: [{ type: 'function_call_output', output: 'x' }] }, 400, 'input[0].call_id', /required/],
    [{ input: [{ type: 'function_call_output', call_id: 'call_zz', output: 'x' }] }, 400,
      'input[0].call_id', /answers no function_call/],
    [{ input: 'x', tools: [{ type: 'function', parameters: {} }] }, 400, 'tools[0].name', /required/],
    [{ input: 'x', tools: [{ type: 'file_search', vector_store_ids: ['vs_1'] }] }, 400,
      'tools[0].type', /function tools only/],
    [{ input: 'x', tools: [booking], tool_choice: { type: 'function', name: 'nope' } }, 400,
      'tool_choice.name', /not one of the request's tools/],
    [{ input: 'x', text: { format: { type: 'yaml' } } }, 400, 'text.format.type', /unknown/],
    [{ input: 'x', previous_response_id: 'resp_missing' }, 404, 'previous_response_id', /resp_missing/],
    [{ input: [{ role: 'user', content: [{ type: 'input_image', image_url: 'http://x' }] }] }, 400,
      'input[0].content[0]', /not supported/],
  ];
  for (const [body, status, param, message] of cases) {
    await assert.rejects(openai.responses.create({ model: 'm', max_output_tokens: 2, ...body }),
      (e) => { assert.equal(e.status, status, e.message); assert.equal(e.param, param);
        assert.match(e.message, message); return true; }, param);
  }
  // Raw bodies: not JSON, no input.
  const notJson = await postJson(`${server.url}/v1/responses`, '{"input": [');
  assert.equal(notJson.status, 400);
  const noInput = await postJson(`${server.url}/v1/responses`, { model: 'm' });
  assert.equal(noInput.status, 400);
  assert.equal(noInput.body.error.param, 'input');
  // Codex's extras and a web_search tool are accepted (web_search is not used).
  const ok = await postJson(`${server.url}/v1/responses`, { model: 'm', input: 'hi',
    max_output_tokens: 2, store: false, include: ['reasoning.encrypted_content'],
    prompt_cache_key: 'k', reasoning: { summary: 'auto' },
    tools: [{ type: 'web_search', external_web_access: false }] });
  assert.equal(ok.status, 200, JSON.stringify(ok.body));
  assert.equal(ok.body.status, 'incomplete');
  const s = await waitIdle(server.url);
  assert.equal(s.kv.blocks_used, 0);
  assert.equal(s.batch.active_rows, 0);
});

// A template that opens <think> in the generation prompt (DeepSeek-R1's, llama.cpp's copy; see
// tools.test.mjs): the random reply, never closed, is all reasoning: a reasoning item with
// reasoning_text content, then an empty message.
const R1 = path.join(SHARED, 'data/chat-templates/chat-templates-llamacpp/deepseek-ai-DeepSeek-R1-Distill-Qwen-32B.jinja');
const r1Skip = skip || sharedSkip(R1);
test('reasoning: a <think> section becomes a reasoning item, streamed as reasoning_text', { skip: r1Skip }, async () => {
  const r1 = await startServer([...tinyQwen3Args(), '--chat-template', R1, '--thinking', 'true',
    '--max-output-tokens', '12']);
  try {
    const oa = new OpenAI({ apiKey: 'unused', baseURL: `${r1.url}/v1`, maxRetries: 0 });
    const req = { model: 'm', input: 'Why?', max_output_tokens: 12, temperature: 0 };
    const r = await oa.responses.create(req);
    assert.deepEqual(r.output.map((o) => o.type), ['reasoning', 'message'], JSON.stringify(r.output));
    const thought = r.output[0].content[0];
    assert.equal(thought.type, 'reasoning_text');
    assert.ok(thought.text.length > 0);
    assert.equal(r.output_text, '');
    assert.ok(r.usage.output_tokens_details.reasoning_tokens > 0);
    assert.ok(r.usage.output_tokens_details.reasoning_tokens <= r.usage.output_tokens);
    const events = [];
    for await (const e of oa.responses.stream(req)) events.push(e);
    const deltas = events.filter((e) => e.type === 'response.reasoning_text.delta');
    assert.equal(deltas.map((e) => e.delta).join(''), thought.text);
    assert.equal(events.find((e) => e.type === 'response.reasoning_text.done').text, thought.text);
    assert.deepEqual(events.filter((e) => e.type === 'response.output_item.added').map((e) => e.item.type),
      ['reasoning', 'message']);
    // reasoning.effort none: the template closes the section; all of the reply is text.
    const off = await oa.responses.create({ ...req, reasoning: { effort: 'none' } });
    assert.deepEqual(off.output.map((o) => o.type), ['message']);
    assert.ok(off.output_text.length > 0);
    // The output sent back as input items (the reasoning item as it came) is accepted.
    const again = await oa.responses.create({ ...req, max_output_tokens: 1, input: [
      { role: 'user', content: 'Why?' }, r.output[0],
      { type: 'message', role: 'assistant', content: [{ type: 'output_text', text: 'Because.' }] },
      { role: 'user', content: 'Sure?' }] });
    assert.ok(again.usage.input_tokens > r.usage.input_tokens);
  } finally {
    assert.equal(await r1.stop(), 0, r1.log());
  }
});
