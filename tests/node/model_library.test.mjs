// The model library: `loom list --json` and `loom serve ORG/NAME` over a fake Hugging Face hub
// cache built in a temp dir the way huggingface_hub lays it out (refs/main -> a commit,
// snapshots/<commit>/<file> -> ../../blobs/<etag>), holding the embedded default model, a
// snapshot whose config.json blob is gone, (with the npm Qwen3 tokenizer) a Qwen3 text side and
// (with ../shared) a GGUF repo of two quants; --models-dir holds a file that is no GGUF. The oracles: the default model's own files (sizes,
// its safetensors header's element count, config.json) and the Qwen3 template's known markup.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFile, spawnSync } from 'node:child_process';
import { promisify } from 'node:util';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import OpenAI from 'openai';
import {
  DEFAULT_MODEL, LOOM_BIN, QWEN3_TOKENIZER, STORIES, TINY_QWEN3, getJson, postJson, sharedSkip,
  skipReason, startServer, tinyQwen3Skip, tinyQwen3Args,
} from './helpers.mjs';

const skip = skipReason() || false;
const root = fs.mkdtempSync(path.join(os.tmpdir(), 'loom-library-'));
process.on('exit', () => fs.rmSync(root, { recursive: true, force: true }));
const hub = path.join(root, 'hub');
const modelsDir = path.join(root, 'models');
const COMMIT = 'c0ffee'.padEnd(40, '0');
// Every loom this file starts finds the fake cache and nothing of the user's.
process.env.HF_HUB_CACHE = hub;
delete process.env.LOOM_MODELS_DIR;

const repoDir = (id) => path.join(hub, 'models--' + id.replace('/', '--'));
let etag = 0;
// A blob (a link to `src`, or nothing when src is null: a missing blob) and its snapshot link.
function addFile(id, file, src) {
  const repo = repoDir(id);
  const blob = `blob${++etag}`;
  fs.mkdirSync(path.join(repo, 'blobs'), { recursive: true });
  if (src) fs.symlinkSync(src, path.join(repo, 'blobs', blob));
  const link = path.join(repo, 'snapshots', COMMIT, file);
  fs.mkdirSync(path.dirname(link), { recursive: true });
  fs.symlinkSync(path.join('..', '..', 'blobs', blob), link);
  fs.mkdirSync(path.join(repo, 'refs'), { recursive: true });
  fs.writeFileSync(path.join(repo, 'refs', 'main'), COMMIT);
}

const defaultFiles = fs.readdirSync(DEFAULT_MODEL);
for (const f of defaultFiles) addFile('loom/default', f, path.join(DEFAULT_MODEL, f));
addFile('org/broken', 'config.json', null);
addFile('org/broken', 'model.safetensors', path.join(DEFAULT_MODEL, 'model.safetensors'));
const withQwen = !tinyQwen3Skip();
if (withQwen) {
  addFile('Qwen/Qwen3-tiny', 'config.json', TINY_QWEN3);
  for (const f of ['tokenizer.json', 'tokenizer_config.json']) {
    addFile('Qwen/Qwen3-tiny', f, path.join(QWEN3_TOKENIZER, f));
  }
}
fs.mkdirSync(modelsDir);
fs.writeFileSync(path.join(modelsDir, 'junk.gguf'), 'not a gguf file');

// The default model's parameters as its safetensors header states them (8-byte length + JSON).
function headerParams(file) {
  const fd = fs.openSync(file, 'r');
  const len = Buffer.alloc(8);
  fs.readSync(fd, len, 0, 8, 0);
  const n = Number(len.readBigUInt64LE());
  const header = Buffer.alloc(n);
  fs.readSync(fd, header, 0, n, 8);
  fs.closeSync(fd);
  let total = 0;
  for (const [name, t] of Object.entries(JSON.parse(header.toString()))) {
    if (name !== '__metadata__') total += t.shape.reduce((a, b) => a * b, 1);
  }
  return total;
}

const loom = (...args) => spawnSync(LOOM_BIN, args, { encoding: 'utf8' });
// While a server's connections idle in this process, a blocking spawnSync would keep undici from
// seeing the server close one at its keep-alive timeout, and the next fetch would reuse it.
const loomAsync = (...args) => promisify(execFile)(LOOM_BIN, args, { encoding: 'utf8' });

test('loom list --json describes the cached models and the broken ones', { skip }, () => {
  const r = loom('list', '--json', '--models-dir', modelsDir);
  assert.equal(r.status, 0, r.stderr);
  const out = JSON.parse(r.stdout);
  assert.equal(out.hf_cache, hub);
  assert.equal(out.models_dir, modelsDir);
  const byId = Object.fromEntries(out.models.map((m) => [m.id, m]));
  assert.deepEqual(out.models.map((m) => m.id),
    ['junk', ...(withQwen ? ['Qwen/Qwen3-tiny'] : []), 'loom/default', 'org/broken']);

  const d = byId['loom/default'];
  const config = JSON.parse(fs.readFileSync(path.join(DEFAULT_MODEL, 'config.json'), 'utf8'));
  const size = defaultFiles.reduce((s, f) => s + fs.statSync(path.join(DEFAULT_MODEL, f)).size, 0);
  assert.deepEqual(d, {
    id: 'loom/default', source: 'hf-cache',
    path: path.join(repoDir('loom/default'), 'snapshots', COMMIT),
    revision: 'main', commit: COMMIT, architecture: config.model_type,
    parameters: headerParams(path.join(DEFAULT_MODEL, 'model.safetensors')),
    parameters_source: 'safetensors headers', format: 'safetensors', quantization: 'bf16',
    context_length: config.max_position_embeddings, size_bytes: size, chat_template: true,
    capabilities: { tools: false, tool_call_format: null, reasoning: false },
    status: 'ok', problems: [],
  });

  const broken = byId['org/broken'];
  assert.equal(broken.status, 'incomplete');
  assert.deepEqual(broken.problems, ['missing blobs: config.json']);
  assert.equal(broken.format, 'safetensors');

  const junk = byId.junk;
  assert.equal(junk.source, 'models-dir');
  assert.equal(junk.status, 'incomplete');
  assert.match(junk.problems[0], /wrong magic/);

  if (withQwen) {
    const q = byId['Qwen/Qwen3-tiny'];
    assert.equal(q.architecture, 'qwen3');
    assert.equal(q.parameters_source, 'config.json shapes');  // no weights in this snapshot
    assert.equal(q.context_length, 65536);
    assert.deepEqual(q.capabilities, { tools: true, tool_call_format: 'hermes', reasoning: true });
  }
});

test('loom list prints a table with the incomplete models marked', { skip }, () => {
  const r = loom('list');
  assert.equal(r.status, 0, r.stderr);
  const lines = r.stdout.split('\n');
  assert.match(lines[0], /^ID\s+ARCH\s+PARAMS\s+FORMAT\s+QUANT\s+CONTEXT\s+SIZE\s+TOOLS\s+REASONING\s+STATUS$/);
  assert.match(r.stdout, /\nloom\/default\s+llama\s+4\.\dM\s+safetensors\s+bf16\s+512\s+9\.\d MB\s+-\s+-\s+ok\n/);
  assert.match(r.stdout, /\norg\/broken\s.*incomplete: missing blobs: config\.json\n/);
  assert.match(r.stdout, new RegExp(`models? in the Hugging Face cache ${hub}`));
});

test('a model id that is not cached fails naming the paths looked at and the download', { skip }, () => {
  const r = loom('generate', 'nobody/nothing', '--models-dir', modelsDir, '-p', 'x');
  assert.notEqual(r.status, 0);
  assert.match(r.stderr, /model nobody\/nothing was not found locally, and loom does not download models/);
  assert.ok(r.stderr.includes(path.join(modelsDir, 'nobody/nothing') + ' (--models-dir)'), r.stderr);
  assert.ok(r.stderr.includes(path.join(hub, 'models--nobody--nothing') + ' (Hugging Face cache)'), r.stderr);
  assert.match(r.stderr, /Fetch it with: huggingface-cli download nobody\/nothing/);
  const broken = loom('generate', 'org/broken', '-p', 'x');
  assert.notEqual(broken.status, 0);
  assert.match(broken.stderr, /is incomplete: missing blobs for config\.json/);
  const rev = loom('generate', 'loom/default', '--revision', 'v9', '-p', 'x');
  assert.notEqual(rev.status, 0);
  assert.match(rev.stderr, new RegExp(`not at revision v9 .*main -> ${COMMIT}`));
});

test('loom tokenize takes a model id too', { skip }, () => {
  const byId = loom('tokenize', 'loom/default', '--text', 'In the beginning');
  assert.equal(byId.status, 0, byId.stderr);
  const byPath = loom('tokenize', DEFAULT_MODEL, '--text', 'In the beginning');
  assert.equal(byId.stdout, byPath.stdout);
  assert.match(byId.stdout, /^\[\d+(, \d+)*\]\n$/);
});

test('a GGUF repo: one row per quant, the tag picks the file, none given lists them', { skip: sharedSkip(STORIES) }, () => {
  // Two names for one blob, as a repo re-uploading a file under a second name would have.
  const id = 'ggml-org/stories260K-GGUF';
  const repo = repoDir(id);
  fs.mkdirSync(path.join(repo, 'blobs'), { recursive: true });
  fs.symlinkSync(STORIES, path.join(repo, 'blobs', 'stories'));
  for (const name of ['stories260K-F32.gguf', 'stories260K-Q8_0.gguf']) {
    const link = path.join(repo, 'snapshots', COMMIT, name);
    fs.mkdirSync(path.dirname(link), { recursive: true });
    fs.symlinkSync(path.join('..', '..', 'blobs', 'stories'), link);
  }
  fs.mkdirSync(path.join(repo, 'refs'), { recursive: true });
  fs.writeFileSync(path.join(repo, 'refs', 'main'), COMMIT);

  const models = JSON.parse(loom('list', '--json').stdout).models.filter((m) => m.id.startsWith(id));
  assert.deepEqual(models.map((m) => m.id), [`${id}:F32`, `${id}:Q8_0`]);
  for (const m of models) {
    assert.equal(m.format, 'gguf');
    assert.equal(m.architecture, 'llama');
    assert.equal(m.parameters_source, 'gguf tensors');
    assert.equal(m.quantization, 'F32');  // the file's general.file_type, whatever its name says
    assert.equal(m.size_bytes, fs.statSync(STORIES).size);
    assert.equal(m.status, 'ok');
  }
  const args = ['-p', 'Once upon a time', '-n', '8', '--temp', '0'];
  const byId = loom('generate', `${id}:F32`, ...args);
  assert.equal(byId.status, 0, byId.stderr);
  const byQuant = loom('generate', id, '--quant', 'q8_0', ...args);
  assert.equal(byQuant.status, 0, byQuant.stderr);
  const byPath = loom('generate', STORIES, ...args);
  assert.equal(byId.stdout, byPath.stdout);
  assert.equal(byQuant.stdout, byPath.stdout);
  const none = loom('generate', id, ...args);
  assert.notEqual(none.status, 0);
  assert.match(none.stderr, /holds 2 GGUF files: pick one with --quant TAG or MODEL:TAG; the files are stories260K-F32\.gguf \(F32\), stories260K-Q8_0\.gguf \(Q8_0\)/);
});

let server;
before(async () => { if (!skip) server = await startServer([], 'loom/default'); });
after(async () => { if (server) assert.equal(await server.stop(), 0, server.log()); });

test('serve ORG/NAME: /v1/models lists the id and the model card', { skip }, async () => {
  const client = new OpenAI({ apiKey: 'unused', baseURL: `${server.url}/v1`, maxRetries: 0 });
  const models = await client.models.list();
  assert.equal(models.data.length, 1);
  const m = models.data[0];
  assert.equal(m.id, 'loom/default');
  assert.equal(m.object, 'model');
  assert.equal(m.owned_by, 'loom');
  assert.equal(typeof m.created, 'number');
  assert.equal(m.max_model_len, 512);
  const listed = JSON.parse((await loomAsync('list', '--json')).stdout).models.find((x) => x.id === 'loom/default');
  assert.deepEqual(m.loom, listed);  // the same card `loom list` prints
  // The model is the one loaded: a completion runs under the id.
  const r = await postJson(`${server.url}/v1/completions`, { model: 'loom/default', prompt: 'In the beginning', max_tokens: 4 });
  assert.equal(r.status, 200, JSON.stringify(r.body));
  assert.equal(r.body.model, 'loom/default');
});

test('/v1/models: the capabilities are those of the parsers the server runs', { skip: tinyQwen3Skip() }, async () => {
  for (const [args, want] of [
    [[], { tools: true, tool_call_format: 'hermes', reasoning: true }],
    [['--tool-parser', 'none', '--reasoning-parser', 'none'], { tools: false, tool_call_format: null, reasoning: false }],
  ]) {
    const s = await startServer([...tinyQwen3Args(), ...args]);
    try {
      const { body } = await getJson(`${s.url}/v1/models`);
      assert.equal(body.data[0].loom.architecture, 'qwen3');
      assert.equal(body.data[0].loom.chat_template, true);
      assert.deepEqual(body.data[0].loom.capabilities, want, JSON.stringify(args));
    } finally {
      assert.equal(await s.stop(), 0, s.log());
    }
  }
});
