// The chat page (GET /, src/server/chat_page.html.inc) in a real browser: headless Chromium
// (Debian's package) driven by playwright-core, against `loom serve`. The default model answers
// the plain chats (greedy, so its replies are the API's); the tiny random Qwen3 (helpers.mjs), with
// a template whose generation prompt opens a <think> section and the Hermes tool parser, gives
// reasoning, tool calls and replies slow enough to stop. Screenshots go to chat_page_screenshots/
// in the build directory (beside LOOM_BIN's build tree) or, for another LOOM_BIN, a temp dir.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { CHROMIUM, HERE, LOOM_BIN, browserSkip, getJson, startServer, tinyQwen3Args,
  tinyQwen3Skip, waitIdle } from './helpers.mjs';

const skip = await browserSkip();
const qwenSkip = skip || tinyQwen3Skip();
const THINK_TEMPLATE = path.join(HERE, 'testdata/think_chat.jinja');
const SHOTS = LOOM_BIN.endsWith(path.join('src', 'cli', 'loom'))
  ? path.resolve(path.dirname(LOOM_BIN), '../../chat_page_screenshots')
  : path.join(os.tmpdir(), 'loom-chat-page-screenshots');

let browser, server, qwen;

before(async () => {
  if (skip) return;
  const { chromium } = await import('playwright-core');
  browser = await chromium.launch({ executablePath: CHROMIUM, headless: true });
  server = await startServer();
  fs.mkdirSync(SHOTS, { recursive: true });
  console.log(`chat page screenshots: ${SHOTS}`);
});
after(async () => {
  if (browser) await browser.close();
  if (server) assert.equal(await server.stop(), 0, server.log());
  if (qwen) assert.equal(await qwen.stop(), 0, qwen.log());
});

// A fresh browser profile (empty localStorage and sessionStorage) on the page at `url`.
async function openPage(url, { onDialog } = {}) {
  const context = await browser.newContext({ viewport: { width: 1100, height: 760 } });
  const page = await context.newPage();
  const problems = [];
  page.on('pageerror', (e) => problems.push(e.message));
  page.on('dialog', (d) => (onDialog ? onDialog(d) : d.accept()));
  await page.goto(`${url}/#/chat`);
  await page.waitForFunction(() => document.getElementById('model').textContent !== '');
  return { context, page, problems };
}

async function settings(page, { system, temperature, maxTokens, extra }) {
  if (await page.locator('#settings').isHidden()) await page.click('#toggle-settings');
  if (system !== undefined) await page.fill('#system', system);
  if (temperature !== undefined) await page.fill('#temperature', String(temperature));
  if (maxTokens !== undefined) await page.fill('#max-tokens', String(maxTokens));
  if (extra !== undefined) await page.fill('#extra', typeof extra === 'string' ? extra : JSON.stringify(extra));
  await page.click('#toggle-settings');
}

async function sendMessage(page, text) {
  await page.fill('#input', text);
  await page.press('#input', 'Enter');
}

// Waits for the reply being streamed to end (Send is back) and returns the last assistant message
// element's stats line.
async function waitReplied(page) {
  await page.waitForFunction(() => document.getElementById('stop').hidden &&
    !document.getElementById('send').hidden, null, { timeout: 60000 });
  return page.locator('.msg.assistant').last();
}

const stored = (page) => page.evaluate(() => JSON.parse(localStorage.getItem('loom-conversations')));

test('a message gets the API\'s greedy reply and its numbers; the next one reports cached tokens; reload keeps the history', { skip, timeout: 120000 }, async () => {
  const { context, page, problems } = await openPage(server.url);
  assert.equal(await page.textContent('#model'), 'loom-default \u00b7 512 tokens context');
  await settings(page, { temperature: 0, maxTokens: 60, extra: { ignore_eos: true } });
  const question = 'And God said, Let there be light: and there was light. And God saw the light, that it was good, and God divided';
  await sendMessage(page, question);
  let reply = await waitReplied(page);
  assert.equal(await reply.getAttribute('data-completion-tokens'), '60');
  // The default model is fast enough that a busy machine's browser may read all 60 tokens at
  // once, when the page gives no rate (the Stop test below checks one on a slower model).
  assert.match(await reply.locator('.meta').textContent(), /^60 tokens · ([\d.]+ tok\/s · )?first token \d+ ms · prompt \d+ tokens, 0 cached · cut at max tokens/);

  // The stored reply is the API's own greedy reply to the same request.
  let convs = await stored(page);
  assert.equal(convs.length, 1);
  const api = await getJson(`${server.url}/v1/chat/completions`, { method: 'POST',
    headers: { 'Content-Type': 'application/json' },
    body: JSON.stringify({ messages: [{ role: 'user', content: question }], temperature: 0,
      max_tokens: 60, ignore_eos: true }) });
  assert.equal(api.status, 200);
  assert.equal(convs[0].messages[1].content, api.body.choices[0].message.content);
  assert.equal(convs[0].title, question.slice(0, 60));
  const id = convs[0].id;
  assert.equal(new URL(page.url()).hash, `#/chat/${id}`);

  // The second turn's prompt starts with the first turn: the prefix cache serves its blocks.
  await sendMessage(page, 'and the darkness he called Night.');
  reply = await waitReplied(page);
  const cached = Number(await reply.getAttribute('data-cached-tokens'));
  assert.ok(cached >= 16, `cached tokens ${cached}`);
  assert.match(await reply.locator('.meta').textContent(), new RegExp(`prompt \\d+ tokens, ${cached} cached`));
  await page.screenshot({ path: path.join(SHOTS, 'conversation.png') });

  // Reload: the same conversation, from localStorage.
  await page.reload();
  await page.waitForSelector('.msg.assistant');
  assert.equal(await page.locator('.msg.user').count(), 2);
  assert.equal(await page.locator('.msg.assistant').count(), 2);
  assert.equal(await page.locator('.msg.user').first().textContent(), question);
  assert.equal(await page.locator('#conversations li').count(), 1);
  assert.equal(await page.locator('#conversations li.current .title').textContent(), question.slice(0, 60));
  assert.equal(await page.inputValue('#max-tokens'), '60');  // settings are kept too

  // A new chat, then back to the first; delete the new one (the page asks first).
  await page.click('#new-chat');
  assert.equal(await page.locator('.msg').count(), 0);
  await sendMessage(page, 'In the beginning');
  await waitReplied(page);
  assert.equal(await page.locator('#conversations li').count(), 2);
  const secondId = (await stored(page)).find((c) => c.id !== id).id;
  await page.click(`#conversations li[data-id="${id}"] .title`);
  assert.equal(await page.locator('.msg.user').count(), 2);
  assert.equal(new URL(page.url()).hash, `#/chat/${id}`);
  await page.hover(`#conversations li[data-id="${secondId}"]`);  // the button shows on hover
  await page.click(`#conversations li[data-id="${secondId}"] .delete`);
  convs = await stored(page);
  assert.deepEqual(convs.map((c) => c.id), [id]);
  await page.reload();
  await page.waitForSelector('.msg.assistant');
  assert.equal(await page.locator('#conversations li').count(), 1);
  // A second tab sees the conversations the first one saves.
  const other = await context.newPage();
  await other.goto(`${server.url}/#/chat`);
  assert.equal(await other.locator('#conversations li').count(), 1);
  await page.click('#new-chat');
  await sendMessage(page, 'Blessed are the');
  await waitReplied(page);
  await other.waitForFunction(() => document.querySelectorAll('#conversations li').length === 2);
  assert.deepEqual(problems, []);
  await context.close();
});

// [markdown, the HTML renderMarkdown gives]. The model's text is untrusted: markup in it is shown,
// never run, and a link goes only to http(s), mailto or a relative URL.
const MARKDOWN_CASES = [
  ['plain text', '<p>plain text</p>'],
  ['# Title\n## Sub *it*', '<h1>Title</h1>\n<h2>Sub <em>it</em></h2>'],
  ['**bold**, __bold__, *it*, _it_, ~~gone~~', '<p><strong>bold</strong>, <strong>bold</strong>, <em>it</em>, <em>it</em>, <del>gone</del></p>'],
  ['snake_case_name and 2 * 3 * 4', '<p>snake_case_name and 2 * 3 * 4</p>'],
  ['use `a < b && *c*` here', '<p>use <code>a &lt; b &amp;&amp; *c*</code> here</p>'],
  ['```js\nif (a < b) { x = "<b>"; }\n```\nafter', '<pre><code class="language-js">if (a &lt; b) { x = &quot;&lt;b&gt;&quot;; }</code></pre>\n<p>after</p>'],
  ['```\nunclosed **fence**', '<pre><code>unclosed **fence**</code></pre>'],
  ['- one\n- two\n  - nested\n- three', '<ul><li>one</li><li>two<ul><li>nested</li></ul></li><li>three</li></ul>'],
  ['3. c\n4. d', '<ol start="3"><li>c</li><li>d</li></ol>'],
  ['1. first\n\n2. second', '<ol><li>first</li><li>second</li></ol>'],
  ['> quoted\n> **text**', '<blockquote><p>quoted<br><strong>text</strong></p></blockquote>'],
  ['a\nb\n\nc', '<p>a<br>b</p>\n<p>c</p>'],
  ['---', '<hr>'],
  ['| a | b |\n|---|--:|\n| 1 | **2** |', '<table><thead><tr><th>a</th><th style="text-align:right">b</th></tr></thead><tbody><tr><td>1</td><td style="text-align:right"><strong>2</strong></td></tr></tbody></table>'],
  ['[loom](https://example.org/a_b_c) and [rel](/v1/models)', '<p><a href="https://example.org/a_b_c" target="_blank" rel="noopener noreferrer">loom</a> and <a href="/v1/models" target="_blank" rel="noopener noreferrer">rel</a></p>'],
  ['see https://example.org/x?a=1&b=2.', '<p>see <a href="https://example.org/x?a=1&amp;b=2" target="_blank" rel="noopener noreferrer">https://example.org/x?a=1&amp;b=2</a>.</p>'],
  ['[`code` **in** link](https://e.org)', '<p><a href="https://e.org" target="_blank" rel="noopener noreferrer"><code>code</code> <strong>in</strong> link</a></p>'],
  // Hostile text.
  ['<script>alert(1)</script>', '<p>&lt;script&gt;alert(1)&lt;/script&gt;</p>'],
  ['<img src=x onerror="alert(1)">', '<p>&lt;img src=x onerror=&quot;alert(1)&quot;&gt;</p>'],
  ['[click](javascript:alert(1))', '<p>[click](javascript:alert(1))</p>'],
  ['[click](javascript:void)', '<p>click</p>'],
  ['[x](https://e.org/"onmouseover="alert(1))', '<p>[x](<a href="https://e.org/" target="_blank" rel="noopener noreferrer">https://e.org/</a>&quot;onmouseover=&quot;alert(1))</p>'],
  ['# <b>head</b>', '<h1>&lt;b&gt;head&lt;/b&gt;</h1>'],
  ['```"><img src=x>\ncode\n```', '<pre><code>code</code></pre>'],
  ['\u0000 nul', '<p> nul</p>'],
];

test('the markdown renderer, evaluated in the page, on known input', { skip }, async () => {
  const { context, page } = await openPage(server.url);
  const got = await page.evaluate((cases) => cases.map(([md]) => window.loom.renderMarkdown(md)),
    MARKDOWN_CASES);
  MARKDOWN_CASES.forEach(([md, want], k) => assert.equal(got[k], want, `markdown ${JSON.stringify(md)}`));
  await context.close();
});

// A reply (the server's SSE, from a canned stream) as a model with markdown would write it.
function cannedStream(deltas, usage) {
  const chunk = (o) => `data: ${JSON.stringify(o)}\n\n`;
  let body = chunk({ choices: [{ index: 0, delta: { role: 'assistant', content: '' } }] });
  for (const d of deltas) body += chunk({ choices: [{ index: 0, delta: d, finish_reason: null }] });
  body += chunk({ choices: [{ index: 0, delta: {}, finish_reason: 'stop' }] });
  body += chunk({ choices: [], usage });
  return body + 'data: [DONE]\n\n';
}

test('a reply\'s markdown is drawn as HTML, and markup in it is shown, not run', { skip }, async () => {
  const { context, page, problems } = await openPage(server.url);
  const reply = '## Plan\n\nThis is **bold**, *italic* and `code`:\n\n```python\ndef f(x):\n    return x < 2\n```\n\n' +
    '1. first\n2. second\n   - nested\n\n| col | n |\n|-----|---|\n| a | 1 |\n\nSee [the docs](/v1/models).\n\n' +
    '<img src=x onerror="window.pwned=1"><script>window.pwned=2</script>';
  const pieces = reply.match(/[\s\S]{1,7}/g).map((content) => ({ content }));
  await page.route('**/v1/chat/completions', (route) => route.fulfill({ status: 200,
    headers: { 'Content-Type': 'text/event-stream' },
    body: cannedStream(pieces, { prompt_tokens: 12, completion_tokens: pieces.length, total_tokens: 12 + pieces.length,
      prompt_tokens_details: { cached_tokens: 7 } }) }));
  await sendMessage(page, 'Write some markdown');
  const msg = await waitReplied(page);
  const body = msg.locator('.body');
  assert.equal(await body.locator('h2').textContent(), 'Plan');
  assert.equal(await body.locator('strong').first().textContent(), 'bold');
  assert.equal(await body.locator('pre code.language-python').textContent(), 'def f(x):\n    return x < 2');
  assert.equal(await body.locator('ol > li').count(), 2);
  assert.equal(await body.locator('ol li ul li').textContent(), 'nested');
  assert.equal(await body.locator('table td').first().textContent(), 'a');
  assert.equal(await body.locator('a').getAttribute('href'), '/v1/models');
  assert.equal(await body.locator('img, script').count(), 0);
  assert.match(await body.textContent(), /<img src=x onerror="window.pwned=1"><script>window.pwned=2<\/script>/);
  assert.equal(await page.evaluate(() => window.pwned), undefined);
  assert.equal(await msg.getAttribute('data-cached-tokens'), '7');
  assert.match(await msg.locator('.meta').textContent(), /prompt 12 tokens, 7 cached/);
  // Copy puts the reply's markdown source on the clipboard.
  await context.grantPermissions(['clipboard-read', 'clipboard-write']);
  await msg.locator('button.copy').click();
  await page.waitForFunction(() => document.querySelector('.msg.assistant button.copy').textContent === 'Copied',
    null, { timeout: 5000 });
  assert.equal(await page.evaluate(() => navigator.clipboard.readText()), reply);
  await page.screenshot({ path: path.join(SHOTS, 'markdown.png') });
  await page.emulateMedia({ colorScheme: 'dark' });
  await page.screenshot({ path: path.join(SHOTS, 'markdown_dark.png') });
  // A phone: the conversation list is an overlay the menu button opens; picking one closes it.
  await page.setViewportSize({ width: 390, height: 760 });
  assert.equal(await page.isVisible('#sidebar'), false);
  await page.click('#toggle-sidebar');
  assert.equal(await page.isVisible('#sidebar'), true);
  await page.screenshot({ path: path.join(SHOTS, 'narrow_sidebar.png') });
  await page.mouse.click(370, 400);  // beside it: closes it
  assert.equal(await page.isVisible('#sidebar'), false);
  await page.click('#toggle-sidebar');
  await page.click('#conversations li .title');
  assert.equal(await page.isVisible('#sidebar'), false);
  await page.screenshot({ path: path.join(SHOTS, 'narrow.png') });
  assert.deepEqual(problems, []);
  await context.close();
});

test('SSE with CRLF line ends is read; a stream cut short keeps its text and says so', { skip }, async () => {
  const { context, page } = await openPage(server.url);
  const crlf = cannedStream([{ content: 'Hello' }, { content: ' **world**' }],
    { prompt_tokens: 3, completion_tokens: 2, total_tokens: 5 }).replace(/\n/g, '\r\n');
  let body = crlf;
  await page.route('**/v1/chat/completions', (route) => route.fulfill({ status: 200,
    headers: { 'Content-Type': 'text/event-stream' }, body }));
  await sendMessage(page, 'hi');
  let reply = await waitReplied(page);
  assert.equal(await reply.locator('.body').innerHTML(), '<p>Hello <strong>world</strong></p>');
  assert.equal(await page.isHidden('#error'), true);
  // No finish_reason, no [DONE]: the connection ended mid-reply.
  body = crlf.split('\r\n\r\n').slice(0, 2).join('\r\n\r\n') + '\r\n\r\n';
  await sendMessage(page, 'again');
  reply = await waitReplied(page);
  assert.equal(await reply.locator('.body').textContent(), 'Hello');
  assert.match(await page.textContent('#error-text'), /ended without a finish reason/);
  await context.close();
});

test('the server\'s error shows in a banner (a 400\'s error.message); a bad setting too', { skip }, async () => {
  const { context, page } = await openPage(server.url);
  await settings(page, { maxTokens: 100000 });
  await sendMessage(page, 'In the beginning');
  await page.waitForSelector('#error:not([hidden])');
  assert.match(await page.textContent('#error-text'),
    /^max_tokens \(100000\) \+ the prompt \(\d+ tokens\) exceed the context length 512; lower max_tokens or shorten the prompt$/);
  await waitReplied(page);
  // The question stays, without an empty answer, and can be sent again.
  assert.equal(await page.locator('.msg.assistant').count(), 0);
  assert.equal(await page.locator('.msg.user').count(), 1);
  await page.screenshot({ path: path.join(SHOTS, 'error.png') });
  await settings(page, { maxTokens: 8, extra: { ignore_eos: true } });  // exactly 8 tokens
  await page.click('.msg.user button.regenerate');
  const reply = await waitReplied(page);
  assert.equal(await page.isHidden('#error'), true);
  assert.equal(await reply.getAttribute('data-completion-tokens'), '8');

  await settings(page, { extra: '{"seed": ' });
  await sendMessage(page, 'again');
  await page.waitForSelector('#error:not([hidden])');
  assert.match(await page.textContent('#error-text'), /^Extra fields \(settings\) are not JSON/);
  await page.click('#error-close');
  assert.equal(await page.isHidden('#error'), true);
  await context.close();
});

test('with --api-key the page asks for the key once and keeps it in sessionStorage only', { skip }, async () => {
  const keyed = await startServer(['--api-key', 'k-page-test']);
  try {
    const prompts = [];
    const { context, page } = await openPage(keyed.url, { onDialog: (d) => {
      prompts.push(d.message());
      return d.accept('k-page-test');
    } });
    assert.equal(await page.textContent('#model'), 'loom-default \u00b7 512 tokens context');
    assert.deepEqual(prompts, ['This loom server needs an API key (kept for this tab only):']);
    assert.equal(await page.evaluate(() => sessionStorage.getItem('loom-api-key')), 'k-page-test');
    await settings(page, { maxTokens: 8, extra: { ignore_eos: true } });
    await sendMessage(page, 'In the beginning');
    const reply = await waitReplied(page);
    assert.equal(await reply.getAttribute('data-completion-tokens'), '8');
    await page.reload();
    await page.waitForSelector('.msg.assistant');
    assert.equal(prompts.length, 1, 'the tab keeps the key across a reload');
    const local = await page.evaluate(() => JSON.stringify(Object.entries(localStorage)));
    assert.doesNotMatch(local, /k-page-test/);
    await context.close();
  } finally {
    assert.equal(await keyed.stop(), 0, keyed.log());
  }
});

async function qwenServer() {
  qwen ??= await startServer([...tinyQwen3Args(), '--chat-template', THINK_TEMPLATE,
    '--tool-parser', 'hermes', '--reasoning-budget', '3']);
  return qwen;
}

test('a long reply streams in (tokens/s shown); Stop ends it mid-stream and the server drops the request', { skip: qwenSkip, timeout: 120000 }, async () => {
  const s = await qwenServer();
  const { context, page, problems } = await openPage(s.url);
  await settings(page, { maxTokens: 5000, extra: { ignore_eos: true } });
  // Every version of the reply's body the page shows, to see it grow rather than appear whole.
  await page.evaluate(() => {
    window.seen = [];
    new MutationObserver(() => {
      const b = document.querySelector('.msg.assistant .body');
      if (b && b.textContent && b.textContent !== window.seen[window.seen.length - 1]) window.seen.push(b.textContent);
    }).observe(document.getElementById('messages'), { subtree: true, childList: true, characterData: true });
  });
  await sendMessage(page, 'Tell me a long story');
  assert.equal(await page.isVisible('#stop'), true);
  // Streamed: the page shows three versions of the reply while the request still runs; then a
  // few more tokens, so the decode spans enough time for a rate.
  await page.waitForFunction(() => window.seen.length >= 3, null, { timeout: 60000 });
  await page.waitForTimeout(300);
  assert.equal(await page.isVisible('#stop'), true);
  await page.screenshot({ path: path.join(SHOTS, 'streaming.png') });
  await page.click('#stop');
  const reply = await waitReplied(page);
  const shown = await reply.locator('.body').textContent();
  assert.match(await reply.locator('.meta').textContent(), /^~\d+ tokens · [\d.]+ tok\/s · first token \d+ ms · stopped/);
  const n = Number(await reply.getAttribute('data-completion-tokens'));
  assert.ok(n > 3 && n < 5000, `${n} tokens before Stop`);
  const idle = await waitIdle(s.url);
  assert.equal(idle.batch.active_rows, 0);
  assert.equal(idle.server.requests_in_flight, 0);
  assert.equal(await reply.locator('.body').textContent(), shown, 'nothing arrives after Stop');
  const convs = await stored(page);
  assert.equal(convs[0].messages[1].finish, 'stopped');
  await page.screenshot({ path: path.join(SHOTS, 'stopped.png') });
  assert.deepEqual(problems, []);
  await context.close();
});

test('reasoning and tool calls are collapsible <details> blocks', { skip: qwenSkip, timeout: 120000 }, async () => {
  const s = await qwenServer();
  const { context, page, problems } = await openPage(s.url);
  const lookup = { type: 'function', function: { name: 'lookup', parameters: { type: 'object',
    properties: { id: { type: 'integer', minimum: 0, maximum: 999 } }, required: ['id'] } } };
  // The server's reasoning budget (3 tokens) closes the <think> section; tool_choice required
  // then makes the rest one valid call.
  await settings(page, { temperature: 1, maxTokens: 200,
    extra: { tools: [lookup], tool_choice: 'required', parallel_tool_calls: false, seed: 1 } });
  await sendMessage(page, 'Look up item 7');
  const reply = await waitReplied(page);
  const reasoning = reply.locator('details.reasoning');
  assert.equal(await reasoning.count(), 1);
  assert.equal(await reasoning.locator('summary').textContent(), 'Reasoning');
  assert.equal(await reasoning.getAttribute('open'), null, 'collapsed once the reply is done');
  const thought = await reasoning.locator('.text').textContent();
  assert.ok(thought.length > 0);
  const call = reply.locator('details.tool-call');
  assert.equal(await call.count(), 1);
  assert.equal(await call.locator('summary').textContent(), 'Tool call: lookup');
  const args = JSON.parse(await call.locator('code').textContent());
  assert.ok(Number.isInteger(args.id) && args.id >= 0 && args.id <= 999, JSON.stringify(args));
  const convs = await stored(page);
  assert.equal(convs[0].messages[1].finish, 'tool_calls');
  assert.equal(convs[0].messages[1].reasoning, thought);
  await reasoning.locator('summary').click();
  await call.locator('summary').click();
  assert.equal(await reasoning.getAttribute('open'), '');
  await page.screenshot({ path: path.join(SHOTS, 'reasoning_tools.png') });
  assert.deepEqual(problems, []);
  await context.close();
});
