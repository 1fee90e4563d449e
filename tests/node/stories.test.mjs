// A GGUF model from ../shared through the official `openai` client: stories260K (TinyStories,
// llama2.c), whose greedy text must equal llama2.c's (golden_once_upon_a_time.json). The only
// node tests that need ../shared: they skip without it (fail under LOOM_REQUIRE_SHARED_DATA=ON).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import OpenAI from 'openai';
import { sharedSkip, startServer, postJson, STORIES, STORIES_GOLDEN } from './helpers.mjs';

const skip = sharedSkip(STORIES, STORIES_GOLDEN);
let server, client, golden;

before(async () => {
  if (skip) return;
  golden = JSON.parse(fs.readFileSync(STORIES_GOLDEN, 'utf8'));
  server = await startServer([], STORIES);
  client = new OpenAI({ apiKey: 'unused', baseURL: `${server.url}/v1`, maxRetries: 0 });
});
after(async () => { if (server) assert.equal(await server.stop(), 0, server.log()); });

const continuation = () => golden.generated_text_stdout.slice('Once upon a time'.length);

test('stories260K: models list names the file', { skip }, async () => {
  const models = await client.models.list();
  assert.equal(models.data.length, 1);
  assert.equal(models.data[0].id, 'stories260K.gguf');
});

test('stories260K: greedy completion matches llama2.c', { skip }, async () => {
  const r = await client.completions.create({
    model: 'stories260K.gguf', prompt: 'Once upon a time', max_tokens: 40, temperature: 0,
  });
  assert.equal(r.choices[0].finish_reason, 'length');
  assert.ok(r.choices[0].text.length > 20);
  assert.ok(continuation().startsWith(r.choices[0].text), `got ${JSON.stringify(r.choices[0].text)}`);
  assert.equal(r.usage.prompt_tokens, golden.prompt_ids.length);  // with the BOS the GGUF adds
  assert.equal(r.usage.completion_tokens, 40);
  const ids = await client.completions.create({
    model: 'x', prompt: golden.prompt_ids, max_tokens: 40, temperature: 0,
  });
  assert.equal(ids.choices[0].text, r.choices[0].text);
});

test('stories260K: tokenize / detokenize agree with llama2.c', { skip }, async () => {
  const t = await postJson(`${server.url}/tokenize`, { content: 'Once upon a time' });
  assert.deepEqual(t.body.tokens, golden.prompt_ids);
  const d = await postJson(`${server.url}/detokenize`, { tokens: golden.greedy_generated_ids.slice(0, 10) });
  assert.ok(continuation().startsWith(d.body.content) || continuation().startsWith(' ' + d.body.content),
    d.body.content);
});
