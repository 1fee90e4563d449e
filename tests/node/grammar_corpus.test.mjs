// The grammar engine over tests/grammar-corpus (real tool and test-suite schemas, its README.md):
// every schema either compiles or is refused with an error naming a schema path and a keyword,
// at least 85% compile (issue 22), and every complete document sampled under a compiled grammar
// (`loom grammar --sample`: random logits through the real Qwen3 tokenizer's masks) is JSON that
// ajv, the oracle, validates against the schema (in the dialect its "$schema" declares; draft-07
// without one). The schemas run in a few `loom grammar` processes of many --json-schema files
// each (loading the tokenizer once per process), two at a time.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import Ajv from 'ajv';
import Ajv2019 from 'ajv/dist/2019.js';
import Ajv2020 from 'ajv/dist/2020.js';
import AjvDraft04 from 'ajv-draft-04';
import addFormats from 'ajv-formats';
import { HERE, LOOM_BIN, QWEN3_TOKENIZER, tinyQwen3Skip } from './helpers.mjs';

const CORPUS = path.join(HERE, '../grammar-corpus');
const SAMPLES = 3;      // documents per schema
const MAX_TOKENS = 256; // per document: most that end (EOS) do so well before
const SEED = 22;
const PROCESSES = 2;    // CI has 2 cores
const MIN_COMPILE_RATE = 0.85;

// Schemas whose complete samples ajv rejects, left out of that assertion until fixed (the test
// still prints them). Key: GROUP/FILE.json; value: why.
const KNOWN_AJV_FAILURES = new Map([
]);

function corpusFiles() {
  return fs.readdirSync(CORPUS, { withFileTypes: true }).filter((d) => d.isDirectory())
    .flatMap((d) => fs.readdirSync(path.join(CORPUS, d.name)).filter((f) => f.endsWith('.json'))
      .map((f) => path.join(CORPUS, d.name, f)))
    .sort();
}

// Runs `loom grammar` on `files`; resolves {code, stderr, results: {file -> {error} | {samples}}}.
function runBatch(files) {
  const args = ['grammar', '--tokenizer', QWEN3_TOKENIZER, '--sample', String(SAMPLES),
    '--seed', String(SEED), '--max-tokens', String(MAX_TOKENS), '--json-schema', ...files];
  return new Promise((resolve) => {
    const p = spawn(LOOM_BIN, args, { stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '', stderr = '';
    p.stdout.on('data', (d) => { stdout += d; });
    p.stderr.on('data', (d) => { stderr += d; });
    p.on('exit', (code, sig) => {
      const results = new Map();
      let current = null;
      for (const line of stdout.split('\n')) {
        if (line === '') continue;
        if (line.startsWith('{')) {
          assert.ok(current?.samples, `a sample line before any compiled schema: ${line}`);
          current.samples.push(JSON.parse(line));
          continue;
        }
        const m = line.match(/^(.*?\.json): (compiled in [0-9.]+ ms|error: (.*))$/);
        assert.ok(m, `unexpected output line: ${line}`);
        current = m[3] !== undefined ? { error: m[3] } : { samples: [] };
        results.set(m[1], current);
      }
      resolve({ code: code ?? sig, stderr, results });
    });
  });
}

// The ajv instance for a schema's declared dialect (draft-07 when none), formats checked.
const validators = new Map();
function ajvFor(schema) {
  const declared = typeof schema === 'object' && typeof schema.$schema === 'string' ? schema.$schema : '';
  const dialect = declared.includes('2020-12') ? '2020' : declared.includes('2019-09') ? '2019'
    : declared.includes('draft-04') ? '04' : '07';
  if (!validators.has(dialect)) {
    const Class = { 2020: Ajv2020, 2019: Ajv2019, '04': AjvDraft04, '07': Ajv }[dialect];
    const ajv = new Class({ strict: false, allErrors: true, logger: false });
    addFormats(ajv);
    validators.set(dialect, ajv);
  }
  return validators.get(dialect);
}

test('grammar corpus: >= 85% of the schemas compile, the rest are refused by path and keyword, and every complete sample validates (ajv)',
  { skip: tinyQwen3Skip(), timeout: 600000 }, async (t) => {
    const files = corpusFiles();
    assert.ok(files.length >= 200, `the corpus has ${files.length} schemas`);
    // Interleaved, so that each process gets a share of every group.
    const batches = Array.from({ length: PROCESSES }, (_, i) => files.filter((_, j) => j % PROCESSES === i));
    const runs = await Promise.all(batches.map(runBatch));
    const results = new Map();
    for (const r of runs) {
      assert.ok(r.code === 0 || r.code === 2, `loom grammar exited ${r.code}: ${r.stderr}`);
      for (const [f, v] of r.results) results.set(f, v);
    }
    const refused = [], failures = [], known = [], noOracle = [];
    let numComplete = 0, numWithComplete = 0;
    for (const file of files) {
      const name = path.relative(CORPUS, file);
      const r = results.get(file);
      assert.ok(r, `no result for ${name}`);
      if (r.error !== undefined) {
        // A JSON pointer into the schema, then what is not supported there.
        assert.match(r.error, /#[^ ]*: \S/, `${name}: the refusal names no schema path`);
        refused.push(`${name}: ${r.error}`);
        continue;
      }
      const schema = JSON.parse(fs.readFileSync(file, 'utf8'));
      let validate;
      try {
        validate = ajvFor(schema).compile(schema);
      } catch (e) {
        noOracle.push(`${name}: ${e.message}`);
        continue;
      }
      const complete = r.samples.filter((s) => s.complete);
      assert.equal(r.samples.length, SAMPLES, name);
      numComplete += complete.length;
      if (complete.length > 0) ++numWithComplete;
      for (const s of complete) {
        assert.ok(!s.invalid_utf8, `${name}: a complete sample is not UTF-8: ${s.doc}`);
        let doc, why = null;
        try {
          doc = JSON.parse(s.doc);
          if (!validate(doc)) why = JSON.stringify(validate.errors);
        } catch (e) {
          why = `not JSON: ${e.message}`;
        }
        if (why === null) continue;
        const line = `${name}: ${JSON.stringify(s.doc)}: ${why}`;
        (KNOWN_AJV_FAILURES.has(name) ? known : failures).push(line);
      }
    }
    const compiled = files.length - refused.length;
    const rate = compiled / files.length;
    t.diagnostic(`${files.length} schemas, ${compiled} compiled (${(100 * rate).toFixed(1)}%), ` +
      `${refused.length} refused; ${numComplete} complete samples (${numWithComplete} schemas with one)`);
    for (const line of refused) t.diagnostic(`refused ${line}`);
    for (const line of noOracle) t.diagnostic(`ajv cannot compile ${line}`);
    for (const line of known) t.diagnostic(`known ajv failure (TODO issue 22) ${line}`);
    assert.deepEqual(failures, [], 'complete samples that ajv rejects (grammar-engine bugs)');
    assert.ok(rate >= MIN_COMPILE_RATE, `compile rate ${rate}`);
    // The samples must exercise most grammars through to their end.
    assert.ok(numWithComplete >= 0.8 * compiled, `${numWithComplete} of ${compiled} compiled schemas had a complete sample`);
  });
