// Concurrency, disconnects and lifecycle: N concurrent streaming requests (LOOM_LOAD_STREAMS,
// default 256) with random client disconnects — zero server errors, every completed stream
// well-formed, KV back to baseline, memory stable; a dropped stream is aborted promptly; a busy
// port is refused; SIGTERM drains and exits 0. The model is the embedded default (512 positions:
// LONG tokens make a request that runs for a while).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import { spawnSync } from 'node:child_process';
import { skipReason, startServer, getJson, waitIdle, LOOM_BIN, CHAT_TEMPLATE } from './helpers.mjs';

const skip = skipReason() || false;
const N = Number(process.env.LOOM_LOAD_STREAMS || 256);
const LONG = 480;  // max_tokens of a request meant to be cut off: fits the 512-token context

function rssMb(pid) {
  const m = fs.readFileSync(`/proc/${pid}/status`, 'utf8').match(/VmRSS:\s+(\d+) kB/);
  return Number(m[1]) / 1024;
}

// Reads an SSE stream; returns {events, done, text, finish}. Aborts after `abortAfter` events.
async function readStream(url, body, abortAfter = Infinity) {
  const ctrl = new AbortController();
  const r = await fetch(url, { method: 'POST', signal: ctrl.signal,
    headers: { 'Content-Type': 'application/json' }, body: JSON.stringify(body) });
  if (r.status !== 200) return { status: r.status, body: await r.text() };
  const reader = r.body.getReader();
  const dec = new TextDecoder();
  let buf = '', events = 0, done = false, text = '', finish = null, usage = null, error = null;
  try {
    for (;;) {
      const { value, done: eof } = await reader.read();
      if (eof) break;
      buf += dec.decode(value, { stream: true });
      let i;
      while ((i = buf.indexOf('\n\n')) >= 0) {
        const ev = buf.slice(0, i);
        buf = buf.slice(i + 2);
        if (ev.startsWith(':')) continue;  // keep-alive comment
        assert.ok(ev.startsWith('data: '), `bad SSE frame ${JSON.stringify(ev)}`);
        const data = ev.slice(6);
        if (data === '[DONE]') { done = true; continue; }
        assert.equal(done, false, 'data after [DONE]');
        const j = JSON.parse(data);
        if (j.error) error = j.error;
        if (j.usage) usage = j.usage;
        for (const c of j.choices || []) {
          text += c.text;
          if (c.finish_reason) finish = c.finish_reason;
        }
        if (++events >= abortAfter) { ctrl.abort(); return { status: 200, aborted: true, events }; }
      }
    }
  } catch (e) {
    if (e.name === 'AbortError') return { status: 200, aborted: true, events };
    throw e;
  }
  return { status: 200, events, done, text, finish, usage, error, rest: buf };
}

test(`load: ${N} concurrent streams with random disconnects`, { skip, timeout: 300000 }, async () => {
  const server = await startServer(['--batch', '32', '--http-threads', String(Math.max(512, N + 64))]);
  try {
    const url = `${server.url}/v1/completions`;
    const prompts = ['Once upon a time', 'The little dog', 'Lily and Ben went to the park', 'One day'];
    // Warm up, then take the baseline.
    await readStream(url, { prompt: 'Once', max_tokens: 4, stream: true });
    const base = await waitIdle(server.url);
    const rss0 = rssMb(server.proc.pid);
    let seed = 42;
    const rand = () => (seed = (seed * 1103515245 + 12345) % 2147483648) / 2147483648;
    const jobs = [];
    for (let i = 0; i < N; i++) {
      const disconnect = rand() < 0.3;
      const body = { prompt: prompts[i % prompts.length], max_tokens: 16 + Math.floor(rand() * 48),
        temperature: 0.8, seed: i, stream: true, stream_options: { include_usage: true } };
      jobs.push(readStream(url, body, disconnect ? 1 + Math.floor(rand() * 6) : Infinity)
        .then((r) => ({ ...r, body })));
    }
    const results = await Promise.all(jobs);
    let completed = 0, aborted = 0;
    for (const r of results) {
      assert.equal(r.status, 200, JSON.stringify(r.body));
      if (r.aborted) { aborted++; continue; }
      completed++;
      assert.equal(r.error, null, JSON.stringify(r.error));
      assert.ok(r.done, 'stream ended without [DONE]');
      assert.equal(r.rest, '');
      assert.ok(r.finish === 'length' || r.finish === 'stop', r.finish);
      assert.ok(r.usage.completion_tokens >= 1 && r.usage.completion_tokens <= r.body.max_tokens);
      if (r.finish === 'length') assert.equal(r.usage.completion_tokens, r.body.max_tokens);
    }
    assert.ok(completed > N / 2 && aborted > 0, `completed ${completed}, aborted ${aborted}`);
    const s = await waitIdle(server.url);
    assert.equal(s.kv.blocks_used, base.kv.blocks_used);
    assert.equal(s.batch.kv_bytes, 0);
    assert.equal(s.batch.active_rows, 0);
    assert.equal(s.batch.pending_rows, 0);
    assert.equal(s.server.requests_in_flight, 0);
    const metrics = await (await fetch(`${server.url}/metrics`)).text();
    assert.doesNotMatch(metrics, /status="5\d\d"/);
    const rss1 = rssMb(server.proc.pid);
    // ASan keeps freed memory in quarantine (256 MB by default): RSS says nothing there.
    if (process.env.LOOM_SANITIZE !== '1') {
      assert.ok(rss1 - rss0 < 200, `RSS grew from ${rss0.toFixed(0)} to ${rss1.toFixed(0)} MB`);
    }
    console.log(`# load: ${completed} completed, ${aborted} disconnected; RSS ${rss0.toFixed(0)} → ${rss1.toFixed(0)} MB`);
  } finally {
    assert.equal(await server.stop(), 0);
  }
});

test('a client that goes away aborts its request promptly', { skip }, async () => {
  const server = await startServer([]);
  try {
    const r = await readStream(`${server.url}/v1/completions`,
      { prompt: 'Once upon a time', max_tokens: LONG, temperature: 0.8, ignore_eos: true, stream: true }, 3);
    assert.ok(r.aborted);
    const t0 = Date.now();
    const s = await waitIdle(server.url, {}, 5000);
    assert.equal(s.batch.active_rows, 0, 'the request kept running after the disconnect');
    assert.equal(s.kv.blocks_used, 0);
    assert.ok(s.batch.generated_tokens < LONG, `generated ${s.batch.generated_tokens}`);
    const metrics = await (await fetch(`${server.url}/metrics`)).text();
    assert.match(metrics, /loom_client_disconnects_total 1/);
    console.log(`# disconnect noticed and freed in ${Date.now() - t0} ms`);
  } finally {
    assert.equal(await server.stop(), 0);
  }
});

// Non-streaming requests write nothing until they finish, so the event loop watches the socket
// (EPOLLRDHUP → HttpRequest::ClientGone): a client that closes mid-generation must free its rows and blocks within
// a poll interval, for the OpenAI and the Anthropic routes alike.
test('a non-streaming client that goes away aborts its request promptly', { skip }, async () => {
  const server = await startServer(['--chat-template', CHAT_TEMPLATE]);
  try {
    const cases = [
      ['/v1/completions', { prompt: 'Once upon a time', max_tokens: LONG, temperature: 0.8, ignore_eos: true }],
      ['/v1/chat/completions', { messages: [{ role: 'user', content: 'Once' }], max_tokens: LONG,
        temperature: 0.8, ignore_eos: true }],
      ['/v1/messages', { model: 'm', messages: [{ role: 'user', content: 'Once' }], max_tokens: LONG,
        temperature: 0.8, ignore_eos: true }],
    ];
    let disconnects = 0;
    for (const [route, body] of cases) {
      // Wait until the request is generating, then hang up. The Anthropic route has no
      // ignore_eos: a reply the model ends early at EOS, before it was seen running, is sent again.
      let ctrl, pending;
      for (let attempt = 0; ; ++attempt) {
        assert.ok(attempt < 5, `${route}: every reply ended before it was seen running`);
        ctrl = new AbortController();
        let answered = false;
        pending = fetch(`${server.url}${route}`, { method: 'POST', signal: ctrl.signal,
          headers: { 'Content-Type': 'application/json' }, body: JSON.stringify(body) })
          .then((r) => { answered = true; return r; }, (e) => e);
        const t_start = Date.now();
        let running = false;
        while (!answered) {
          const s = (await getJson(`${server.url}/stats`)).body;
          if (s.batch.active_rows > 0) { running = true; break; }
          assert.ok(Date.now() - t_start < 5000, `${route}: never started`);
          await new Promise((r) => setTimeout(r, 10));
        }
        if (running) break;
        assert.equal((await pending).status, 200, route);
      }
      ctrl.abort();
      assert.equal((await pending).name, 'AbortError');
      const t0 = Date.now();
      const s = await waitIdle(server.url, {}, 5000);
      assert.equal(s.batch.active_rows, 0, `${route}: the request kept running after the disconnect`);
      assert.equal(s.kv.blocks_used, 0);
      disconnects += 1;
      const metrics = await (await fetch(`${server.url}/metrics`)).text();
      assert.match(metrics, new RegExp(`loom_client_disconnects_total ${disconnects}\\b`), route);
      console.log(`# ${route}: non-streaming disconnect noticed and freed in ${Date.now() - t0} ms`);
    }
    // A request that stays connected still completes.
    const ok = await getJson(`${server.url}/v1/completions`, { method: 'POST',
      headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify({ prompt: 'Once upon a time', max_tokens: 8, temperature: 0, ignore_eos: true }) });
    assert.equal(ok.status, 200);
    assert.equal(ok.body.usage.completion_tokens, 8);
  } finally {
    assert.equal(await server.stop(), 0);
  }
});

test('a busy port is refused with a clear message', { skip }, async () => {
  const server = await startServer([]);
  try {
    const r = spawnSync(LOOM_BIN, ['serve', '--port', String(server.port), '--no-open'],
      { encoding: 'utf8', timeout: 30000 });
    assert.equal(r.status, 1);
    assert.match(r.stderr, /already in use/);
    assert.equal((await getJson(`${server.url}/health`)).status, 200);
  } finally {
    assert.equal(await server.stop(), 0);
  }
});

test('SIGTERM: in-flight stream ends cleanly after the grace period, exit 0', { skip }, async () => {
  const server = await startServer(['--shutdown-grace', '0.5']);
  const pending = readStream(`${server.url}/v1/completions`,
    { prompt: 'Once', max_tokens: LONG, ignore_eos: true, temperature: 0.8, stream: true });
  await new Promise((r) => setTimeout(r, 200));
  const code = await server.stop('SIGTERM');
  assert.equal(code, 0, server.log());
  const r = await pending;
  assert.ok(r.done, 'stream not terminated with [DONE]');
  assert.ok(r.error || r.finish === 'length', JSON.stringify(r).slice(0, 300));
});

test('engine admission errors are 400 memory_admission; small requests still run', { skip }, async () => {
  // 5e5 bytes: ~81 tokens of f32 KV (6 layers x K,V x 4 heads x 32 x 4 bytes = 6 KiB a token).
  const server = await startServer(['--kv-budget', '0.0005']);
  try {
    const big = await getJson(`${server.url}/v1/completions`, { method: 'POST',
      headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify({ prompt: 'Once upon a time', max_tokens: 200 }) });
    assert.equal(big.status, 400);
    assert.equal(big.body.error.code, 'memory_admission');
    assert.match(big.body.error.message, /--kv-budget/);
    const small = await getJson(`${server.url}/v1/completions`, { method: 'POST',
      headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify({ prompt: 'Once upon a time', max_tokens: 8, temperature: 0, ignore_eos: true }) });
    assert.equal(small.status, 200);
    assert.equal(small.body.usage.completion_tokens, 8);
  } finally {
    assert.equal(await server.stop(), 0);
  }
});
