// The first five minutes (issue 23). `loom chat`: answers stream to stdout, the conversation is
// kept between turns, `/reset` forgets it and `/system TEXT` sets the system prompt and starts
// over (the tiny random Qwen3 with the real Qwen3 chat template: greedy answers of random weights
// depend on every prompt token, so equal outputs mean equal prompts). A model load off a terminal
// reports one "loaded ... of weights" line, no bar. `loom serve` opens the chat page in a browser
// only on a terminal (a pseudo-terminal from script(1) here) and never with --no-open: a fake
// xdg-open on PATH records what it was asked to open.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { LOOM_BIN, tinyQwen3Args, tinyQwen3Skip } from './helpers.mjs';

const skip = tinyQwen3Skip() || false;

// Runs `loom chat` on the lines; returns {stdout, stderr} (answers are all of stdout).
function chat(lines, extra = []) {
  const r = spawnSync(LOOM_BIN, ['chat', ...tinyQwen3Args(), '--threads', '1', '--temp', '0',
    '-n', '6', ...extra], { input: lines.map((l) => `${l}\n`).join(''), encoding: 'utf8',
    timeout: 60000 });
  assert.equal(r.status, 0, r.stderr);
  return r;
}

test('loom chat keeps the conversation; /reset and /system start over', { skip, timeout: 120000 }, () => {
  const hello = chat(['hello']).stdout;
  const hi = chat(['hi']).stdout;
  const hiWithSystem = chat(['hi'], ['--system', 'Answer briefly.']).stdout;
  assert.ok(hello.length > 1 && hi.length > 1, `${hello} / ${hi}`);
  // The second turn sees the first: not what "hi" alone gets.
  const both = chat(['hello', 'hi']);
  assert.ok(both.stdout.startsWith(hello));
  assert.notEqual(both.stdout, hello + hi, 'the second turn did not see the first');
  // /reset: the second turn is answered as if alone.
  const reset = chat(['hello', '/reset', 'hi']);
  assert.equal(reset.stdout, hello + hi);
  assert.match(reset.stderr, /\(conversation cleared\)/);
  // /system TEXT: as if started with --system TEXT.
  assert.notEqual(hiWithSystem, hi, 'the system prompt changed nothing');
  const system = chat(['hello', '/system Answer briefly.', 'hi']);
  assert.equal(system.stdout, hello + hiWithSystem);
  assert.match(system.stderr, /\(system prompt set; conversation cleared\)/);
  // /system alone removes it again; /help and unknown commands send nothing; /quit leaves.
  const removed = chat(['/system', 'hi', '/help', '/nope', '/quit', 'never sent'], ['--system', 'Answer briefly.']);
  assert.equal(removed.stdout, hi);
  assert.match(removed.stderr, /\(system prompt removed; conversation cleared\)/);
  assert.match(removed.stderr, /\/system TEXT sets the system prompt/);
});

test('loading weights off a terminal: one summary line, no progress bar', { skip: skipReasonDefault() }, () => {
  // The default model has real weight files (the tiny Qwen3's are random: nothing is read).
  const r = spawnSync(LOOM_BIN, ['generate', '-p', 'In the beginning', '-n', '2', '--threads', '1'],
    { encoding: 'utf8', timeout: 60000 });
  assert.equal(r.status, 0, r.stderr);
  const lines = r.stderr.split('\n').filter((l) => /loaded .* of weights/.test(l));
  assert.equal(lines.length, 1, r.stderr);
  assert.match(lines[0], /^loaded \d+(\.\d+)? (kB|MB) of weights in \d+\.\d s \(\d+(\.\d+)? (kB|MB|GB)\/s\)$/);
  assert.ok(!r.stderr.includes('\r'), 'a bar was drawn off a terminal');
});

function skipReasonDefault() {
  return spawnSync('test', ['-x', LOOM_BIN]).status === 0 ? false : `loom binary not found at ${LOOM_BIN}`;
}

// Runs `loom serve ...args` (through `script` when `tty`) with a fake xdg-open first on PATH until
// its ready card is out plus a moment; returns what xdg-open was given ('' when not run).
async function serveAndSeeWhatOpens(args, tty) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'loom-open-'));
  const marker = path.join(dir, 'opened');
  fs.writeFileSync(path.join(dir, 'xdg-open'), `#!/bin/sh\necho "$@" > '${marker}'\n`, { mode: 0o755 });
  const env = { ...process.env, PATH: `${dir}:${process.env.PATH}` };
  const serve = [LOOM_BIN, 'serve', '--port', '0', '--threads', '1', ...args];
  const proc = tty
    ? spawn('script', ['-qec', serve.map((a) => `'${a}'`).join(' '), '/dev/null'], { env, stdio: ['pipe', 'pipe', 'pipe'] })
    : spawn(serve[0], serve.slice(1), { env, stdio: ['ignore', 'pipe', 'pipe'] });
  let log = '';
  proc.stdout.on('data', (d) => { log += d; });
  proc.stderr.on('data', (d) => { log += d; });
  const exited = new Promise((resolve) => proc.on('exit', resolve));
  try {
    for (const deadline = Date.now() + 30000; !/url\s+http/.test(log);) {
      assert.ok(Date.now() < deadline && proc.exitCode === null, `serve did not start:\n${log}`);
      await new Promise((r) => setTimeout(r, 50));
    }
    for (const deadline = Date.now() + 2000; Date.now() < deadline && !fs.existsSync(marker);) {
      await new Promise((r) => setTimeout(r, 50));
    }
    return fs.existsSync(marker) ? fs.readFileSync(marker, 'utf8').trim() : '';
  } finally {
    if (tty) proc.stdin.write('\x03');  // Ctrl-C through the terminal: SIGINT to loom
    proc.kill('SIGTERM');
    await exited;
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

const noScript = spawnSync('script', ['--version']).status === 0 ? false : 'needs script(1) (util-linux)';

test('loom serve opens the chat page on a terminal only, and not with --no-open', { skip: skipReasonDefault() || noScript, timeout: 120000 }, async () => {
  const opened = await serveAndSeeWhatOpens([], true);
  assert.match(opened, /^http:\/\/127\.0\.0\.1:\d+\/#\/chat$/);
  // Bound to every address, the browser still goes through loopback.
  assert.match(await serveAndSeeWhatOpens(['--host', '0.0.0.0'], true), /^http:\/\/127\.0\.0\.1:\d+\/#\/chat$/);
  assert.equal(await serveAndSeeWhatOpens(['--no-open'], true), '');
  assert.equal(await serveAndSeeWhatOpens([], false), '');  // a pipe: never
});
