// `loom quantize`: the default model (converted to GGUF by tools/goldens/hf_to_gguf) written as
// Q4_K_M and Q8_0 — llama.cpp's mixture in the per-tensor lines, files that load and generate,
// Q8_0 keeping the unquantized greedy start — and its errors: an unknown type, requantizing
// without --allow-requantize, a model that is not GGUF; none leaves a file behind.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { DEFAULT_MODEL, HERE, LOOM_BIN, skipReason } from './helpers.mjs';

const HF_TO_GGUF = process.env.LOOM_HF_TO_GGUF || path.join(HERE, '../../build/tools/goldens/hf_to_gguf');
const skip = skipReason() || (fs.existsSync(HF_TO_GGUF) ? false : `needs ${HF_TO_GGUF}`);
const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'loom-quantize-'));
process.on('exit', () => fs.rmSync(dir, { recursive: true, force: true }));
const at = (name) => path.join(dir, name);
const loom = (...args) => spawnSync(LOOM_BIN, args, { encoding: 'utf8' });
const PROMPT = 'And the LORD said unto Moses,';
const greedy = (gguf) => {
  const r = loom('generate', gguf, '--tokenizer', DEFAULT_MODEL, '-p', PROMPT, '-n', '24', '--temp', '0');
  assert.equal(r.status, 0, r.stderr);
  return r.stdout;
};

let source = null;
const sourceGguf = () => {
  if (source) return source;
  const r = spawnSync(HF_TO_GGUF, [DEFAULT_MODEL, at('default.gguf')], { encoding: 'utf8' });
  assert.equal(r.status, 0, r.stderr);
  source = at('default.gguf');
  return source;
};

test('Q4_K_M follows llama.cpp\'s mixture and the file generates', { skip }, () => {
  const r = loom('quantize', sourceGguf(), at('q4km.gguf'), 'Q4_K_M', '--threads', '2');
  assert.equal(r.status, 0, r.stderr);
  const type = (name) => {
    const line = r.stderr.split('\n').find((l) => l.includes(` ${name} `));
    assert.ok(line, `no line for ${name}:\n${r.stderr}`);
    return line.match(/(\S+) -> (\S+)/).slice(1);
  };
  // 6 layers: n / 8 = 0, so use_more_bits picks i >= 42 / 8 = 5 and i % 3 == 2: layers 2 and 5.
  assert.deepEqual(type('blk.0.attn_v.weight'), ['bf16', 'q4_K']);
  assert.deepEqual(type('blk.2.attn_v.weight'), ['bf16', 'q6_K']);
  assert.deepEqual(type('blk.1.ffn_down.weight'), ['bf16', 'q4_K']);
  assert.deepEqual(type('blk.2.ffn_down.weight'), ['bf16', 'q6_K']);
  assert.deepEqual(type('blk.3.ffn_down.weight'), ['bf16', 'q4_K']);
  assert.deepEqual(type('blk.5.ffn_down.weight'), ['bf16', 'q6_K']);
  assert.deepEqual(type('blk.3.attn_q.weight'), ['bf16', 'q4_K']);
  assert.deepEqual(type('blk.3.attn_norm.weight'), ['f32', 'f32']);
  assert.match(r.stderr, /wrote .*q4km\.gguf: [0-9.]+ MiB of tensors -> [0-9.]+ MiB/);
  const ratio = fs.statSync(at('q4km.gguf')).size / fs.statSync(sourceGguf()).size;
  assert.ok(ratio > 0.25 && ratio < 0.4, `Q4_K_M is ${ratio} of the bf16 file`);
  assert.ok(greedy(at('q4km.gguf')).startsWith(PROMPT));
});

test('Q8_0 keeps the unquantized greedy start', { skip }, () => {
  const r = loom('quantize', sourceGguf(), at('q8.gguf'), 'q8_0');
  assert.equal(r.status, 0, r.stderr);
  const want = greedy(sourceGguf()), got = greedy(at('q8.gguf'));
  assert.equal(got.slice(0, PROMPT.length + 60), want.slice(0, PROMPT.length + 60));
});

test('bad requests name the problem and leave no file', { skip }, () => {
  let r = loom('quantize', sourceGguf(), at('x.gguf'), 'Q3_K_M');
  assert.notEqual(r.status, 0);
  assert.match(r.stderr, /'Q3_K_M' is not one of .*Q4_K_M/);
  r = loom('quantize', sourceGguf(), at('q8b.gguf'), 'Q8_0');
  assert.equal(r.status, 0, r.stderr);
  r = loom('quantize', at('q8b.gguf'), at('y.gguf'), 'Q4_K_M');
  assert.notEqual(r.status, 0);
  assert.match(r.stderr, /already q8_0.*--allow-requantize/);
  r = loom('quantize', DEFAULT_MODEL, at('z.gguf'), 'Q4_K_M');
  assert.notEqual(r.status, 0);
  assert.match(r.stderr, /not a \.gguf file/);
  for (const f of ['x.gguf', 'y.gguf', 'z.gguf', 'y.gguf.part']) assert.ok(!fs.existsSync(at(f)), f);
  r = loom('quantize', at('q8b.gguf'), at('y.gguf'), 'Q4_K_M', '--allow-requantize');
  assert.equal(r.status, 0, r.stderr);
});

test('FP8 from a Hugging Face directory: an FP8 checkpoint that loads as fp8 and generates', { skip: skipReason() || false }, () => {
  const out = at('fp8');
  const r = loom('quantize', DEFAULT_MODEL, out, 'FP8', '--threads', '2');
  assert.equal(r.status, 0, r.stderr);
  assert.match(r.stderr, /model\.layers\.0\.mlp\.down_proj\.weight -> F8_E4M3/);
  assert.match(r.stderr, /wrote .*: \d+ tensors quantized, \d+ copied/);
  const config = JSON.parse(fs.readFileSync(path.join(out, 'config.json'), 'utf8'));
  assert.deepEqual(config.quantization_config,
    { quant_method: 'fp8', fmt: 'e4m3', activation_scheme: 'dynamic', weight_block_size: [128, 128] });
  assert.ok(fs.existsSync(path.join(out, 'tokenizer.json')), 'the tokenizer is copied');
  const bench = loom('bench', out, '--gen-tokens', '8', '--prompt-tokens', '16');
  assert.equal(bench.status, 0, bench.stderr);
  assert.match(bench.stdout, /\(fp8, /);
  assert.ok(greedy(out).startsWith(PROMPT));
  // Refused: requantizing, a GGUF type from a directory.
  const again = loom('quantize', out, at('fp8-again'), 'fp8');
  assert.notEqual(again.status, 0);
  assert.match(again.stderr, /already quantized/);
  const gguf = loom('quantize', DEFAULT_MODEL, at('x.gguf'), 'Q4_K_M');
  assert.notEqual(gguf.status, 0);
  assert.match(gguf.stderr, /is not a \.gguf file/);
  assert.ok(!fs.existsSync(at('x.gguf')));
});
