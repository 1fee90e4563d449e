// llama.cpp's own GBNF grammars (grammars/*.gbnf, as node-llama-cpp ships them verbatim in
// llama/grammars/: a devDependency here, installed without its optional prebuilt binaries, see
// .npmrc) through `loom grammar --gbnf FILE --check DOC...`: every file compiles; for the files
// with a clear language, hand-written documents are accepted or rejected at the byte offset
// expected; json.gbnf's verdicts agree with JSON.parse except where json.gbnf is itself narrower
// than JSON (each such document says how).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { HERE, LOOM_BIN, skipReason } from './helpers.mjs';

const GRAMMARS = path.join(HERE, 'node_modules/node-llama-cpp/llama/grammars');

// Files loom refuses on purpose; key: file name, value: why. Empty: all of them compile.
const REFUSED = new Map([]);

// Why the test cannot run (false when it can). node-llama-cpp comes with scripts/install-deps.sh,
// so under LOOM_REQUIRE_SHARED_DATA=1 (CI) its absence is an error rather than a skip.
function gbnfSkip() {
  const bin = skipReason();
  if (bin) return bin;
  if (fs.existsSync(path.join(GRAMMARS, 'json.gbnf'))) return false;
  const why = `needs ${GRAMMARS} (npm devDependency node-llama-cpp: scripts/install-deps.sh)`;
  if (process.env.LOOM_REQUIRE_SHARED_DATA === '1') throw new Error(why);
  return why;
}
const skip = gbnfSkip();

const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'loom-gbnf-files-'));
process.on('exit', () => fs.rmSync(dir, { recursive: true, force: true }));

// Runs `loom grammar --gbnf grammar --check` on `docs` (strings); resolves the verdict per doc
// ("accept" / "reject N").
function check(grammar, docs) {
  const files = docs.map((d, i) => {
    const p = path.join(dir, `${path.basename(grammar, '.gbnf')}-${i}.txt`);
    fs.writeFileSync(p, d);
    return p;
  });
  const r = spawnSync(LOOM_BIN, ['grammar', '--gbnf', grammar, '--check', ...files],
    { encoding: 'utf8', maxBuffer: 1 << 24 });
  assert.equal(r.status, 0, `${grammar}: ${r.stderr}`);
  const lines = r.stdout.trim().split('\n');
  assert.match(lines[0], /^compiled in [0-9.]+ ms$/);
  assert.equal(lines.length, docs.length + 1, r.stdout);
  return lines.slice(1).map((l, i) => {
    assert.ok(l.startsWith(`${files[i]}: `), l);
    return l.slice(files[i].length + 2);
  });
}

test('every .gbnf file llama.cpp ships compiles', { skip }, () => {
  const files = fs.readdirSync(GRAMMARS).filter((f) => f.endsWith('.gbnf')).sort();
  for (const f of ['arithmetic', 'c', 'chess', 'english', 'japanese', 'json', 'json_arr', 'list']) {
    assert.ok(files.includes(`${f}.gbnf`), `${f}.gbnf missing from ${GRAMMARS}`);
  }
  for (const f of files) {
    const r = spawnSync(LOOM_BIN, ['grammar', '--gbnf', path.join(GRAMMARS, f)], { encoding: 'utf8' });
    if (REFUSED.has(f)) {
      assert.equal(r.status, 2, `${f} is listed as refused (${REFUSED.get(f)}) but compiles`);
    } else {
      assert.equal(r.status, 0, `${f}: ${r.stderr}`);
      assert.match(r.stdout, /^compiled in [0-9.]+ ms\n$/, f);
    }
  }
});

// Per file: [document, expected verdict]; a reject's offset is the first byte the grammar refuses
// (the document's length when it is a prefix of a document but not one itself).
const CASES = {
  'arithmetic.gbnf': [
    ['1+2=3\n', 'accept'],
    ['(a +b) *2 = x_1\n', 'accept'],  // ws only after a term, never before one
    ['x=1\ny=2\n', 'accept'],
    ['f1/(2-g)=0\n', 'accept'],
    ['1+2=3', 'reject 5'],            // each equation ends with "\n"
    ['1 + 2=3\n', 'reject 3'],
    ['=3\n', 'reject 0'],
    ['A=1\n', 'reject 0'],
    ['1+2=3\n4', 'reject 7'],
  ],
  'list.gbnf': [
    ['- milk\n- eggs\n', 'accept'],
    ['- café ☕\n', 'accept'],
    ['- milk', 'reject 6'],
    ['-milk\n', 'reject 1'],
    ['- \n', 'reject 2'],
    ['- a\u2028b\n', 'reject 5'],  // E2 80 A8: E2 80 still starts allowed characters
    ['- a\r\n', 'reject 3'],
    ['', 'reject 0'],
  ],
  'chess.gbnf': [
    ['1. e4 e5\n2. Nf3 Nc6\n', 'accept'],
    ['1. d4 d5\n2. c4 dxc4\n3. e3 b5\n', 'accept'],
    ['1. e4 e5\n2. Qh5 Nc6\n3. Bc4 Nf6\n4. Qxf7# O-O\n', 'accept'],
    ['1. e4 e5\n2. e8=Q+ O-O-O\n', 'accept'],
    ['1. e4 e5\n', 'reject 9'],  // at least two numbered lines
    ['1. e9 e5\n2. Nf3 Nc6\n', 'reject 4'],
    ['2. e4 e5\n', 'reject 0'],
    ['1. Ze4', 'reject 3'],
  ],
  'english.gbnf': [
    ['Hello, world!', 'accept'],
    ["It's 42 degrees.\nOK", 'accept'],
    ['a[b]\\c^_`{|}~', 'accept'],
    ['Hello  world', 'reject 6'],
    ['café', 'reject 3'],
    ['', 'reject 0'],
    ['trailing ', 'reject 9'],
  ],
  'japanese.gbnf': [
    ['こんにちは', 'accept'],
    ['日本語 カタカナ。', 'accept'],
    ['hello', 'reject 0'],
    ['日本語abc', 'reject 9'],
  ],
  'c.gbnf': [
    ['', 'accept'],
    ['int main(){return 0;}', 'accept'],
    ['int add(int a){int b = a+1;return b;}', 'accept'],
    ['int f(){while(x<10){x = x+1;}}', 'accept'],
    ['int f(){// hi\nreturn 1;}float g(){/* a*b */return -f();}', 'accept'],
    ['int main() {return 0;}', 'reject 10'],
    ['int main(){return 0}', 'reject 19'],
    ['void f(){}', 'reject 0'],
    ['intmain(){}', 'reject 3'],
  ],
  'json_arr.gbnf': [
    ['[\n]', 'accept'],
    ['[\n1,\n2]', 'accept'],
    ['[\n{"a": [true, null]},\n"x"]', 'accept'],
    ['[1]', 'reject 1'],
    ['[\n1, 2]', 'reject 4'],
    ['[\n]\n', 'reject 3'],  // no whitespace after the root array
  ],
  'json.gbnf': [
    ['{}', 'accept'],
    ['{"a":1}', 'accept'],
    ['{"a": [1, 2.5, -3e5, true, false, null], "b": {"c": "d\\n\\u00e9"}}', 'accept'],
    ['{ "x" : "é" }', 'accept'],
    ['{"a":1}\n', 'accept'],
    ['[1]', 'reject 0'],
    ['{"a":1,}', 'reject 7'],
    ['{"a":01}', 'reject 6'],
    ['{"a":1e10}', 'reject 8'],  // json.gbnf: exponent digits after the first are 1-9
    ['{"a":tru}', 'reject 8'],
    ['{"a" 1}', 'reject 5'],
    ["{'a':1}", 'reject 1'],
    ['{"a":1', 'reject 6'],
  ],
};

for (const [file, cases] of Object.entries(CASES)) {
  test(`${file}: documents accepted and rejected at the expected byte`, { skip }, () => {
    const got = check(path.join(GRAMMARS, file), cases.map(([doc]) => doc));
    const want = cases.map(([, verdict]) => verdict);
    for (let i = 0; i < cases.length; ++i) {
      assert.equal(got[i], want[i], `${file}: ${JSON.stringify(cases[i][0])}`);
    }
  });
}

// json.gbnf against JSON.parse. A document with a `narrower` reason is JSON that json.gbnf does
// not accept (JSON.parse must accept it, loom must reject it); every other document gets
// JSON.parse's verdict (with a root object: json.gbnf's root is `object`).
const JSON_DOCS = [
  ['{}'],
  ['{"a":null}'],
  ['{"k":"v","n":-0.5e-3,"t":true,"f":false,"z":null}'],
  ['{"nested":{"deep":{"deeper":[[[]],{}]}}}'],
  ['{"esc":"\\"\\\\\\b\\f\\n\\r\\t\\u0041\\uD83D\\uDE00"}'],
  ['{"uni":"日本語 😀 é"}'],
  ['{"a":[1,2,3],"b":[]}'],
  ['{"a": 1, "b": 2}'],
  ['{\n  "a": 1,\n  "b": [\n    true\n  ]\n}'],
  ['{"big":1234567890123456}'],
  ['{"e":1E+5,"f":1e-7,"g":0.0}'],
  ['{"dup":1,"dup":2}'],
  // Not JSON.
  ['{"a":1,}'],
  ['{"a":[1,2,]}'],
  ['{a:1}'],
  ["{'a':1}"],
  ['{"a":01}'],
  ['{"a":1.}'],
  ['{"a":.5}'],
  ['{"a":+1}'],
  ['{"a":-}'],
  ['{"a":1e}'],
  ['{"a":"\\x41"}'],
  ['{"a":"\\u12"}'],
  ['{"a":"tab\there"}'],
  ['{"a":"new\nline"}'],
  ['{"a":NaN}'],
  ['{"a":Infinity}'],
  ['{"a":undefined}'],
  ['{"a":1}}'],
  ['{"a":1'],
  ['{"a" 1}'],
  ['{"a":1 "b":2}'],
  ['{"a":[1 2]}'],
  ['{"a":tru}'],
  ['{"a":nul}'],
  ['{"a":"unterminated}'],
  ['{} {}'],
  ['{"a":1}x'],
  [''],
  // JSON that json.gbnf does not accept.
  ['[1,2]', 'the root is an object'],
  ['"text"', 'the root is an object'],
  ['42', 'the root is an object'],
  [' {}', 'no whitespace before the root'],
  ['{"a":1e10}', 'exponent digits after the first are 1-9'],
  ['{"a":12345678901234567}', 'at most 16 integer digits'],
  ['{"a":"\\/"}', 'no \\/ escape'],
  ['{"a":"\x7F"}', 'no raw DEL in strings'],
  ['{  "a":1}', 'whitespace is one space or a newline and up to 20 spaces / tabs'],
  ['{"a":1}\n\n', 'whitespace is one space or a newline and up to 20 spaces / tabs'],
  ['{\t"a":1}', 'whitespace is one space or a newline and up to 20 spaces / tabs'],
  ['{\r\n"a":1}', 'whitespace is one space or a newline and up to 20 spaces / tabs'],
];

test('json.gbnf agrees with JSON.parse where it is not narrower', { skip }, () => {
  assert.ok(JSON_DOCS.length >= 40);
  const parses = (doc) => { try { JSON.parse(doc); return true; } catch { return false; } };
  const got = check(path.join(GRAMMARS, 'json.gbnf'), JSON_DOCS.map(([doc]) => doc));
  let accepted = 0;
  JSON_DOCS.forEach(([doc, narrower], i) => {
    const json = parses(doc);
    if (narrower) {
      assert.ok(json, `${JSON.stringify(doc)} is listed as narrower (${narrower}) but is not JSON`);
      assert.match(got[i], /^reject \d+$/, `${JSON.stringify(doc)}: json.gbnf is narrower (${narrower})`);
    } else {
      assert.equal(got[i] === 'accept', json, `${JSON.stringify(doc)}: loom ${got[i]}, JSON.parse ${json}`);
      if (json) ++accepted;
    }
  });
  assert.ok(accepted >= 10, `only ${accepted} documents accepted`);
});
