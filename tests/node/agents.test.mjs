// Real coding-agent CLIs (tests/agents, from npm) complete a non-interactive turn against
// `loom serve`: Claude Code (`claude -p`, the Anthropic API), Qwen Code (`qwen -p`, OpenAI chat
// completions with tools and streaming), opencode (`opencode run`, OpenAI chat completions through
// the AI SDK) and the Codex CLI (`codex exec`, the Responses API). The model is the random-weight
// tiny Qwen3 with the real Qwen3 tokenizer and chat template (helpers.mjs), with a context long
// enough for their 15-30k token system prompts and tool lists: what is tested is that their whole
// request shape is accepted and their client parses loom's answers, not what the model says.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { HERE, QWEN3_TOKENIZER, TINY_QWEN3, startServer, tinyQwen3Skip, waitIdle } from './helpers.mjs';

const AGENTS = path.join(HERE, '../agents/node_modules');
const CLAUDE = path.join(AGENTS, '@anthropic-ai/claude-code-linux-x64/claude');
const QWEN = path.join(AGENTS, '@qwen-code/qwen-code/cli.js');
const OPENCODE = path.join(AGENTS, 'opencode-linux-x64/bin/opencode');
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
const opencodeSkip = process.platform !== 'linux' || process.arch !== 'x64'
  ? 'opencode is installed for linux-x64 only' : agentSkip(OPENCODE);
const codexSkip = process.platform !== 'linux' || process.arch !== 'x64'
  ? 'the Codex CLI is installed for linux-x64 only' : agentSkip(CODEX);

// The tiny Qwen3 with 300 more EOS ids (100000-100299: CJK and code pieces, no JSON punctuation,
// so grammars still work), so that its random replies end on their own (stop_reason end_turn) as
// a real model's do: Claude Code treats a reply cut by max_tokens as an error, Codex an
// incomplete response, and an empty one prints nothing. Measured on 40 replies: 4 to 2478 tokens,
// ~480 on average (a reply is empty with probability ~0.2%, cut at 4000 with ~0.03%). 64k
// context for the agents' prompts.
function shortReplyConfig() {
  const cfg = JSON.parse(fs.readFileSync(TINY_QWEN3, 'utf8'));
  cfg.eos_token_id = [cfg.eos_token_id, ...Array.from({ length: 300 }, (_, i) => 100000 + i)];
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'loom-agent-model-'));
  process.on('exit', () => fs.rmSync(dir, { recursive: true, force: true }));
  fs.writeFileSync(path.join(dir, 'config.json'), JSON.stringify(cfg));
  return path.join(dir, 'config.json');
}

let server;
before(async () => {
  if (claudeSkip && qwenSkip && opencodeSkip && codexSkip) return;
  // --max-tokens 0: Codex sends no max_output_tokens (the default 512 would cut replies).
  server = await startServer(['--dummy-weights', shortReplyConfig(), '--tokenizer', QWEN3_TOKENIZER,
    '--max-tokens', '0', '--max-output-tokens', '4000']);
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

test('opencode: opencode run completes a turn over OpenAI chat completions', { skip: opencodeSkip, timeout: 300000 }, async () => {
  // A custom provider through the AI SDK's openai-compatible package (bundled in the binary); no
  // models.dev fetch, no update check, no sharing. --format json: one JSON event per line.
  const from = server.log().length;
  const config = {
    $schema: 'https://opencode.ai/config.json',
    provider: { loom: { npm: '@ai-sdk/openai-compatible', name: 'loom',
      options: { baseURL: `${server.url}/v1`, apiKey: 'sk-loom-test' },
      models: { 'loom-test': { name: 'loom-test' } } } },
    model: 'loom/loom-test',
    autoupdate: false,
    share: 'disabled',
  };
  const r = await run(OPENCODE, ['run', '--format', 'json', '-m', 'loom/loom-test', 'Say hi.'], {
    OPENCODE_CONFIG_CONTENT: JSON.stringify(config),
    OPENCODE_DISABLE_MODELS_FETCH: '1',
    OPENCODE_DISABLE_AUTOUPDATE: '1',
  });
  const statuses = statusesSince(from, '/v1/chat/completions');
  assert.equal(r.code, 0, `exit ${r.code}\nstdout: ${r.stdout}\nstderr: ${r.stderr}\nstatuses ${statuses}`);
  assert.ok(statuses.length >= 1 && statuses.every((s) => s === '200'), `statuses ${statuses}`);
  const events = r.stdout.split('\n').filter((l) => l.trim()).map((l) => JSON.parse(l));
  assert.ok(!events.some((e) => e.type === 'error'), r.stdout);
  const finish = events.find((e) => e.type === 'step_finish');
  assert.ok(finish, `no step_finish event: ${r.stdout}`);
  assert.equal(finish.part.reason, 'stop', r.stdout);
  assert.ok(finish.part.tokens.output > 0, r.stdout);
  assert.ok(events.some((e) => e.type === 'text' && e.part.text.length > 0), r.stdout);
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
  // reply valid. Reasoning effort none: the template closes the think section, so the JSON comes
  // first.
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'loom-codex-schema-'));
  const schemaFile = path.join(dir, 'schema.json');
  const schema = { type: 'object', properties: { answer: { enum: ['yes', 'no'] } },
    required: ['answer'], additionalProperties: false };
  fs.writeFileSync(schemaFile, JSON.stringify(schema));
  const from = server.log().length;
  const r = await run(CODEX, ['exec', '--skip-git-repo-check', '--sandbox', 'read-only',
    '-c', 'model_reasoning_effort="none"', '--output-schema', schemaFile, 'Answer yes or no.'], {
    CODEX_HOME: codexHome(server.url),
    LOOM_API_KEY: 'sk-loom-test',
  });
  fs.rmSync(dir, { recursive: true, force: true });
  assert.equal(r.code, 0, `exit ${r.code}\nstdout: ${r.stdout}\nstderr: ${r.stderr}\n${server.log().slice(from, from + 4000)}`);
  const answer = JSON.parse(r.stdout.trim());
  assert.ok(['yes', 'no'].includes(answer.answer) && Object.keys(answer).length === 1, r.stdout);
  assert.equal((await waitIdle(server.url)).kv.blocks_used, 0);
});
