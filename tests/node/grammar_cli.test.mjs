// `loom grammar`: compile time line, accept / reject <byte offset> per document (bytes, and with
// --tokenizer the token-by-token walk), --bench's mask timing line, exit 2 with the error for a
// grammar that does not compile; --sample's documents, several schemas in one run, --bench-json.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { LOOM_BIN, QWEN3_TOKENIZER, skipReason, tinyQwen3Skip } from './helpers.mjs';

const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'loom-grammar-cli-'));
process.on('exit', () => fs.rmSync(dir, { recursive: true, force: true }));
const file = (name, text) => { const p = path.join(dir, name); fs.writeFileSync(p, text); return p; };
const schema = file('person.json', JSON.stringify({ type: 'object', properties: {
  name: { type: 'string', maxLength: 20 }, age: { type: 'integer', minimum: 0, maximum: 150 } },
required: ['name', 'age'] }));
const good = file('good.json', '{"name":"Ada Lovelace","age":36}');
const bad = file('bad.json', '{"name":"Ada","age":360}');
const short = file('short.json', '{"name":"Ada"');
const loom = (...args) => spawnSync(LOOM_BIN, ['grammar', ...args], { encoding: 'utf8' });

test('loom grammar checks documents byte by byte', { skip: skipReason() || false }, () => {
  const r = loom('--json-schema', schema, '--check', good, bad, short);
  assert.equal(r.status, 0, r.stderr);
  const lines = r.stdout.trim().split('\n');
  assert.match(lines[0], /^compiled in [0-9.]+ ms$/);
  assert.deepEqual(lines.slice(1), [`${good}: accept`, `${bad}: reject 22`, `${short}: reject 13`]);
  const choice = loom('--choice', 'yes,no', '--check', file('yes.txt', 'yes'), file('nah.txt', 'nah'));
  assert.match(choice.stdout, /yes\.txt: accept\n.*nah\.txt: reject 1\n/);
  const regex = loom('--regex', '[0-9]{3}-[a-z]+', '--check', file('r.txt', '123-ab'), file('s.txt', 'x123-ab'));
  assert.match(regex.stdout, /r\.txt: accept\n.*s\.txt: reject 0\n/);
});

test('loom grammar exits 2 naming the problem when the grammar does not compile', { skip: skipReason() || false }, () => {
  const r = loom('--gbnf', file('left.gbnf', 'root ::= root "x" | "y"'));
  assert.equal(r.status, 2);
  assert.match(r.stderr, /left-recursive/);
  const s = loom('--json-schema', file('s.json', '{"type":"object","patternProperties":{"a":{}}}'));
  assert.equal(s.status, 2);
  assert.match(s.stderr, /patternProperties/);
});

test('loom grammar --tokenizer walks the tokens and --bench times the masks', { skip: tinyQwen3Skip() }, () => {
  const r = loom('--json-schema', schema, '--tokenizer', QWEN3_TOKENIZER, '--check', good, bad, '--bench');
  assert.equal(r.status, 0, r.stderr);
  assert.match(r.stdout, /good\.json: accept; tokens: accept \(\d+ tokens \+ EOS\)/);
  assert.match(r.stdout, /bad\.json: reject 22; tokens: reject \d+ \(token \d+, id \d+\)/);
  assert.match(r.stdout, /mask: \d+ tokens, p50 [0-9.]+ us, p99 [0-9.]+ us, max [0-9.]+ us/);
});

test('loom grammar --sample draws documents under the grammar, reproducibly by --seed', { skip: tinyQwen3Skip() }, () => {
  const sample = (...args) => loom('--tokenizer', QWEN3_TOKENIZER, '--sample', '4', ...args);
  const r = sample('--json-schema', schema, '--seed', '7');
  assert.equal(r.status, 0, r.stderr);
  const [first, ...rest] = r.stdout.trim().split('\n');
  assert.match(first, /^compiled in [0-9.]+ ms$/);
  const docs = rest.map((l) => JSON.parse(l));
  assert.equal(docs.length, 4);
  for (const d of docs) {
    assert.deepEqual(Object.keys(d), ['doc', 'complete']);
    if (!d.complete) continue;
    const v = JSON.parse(d.doc);
    assert.deepEqual(Object.keys(v), ['name', 'age']);
    assert.ok([...v.name].length <= 20 && Number.isInteger(v.age) && v.age >= 0 && v.age <= 150, d.doc);
  }
  assert.ok(docs.some((d) => d.complete), r.stdout);
  const samplesOf = (out) => out.split('\n').slice(1).join('\n');  // without the compile time
  assert.equal(samplesOf(sample('--json-schema', schema, '--seed', '7').stdout), samplesOf(r.stdout));
  assert.notEqual(samplesOf(sample('--json-schema', schema, '--seed', '8').stdout), samplesOf(r.stdout));
  const choice = sample('--choice', 'yes,no,maybe', '--max-tokens', '8');
  for (const d of choice.stdout.trim().split('\n').slice(1).map((l) => JSON.parse(l))) {
    assert.ok(d.complete && ['yes', 'no', 'maybe'].includes(d.doc), JSON.stringify(d));
  }
});

test('loom grammar runs several --json-schema files in one process; --bench-json writes every time', { skip: tinyQwen3Skip() }, () => {
  const refused = file('refused.json', '{"type":"object","patternProperties":{"a":{}}}');
  const out = path.join(dir, 'bench.json');
  const r = loom('--tokenizer', QWEN3_TOKENIZER, '--sample', '2', '--bench-json', out, '--bench',
    '--json-schema', schema, refused);
  assert.equal(r.status, 2);
  assert.match(r.stderr, /1 of 2 grammars did not compile/);
  const lines = r.stdout.trim().split('\n');
  assert.match(lines[0], new RegExp(`^${schema}: compiled in [0-9.]+ ms$`));
  assert.ok(lines[1].startsWith('{"doc":') && lines[2].startsWith('{"doc":'), r.stdout);
  assert.match(lines[3], new RegExp(`^${schema}: mask: \\d+ tokens, p50`));
  assert.match(lines[4], new RegExp(`^${refused}: error: #: keyword "patternProperties" is not supported$`));
  const report = JSON.parse(fs.readFileSync(out, 'utf8'));
  assert.equal(report.tokenizer, QWEN3_TOKENIZER);
  assert.deepEqual(report.grammars.map((g) => g.name), [schema, refused]);
  assert.ok(report.grammars[0].compile_ms > 0 && report.grammars[0].mask_us.length >= 2);
  assert.equal(report.grammars[0].mask_us.length, Number(lines[3].match(/mask: (\d+)/)[1]));
  assert.match(report.grammars[1].error, /patternProperties/);
});
