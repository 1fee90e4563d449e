// Generates src/tokenizer/chat_template/testdata/expected_hf_jinja.json: every chat template
// found under ../shared/data (llama.cpp, mistral-common and ollama template collections, and the
// chat_template of each tokenizer_config.json / chat_template.json) rendered with every
// conversation of testdata/conversations.json by @huggingface/jinja (the engine transformers.js
// uses). Outputs are recorded byte-for-byte; a template that throws records the error message.
//
// Usage: cd tools/goldens/chat_template && npm ci && node gen.mjs [path/to/shared]
import fs from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { Template } from "@huggingface/jinja";

const here = path.dirname(fileURLToPath(import.meta.url));
const repo = path.resolve(here, "../../..");
const shared = path.resolve(process.argv[2] ?? path.join(repo, "../shared"));
const testdata = path.join(repo, "src/tokenizer/chat_template/testdata");

// strftime_now() must be deterministic: freeze the clock at 2025-01-15 10:30:00 UTC.
// loom's test passes the same instant through RenderOptions.
export const kFixedEpochSeconds = 1736937000;
process.env.TZ = "UTC";
const RealDate = Date;
globalThis.Date = class extends RealDate {
  constructor(...args) {
    if (args.length === 0) super(kFixedEpochSeconds * 1000);
    else super(...args);
  }
  static now() { return kFixedEpochSeconds * 1000; }
};

const tokenText = (t) => (t == null ? null : typeof t === "string" ? t : t.content ?? null);

function listTemplates() {
  const out = [];
  for (const coll of ["chat-templates-llamacpp", "chat-templates-mistral-common"]) {
    const dir = path.join(shared, "data/chat-templates", coll);
    for (const f of fs.readdirSync(dir).filter((f) => f.endsWith(".jinja")).sort()) {
      out.push({
        id: `${coll.replace("chat-templates-", "")}/${f}`,
        source: { kind: "file", path: `data/chat-templates/${coll}/${f}` },
        text: fs.readFileSync(path.join(dir, f), "utf8"),
        bos_token: "<s>",
        eos_token: "</s>",
      });
    }
  }
  const jsonl = "data/chat-templates/chat-templates-ollama/templates.jsonl";
  fs.readFileSync(path.join(shared, jsonl), "utf8").split("\n").forEach((line, i) => {
    if (!line.trim()) return;
    const [key, text] = Object.entries(JSON.parse(line))[0];
    out.push({
      id: `ollama/${i}-${key}`,
      source: { kind: "jsonl", path: jsonl, line: i, key },
      text, bos_token: "<s>", eos_token: "</s>",
    });
  });
  const tokDir = path.join(shared, "data/tokenizers");
  const configs = [];
  for (const d of fs.readdirSync(tokDir).sort()) {
    for (const sub of ["", ...fs.readdirSync(path.join(tokDir, d)).sort()]) {
      for (const name of ["tokenizer_config.json", "chat_template.json"]) {
        const rel = path.join("data/tokenizers", d, sub, name);
        if (fs.existsSync(path.join(shared, rel))) configs.push(rel);
      }
    }
  }
  for (const rel of configs) {
    const cfg = JSON.parse(fs.readFileSync(path.join(shared, rel), "utf8"));
    const ct = cfg.chat_template;
    if (ct == null) continue;
    const entries = typeof ct === "string" ? [[null, ct]] : ct.map((e) => [e.name, e.template]);
    for (const [name, text] of entries) {
      out.push({
        id: `tokenizers/${rel.replace("data/tokenizers/", "")}${name ? ":" + name : ""}`,
        source: { kind: "config", path: rel, ...(name ? { name } : {}) },
        text,
        bos_token: tokenText(cfg.bos_token) ?? "",
        eos_token: tokenText(cfg.eos_token) ?? "",
      });
    }
  }
  return out;
}

const conversations = JSON.parse(
  fs.readFileSync(path.join(testdata, "conversations.json"), "utf8")).conversations;
const templates = [];
let numOk = 0, numErr = 0;
for (const t of listTemplates()) {
  const results = {};
  let parsed = null, parseError = null;
  try { parsed = new Template(t.text); } catch (e) { parseError = String(e.message ?? e); }
  for (const conv of conversations) {
    // transformers always passes tools and documents (None when absent); mirror that.
    const { id, ...rest } = conv;
    const ctx = { tools: null, documents: null, ...rest };
    try {
      if (parseError) throw new Error(parseError);
      const output = parsed.render({
        ...structuredClone(ctx), bos_token: t.bos_token, eos_token: t.eos_token });
      results[id] = { output };
      numOk++;
    } catch (e) {
      results[id] = { error: String(e.message ?? e) };
      numErr++;
    }
  }
  templates.push({ id: t.id, source: t.source, bos_token: t.bos_token, eos_token: t.eos_token,
                   results });
}
const pkg = JSON.parse(fs.readFileSync(
  path.join(here, "node_modules/@huggingface/jinja/package.json"), "utf8"));
const doc = {
  _generated_by: "tools/goldens/chat_template/gen.mjs (do not edit by hand)",
  oracle: `@huggingface/jinja ${pkg.version}`,
  fixed_epoch_seconds: kFixedEpochSeconds,
  templates,
};
fs.writeFileSync(path.join(testdata, "expected_hf_jinja.json"), JSON.stringify(doc, null, 1) + "\n");
console.log(`${templates.length} templates x ${conversations.length} conversations: ` +
            `${numOk} rendered, ${numErr} errors`);
