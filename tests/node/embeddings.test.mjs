// POST /v1/embeddings with the official `openai` npm client's embeddings.create against `loom
// serve` with the embedded default model (256 wide; no sentence-transformers config, so last-token
// pooling). The SDK asks for base64 when the caller names no encoding_format and decodes it into
// floats itself, so "default" exercises base64 and "float" the JSON numbers: both must give the
// same f32 values. The CPU backend is batch-invariant, so an input gives the same vector alone
// and inside a batch, bit for bit.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import OpenAI from 'openai';
import { skipReason, startServer, postJson, waitIdle, DEFAULT_ID } from './helpers.mjs';

const skip = skipReason() || false;
const HIDDEN = 256;  // models/default/config.json hidden_size
const CONTEXT = 512;  // its max_position_embeddings
let server, client;

before(async () => {
  if (skip) return;
  server = await startServer();
  client = new OpenAI({ apiKey: 'none', baseURL: `${server.url}/v1`, maxRetries: 0 });
});
after(async () => { if (server) assert.equal(await server.stop(), 0, server.log()); });

const TEXTS = ['In the beginning God created the heaven and the earth.',
  'And the LORD said unto Moses,', 'Blessed are the', 'a'];

function norm(v) { return Math.sqrt(v.reduce((s, x) => s + x * x, 0)); }
function f32(v) { return Array.from(v, (x) => Math.fround(x)); }

async function tokenize(text) {
  const r = await postJson(`${server.url}/tokenize`, { content: text, add_special: true });
  assert.equal(r.status, 200);
  return r.body.tokens;
}

test('float and base64 (the SDK default) give the same unit vectors', { skip }, async () => {
  const asFloat = await client.embeddings.create({ model: DEFAULT_ID, input: TEXTS,
    encoding_format: 'float' });
  assert.equal(asFloat.object, 'list');
  assert.equal(asFloat.model, DEFAULT_ID);
  assert.equal(asFloat.data.length, TEXTS.length);
  let tokens = 0;
  for (const [i, d] of asFloat.data.entries()) {
    assert.equal(d.object, 'embedding');
    assert.equal(d.index, i);
    assert.equal(d.embedding.length, HIDDEN);
    assert.ok(Math.abs(norm(d.embedding) - 1) < 1e-5, `input ${i}: norm ${norm(d.embedding)}`);
    tokens += (await tokenize(TEXTS[i])).length;
  }
  assert.equal(asFloat.usage.prompt_tokens, tokens);
  assert.equal(asFloat.usage.total_tokens, tokens);

  const decoded = await client.embeddings.create({ model: DEFAULT_ID, input: TEXTS });
  for (const [i, d] of decoded.data.entries()) {
    assert.deepEqual(f32(d.embedding), f32(asFloat.data[i].embedding), `input ${i}`);
  }
  // Asked for explicitly, base64 comes back as the string (little-endian f32 bytes).
  const raw = await client.embeddings.create({ model: DEFAULT_ID, input: TEXTS[0],
    encoding_format: 'base64' });
  assert.equal(typeof raw.data[0].embedding, 'string');
  const bytes = Buffer.from(raw.data[0].embedding, 'base64');
  const floats = new Float32Array(bytes.buffer, bytes.byteOffset, bytes.length / 4);
  assert.deepEqual(Array.from(floats), f32(asFloat.data[0].embedding));
});

test('an input gives the same vector alone and in a batch; different texts differ', { skip },
  async () => {
    const batch = await client.embeddings.create({ model: DEFAULT_ID, input: TEXTS,
      encoding_format: 'float' });
    for (const [i, text] of TEXTS.entries()) {
      const alone = await client.embeddings.create({ model: DEFAULT_ID, input: text,
        encoding_format: 'float' });
      assert.deepEqual(alone.data[0].embedding, batch.data[i].embedding, `input ${i}`);
    }
    // Concurrent requests share engine steps: still the same vectors.
    const concurrent = await Promise.all(TEXTS.map((text) => client.embeddings.create({
      model: DEFAULT_ID, input: [text, TEXTS[0]], encoding_format: 'float' })));
    for (const [i, r] of concurrent.entries()) {
      assert.deepEqual(r.data[0].embedding, batch.data[i].embedding, `input ${i}`);
      assert.deepEqual(r.data[1].embedding, batch.data[0].embedding);
    }
    const cos = batch.data[0].embedding.reduce((s, x, j) => s + x * batch.data[1].embedding[j], 0);
    assert.ok(cos < 0.9999, `different texts, cosine ${cos}`);
  });

test('token-id inputs equal their text', { skip }, async () => {
  const ids = await Promise.all(TEXTS.slice(0, 2).map(tokenize));
  const byText = await client.embeddings.create({ model: DEFAULT_ID, input: TEXTS.slice(0, 2),
    encoding_format: 'float' });
  const byIds = await client.embeddings.create({ model: DEFAULT_ID, input: ids,
    encoding_format: 'float' });
  const one = await client.embeddings.create({ model: DEFAULT_ID, input: ids[1],
    encoding_format: 'float' });
  assert.deepEqual(byIds.data[0].embedding, byText.data[0].embedding);
  assert.deepEqual(byIds.data[1].embedding, byText.data[1].embedding);
  assert.deepEqual(one.data[0].embedding, byText.data[1].embedding);
  assert.equal(byIds.usage.prompt_tokens, ids[0].length + ids[1].length);
});

test('dimensions truncates, then normalizes again', { skip }, async () => {
  const full = await client.embeddings.create({ model: DEFAULT_ID, input: TEXTS[1],
    encoding_format: 'float' });
  for (const dims of [1, 8, 64, HIDDEN]) {
    const r = await client.embeddings.create({ model: DEFAULT_ID, input: TEXTS[1],
      dimensions: dims, encoding_format: 'float' });
    const v = r.data[0].embedding;
    assert.equal(v.length, dims);
    assert.ok(Math.abs(norm(v) - 1) < 1e-5);
    const head = full.data[0].embedding.slice(0, dims);
    const n = norm(head);
    for (let j = 0; j < dims; j++) assert.ok(Math.abs(v[j] - head[j] / n) < 1e-6, `${dims}: ${j}`);
  }
  // Through the SDK's base64 path too.
  const b = await client.embeddings.create({ model: DEFAULT_ID, input: TEXTS[1], dimensions: 8 });
  assert.equal(b.data[0].embedding.length, 8);
});

test('bad inputs are 400s naming the field', { skip }, async () => {
  const url = `${server.url}/v1/embeddings`;
  const cases = [
    [{ model: 'm' }, 'input'],
    [{ input: '' }, 'input'],
    [{ input: [] }, 'input'],
    [{ input: ['fine', ''] }, 'input[1]'],
    [{ input: [[1, 2], []] }, 'input[1]'],
    [{ input: [1, 99999] }, 'input'],
    [{ input: 5 }, 'input'],
    [{ input: 'x', encoding_format: 'int8' }, 'encoding_format'],
    [{ input: 'x', dimensions: 0 }, 'dimensions'],
    [{ input: 'x', dimensions: HIDDEN + 1 }, 'dimensions'],
    [{ input: 'x', user: 3 }, 'user'],
    [{ input: new Array(CONTEXT + 1).fill(5) }, 'input'],
    [{ input: ['ok', new Array(CONTEXT + 1).fill('word').join(' ')] }, 'input[1]'],
  ];
  for (const [body, param] of cases) {
    const r = await postJson(url, body);
    assert.equal(r.status, 400, `${JSON.stringify(body).slice(0, 80)}: ${JSON.stringify(r.body)}`);
    assert.equal(r.body.error.type, 'invalid_request_error');
    assert.equal(r.body.error.param, param, JSON.stringify(r.body));
    assert.ok(r.body.error.message.length > 0);
  }
  // The SDK surfaces them as BadRequestError.
  await assert.rejects(client.embeddings.create({ model: DEFAULT_ID, input: '' }),
    (e) => e.status === 400 && e.param === 'input');
  // The whole context fits (an embedding generates nothing).
  const fits = await client.embeddings.create({ model: DEFAULT_ID,
    input: new Array(CONTEXT).fill(5), encoding_format: 'float' });
  assert.equal(fits.data[0].embedding.length, HIDDEN);
  assert.equal(fits.usage.prompt_tokens, CONTEXT);
});

test('embeddings leave no KV behind and no prefix-cache entries', { skip }, async () => {
  const before = await waitIdle(server.url);
  const long = new Array(40).fill('And the LORD said unto Moses,').join(' ');
  await client.embeddings.create({ model: DEFAULT_ID, input: [long, long] });
  const s = await waitIdle(server.url);
  assert.equal(s.kv.blocks_used, 0);
  assert.equal(s.batch.active_rows, 0);
  assert.equal(s.prompt_cache.entries, before.prompt_cache.entries);
  assert.equal(s.prompt_cache.hits, before.prompt_cache.hits);
});
