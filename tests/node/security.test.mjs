// Local-server security (issue 28) with a real HTTP client: a web page's cross-origin requests
// are refused before anything reaches the engine (its submitted_rows counter proves it),
// preflights reflect the policy, a DNS-rebinding Host is refused, and API keys guard every route
// but /health. node:http (not fetch, which may not set Host) sends the exact headers.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { LOOM_BIN, skipReason, startServer } from './helpers.mjs';

const skip = skipReason() || false;
const KEYS = ['sk-sec-flag-1', 'sk-sec-flag-2', 'sk-sec-file', 'sk-sec-env'];
const AUTH = { Authorization: `Bearer ${KEYS[0]}` };
const APP = 'https://app.example.com';
let server;  // default policy plus --allowed-origins APP, --allowed-hosts loom.lan; keys from every source
let open;    // --host 0.0.0.0 --allowed-origins '*' --allowed-hosts '*', no key
let keyDir;

before(async () => {
  if (skip) return;
  keyDir = fs.mkdtempSync(path.join(os.tmpdir(), 'loom-keys-'));
  const keyFile = path.join(keyDir, 'keys');
  fs.writeFileSync(keyFile, `# loom keys\n\n  ${KEYS[2]}  \n`);
  process.env.LOOM_API_KEY = KEYS[3];
  try {
    server = await startServer(['--api-key', `${KEYS[0]},${KEYS[1]}`, '--api-key-file', keyFile,
      '--allowed-origins', APP, '--allowed-hosts', 'loom.lan']);
  } finally {
    delete process.env.LOOM_API_KEY;
  }
  open = await startServer(['--host', '0.0.0.0', '--allowed-origins', '*', '--allowed-hosts', '*']);
});
after(async () => {
  if (server) assert.equal(await server.stop(), 0, server.log());
  if (open) assert.equal(await open.stop(), 0, open.log());
  if (keyDir) fs.rmSync(keyDir, { recursive: true, force: true });
});

// One request with exactly these headers (Host defaults to 127.0.0.1:PORT); resolves
// {status, headers, body (parsed JSON when it is JSON)}.
function request(srv, method, route, headers = {}, body = undefined) {
  return new Promise((resolve, reject) => {
    const req = http.request({ host: '127.0.0.1', port: srv.port, method, path: route, headers,
      agent: false }, (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (d) => { text += d; });
      res.on('end', () => {
        let parsed = text;
        try { parsed = JSON.parse(text); } catch { /* not JSON */ }
        resolve({ status: res.statusCode, headers: res.headers, body: parsed });
      });
    });
    req.on('error', reject);
    if (body !== undefined) req.write(body);
    req.end();
  });
}

const COMPLETION = JSON.stringify({ prompt: 'In the beginning', max_tokens: 2 });
const CHAT = JSON.stringify({ messages: [{ role: 'user', content: 'hi' }], max_tokens: 2 });

async function submitted(srv, headers = AUTH) {
  const r = await request(srv, 'GET', '/stats', headers);
  assert.equal(r.status, 200, JSON.stringify(r.body));
  return r.body.batch.submitted_rows;
}

function assertNoCors(r) {
  for (const h of Object.keys(r.headers)) assert.ok(!h.startsWith('access-control-allow'), `${h}: ${r.headers[h]}`);
}

test('a cross-origin simple POST is refused with 403 and never reaches the engine', { skip }, async () => {
  const before = await submitted(server);
  const CASES = [
    ['/v1/chat/completions', 'text/plain', CHAT, 'http://evil.example'],
    ['/v1/completions', 'text/plain;charset=UTF-8', COMPLETION, 'https://evil.example:8443'],
    ['/v1/completions', 'application/x-www-form-urlencoded', COMPLETION, 'http://localhost.evil.example'],
    ['/v1/messages', 'text/plain', CHAT, 'null'],
    ['/v1/completions', 'text/plain', COMPLETION, 'null'],
  ];
  for (const [route, type, body, origin] of CASES) {
    // With a valid key too: the Origin check does not depend on it.
    const r = await request(server, 'POST', route, { Origin: origin, 'Content-Type': type, ...AUTH }, body);
    assert.equal(r.status, 403, `${origin} ${route}: ${JSON.stringify(r.body)}`);
    assert.match(JSON.stringify(r.body), /Origin/);
    assertNoCors(r);
  }
  assert.equal(await submitted(server), before, 'a refused request was submitted to the engine');
  const metrics = (await request(server, 'GET', '/metrics', AUTH)).body;
  assert.match(metrics, /loom_requests_total\{route="\/v1\/completions",status="403"\} 3/);
});

test('a refused body is not read as a second request on the same connection', { skip }, async () => {
  // The body of a refused text/plain POST holds a whole request without an Origin; sent after the
  // headers, it must be read and dropped, not served.
  const before = await submitted(server);
  const inner = `POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer ${KEYS[0]}\r\n` +
    `Content-Type: application/json\r\nContent-Length: ${COMPLETION.length}\r\n\r\n${COMPLETION}`;
  const head = `POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1:${server.port}\r\n` +
    `Origin: http://evil.example\r\nContent-Type: text/plain\r\nContent-Length: ${inner.length}\r\n\r\n`;
  const got = await new Promise((resolve, reject) => {
    const s = net.connect(server.port, '127.0.0.1', () => {
      s.write(head);
      setTimeout(() => s.write(inner), 150);
    });
    let text = '';
    s.on('data', (d) => { text += d; });
    s.on('error', reject);
    setTimeout(() => { s.destroy(); resolve(text); }, 1500);
  });
  assert.equal(got.match(/HTTP\/1\.1 \d{3}/g).join(','), 'HTTP/1.1 403', got);
  assert.equal(await submitted(server), before);
});

test('preflights reflect the policy', { skip }, async () => {
  const preflight = (origin) => request(server, 'OPTIONS', '/v1/chat/completions', {
    Origin: origin, 'Access-Control-Request-Method': 'POST',
    'Access-Control-Request-Headers': 'content-type,authorization' });
  for (const origin of ['http://evil.example', 'null', 'http://127.0.0.1.evil.example']) {
    const r = await preflight(origin);
    assert.equal(r.status, 403, origin);
    assertNoCors(r);
  }
  for (const origin of [APP, 'http://localhost:5173', `http://127.0.0.1:${server.port}`]) {
    const r = await preflight(origin);
    assert.equal(r.status, 204, origin);
    assert.equal(r.headers['access-control-allow-origin'], origin);
    assert.match(r.headers.vary, /Origin/);
    assert.match(r.headers['access-control-allow-headers'], /authorization/);
    assert.match(r.headers['access-control-allow-methods'], /POST/);
  }
});

test('allowed, loopback and same origins work, their origin echoed', { skip }, async () => {
  const before = await submitted(server);
  const origins = [APP, 'http://localhost:3000', 'http://[::1]:8080', `http://127.0.0.1:${server.port}`];
  for (const origin of origins) {
    const r = await request(server, 'POST', '/v1/completions',
      { Origin: origin, 'Content-Type': 'application/json', ...AUTH }, COMPLETION);
    assert.equal(r.status, 200, `${origin}: ${JSON.stringify(r.body)}`);
    assert.equal(r.headers['access-control-allow-origin'], origin);
    assert.match(r.headers.vary, /Origin/);
    assert.equal(r.headers['access-control-expose-headers'], 'x-request-id');
  }
  assert.equal(await submitted(server), before + origins.length);
  // No Origin (SDKs, curl): no CORS headers, nothing refused.
  const plain = await request(server, 'POST', '/v1/completions', { 'Content-Type': 'application/json', ...AUTH }, COMPLETION);
  assert.equal(plain.status, 200);
  assert.equal(plain.headers['access-control-allow-origin'], undefined);
});

test('a Host that does not name loopback is refused (DNS rebinding)', { skip }, async () => {
  const before = await submitted(server);
  for (const host of ['evil.example', `evil.example:${server.port}`, `localhost.evil.example:${server.port}`,
    `192.168.7.7:${server.port}`, `loom.lan.evil.example:${server.port}`, `x.loom.lan:${server.port}`]) {
    for (const [method, route, body] of [['GET', '/health'], ['GET', '/v1/models'],
      ['POST', '/v1/completions', COMPLETION]]) {
      const r = await request(server, method, route, { Host: host, 'Content-Type': 'application/json', ...AUTH }, body);
      assert.equal(r.status, 403, `${host} ${route}`);
      assert.match(r.body.error.message, /Host header/);
      assert.equal(r.body.error.code, 'forbidden_host');
    }
  }
  assert.equal(await submitted(server), before);
  // Loopback names and --allowed-hosts names (any port) pass.
  for (const host of ['localhost', `localhost:${server.port}`, `127.0.0.1:${server.port}`, `[::1]:${server.port}`,
    `127.0.0.2:${server.port}`, 'loom.lan', `LOOM.lan:${server.port}`]) {
    const r = await request(server, 'POST', '/v1/completions', { Host: host, 'Content-Type': 'application/json', ...AUTH }, COMPLETION);
    assert.equal(r.status, 200, host);
  }
});

test('API keys: missing / wrong / right on every route; /health and the page are public', { skip }, async () => {
  const ROUTES = [
    ['GET', '/v1/models'], ['GET', '/stats'], ['GET', '/metrics'], ['GET', '/v1/responses/resp_x'],
    ['POST', '/v1/chat/completions', CHAT], ['POST', '/v1/completions', COMPLETION],
    ['POST', '/v1/messages', JSON.stringify({ max_tokens: 2, messages: [{ role: 'user', content: 'hi' }] })],
    ['POST', '/v1/messages/count_tokens', JSON.stringify({ messages: [{ role: 'user', content: 'hi' }] })],
    ['POST', '/v1/responses', JSON.stringify({ input: 'hi', max_output_tokens: 2 })],
    ['POST', '/tokenize', JSON.stringify({ content: 'hi' })], ['POST', '/detokenize', JSON.stringify({ tokens: [1] })],
    ['DELETE', '/v1/responses/resp_x'], ['GET', '/no/such/route'],
  ];
  const json = { 'Content-Type': 'application/json' };
  for (const [method, route, body] of ROUTES) {
    const missing = await request(server, method, route, json, body);
    assert.equal(missing.status, 401, `${method} ${route}`);
    assert.match(missing.headers['www-authenticate'], /^Bearer/);
    assert.match(JSON.stringify(missing.body), /missing API key/);
    for (const wrong of [{ Authorization: 'Bearer sk-wrong' }, { 'x-api-key': 'sk-wrong' },
      { Authorization: KEYS[0] }, { Authorization: `Bearer ${KEYS[0]}x` }]) {
      const r = await request(server, method, route, { ...json, ...wrong }, body);
      assert.equal(r.status, 401, `${method} ${route} ${JSON.stringify(wrong)}`);
      assert.match(JSON.stringify(r.body), /invalid API key/);
    }
    // Every key source, both headers.
    const rights = [{ Authorization: `Bearer ${KEYS[0]}` }, { Authorization: `bearer ${KEYS[1]}` },
      { 'x-api-key': KEYS[2] }, { 'x-api-key': KEYS[3] }];
    for (const right of rights) {
      const r = await request(server, method, route, { ...json, ...right }, body);
      assert.notEqual(r.status, 401, `${method} ${route} ${JSON.stringify(right)}: ${JSON.stringify(r.body)}`);
    }
  }
  // Anthropic-shaped 401 on /v1/messages.
  const a = await request(server, 'POST', '/v1/messages', json, '{}');
  assert.equal(a.body.type, 'error');
  assert.equal(a.body.error.type, 'authentication_error');
  assert.equal((await request(server, 'GET', '/health')).status, 200);
  const page = await request(server, 'GET', '/');
  assert.equal(page.status, 200);
  assert.match(page.body, /sessionStorage/);  // the page asks for the key on 401
  for (const k of KEYS) assert.ok(!server.log().includes(k), 'a key was logged');
});

test('--allowed-origins * and --allowed-hosts * open the server, with warnings', { skip }, async () => {
  assert.match(open.log(), /warning\s+--allowed-origins \*/);
  assert.match(open.log(), /warning\s+--allowed-hosts \*/);
  assert.match(open.log(), /warning\s+listening on 0\.0\.0\.0 without an API key/);
  assert.doesNotMatch(server.log(), /warning/);
  for (const origin of ['http://evil.example', 'null']) {
    const r = await request(open, 'POST', '/v1/completions',
      { Origin: origin, Host: 'evil.example', 'Content-Type': 'text/plain' }, COMPLETION);
    assert.equal(r.status, 200, origin);
    assert.equal(r.headers['access-control-allow-origin'], origin);
  }
});

test('bad security flags fail at startup naming the flag', { skip }, () => {
  const CASES = [
    [['--allowed-origins', 'app.example.com'], /--allowed-origins: 'app.example.com' is not an origin/],
    [['--allowed-hosts', 'http://a.lan'], /--allowed-hosts/],
    [['--api-key', 'sk one'], /--api-key: API key 1 holds a space/],
    [['--api-key-file', '/nonexistent/keys'], /--api-key-file/],
  ];
  for (const [args, re] of CASES) {
    const r = spawnSync(LOOM_BIN, ['serve', '--port', '0', '--no-open', ...args], { encoding: 'utf8', timeout: 30000 });
    assert.notEqual(r.status, 0, args.join(' '));
    assert.match(r.stderr + r.stdout, re);
    assert.doesNotMatch(r.stderr + r.stdout, /sk one/);
  }
});

test('--max-queued-requests: 429 with Retry-After beyond the queue cap, no KV block leaked', { skip, timeout: 60000 }, async () => {
  const q = await startServer(['--batch', '1', '--max-queued-requests', '2']);
  try {
    const stats = async () => (await request(q, 'GET', '/stats')).body;
    const json = { 'Content-Type': 'application/json' };
    // n: 128 is 128 rows of 480 tokens: one runs (--batch 1), 127 wait. The refused requests
    // are sent once at least 100 wait, so the queue would have to drain 98 rows (~47k tokens)
    // in the gap between the poll and their arrival to let them in (with n: 32 and 16 waiting, a
    // loaded CI machine once saw it drain). The request is dropped by closing its connection once
    // the refusals are checked, which aborts its rows.
    const long = JSON.stringify({ prompt: 'In the beginning', max_tokens: 480, ignore_eos: true, n: 128 });
    const longReq = http.request({ host: '127.0.0.1', port: q.port, method: 'POST', path: '/v1/completions',
      headers: json, agent: false });
    longReq.on('error', () => { /* destroyed below */ });
    longReq.end(long);
    let s;
    for (const deadline = Date.now() + 10000; Date.now() < deadline;) {
      s = await stats();
      // All 128 rows submitted (a fresh server), so that submitted_rows cannot grow later.
      if (s.batch.pending_rows >= 100 && s.batch.submitted_rows >= 128) break;
      await new Promise((r) => setTimeout(r, 5));
    }
    assert.ok(s.batch.pending_rows >= 100 && s.batch.submitted_rows >= 128, JSON.stringify(s.batch));
    const before = s.batch.submitted_rows;
    const refused = await Promise.all([
      request(q, 'POST', '/v1/completions', json, COMPLETION),
      request(q, 'POST', '/v1/messages', json, JSON.stringify({ max_tokens: 2, messages: [{ role: 'user', content: 'hi' }] })),
    ]);
    for (const r of refused) {
      assert.equal(r.status, 429, JSON.stringify(r.body));
      assert.equal(r.headers['retry-after'], '1');
      assert.match(JSON.stringify(r.body), /--max-queued-requests 2/);
    }
    assert.equal(refused[0].body.error.code, 'queue_full');
    assert.equal(refused[1].body.error.type, 'rate_limit_error');
    // Routes that queue nothing still answer.
    assert.equal((await request(q, 'POST', '/tokenize', json, JSON.stringify({ content: 'hi' }))).status, 200);
    longReq.destroy();
    for (const deadline = Date.now() + 10000; Date.now() < deadline;) {
      s = await stats();
      if (s.batch.active_rows === 0 && s.batch.pending_rows === 0 && s.kv.blocks_used === 0) break;
      await new Promise((r) => setTimeout(r, 20));
    }
    assert.equal(s.batch.submitted_rows, before, 'a refused request reached the engine');
    assert.equal(s.kv.blocks_used, 0);
    assert.equal((await request(q, 'POST', '/v1/completions', json, COMPLETION)).status, 200);
  } finally {
    assert.equal(await q.stop(), 0, q.log());
  }
});

test('header caps: over 100 headers or 64 KiB of them is a 431 naming the limit; the server keeps serving', { skip }, async () => {
  const json = { 'Content-Type': 'application/json', ...AUTH };
  const many = { ...json };
  for (let i = 0; i < 120; ++i) many[`x-filler-${i}`] = 'v';
  const r = await request(server, 'POST', '/v1/completions', many, COMPLETION);
  assert.equal(r.status, 431, JSON.stringify(r.body));
  assert.equal(r.body.error.code, 'request_headers_too_large');
  assert.match(r.body.error.message, /at most 100 headers and 64 KiB/);
  // Ten 7 KiB headers: each under httplib's 8 KiB line cap, together over 64 KiB.
  const big = { ...json };
  for (let i = 0; i < 10; ++i) big[`x-big-${i}`] = 'b'.repeat(7 << 10);
  const r2 = await request(server, 'GET', '/v1/models', big);
  assert.equal(r2.status, 431, JSON.stringify(r2.body));
  // 90 small headers are fine, and so is the next request.
  const fine = { ...json };
  for (let i = 0; i < 90; ++i) fine[`x-filler-${i}`] = 'v';
  assert.equal((await request(server, 'POST', '/v1/completions', fine, COMPLETION)).status, 200);
  assert.equal((await request(server, 'GET', '/v1/models', AUTH)).status, 200);
});

test('the request log: ids, sizes and timings, never a prompt, a reply or a key; --log-prompts adds them', { skip, timeout: 60000 }, async () => {
  const prompt = 'In the beginning zqxj';
  const body = JSON.stringify({ prompt, max_tokens: 4, temperature: 0 });
  const chat = JSON.stringify({ messages: [{ role: 'user', content: 'hello zqxj' }], max_tokens: 4, temperature: 0 });
  const json = { 'Content-Type': 'application/json', ...AUTH };
  const before = server.log().length;
  const r = await request(server, 'POST', '/v1/completions', json, body);
  assert.equal(r.status, 200, JSON.stringify(r.body));
  await new Promise((res) => setTimeout(res, 100));
  const quiet = server.log().slice(before);
  const line = quiet.split('\n').find((l) => l.includes(`${r.headers['x-request-id']} POST /v1/completions 200`));
  assert.ok(line, quiet);
  assert.match(line, new RegExp(`in ${Buffer.byteLength(body)} B out \\d+ B \\d+\\.\\d ms`));
  assert.doesNotMatch(quiet, /zqxj/);
  assert.ok(!quiet.includes(KEYS[0]));

  const loud = await startServer(['--log-prompts']);
  try {
    const c = await request(loud, 'POST', '/v1/completions', { 'Content-Type': 'application/json' }, body);
    assert.equal(c.status, 200, JSON.stringify(c.body));
    const m = await request(loud, 'POST', '/v1/chat/completions', { 'Content-Type': 'application/json' }, chat);
    assert.equal(m.status, 200, JSON.stringify(m.body));
    await new Promise((res) => setTimeout(res, 100));
    const log = loud.log();
    const id = c.headers['x-request-id'];
    assert.ok(log.includes(`${id} prompt (`) && log.includes('In the beginning zqxj'), log);
    // The reply, as one JSON string, under the same id.
    assert.ok(log.includes(`${id} choice 0 length: ${JSON.stringify(c.body.choices[0].text)}`), log);
    // Chat: the prompt as the template rendered it.
    const chatId = m.headers['x-request-id'];
    const promptLine = log.split('\n').find((l) => l.includes(`${chatId} prompt (`));
    assert.ok(promptLine && promptLine.includes('hello zqxj'), log);
    assert.ok(log.includes(`${chatId} choice 0 `), log);
  } finally {
    assert.equal(await loud.stop(), 0, loud.log());
  }
});

test('a prompt that cannot fit the context is refused before it is tokenized; the server keeps serving', { skip, timeout: 120000 }, async (t) => {
  // The default model: a 512-token context and at most 15 bytes a token, so 30 MB of text has at
  // least 2M tokens; the pre-check refuses it from its byte count ("at least"), without the
  // tokenizer, the engine, or a KV block.
  const json = { 'Content-Type': 'application/json', ...AUTH };
  const verse = 'In the beginning God created the heaven and the earth. ';
  const huge = verse.repeat(Math.ceil((30 << 20) / verse.length));
  assert.ok(Buffer.byteLength(huge) > 29 << 20 && Buffer.byteLength(huge) < 31 << 20);
  const big = verse.repeat(Math.ceil((3 << 20) / verse.length));  // the other routes: 3 MB
  const CASES = [
    ['/v1/completions', { prompt: huge, max_tokens: 1 }, 'prompt'],
    ['/v1/chat/completions', { messages: [{ role: 'user', content: big }], max_tokens: 1 }, 'messages'],
    ['/v1/messages', { messages: [{ role: 'user', content: big }], max_tokens: 1 }, 'messages'],
    ['/v1/responses', { input: big, max_output_tokens: 16 }, 'input'],
  ];
  const before = await submitted(server);
  for (const [route, body, field] of CASES) {
    const start = Date.now();
    const r = await request(server, 'POST', route, json, JSON.stringify(body));
    t.diagnostic(`${route}: ${r.status} in ${Date.now() - start} ms`);
    assert.equal(r.status, 400, `${route}: ${JSON.stringify(r.body).slice(0, 300)}`);
    const message = r.body.error.message;
    assert.match(message, /^the prompt has at least (\d+) tokens \(\d+ bytes, and no token of this model is longer than 15 bytes\) but the context length is 512; shorten the prompt$/, route);
    assert.ok(Number(message.match(/at least (\d+)/)[1]) > 200_000, message);
    if (route === '/v1/messages') {
      assert.equal(r.body.error.type, 'invalid_request_error');
    } else {
      assert.equal(r.body.error.code, 'context_length_exceeded', route);
      assert.equal(r.body.error.param, field, route);
    }
  }
  const s = (await request(server, 'GET', '/stats', AUTH)).body;
  assert.equal(s.batch.submitted_rows, before, 'a refused prompt reached the engine');
  assert.equal(s.kv.blocks_used, 0);
  // Just over the context in bytes the bound says nothing: the exact check after tokenizing
  // refuses it, with the real count.
  const over = await request(server, 'POST', '/v1/completions', json,
    JSON.stringify({ prompt: 'In the beginning '.repeat(400), max_tokens: 1 }));
  assert.equal(over.status, 400);
  assert.match(over.body.error.message, /^the prompt has \d+ tokens but the context length is 512/);
  // count_tokens counts prompts of any length (it generates nothing).
  const count = await request(server, 'POST', '/v1/messages/count_tokens', json,
    JSON.stringify({ messages: [{ role: 'user', content: 'In the beginning '.repeat(2000) }] }));
  assert.equal(count.status, 200, JSON.stringify(count.body));
  assert.ok(count.body.input_tokens > 512, JSON.stringify(count.body));
  // Still serving.
  assert.equal((await request(server, 'POST', '/v1/completions', json, COMPLETION)).status, 200);
  assert.equal(await submitted(server), before + 1);
});
