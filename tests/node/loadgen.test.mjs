// tools/loadgen/loadgen.py (the load generator behind docs/benchmarks.md's serving figures)
// against `loom serve` with the embedded model: its three arrival modes complete every request
// with exactly the tokens asked, its latencies are consistent, and a refused request makes it fail
// loudly instead of reporting numbers that mean something else. Skipped without python3.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import path from 'node:path';
import { HERE, startServer, waitIdle } from './helpers.mjs';

const LOADGEN = path.join(HERE, '../../tools/loadgen/loadgen.py');
const python = spawnSync('python3', ['--version']);
const skip = python.status === 0 ? false : 'python3 is not installed';
let server;
before(async () => { if (!skip) server = await startServer(); });
after(async () => { if (server) assert.equal(await server.stop(), 0, server.log()); });

function loadgen(...args) {
  const r = spawnSync('python3', [LOADGEN, '--url', server.url, '--vocab-range', '5:300',
    '--json', '-', ...args], { encoding: 'utf8', timeout: 120000 });
  return { status: r.status, out: r.stderr, doc: r.stdout ? JSON.parse(r.stdout) : null };
}

for (const mode of [['--concurrency', '3'], ['--burst'], ['--rate', '50']]) {
  test(`loadgen ${mode.join(' ')}: every request completes with its tokens`, { skip }, async () => {
    const { status, out, doc } = loadgen(...mode, '--num-requests', '6', '--prompt-tokens', '10:40',
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
  const { status, doc } = loadgen('--num-requests', '2', '--output-tokens', '100000');
  assert.equal(status, 1);
  assert.equal(doc.summary.failed, 2);
  assert.match(doc.summary.errors[0], /HTTP 400: .*context/);
  assert.equal((await waitIdle(server.url)).kv.blocks_used, 0);
});
