// Grammar-constrained output through the official `openai` client, on the random-weight Qwen3
// (helpers.mjs): whatever a random model samples, a response_format json_schema reply validates
// against its schema (ajv is the oracle), guided_choice / guided_regex / GBNF replies are in their
// language, and a schema the grammar engine cannot honour is a 400 naming the field and the
// schema location, never a looser grammar.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import OpenAI from 'openai';
import Ajv2020 from 'ajv/dist/2020.js';
import addFormats from 'ajv-formats';
import { startServer, tinyQwen3Args, tinyQwen3Skip, waitIdle } from './helpers.mjs';

const skip = tinyQwen3Skip();
let server, openai;
before(async () => {
  if (skip) return;
  server = await startServer([...tinyQwen3Args(), '--max-output-tokens', '200']);
  openai = new OpenAI({ apiKey: 'unused', baseURL: `${server.url}/v1`, maxRetries: 0 });
});
after(async () => { if (server) assert.equal(await server.stop(), 0, server.log()); });

const ajv = new Ajv2020({ strict: false });
addFormats(ajv);
// reasoning_effort none: Qwen3's template closes the think section in the prompt, so the grammar
// applies from the first token.
const base = { model: 'm', messages: [{ role: 'user', content: 'Describe a person.' }],
  max_tokens: 200, reasoning_effort: 'none' };

// Schemas whose documents a random model finishes within 200 tokens (bounded strings, numbers
// and arrays), covering the keywords agents' and Pydantic's schemas use.
const schemas = {
  person: {
    type: 'object',
    properties: {
      name: { type: 'string', minLength: 1, maxLength: 12 },
      age: { type: 'integer', minimum: 0, maximum: 120 },
      tags: { type: 'array', items: { enum: ['a', 'b', 'c'] }, maxItems: 3 },
      address: {
        type: 'object',
        properties: { zip: { type: 'string', pattern: '^[0-9]{5}$' }, city: { $ref: '#/$defs/city' } },
        required: ['zip'],
        additionalProperties: false,
      },
      nickname: { anyOf: [{ type: 'null' }, { type: 'string', maxLength: 6 }] },
    },
    required: ['name', 'age', 'address'],
    additionalProperties: false,
    $defs: { city: { enum: ['Paris', 'Rome', null, 3] } },
  },
  date: { type: 'string', format: 'date' },
  uuid: { type: 'string', format: 'uuid' },
  pair: { type: 'array', prefixItems: [{ type: 'boolean' }, { const: 'x' }], items: false, minItems: 2 },
};

for (const [name, schema] of Object.entries(schemas)) {
  test(`response_format json_schema "${name}": every reply validates`, { skip }, async () => {
    const validate = ajv.compile(schema);
    for (const seed of [1, 2, 3, 4]) {
      const c = await openai.chat.completions.create({ ...base, seed, temperature: 1,
        response_format: { type: 'json_schema', json_schema: { name, schema, strict: true } } });
      const choice = c.choices[0];
      assert.equal(choice.finish_reason, 'stop', `seed ${seed}: ${choice.message.content}`);
      const doc = JSON.parse(choice.message.content);
      assert.ok(validate(doc), `seed ${seed}: ${choice.message.content} ${JSON.stringify(validate.errors)}`);
    }
  });
}

test('streamed structured output equals the non-streamed reply', { skip }, async () => {
  const req = { ...base, seed: 9, temperature: 1, response_format: { type: 'json_schema',
    json_schema: { name: 'person', schema: schemas.person } } };
  const whole = (await openai.chat.completions.create(req)).choices[0].message.content;
  let text = '';
  for await (const chunk of await openai.chat.completions.create({ ...req, stream: true })) {
    text += chunk.choices[0]?.delta?.content ?? '';
  }
  assert.equal(text, whole);
  assert.ok(ajv.validate(schemas.person, JSON.parse(text)));
});

test('guided_choice, guided_regex, GBNF and n > 1 stay in their language', { skip }, async () => {
  const choice = await openai.chat.completions.create({ ...base, n: 3, temperature: 1,
    guided_choice: ['yes', 'no', 'maybe later'] });
  assert.equal(choice.choices.length, 3);
  for (const c of choice.choices) assert.ok(['yes', 'no', 'maybe later'].includes(c.message.content), c.message.content);
  const regex = await openai.chat.completions.create({ ...base, seed: 3, guided_regex: '[0-9]{3}-[a-z]{2,4}' });
  assert.match(regex.choices[0].message.content, /^[0-9]{3}-[a-z]{2,4}$/);
  const gbnf = await openai.chat.completions.create({ ...base, seed: 4,
    grammar: 'root ::= "(" item ("," item)* ")"\nitem ::= [a-c] | "z"' });
  assert.match(gbnf.choices[0].message.content, /^\(([a-cz])(,[a-cz])*\)$/);
  // /v1/completions takes the same fields.
  const comp = await openai.completions.create({ model: 'm', prompt: 'Number:', max_tokens: 20,
    seed: 2, guided_regex: '-?[1-9][0-9]?' });
  assert.match(comp.choices[0].text, /^-?[1-9][0-9]?$/);
});

test('json_object replies are JSON objects', { skip }, async () => {
  for (const seed of [1, 2]) {
    const c = await openai.chat.completions.create({ ...base, seed, max_tokens: 200,
      response_format: { type: 'json_object' } });
    const text = c.choices[0].message.content;
    assert.ok(text.startsWith('{'), text);
    // A free-form object may run past the cap; when it ended, it is whole.
    if (c.choices[0].finish_reason === 'stop') assert.equal(typeof JSON.parse(text), 'object');
  }
});

test('a schema the engine cannot honour is a 400 naming the field and the location', { skip }, async () => {
  const cases = [
    [{ response_format: { type: 'json_schema', json_schema: { name: 'x', schema: {
      type: 'object', properties: { host: { type: 'string', format: 'idn-hostname' } } } } } },
    'response_format.json_schema.schema', /#\/properties\/host.*format "idn-hostname" is not supported/],
    [{ guided_json: { type: 'object', patternProperties: { '^x': {} } } },
      'guided_json', /patternProperties/],
    [{ guided_regex: '(a)\\1' }, 'guided_regex', /guided_regex: /],
    [{ grammar: 'root ::= root "x"' }, 'grammar', /left/],
  ];
  for (const [extra, param, message] of cases) {
    await assert.rejects(openai.chat.completions.create({ ...base, ...extra }),
      (e) => { assert.equal(e.status, 400); assert.equal(e.param, param); assert.match(e.message, message); return true; },
      param);
  }
  assert.equal((await waitIdle(server.url)).kv.blocks_used, 0);
});

// Schemas that would compile for too long or into too large a grammar are refused (400 naming
// the limit), and the server goes on serving: past the rule cap on this server, past the
// deadline on one run with --grammar-compile-timeout 1.
const longStrings = (n) => ({ type: 'object', properties: Object.fromEntries(
  Array.from({ length: n }, (_, i) => [`p${i}`, { type: 'string', maxLength: 100000 }])) });
test('a grammar too large or too slow to compile is refused and the server keeps serving', { skip }, async () => {
  await assert.rejects(openai.chat.completions.create({ ...base, guided_json: longStrings(6) }),
    (e) => { assert.equal(e.status, 400); assert.equal(e.param, 'guided_json');
      assert.match(e.message, /more than 400000 rules/); return true; });
  const quick = await startServer([...tinyQwen3Args(), '--grammar-compile-timeout', '1']);
  try {
    const client = new OpenAI({ apiKey: 'unused', baseURL: `${quick.url}/v1`, maxRetries: 0 });
    await assert.rejects(client.chat.completions.create({ ...base, guided_json: longStrings(3) }),
      (e) => { assert.equal(e.status, 400); assert.equal(e.param, 'guided_json');
        assert.match(e.message, /compiling took longer than 1 ms \(--grammar-compile-timeout\)/);
        return true; });
    const ok = await client.chat.completions.create({ ...base, max_tokens: 8,
      guided_choice: ['yes', 'no'] });
    assert.match(ok.choices[0].message.content, /^(yes|no)$/);
    assert.equal((await waitIdle(quick.url)).kv.blocks_used, 0);
  } finally {
    assert.equal(await quick.stop(), 0, quick.log());
  }
});
