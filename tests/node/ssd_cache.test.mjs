// The SSD tier under the prefix cache (`loom serve --ssd-cache DIR`): KV blocks written behind to
// DIR/<2 hex>/<32 hex>.kvb survive a restart (SIGTERM, which flushes the write queue, and kill -9,
// which loses only what was not yet written), are read back when a prompt's prefix continues on
// disk (usage.prompt_tokens_details.cached_tokens counts them), and bad files (truncated, another
// format version, another KV dtype, a flipped payload byte) are quarantined while the answers stay
// those of a server without the tier. The model is the embedded default (512 positions).
//
// The oracle: a reference server R without --ssd-cache runs every conversation once (before());
// the servers under test replay R's request bodies and must give R's text and R's cached_tokens.
import { test, before } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { skipReason, startServer, getJson, postJson, waitIdle } from './helpers.mjs';

const skip = skipReason() || false;
const BLOCK = 16;         // tokens per KV block (one .kvb file)
const HEADER = 4096;      // .kvb header bytes: the payload starts here
const TURN_TOKENS = 64;   // max_tokens of each recorded turn
const NEXT_TOKENS = 40;   // max_tokens of the next turn, asked after the restart

// Six conversations: three recorded turns, then the next turn's user message. Their openers differ
// within the first block (the template adds only "<bos><|user|>\n"), so no two share a block.
const CONVERSATIONS = [
  ['Tell me about Moses and the burning bush.', 'What did Pharaoh answer him?',
    'How did the people cross the sea?', 'Where did they go after that?'],
  ['Who was David, the son of Jesse the Bethlehemite?', 'Why did Saul seek his life?',
    'What became of Jonathan?', 'And what of his son Solomon?'],
  ['Describe the garden that was eastward in Eden.', 'What did the serpent say unto the woman?',
    'Why were they sent forth from the garden?', 'What did Cain do unto Abel?'],
  ['Sing a psalm of praise for the morning.', 'Now a psalm for the evening.',
    'Give thanks for the harvest of the field.', 'Bless the house of Israel.'],
  ['Write a proverb about wisdom and folly.', 'One more about the sluggard and the ant.',
    'And one about a soft answer that turneth away wrath.', 'What is the beginning of knowledge?'],
  ['Recount how Jonah was swallowed by a great fish.', 'Why did he flee unto Tarshish?',
    'What happened in Nineveh?', 'Why was Jonah angry for the gourd?'],
];

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const tempDir = (tag) => fs.mkdtempSync(path.join(os.tmpdir(), `loom-ssd-${tag}-`));
const floorBlock = (n) => Math.floor(n / BLOCK) * BLOCK;

async function chat(url, body) {
  const r = await postJson(`${url}/v1/chat/completions`, body);
  assert.equal(r.status, 200, JSON.stringify(r.body));
  const c = r.body.choices[0];
  return { text: c.message.content, finish: c.finish_reason, usage: r.body.usage };
}

async function ssdStats(url) {
  return (await getJson(`${url}/stats`)).body.ssd_cache;
}

// The block files under DIR (relative paths "ab/ab<30 hex>.kvb"), not those in DIR/quarantine or DIR/tmp.
function kvbFiles(dir) {
  const out = [];
  for (const shard of fs.readdirSync(dir)) {
    if (!/^[0-9a-f]{2}$/.test(shard)) continue;
    for (const f of fs.readdirSync(path.join(dir, shard))) {
      if (f.endsWith('.kvb')) out.push(`${shard}/${f}`);
    }
  }
  return out.sort();
}

function kvbSize(dir) {
  return fs.statSync(path.join(dir, kvbFiles(dir)[0])).size;
}

const listDir = (dir) => (fs.existsSync(dir) ? fs.readdirSync(dir).sort() : []);

// Polls /stats until the write-behind queue is empty. Every block a request filled is queued
// before its reply goes out, so once the engine is idle pending_spills only falls, to 0 when the
// last file is renamed into place.
async function waitSpilled(url, timeoutMs = 20000) {
  await waitIdle(url);
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const s = await ssdStats(url);
    if (s.pending_spills === 0) return s;
    if (Date.now() > deadline) {
      assert.fail(`/stats ssd_cache.pending_spills is still ${s.pending_spills} after ${timeoutMs} ms ` +
        `of an idle engine (${kvbFiles(s.dir).length} .kvb files on disk, /stats says entries ` +
        `${s.entries}, writes ${s.writes}): ${JSON.stringify(s)}`);
    }
    await sleep(25);
  }
}

// R's record of every conversation: [{turns: [{body, text, usage}] x3, next: {body, text, usage}}].
let ref = null;

before(async () => {
  if (skip) return;
  const r = await startServer([]);
  try {
    ref = [];
    for (const conv of CONVERSATIONS) {
      let messages = [{ role: 'user', content: conv[0] }];
      const turns = [];
      for (let t = 1; t < conv.length; t++) {
        const body = { messages, max_tokens: TURN_TOKENS, temperature: 0 };
        const a = await chat(r.url, body);
        turns.push({ body, ...a });
        messages = [...messages, { role: 'assistant', content: a.text }, { role: 'user', content: conv[t] }];
      }
      const body = { messages, max_tokens: NEXT_TOKENS, temperature: 0 };
      ref.push({ turns, next: { body, ...(await chat(r.url, body)) } });
    }
  } finally {
    assert.equal(await r.stop(), 0, r.log());
  }
});

// Replays the recorded turns on `url` (a server with --ssd-cache): the tier changes no answer.
async function replayTurns(url) {
  for (const [i, conv] of ref.entries()) {
    for (const [t, turn] of conv.turns.entries()) {
      const a = await chat(url, turn.body);
      assert.equal(a.text, turn.text, `conversation ${i} turn ${t}: differs from the reference`);
      assert.deepEqual(a.usage, turn.usage, `conversation ${i} turn ${t}`);
    }
  }
}

// What a server that restored conversation i's whole history from disk must report for its next
// turn. The previous turn ran P prompt + C completion tokens; KV exists for the first P + C - 1 of
// them (the last sampled token is never fed back), so floor((P + C - 1) / 16) full blocks of that
// sequence were cached and written. The next prompt re-renders that prompt and reply and goes on
// ("…reply<|end|>\n<|user|>\n…"), so it starts with those tokens: all those blocks are reusable,
// and R (whose memory holds the same blocks as the disk) must report exactly that many — checked
// here, so that the bound below is the whole previous conversation and not R's say-so. At most
// (P_next - 1) / 16 blocks can be reused: one prompt token is always computed.
function expectedCached(i) {
  const { turns, next } = ref[i];
  const last = turns[turns.length - 1].usage;
  const history = floorBlock(last.prompt_tokens + last.completion_tokens - 1);
  const cached = next.usage.prompt_tokens_details.cached_tokens;
  assert.ok(cached >= history && cached <= floorBlock(next.usage.prompt_tokens - 1),
    `reference conversation ${i}: cached_tokens ${cached}, history ${history} tokens, ` +
    `next prompt ${next.usage.prompt_tokens}`);
  return cached;
}

// Asks every conversation's next turn on `url`; checks R's text and usage, and cached_tokens ==
// want(i). Returns the cached_tokens.
async function askNextTurns(url, want) {
  const got = [];
  for (const [i, conv] of ref.entries()) {
    const a = await chat(url, conv.next.body);
    assert.equal(a.text, conv.next.text, `conversation ${i}: next turn differs from the reference`);
    assert.equal(a.usage.prompt_tokens, conv.next.usage.prompt_tokens);
    assert.equal(a.usage.completion_tokens, conv.next.usage.completion_tokens);
    assert.equal(a.usage.prompt_tokens_details.cached_tokens, want(i),
      `conversation ${i}: cached_tokens (prompt ${a.usage.prompt_tokens} tokens)`);
    got.push(a.usage.prompt_tokens_details.cached_tokens);
  }
  return got;
}

const sum = (xs) => xs.reduce((a, b) => a + b, 0);

test('restart after SIGTERM: every conversation comes back from disk, same answers', { skip, timeout: 120000 }, async () => {
  const dir = tempDir('restart');
  try {
    const a = await startServer(['--ssd-cache', dir]);
    let drained, flushBlocks, queuedAtStop;
    try {
      await replayTurns(a.url);
      drained = await waitSpilled(a.url);
      assert.equal(drained.write_errors, 0);
      assert.equal(drained.dropped_spills, 0);
      assert.equal(drained.spill_disabled, false);
      assert.equal(drained.quarantined, 0);
      assert.equal(drained.writes, drained.entries);
      assert.equal(drained.entries, kvbFiles(dir).length);
      // SIGTERM right after a 460-token prompt's reply: its 28 blocks are queued at once (one
      // prefill step) and written one fsync each, so some are still queued when the signal lands;
      // the graceful stop must flush them.
      const ids = Array.from({ length: 460 }, (_, k) => 100 + ((k * 37) % 3000));
      const flush = await postJson(`${a.url}/v1/completions`,
        { prompt: ids, max_tokens: 4, temperature: 0, ignore_eos: true });
      assert.equal(flush.status, 200, JSON.stringify(flush.body));
      flushBlocks = Math.floor((ids.length + 4 - 1) / BLOCK);
      // (/stats as of the reply's last step: how many the stop had to flush, roughly.)
      queuedAtStop = (await ssdStats(a.url)).pending_spills;
    } finally {
      assert.equal(await a.stop('SIGTERM'), 0, a.log());
    }
    assert.doesNotMatch(a.log(), /still queued|ssd cache:/);
    assert.equal(kvbFiles(dir).length, drained.entries + flushBlocks,
      'SIGTERM did not flush the write queue');
    assert.deepEqual(listDir(path.join(dir, 'tmp')), []);

    const b = await startServer(['--ssd-cache', dir]);
    try {
      const s0 = await ssdStats(b.url);
      assert.equal(s0.entries, drained.entries + flushBlocks);
      assert.equal(s0.quarantined, 0);
      assert.equal(s0.restores, 0);
      const cached = await askNextTurns(b.url, expectedCached);
      await waitIdle(b.url);
      const s = await ssdStats(b.url);
      // One restore per conversation (each next turn's whole history was on disk, nothing in
      // memory), every cached token of theirs read from disk.
      assert.equal(s.restores, ref.length, JSON.stringify(s));
      assert.equal(s.restored_blocks * BLOCK, sum(cached), JSON.stringify(s));
      assert.equal(s.restore_tokens, s.restored_blocks * BLOCK);
      assert.ok(s.restore_tokens > 0);
      assert.equal(s.hits, s.restored_blocks);
      assert.equal(s.quarantined, 0);
      assert.doesNotMatch(b.log(), /quarantined|ssd cache:/);
      console.log(`# restored ${s.restored_blocks} blocks (${s.restore_tokens} tokens) for ` +
        `${ref.length} conversations; ${s0.entries} files after the restart (SIGTERM with about ` +
        `${queuedAtStop} of ${flushBlocks} blocks still queued)`);
    } finally {
      assert.equal(await b.stop(), 0, b.log());
    }
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
});

test('restart after kill -9 mid-generation: written blocks survive, leftovers are cleaned', { skip, timeout: 120000 }, async () => {
  const dir = tempDir('kill9');
  try {
    const a = await startServer(['--ssd-cache', dir]);
    let written, tmpAfterKill, streamed = 0;
    try {
      await replayTurns(a.url);
      await waitSpilled(a.url);
      written = kvbFiles(dir);
      // A long generation whose blocks are spilled while it runs (one every 16 tokens); the kill
      // lands while the writer is busy with them.
      const ctrl = new AbortController();
      const r = await fetch(`${a.url}/v1/completions`, { method: 'POST', signal: ctrl.signal,
        headers: { 'Content-Type': 'application/json' },
        body: JSON.stringify({ prompt: 'And it came to pass in those days, that the king of Babylon',
          max_tokens: 400, ignore_eos: true, temperature: 0, stream: true }) });
      assert.equal(r.status, 200);
      const reader = r.body.getReader();
      const dec = new TextDecoder();
      let buf = '';
      while (streamed < 150) {
        const { value, done } = await reader.read();
        assert.ok(!done, `the stream ended after ${streamed} events`);
        buf += dec.decode(value, { stream: true });
        let k;
        while ((k = buf.indexOf('\n\n')) >= 0) {
          if (buf.startsWith('data: {')) streamed++;
          buf = buf.slice(k + 2);
        }
      }
      assert.equal(await a.stop('SIGKILL'), 'SIGKILL');
      ctrl.abort();
      tmpAfterKill = listDir(path.join(dir, 'tmp'));
    } finally {
      await a.stop('SIGKILL');
    }
    // Whatever the kill left in DIR/tmp, plus two leftovers planted here: a dead process's write
    // (its name carries the killed server's pid) and a name that is no write of loom's at all.
    fs.writeFileSync(path.join(dir, 'tmp', `${'ab'.repeat(16)}.${a.proc.pid}.99`), 'partial');
    fs.writeFileSync(path.join(dir, 'tmp', 'junk'), 'x');
    const onDisk = kvbFiles(dir);
    for (const f of written) assert.ok(onDisk.includes(f), `${f}, written before the kill, is gone`);

    const b = await startServer(['--ssd-cache', dir]);
    try {
      assert.deepEqual(listDir(path.join(dir, 'tmp')), [], 'leftover temp files were not deleted');
      const s0 = await ssdStats(b.url);
      // Renames are atomic: the kill can leave temp files, never a partial file under its name.
      assert.equal(s0.quarantined, 0, JSON.stringify(s0));
      assert.equal(s0.entries, onDisk.length);
      await askNextTurns(b.url, expectedCached);
      await waitIdle(b.url);
      const s = await ssdStats(b.url);
      assert.equal(s.restores, ref.length, JSON.stringify(s));
      assert.ok(s.restore_tokens > 0);
      assert.equal(s.quarantined, 0);
      assert.doesNotMatch(b.log(), /quarantined|ssd cache:/);
      assert.match(b.log(), /deleted leftover temp file \S*\/tmp\/junk/);
      assert.match(b.log(), new RegExp(`deleted leftover temp file \\S*\\.${a.proc.pid}\\.99`));
      console.log(`# kill -9 after ${streamed} streamed tokens: ${written.length} files before the ` +
        `stream, ${onDisk.length} after the kill, ${tmpAfterKill.length} temp files left by it`);
    } finally {
      assert.equal(await b.stop(), 0, b.log());
    }
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
});

// Header fields (little-endian): 0 magic[8], 8 version u32, 12 header_bytes u32, 16 hash[16],
// 32 parent[16]. Returns each conversation's block files in chain order, conversations in the
// order they were run (the writer is FIFO, so the first blocks' mtimes order them).
function chainsOf(dir) {
  const files = kvbFiles(dir).map((rel) => {
    const full = path.join(dir, rel);
    const head = Buffer.alloc(48);
    const fd = fs.openSync(full, 'r');
    fs.readSync(fd, head, 0, 48, 0);
    fs.closeSync(fd);
    return { rel, full, hash: head.subarray(16, 32).toString('hex'),
      parent: head.subarray(32, 48).toString('hex'), mtime: fs.statSync(full, { bigint: true }).mtimeNs };
  });
  const byHash = new Map(files.map((f) => [f.hash, f]));
  const children = new Map();
  for (const f of files) {
    if (!children.has(f.parent)) children.set(f.parent, []);
    children.get(f.parent).push(f);
  }
  const firsts = files.filter((f) => !byHash.has(f.parent));
  assert.equal(new Set(firsts.map((f) => f.parent)).size, 1, 'first blocks with different roots');
  firsts.sort((x, y) => (x.mtime < y.mtime ? -1 : x.mtime > y.mtime ? 1 : 0));
  return firsts.map((first) => {
    const chain = [first];
    for (;;) {
      const next = children.get(chain[chain.length - 1].hash) || [];
      assert.ok(next.length <= 1, 'a conversation\'s blocks branch');
      if (next.length === 0) return chain;
      chain.push(next[0]);
    }
  });
}

test('corrupt, truncated, future-version and foreign files are quarantined; answers unchanged', { skip, timeout: 120000 }, async () => {
  const dir = tempDir('corrupt');
  const foreignDir = tempDir('bf16');
  try {
    // Blocks of another format: the same model with bf16 KV.
    const c = await startServer(['--kv-dtype', 'bf16', '--ssd-cache', foreignDir]);
    try {
      const r = await postJson(`${c.url}/v1/completions`, { prompt: 'And the LORD spake unto Moses',
        max_tokens: 60, temperature: 0, ignore_eos: true });
      assert.equal(r.status, 200, JSON.stringify(r.body));
    } finally {
      assert.equal(await c.stop(), 0, c.log());
    }
    const foreign = kvbFiles(foreignDir);
    assert.ok(foreign.length >= 3, `bf16 server wrote ${foreign.length} files`);

    const a = await startServer(['--ssd-cache', dir]);
    try {
      await replayTurns(a.url);
    } finally {
      assert.equal(await a.stop(), 0, a.log());  // flushes the write queue
    }
    const chains = chainsOf(dir);
    assert.equal(chains.length, ref.length);
    for (const [i, chain] of chains.entries()) {
      assert.equal(chain.length * BLOCK, expectedCached(i), `conversation ${i}: blocks on disk`);
      assert.ok(chain.length >= 6, `conversation ${i}: only ${chain.length} blocks`);
    }

    // conversation -> [block index, what is done to it, caught by the start scan?]. The next
    // turn restores the blocks before the first bad one and re-prefills from there.
    const flip = (f) => {
      const fd = fs.openSync(f.full, 'r+');
      const b = Buffer.alloc(1);
      fs.readSync(fd, b, 0, 1, HEADER + 1234);
      b[0] ^= 0x40;
      fs.writeSync(fd, b, 0, 1, HEADER + 1234);
      fs.closeSync(fd);
    };
    const plan = [
      [0, 'payload byte flipped', flip, false],
      [3, 'payload byte flipped', flip, false],
      [1, 'truncated in the payload', (f) => fs.truncateSync(f.full, HEADER + 1000), true],
      [2, 'version 99', (f) => {
        const fd = fs.openSync(f.full, 'r+');
        const v = Buffer.alloc(4);
        v.writeUInt32LE(99);
        fs.writeSync(fd, v, 0, 4, 8);
        fs.closeSync(fd);
      }, true],
      [4, 'replaced by a bf16 file', (f) => fs.copyFileSync(path.join(foreignDir, foreign[0]), f.full), true],
      [null, 'intact', null, false],
    ];
    const bad = [];  // {rel, atScan}
    for (const [i, [k, , corrupt, atScan]] of plan.entries()) {
      if (k === null) continue;
      corrupt(chains[i][k]);
      bad.push({ rel: chains[i][k].rel, atScan });
    }
    // Past conversation 2's first bad block: a header cut short, caught by the scan, never read.
    fs.truncateSync(chains[2][5].full, 100);
    bad.push({ rel: chains[2][5].rel, atScan: true });
    // Two bf16 files beside them, under their own names.
    for (const rel of foreign.slice(1, 3)) {
      fs.mkdirSync(path.join(dir, path.dirname(rel)), { recursive: true });
      fs.copyFileSync(path.join(foreignDir, rel), path.join(dir, rel));
      bad.push({ rel, atScan: true });
    }
    const atScan = bad.filter((x) => x.atScan);
    const onRead = bad.filter((x) => !x.atScan);
    const total = kvbFiles(dir).length;

    const b = await startServer(['--ssd-cache', dir]);
    try {
      const s0 = await ssdStats(b.url);
      assert.equal(s0.quarantined, atScan.length, JSON.stringify(s0));
      assert.equal(s0.entries, total - atScan.length);
      const quarantineDir = path.join(dir, 'quarantine');
      assert.deepEqual(listDir(quarantineDir), atScan.map((x) => path.basename(x.rel)).sort());
      for (const x of onRead) assert.ok(fs.existsSync(path.join(dir, x.rel)));

      const want = (i) => (plan[i][0] === null ? expectedCached(i) : plan[i][0] * BLOCK);
      const cached = await askNextTurns(b.url, want);
      await waitIdle(b.url);
      const s = await ssdStats(b.url);
      // The flipped payloads were read (each is in a chain a next turn restored) and failed their
      // hash: quarantined now, on top of the scan's.
      assert.equal(s.quarantined, bad.length, JSON.stringify(s));
      assert.deepEqual(listDir(quarantineDir), bad.map((x) => path.basename(x.rel)).sort());
      assert.equal(s.restores, plan.filter(([k]) => k !== 0).length, JSON.stringify(s));
      assert.equal(s.restored_blocks * BLOCK, sum(cached));
      const warnings = b.log().match(/kv disk store: quarantined .*/g) || [];
      assert.equal(warnings.length, bad.length, b.log());
      assert.ok(warnings.some((w) => /version 99/.test(w)), warnings.join('\n'));
      console.log(`# quarantined ${s0.quarantined} files at the start, ${s.quarantined} in all:\n# ` +
        warnings.join('\n# '));
    } finally {
      assert.equal(await b.stop(), 0, b.log());
    }

    // The re-prefilled blocks were written again under their names: a later start finds every
    // file good, and a next turn now reuses all but its last prompt token's block.
    for (const x of bad.slice(0, 5)) assert.ok(fs.existsSync(path.join(dir, x.rel)), `${x.rel} not rewritten`);
    const b2 = await startServer(['--ssd-cache', dir]);
    try {
      assert.equal((await ssdStats(b2.url)).quarantined, 0);
      for (const i of [0, 2]) {
        const { next } = ref[i];
        const a2 = await chat(b2.url, next.body);
        assert.equal(a2.text, next.text);
        assert.equal(a2.usage.prompt_tokens_details.cached_tokens, floorBlock(next.usage.prompt_tokens - 1));
      }
    } finally {
      assert.equal(await b2.stop(), 0, b2.log());
    }
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
    fs.rmSync(foreignDir, { recursive: true, force: true });
  }
});

test('/stats ssd_cache and /metrics: shape with and without --ssd-cache', { skip, timeout: 60000 }, async () => {
  // --host-cache on the CPU backend: no tier (its pool is host RAM already), said once in the log.
  const plain = await startServer(['--host-cache', '0.5']);
  try {
    const stats = (await getJson(`${plain.url}/stats`)).body;
    assert.deepEqual(stats.ssd_cache, { enabled: false });
    assert.deepEqual(stats.host_cache, { enabled: false });
    const metrics = await (await fetch(`${plain.url}/metrics`)).text();
    assert.doesNotMatch(metrics, /loom_ssd_cache|loom_host_cache/);
    assert.match(plain.log(), /--host-cache: the CPU backend's KV pool is host memory already/);
  } finally {
    assert.equal(await plain.stop(), 0, plain.log());
  }

  const dir = tempDir('stats');
  try {
    const s = await startServer(['--ssd-cache', dir, '--ssd-cache-max', '0.5']);
    try {
      const numbers = ['entries', 'bytes', 'max_bytes', 'hits', 'misses', 'restores',
        'restored_blocks', 'restore_tokens', 'writes', 'write_errors', 'evictions', 'quarantined', 'discovered',
        'pending_spills', 'demoted_blocks', 'dropped_spills'];
      const st = await ssdStats(s.url);
      assert.deepEqual(Object.keys(st).sort(),
        ['enabled', 'dir', 'spill_disabled', ...numbers].sort());
      assert.equal(st.enabled, true);
      assert.equal(st.dir, dir);
      assert.equal(st.spill_disabled, false);
      for (const k of numbers) assert.ok(Number.isInteger(st[k]) && st[k] >= 0, `${k}: ${st[k]}`);
      assert.equal(st.max_bytes, 500000000);
      assert.equal(st.entries, 0);

      // 14 + 100 tokens: 7 full blocks (KV for 113 of them), written behind while the engine is
      // idle. /stats must follow the writer, not stay at what it saw when the last step ended.
      const r = await postJson(`${s.url}/v1/completions`, { prompt: 'And God said unto Moses, go down unto the people and tell them',
        max_tokens: 100, temperature: 0, ignore_eos: true });
      assert.equal(r.status, 200);
      const blocks = Math.floor((r.body.usage.prompt_tokens + 100 - 1) / BLOCK);
      const after = await waitSpilled(s.url, 10000);
      assert.equal(kvbFiles(dir).length, blocks);
      assert.equal(after.entries, blocks, JSON.stringify(after));
      assert.equal(after.writes, blocks);
      assert.equal(after.bytes, blocks * kvbSize(dir));
      const metrics = await (await fetch(`${s.url}/metrics`)).text();
      assert.match(metrics, new RegExp(`^loom_ssd_cache_blocks ${blocks}$`, 'm'));
      for (const name of ['loom_ssd_cache_bytes', 'loom_ssd_cache_restored_tokens_total',
        'loom_ssd_cache_writes_total', 'loom_ssd_cache_demoted_blocks_total', 'loom_ssd_cache_dropped_spills_total',
        'loom_ssd_cache_quarantined_total', 'loom_ssd_cache_pending_spills']) {
        assert.match(metrics, new RegExp(`^${name} \\d`, 'm'), name);
      }
    } finally {
      assert.equal(await s.stop(), 0, s.log());
    }
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
});
