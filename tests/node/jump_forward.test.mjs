// `loom serve --jump-forward` on the random-weight Qwen3 (helpers.mjs): the text a grammar forces
// (a schema's keys and punctuation, a forced tool call's markup) is appended without sampling,
// and the replies still validate (ajv is the oracle), streamed or not; /stats counts the
// appended tokens.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import OpenAI from 'openai';
import Ajv2020 from 'ajv/dist/2020.js';
import { getJson, startServer, tinyQwen3Args, tinyQwen3Skip, waitIdle } from './helpers.mjs';

const skip = tinyQwen3Skip();
let server, openai;
before(async () => {
  if (skip) return;
  server = await startServer([...tinyQwen3Args(), '--max-output-tokens', '200', '--jump-forward']);
  openai = new OpenAI({ apiKey: 'unused', baseURL: `${server.url}/v1`, maxRetries: 0 });
});
after(async () => { if (server) assert.equal(await server.stop(), 0, server.log()); });

const ajv = new Ajv2020({ strict: false });
const base = { model: 'm', messages: [{ role: 'user', content: 'Describe a person.' }],
  max_tokens: 200, reasoning_effort: 'none' };
const person = {
  type: 'object',
  properties: {
    first_name: { type: 'string', maxLength: 8 },
    age: { type: 'integer', minimum: 0, maximum: 120 },
    address: { type: 'object', properties: { city: { enum: ['Paris', 'Rome'] }, zip: { type: 'string', maxLength: 5 } },
      required: ['city', 'zip'], additionalProperties: false },
  },
  required: ['first_name', 'age', 'address'],
  additionalProperties: false,
};
const jumped = async () => (await getJson(`${server.url}/stats`)).body.batch.jump_forward_tokens;

test('json_schema replies validate, and the forced keys are appended without sampling', { skip }, async () => {
  const validate = ajv.compile(person);
  const before = await jumped();
  for (const seed of [1, 2, 3]) {
    const c = await openai.chat.completions.create({ ...base, seed, temperature: 1,
      response_format: { type: 'json_schema', json_schema: { name: 'person', schema: person } } });
    const text = c.choices[0].message.content;
    assert.equal(c.choices[0].finish_reason, 'stop', text);
    assert.ok(validate(JSON.parse(text)), `seed ${seed}: ${text} ${JSON.stringify(validate.errors)}`);
    assert.equal(c.usage.completion_tokens > 0, true);
  }
  // `{"first_name":"`, `","age":`, `,"address":{"city":"` ... are forced: several tokens a reply.
  assert.ok(await jumped() - before >= 3 * 6, `appended ${await jumped() - before}`);
  assert.equal((await waitIdle(server.url)).kv.blocks_used, 0);
});

test('a streamed reply equals the non-streamed one', { skip }, async () => {
  const req = { ...base, seed: 5, temperature: 1,
    response_format: { type: 'json_schema', json_schema: { name: 'person', schema: person } } };
  const whole = (await openai.chat.completions.create(req)).choices[0].message.content;
  let text = '';
  for await (const chunk of await openai.chat.completions.create({ ...req, stream: true })) {
    text += chunk.choices[0]?.delta?.content ?? '';
  }
  assert.equal(text, whole);
  assert.ok(ajv.validate(person, JSON.parse(text)), text);
});

test('a forced tool call validates; logprobs rows sample every token', { skip }, async () => {
  const tool = { type: 'function', function: { name: 'get_weather', parameters: {
    type: 'object', properties: { city: { type: 'string', maxLength: 10 }, days: { type: 'integer', minimum: 1, maximum: 9 } },
    required: ['city', 'days'], additionalProperties: false } } };
  const c = await openai.chat.completions.create({ ...base, seed: 2, temperature: 1, tools: [tool],
    tool_choice: { type: 'function', function: { name: 'get_weather' } }, parallel_tool_calls: false });
  const calls = c.choices[0].message.tool_calls;
  assert.equal(calls?.length, 1, JSON.stringify(c.choices[0].message));
  assert.equal(calls[0].function.name, 'get_weather');
  assert.ok(ajv.validate(tool.function.parameters, JSON.parse(calls[0].function.arguments)),
    calls[0].function.arguments);
  // With logprobs every token has its own: nothing is appended for that reply.
  const before = await jumped();
  const lp = await openai.chat.completions.create({ ...base, seed: 3, temperature: 1, logprobs: true,
    response_format: { type: 'json_schema', json_schema: { name: 'person', schema: person } } });
  assert.equal(await jumped(), before);
  assert.equal(lp.choices[0].logprobs.content.length, lp.usage.completion_tokens);
  assert.ok(ajv.validate(person, JSON.parse(lp.choices[0].message.content)));
});
