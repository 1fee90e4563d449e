// `loom serve --kv-quant`: the quantized KV cache as a user meets it (the embedded default model,
// CPU). /stats and the ready card count the quantized bytes per token (more tokens in the same
// pool); greedy answers stay the same answers with and without the prefix cache; blocks written
// to the SSD tier under one scheme are restored by a restart with that scheme and never served to
// another (the scheme is in the blocks' root hash and in the files' header).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { skipReason, startServer, getJson, postJson, waitIdle } from './helpers.mjs';

const skip = skipReason() || false;
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

const BODY = {
  messages: [{ role: 'user', content: 'Tell me how the children of Israel went out of Egypt, ' +
    'and what the LORD spake unto Moses in the wilderness of Sinai.' }],
  max_tokens: 48, temperature: 0,
};

async function chat(url) {
  const r = await postJson(`${url}/v1/chat/completions`, BODY);
  assert.equal(r.status, 200, JSON.stringify(r.body));
  return { text: r.body.choices[0].message.content,
    cached: r.body.usage.prompt_tokens_details?.cached_tokens ?? 0,
    prompt: r.body.usage.prompt_tokens };
}

async function waitSpilled(url) {
  await waitIdle(url);
  for (let i = 0; i < 800; i++) {
    if ((await getJson(`${url}/stats`)).body.ssd_cache.pending_spills === 0) return;
    await sleep(25);
  }
  assert.fail('the SSD writer did not drain');
}

test('/stats and the ready card count the quantized bytes per token', { skip, timeout: 60000 }, async () => {
  const perToken = {};
  for (const [flags, name] of [[[], 'f32'], [['--kv-quant', '8'], 'int8'],
    [['--kv-quant', 'fp8'], 'fp8'], [['--kv-quant', '4'], 'int4'],
    [['--kv-quant', '8', '--kv-quant-v', '4'], 'k:int8,v:int4'],
    [['--kv-dtype', 'bf16', '--kv-quant-k', 'fp8'], 'k:fp8,v:bf16'],
    [['--kv-quant', 'turbo'], 'turbo:k8v3']]) {
    const s = await startServer([...flags, '--kv-cache-gb', '0.01']);
    try {
      const kv = (await getJson(`${s.url}/stats`)).body.kv;
      assert.equal(kv.dtype, name);
      assert.match(s.log(), new RegExp(`KV \\d+ blocks x 16 = (\\d+) tokens \\(${name}, ${kv.bytes_per_token} B/token\\)`));
      perToken[name] = { bytes: kv.bytes_per_token, capacity: kv.capacity_tokens };
      const a = await chat(s.url);
      assert.ok(a.text.length > 0);
    } finally {
      assert.equal(await s.stop(), 0, s.log());
    }
  }
  // The default model: 6 layers x 4 kv heads x head_dim 32 (one group of 32): rows of 128 B in
  // f32, 34 B in int8 and fp8, 20 B in int4.
  const f32 = perToken.f32.bytes;
  assert.ok(f32 / perToken.int8.bytes > 3.7, JSON.stringify(perToken));
  assert.equal(perToken.int8.bytes, perToken.fp8.bytes);
  assert.ok(perToken.int4.bytes < perToken.int8.bytes);
  // turbo k8v3: int8 keys (34 B) and 3-bit values (12 B of codes + a 2 B scale).
  assert.equal(perToken['turbo:k8v3'].bytes, perToken.int8.bytes / 68 * 48, JSON.stringify(perToken));
  // The same 10 MB pool holds that many more tokens.
  assert.ok(perToken.int4.capacity > 6 * perToken.f32.capacity, JSON.stringify(perToken));
});

test('a restart restores its own scheme\'s blocks from disk and never another scheme\'s', { skip, timeout: 90000 }, async () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'loom-kvq-'));
  try {
    const first = await startServer(['--kv-quant', '8', '--ssd-cache', dir]);
    let want;
    try {
      want = await chat(first.url);
      assert.equal(want.cached, 0);
      // The prefix cache in the pool: the same prompt again reads its quantized blocks back.
      const again = await chat(first.url);
      assert.ok(again.cached >= 16, JSON.stringify(again));
      assert.equal(again.text, want.text);
      await waitSpilled(first.url);
    } finally {
      assert.equal(await first.stop(), 0, first.log());
    }
    const files = fs.readdirSync(dir).filter((d) => /^[0-9a-f]{2}$/.test(d));
    assert.ok(files.length > 0, 'no blocks on disk');

    const same = await startServer(['--kv-quant', '8', '--ssd-cache', dir]);
    try {
      const a = await chat(same.url);
      assert.ok(a.cached >= 16, `int8 restart restored ${a.cached} tokens`);
      assert.equal(a.text, want.text);
    } finally {
      assert.equal(await same.stop(), 0, same.log());
    }
    for (const flags of [[], ['--kv-quant', '4'], ['--kv-quant', 'fp8'],
      ['--kv-quant-k', '8', '--kv-quant-v', '4']]) {
      const other = await startServer([...flags, '--ssd-cache', dir]);
      try {
        const a = await chat(other.url);
        assert.equal(a.cached, 0, `${flags.join(' ') || 'f32'}: ${a.cached} tokens from int8 blocks`);
      } finally {
        assert.equal(await other.stop(), 0, other.log());
      }
    }
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
});

test('--kv-quant refuses what it cannot do, by name', { skip, timeout: 30000 }, async () => {
  const { spawnSync } = await import('node:child_process');
  const { LOOM_BIN } = await import('./helpers.mjs');
  for (const bad of ['turbo:k3v3', 'q5']) {
    const r = spawnSync(LOOM_BIN, ['generate', '-p', 'x', '-n', '1', '--kv-quant', bad], { encoding: 'utf8' });
    assert.notEqual(r.status, 0);
    assert.match(r.stderr, /--kv-quant/);
    assert.ok(r.stderr.includes(bad), r.stderr);
  }
});
