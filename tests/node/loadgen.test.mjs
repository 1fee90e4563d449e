// tools/loadgen/loadgen.py (the load generator behind docs/benchmarks.md's serving figures)
// against `loom serve` with the embedded model: its three arrival modes complete every request
// with exactly the tokens asked, its latencies are consistent, and a refused request makes it fail
// loudly instead of reporting numbers that mean something else. Skipped without python3.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import path from 'node:path';
import { HERE, startServer, waitIdle } from './helpers.mjs';

const LOADGEN = path.join(HERE, '../../tools/loadgen/loadgen.py');
const python = spawnSync('python3', ['--version']);
const skip = python.status === 0 ? false : 'python3 is not installed';
let server;
before(async () => { if (!skip) server = await startServer(); });
after(async () => { if (server) assert.equal(await server.stop(), 0, server.log()); });

// Asynchronous on purpose: a spawnSync would block node's event loop for the whole run, so fetch's
// pooled keep-alive sockets would miss the server closing them after its idle timeout (5 s) and
// the next fetch would be sent on a dead socket ("other side closed").
async function loadgen(...args) {
  const child = spawn('python3', [LOADGEN, '--url', server.url, '--vocab-range', '5:300',
    '--json', '-', ...args], { stdio: ['ignore', 'pipe', 'pipe'], timeout: 120000 });
  let stdout = '', stderr = '';
  child.stdout.on('data', (d) => { stdout += d; });
  child.stderr.on('data', (d) => { stderr += d; });
  const status = await new Promise((resolve) => child.on('close', (code) => resolve(code)));
  return { status, out: stderr, doc: stdout ? JSON.parse(stdout) : null };
}

for (const mode of [['--concurrency', '3'], ['--burst'], ['--rate', '50']]) {
  test(`loadgen ${mode.join(' ')}: every request completes with its tokens`, { skip }, async () => {
    const { status, out, doc } = await loadgen(...mode, '--num-requests', '6', '--prompt-tokens', '10:40',
      '--output-tokens', '5:12', '--shared-prefix', '8');
    assert.equal(status, 0, out);
    const s = doc.summary;
    assert.equal(s.requests, 6);
    assert.equal(s.failed, 0, out);
    let want = 0;
    for (const r of doc.records) {
      assert.equal(r.error, null);
      assert.equal(r.completion_tokens, r.max_tokens);
      assert.ok(r.max_tokens >= 5 && r.max_tokens <= 12 && r.prompt_tokens >= 10 && r.prompt_tokens <= 40);
      assert.ok(r.ttft_s > 0 && r.ttft_s <= r.e2e_s, JSON.stringify(r));
      assert.ok(r.itl_s > 0 && r.chunks >= 1 && r.chunks <= r.completion_tokens, JSON.stringify(r));
      want += r.max_tokens;
    }
    assert.equal(s.output_tokens, want);
    assert.ok(s.output_tok_per_s > 0 && s.ttft_p50_ms <= s.ttft_p99_ms && s.e2e_p99_ms >= s.ttft_p99_ms);
  });
}

test('loadgen fails when the server refuses a request', { skip }, async () => {
  const { status, doc } = await loadgen('--num-requests', '2', '--output-tokens', '100000');
  assert.equal(status, 1);
  assert.equal(doc.summary.failed, 2);
  assert.match(doc.summary.errors[0], /HTTP 400: .*context/);
  assert.equal((await waitIdle(server.url)).kv.blocks_used, 0);
});

test('loadgen --time-limit reports the unfinished requests as failed and drops them', { skip }, async () => {
  const { status, doc } = await loadgen('--burst', '--num-requests', '4', '--prompt-tokens', '20',
    '--output-tokens', '480', '--time-limit', '0.02');
  assert.equal(status, 1);
  assert.equal(doc.summary.failed, 4);
  assert.match(doc.summary.errors[0], /unfinished at --time-limit 0.02 s/);
  // The cancelled streams closed their sockets: the server frees their KV.
  assert.equal((await waitIdle(server.url)).kv.blocks_used, 0);
});

test('loadgen --no-stream counts plain replies (end-to-end only)', { skip }, async () => {
  const { status, out, doc } = await loadgen('--no-stream', '--concurrency', '2', '--num-requests', '4',
    '--prompt-tokens', '12', '--output-tokens', '6:9');
  assert.equal(status, 0, out);
  assert.equal(doc.summary.failed, 0);
  assert.equal(doc.summary.ttft_p50_ms, null);
  for (const r of doc.records) {
    assert.equal(r.completion_tokens, r.max_tokens);
    assert.ok(r.e2e_s > 0 && r.ttft_s === null, JSON.stringify(r));
  }
  assert.equal(doc.summary.output_tokens, doc.records.reduce((a, r) => a + r.max_tokens, 0));
});
