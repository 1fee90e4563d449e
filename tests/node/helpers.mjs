// Starts `loom serve` (LOOM_BIN) on a free port with the stories260K GGUF from LOOM_SHARED_DIR
// and stops it. Tests skip when the binary or the shared data is missing.
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

export const HERE = path.dirname(fileURLToPath(import.meta.url));
export const LOOM_BIN = process.env.LOOM_BIN || path.join(HERE, '../../build/src/cli/loom');
export const SHARED = process.env.LOOM_SHARED_DIR || path.join(HERE, '../../../shared');
export const STORIES = path.join(SHARED, 'data/models/stories260K-gguf/stories260K.gguf');
export const GOLDEN = path.join(SHARED, 'data/models/stories260K-llama2c/golden_once_upon_a_time.json');
export const CHAT_TEMPLATE = path.join(HERE, 'testdata/plain_chat.jinja');

export function skipReason() {
  if (!fs.existsSync(LOOM_BIN)) return `loom binary not found at ${LOOM_BIN} (set LOOM_BIN)`;
  if (!fs.existsSync(STORIES)) return `stories260K not found under ${SHARED}`;
  return null;
}

// Starts the server; resolves {url, port, proc, stop(signal) → exit code, log()}.
export async function startServer(extraArgs = []) {
  const args = ['serve', STORIES, '--port', '0', '--no-open', '--threads', '1', ...extraArgs];
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
