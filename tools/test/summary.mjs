// Counts the test cases of the last `make test` ctest run and says why each skipped one skipped:
//   node tools/test/summary.mjs BUILD_DIR
// Reads BUILD_DIR/test-results/ctest.xml (ctest --output-junit: one entry per ctest test),
// BUILD_DIR/test-results/<test>.xml (GTest XML, GTEST_OUTPUT=xml:DIR/) and BUILD_DIR/node_test.tap
// (the node tests' TAP). A ctest test is counted by its cases (GTest or node) when their report
// exists, else as one case; a crashed binary whose report shows no failure counts one failure.
// The last line, "cases: N passed, N failed, N skipped", is the whole run's count. Exit 0: the
// exit status of `make test` is ctest's.
import fs from 'node:fs';
import path from 'node:path';

const build = process.argv[2] || 'build';
const results = path.join(build, 'test-results');
const read = (f) => (fs.existsSync(f) ? fs.readFileSync(f, 'utf8') : null);

const unescape = (s) => s.replace(/&#x0*A;/gi, '\n').replace(/&#x0*D;/gi, '').replace(/&quot;/g, '"')
  .replace(/&apos;/g, "'").replace(/&lt;/g, '<').replace(/&gt;/g, '>').replace(/&amp;/g, '&');
const attr = (tag, name) => {
  const m = tag.match(new RegExp(`\\s${name}="([^"]*)"`));
  return m ? unescape(m[1]) : null;
};

// Each <testcase ...>...</testcase> or <testcase .../> of an XML report: {name, tag, body}.
function testcases(xml) {
  const out = [];
  const re = /<testcase\b([^>]*?)(\/>|>([\s\S]*?)<\/testcase>)/g;
  for (let m; (m = re.exec(xml));) {
    out.push({ name: attr(m[1], 'name'), tag: m[1], body: m[3] || '' });
  }
  return out;
}

// GTest: skip messages are "file:line\nmessage"; the reason is the message.
function gtestCases(xml, suite) {
  const counts = { passed: 0, failed: 0, skipped: 0, reasons: [] };
  for (const c of testcases(xml)) {
    const result = attr(c.tag, 'result');
    const status = attr(c.tag, 'status');
    if (/<failure\b/.test(c.body)) {
      counts.failed++;
    } else if (result === 'skipped' || /<skipped\b/.test(c.body)) {
      counts.skipped++;
      const m = c.body.match(/<skipped\b[^>]*message="([^"]*)"/);
      const msg = m ? unescape(m[1]).split('\n').slice(1).join(' ').trim() : '';
      counts.reasons.push(msg || '(no reason given)');
    } else if (status === 'notrun' || result === 'suppressed') {
      counts.skipped++;
      counts.reasons.push(`disabled (${suite}: DISABLED_ prefix)`);
    } else {
      counts.passed++;
    }
  }
  return counts;
}

// node --test TAP: "ok N - name # SKIP reason" per test (nested ones indented), totals at the end.
function nodeCases(tap) {
  const counts = { passed: 0, failed: 0, skipped: 0, reasons: [] };
  const total = (k) => Number((tap.match(new RegExp(`^# ${k} (\\d+)$`, 'm')) || [0, 0])[1]);
  counts.failed = total('fail') + total('cancelled');
  counts.skipped = total('skipped');
  counts.passed = total('pass');
  for (const m of tap.matchAll(/^\s*ok \d+ - .*?# SKIP\s*(.*)$/gm)) {
    counts.reasons.push(`node: ${m[1].trim() || '(no reason given)'}`);
  }
  return counts;
}

const ctestXml = read(path.join(results, 'ctest.xml'));
if (!ctestXml) {
  console.log(`summary: no ${path.join(results, 'ctest.xml')} (did ctest run with --output-junit?)`);
  process.exit(0);
}
const total = { passed: 0, failed: 0, skipped: 0 };
const reasons = new Map();  // reason → count
const failedTests = [];
for (const t of testcases(ctestXml)) {
  const status = attr(t.tag, 'status');  // run, fail, disabled, notrun
  const ctestFailed = status === 'fail' || /<failure\b/.test(t.body);
  const ctestSkipped = !ctestFailed &&
    (status === 'disabled' || status === 'notrun' || /<skipped\b/.test(t.body));
  let c = null;
  const gtest = read(path.join(results, `${t.name}.xml`));
  const tap = t.name === 'server_node_test' ? read(path.join(build, 'node_test.tap')) : null;
  if (gtest) c = gtestCases(gtest, t.name);
  else if (tap) c = nodeCases(tap);
  if (!c) {
    c = { passed: 0, failed: 0, skipped: 0, reasons: [] };
    if (ctestFailed) c.failed = 1;
    else if (ctestSkipped) {
      c.skipped = 1;
      // ctest keeps the test's output in the JUnit <system-out>; its last line says why.
      const out = (t.body.match(/<system-out>([\s\S]*?)<\/system-out>/) || [0, ''])[1];
      const last = unescape(out).trim().split('\n').pop();
      c.reasons.push(`${t.name}: ${last || 'skipped'}`);
    } else c.passed = 1;
  } else if (ctestFailed && c.failed === 0) {
    c.failed = 1;  // crashed, timed out or exited non-zero with every recorded case passing
  }
  if (ctestFailed) failedTests.push(t.name);
  total.passed += c.passed;
  total.failed += c.failed;
  total.skipped += c.skipped;
  for (const r of c.reasons) reasons.set(r, (reasons.get(r) || 0) + 1);
}

console.log('');
console.log(`== Test cases of ${testcases(ctestXml).length} ctest tests (GTest cases, node tests, scripts)`);
if (reasons.size) {
  console.log(`skipped, by reason (${total.skipped}):`);
  for (const [r, n] of [...reasons].sort((a, b) => b[1] - a[1] || a[0].localeCompare(b[0]))) {
    console.log(`  ${String(n).padStart(4)}  ${r}`);
  }
}
if (failedTests.length) console.log(`failed ctest tests: ${failedTests.join(', ')}`);
console.log(`cases: ${total.passed} passed, ${total.failed} failed, ${total.skipped} skipped`);
