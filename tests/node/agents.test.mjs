// Real coding-agent CLIs (tests/agents, from npm) complete a non-interactive turn against
// `loom serve`: Claude Code (`claude -p`, the Anthropic API), Qwen Code (`qwen -p`, OpenAI chat
// completions with tools and streaming) and the Codex CLI (`codex exec`, the Responses API). The model is the random-weight tiny Qwen3 with the real
// Qwen3 tokenizer and chat template (helpers.mjs), with a context long enough for their 15-30k
// token system prompts and tool lists: what is tested is that their whole request shape is
// accepted and their client parses loom's answers, not what the model says.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { HERE, QWEN3_TOKENIZER, TINY_QWEN3, startServer, tinyQwen3Args, tinyQwen3Skip, waitIdle } from './helpers.mjs';

const AGENTS = path.join(HERE, '../agents/node_modules');
const CLAUDE = path.join(AGENTS, '@anthropic-ai/claude-code-linux-x64/claude');
const QWEN = path.join(AGENTS, '@qwen-code/qwen-code/cli.js');
// @openai/codex's launcher (bin/codex.js) runs this native binary, from its platform package.
const CODEX = path.join(AGENTS, '@openai/codex-linux-x64/vendor/x86_64-unknown-linux-musl/bin/codex');

function agentSkip(file) {
  const s = tinyQwen3Skip();
  if (s) return s;
  if (fs.existsSync(file)) return false;
  const why = `needs ${path.relative(path.join(HERE, '../..'), file)} (make test installs tests/agents)`;
  if (process.env.LOOM_REQUIRE_SHARED_DATA === '1') throw new Error(why);
  return why;
}
const nodeMajor = Number(process.versions.node.split('.')[0]);
const claudeSkip = process.platform !== 'linux' || process.arch !== 'x64'
  ? 'Claude Code is installed for linux-x64 only' : agentSkip(CLAUDE);
const qwenSkip = nodeMajor < 20 ? `Qwen Code needs node >= 20 (this is ${process.versions.node})`
  : agentSkip(QWEN);
const codexSkip = process.platform !== 'linux' || process.arch !== 'x64'
  ? 'the Codex CLI is installed for linux-x64 only' : agentSkip(CODEX);

// The tiny Qwen3 with ids 0-39999 added to its EOS ids, so that its random replies end on their
// own after a few tokens (stop_reason end_turn) as a real model's do: Claude Code treats a reply
// cut by max_tokens as an error. 64k context for the agents' prompts; --max-output-tokens 48
// bounds the rare long reply.
function shortReplyConfig() {
  const cfg = JSON.parse(fs.readFileSync(TINY_QWEN3, 'utf8'));
  cfg.eos_token_id = [cfg.eos_token_id, ...Array.from({ length: 40000 }, (_, i) => i)];
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'loom-agent-model-'));
  process.on('exit', () => fs.rmSync(dir, { recursive: true, force: true }));
  fs.writeFileSync(path.join(dir, 'config.json'), JSON.stringify(cfg));
  return path.join(dir, 'config.json');
}

let server;
before(async () => {
  if (claudeSkip && qwenSkip && codexSkip) return;
  server = await startServer(['--dummy-weights', shortReplyConfig(), '--tokenizer', QWEN3_TOKENIZER,
    '--max-output-tokens', '48']);
});
after(async () => { if (server) assert.equal(await server.stop(), 0, server.log()); });

// Runs `cmd args` with `env` (HOME in a fresh temp dir), resolves {code, stdout, stderr}.
function run(cmd, args, env, timeoutMs = 240000) {
  const home = fs.mkdtempSync(path.join(os.tmpdir(), 'loom-agent-home-'));
  return new Promise((resolve) => {
    const p = spawn(cmd, args, { env: { PATH: process.env.PATH, HOME: home, ...env },
      stdio: ['ignore', 'pipe', 'pipe'], cwd: home });
    let stdout = '', stderr = '';
    p.stdout.on('data', (d) => { stdout += d; });
    p.stderr.on('data', (d) => { stderr += d; });
    const timer = setTimeout(() => p.kill('SIGKILL'), timeoutMs);
    p.on('exit', (code, sig) => {
      clearTimeout(timer);
      fs.rmSync(home, { recursive: true, force: true });
      resolve({ code: code ?? sig, stdout, stderr });
    });
  });
}

// The server's request log lines for `route` since `from` (loom logs one line per request).
function statusesSince(from, route) {
  return server.log().slice(from).split('\n')
    .filter((l) => l.includes(route)).map((l) => (l.match(/ (\d{3}) /) || [])[1]).filter(Boolean);
}

test('Claude Code: claude -p completes a turn over the Anthropic API', { skip: claudeSkip, timeout: 300000 }, async () => {
  const from = server.log().length;
  const r = await run(CLAUDE, ['-p', 'Say hi.', '--model', 'loom-test', '--max-turns', '1'], {
    ANTHROPIC_BASE_URL: server.url,
    ANTHROPIC_API_KEY: 'sk-loom-test',
    DISABLE_AUTOUPDATER: '1',
    DISABLE_TELEMETRY: '1',
    CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC: '1',
  });
  const statuses = statusesSince(from, '/v1/messages');
  assert.equal(r.code, 0, `exit ${r.code}\nstdout: ${r.stdout}\nstderr: ${r.stderr}\nstatuses ${statuses}\n${server.log().slice(from, from + 4000)}`);
  assert.ok(statuses.length >= 1 && statuses.every((s) => s === '200'), `statuses ${statuses}`);
  assert.ok(r.stdout.trim().length > 0, 'no reply printed');
  assert.equal((await waitIdle(server.url)).kv.blocks_used, 0);
});

test('Qwen Code: qwen -p completes a turn over OpenAI chat completions', { skip: qwenSkip, timeout: 300000 }, async () => {
  const from = server.log().length;
  const r = await run(process.execPath, [QWEN, '-p', 'Say hi.'], {
    OPENAI_BASE_URL: `${server.url}/v1`,
    OPENAI_API_KEY: 'sk-loom-test',
    OPENAI_MODEL: 'loom-test',
  });
  const statuses = statusesSince(from, '/v1/chat/completions');
  assert.equal(r.code, 0, `exit ${r.code}\nstdout: ${r.stdout}\nstderr: ${r.stderr}\nstatuses ${statuses}`);
  assert.ok(statuses.length >= 1 && statuses.every((s) => s === '200'), `statuses ${statuses}`);
  assert.ok(r.stdout.trim().length > 0, 'no reply printed');
  assert.equal((await waitIdle(server.url)).kv.blocks_used, 0);
});

// A CODEX_HOME whose config.toml points a custom provider speaking the Responses API at `url`:
// no update check, no analytics. Removed at exit.
function codexHome(url) {
  const home = fs.mkdtempSync(path.join(os.tmpdir(), 'loom-codex-home-'));
  process.on('exit', () => fs.rmSync(home, { recursive: true, force: true }));
  fs.writeFileSync(path.join(home, 'config.toml'), [
    'model = "loom-test"',
    'model_provider = "loom"',
    'check_for_update_on_startup = false',
    '',
    '[model_providers.loom]',
    'name = "loom"',
    `base_url = "${url}/v1"`,
    'wire_api = "responses"',
    'env_key = "LOOM_API_KEY"',
    '',
    '[analytics]',
    'enabled = false',
    ''].join('\n'));
  return home;
}

test('Codex CLI: codex exec completes a turn over the Responses API', { skip: codexSkip, timeout: 300000 }, async () => {
  // Read-only sandbox; exec mode asks for no approvals.
  const from = server.log().length;
  const r = await run(CODEX, ['exec', '--skip-git-repo-check', '--sandbox', 'read-only', 'Say hi.'], {
    CODEX_HOME: codexHome(server.url),
    LOOM_API_KEY: 'sk-loom-test',
  });
  const statuses = statusesSince(from, '/v1/responses');
  assert.equal(r.code, 0, `exit ${r.code}\nstdout: ${r.stdout}\nstderr: ${r.stderr}\nstatuses ${statuses}\n${server.log().slice(from, from + 4000)}`);
  assert.ok(statuses.length >= 1 && statuses.every((s) => s === '200'), `statuses ${statuses}`);
  assert.match(r.stderr, /tokens used/, r.stderr);
  assert.equal((await waitIdle(server.url)).kv.blocks_used, 0);
});

test('Codex CLI: codex exec --output-schema answers JSON that validates (text.format)', { skip: codexSkip, timeout: 300000 }, async () => {
  // Codex sends the schema as text.format json_schema (strict); the grammar makes the random
  // reply valid. The plain tiny Qwen3 here: the short-reply model's extra EOS ids include the
  // JSON punctuation tokens, which a grammar then can never emit. Reasoning effort none: the
  // template closes the think section, so the JSON comes first.
  const plain = await startServer([...tinyQwen3Args(), '--max-output-tokens', '48']);
  try {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'loom-codex-schema-'));
    const schemaFile = path.join(dir, 'schema.json');
    const schema = { type: 'object', properties: { answer: { enum: ['yes', 'no'] } },
      required: ['answer'], additionalProperties: false };
    fs.writeFileSync(schemaFile, JSON.stringify(schema));
    const r = await run(CODEX, ['exec', '--skip-git-repo-check', '--sandbox', 'read-only',
      '-c', 'model_reasoning_effort="none"', '--output-schema', schemaFile, 'Answer yes or no.'], {
      CODEX_HOME: codexHome(plain.url),
      LOOM_API_KEY: 'sk-loom-test',
    });
    fs.rmSync(dir, { recursive: true, force: true });
    assert.equal(r.code, 0, `exit ${r.code}\nstdout: ${r.stdout}\nstderr: ${r.stderr}\n${plain.log().slice(0, 4000)}`);
    const answer = JSON.parse(r.stdout.trim());
    assert.ok(['yes', 'no'].includes(answer.answer) && Object.keys(answer).length === 1, r.stdout);
    assert.equal((await waitIdle(plain.url)).kv.blocks_used, 0);
  } finally {
    assert.equal(await plain.stop(), 0, plain.log());
  }
});
