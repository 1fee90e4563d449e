// Generates src/tokenizer/testdata/expected_<name>.json: the token ids and decodes of every
// string in src/tokenizer/testdata/corpus.json, for every tokenizer in ../shared/data/tokenizers,
// computed by Hugging Face's JavaScript tokenizers (@huggingface/tokenizers, the tokenizer
// engine of @huggingface/transformers, pinned in package.json).
//
// Usage: cd tools/goldens/tokenizer && npm install && node gen.mjs [path/to/shared]
// Decodes use clean_up_tokenization_spaces=false: loom's Decode, like the Rust `tokenizers`
// library, does not apply transformers' cleanup.
import fs from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { Tokenizer } from "@huggingface/tokenizers";

const here = path.dirname(fileURLToPath(import.meta.url));
const repo = path.resolve(here, "../../..");
const shared = path.resolve(process.argv[2] ?? path.join(repo, "../shared"));
const tokDir = path.join(shared, "data/tokenizers");
const outDir = path.join(repo, "src/tokenizer/testdata");
const corpus = JSON.parse(fs.readFileSync(path.join(outDir, "corpus.json"), "utf8")).cases;

const readJson = (p) => JSON.parse(fs.readFileSync(p, "utf8"));
const pkgVersion = (name) =>
  readJson(path.join(here, "node_modules", name, "package.json")).version;

// GPT-2 ships vocab.json + merges.txt; this is the tokenizer.json that HF's converter
// (GPT2Converter) produces from them.
function gpt2TokenizerJson(dir) {
  const vocab = readJson(path.join(dir, "vocab.json"));
  const merges = fs.readFileSync(path.join(dir, "merges.txt"), "utf8").split("\n")
    .filter((l) => l.length > 0 && !l.startsWith("#version"));
  const byteLevel = { type: "ByteLevel", add_prefix_space: false, trim_offsets: true, use_regex: true };
  return {
    version: "1.0",
    added_tokens: [{ id: vocab["<|endoftext|>"], content: "<|endoftext|>", single_word: false,
                     lstrip: false, rstrip: false, normalized: true, special: true }],
    normalizer: null,
    pre_tokenizer: byteLevel,
    post_processor: byteLevel,
    decoder: byteLevel,
    model: { type: "BPE", dropout: null, unk_token: null, continuing_subword_prefix: "",
             end_of_word_suffix: "", fuse_unk: false, byte_fallback: false, vocab, merges },
  };
}

const tokenizers = [
  { name: "llama3_1", dir: "tokenizer-llama3_1-lenml" },
  { name: "llama2", dir: "tokenizer-llama2-ortx" },
  { name: "mistral_v0_1", dir: "tokenizer-mistral-v0.1-lenml" },
  { name: "qwen3", dir: "tokenizer-qwen3-lenml" },
  { name: "gemma3", dir: "tokenizer-gemma3-lenml" },
  { name: "phi3", dir: "tokenizer-phi3-mini-ortx" },
  { name: "gpt2", dir: "tokenizer-gpt2-ortx", gpt2: true },
];

for (const t of tokenizers) {
  const dir = path.join(tokDir, t.dir);
  let json, config = {};
  if (t.gpt2) {
    json = gpt2TokenizerJson(dir);
  } else {
    json = readJson(path.join(dir, "tokenizer.json"));
    const cfg = path.join(dir, "tokenizer_config.json");
    if (fs.existsSync(cfg)) config = readJson(cfg);
  }
  const tok = new Tokenizer(json, config);
  const decode = (ids, skip) => ids.length === 0 ? "" :
    tok.decode(ids, { skip_special_tokens: skip, clean_up_tokenization_spaces: false });
  const cases = corpus.map((c) => {
    const ids = tok.encode(c.text, { add_special_tokens: false }).ids;
    const idsSpecial = tok.encode(c.text, { add_special_tokens: true }).ids;
    return {
      name: c.name,
      ids,
      ids_with_special: idsSpecial,
      decoded: decode(ids, false),
      decoded_skip_special: decode(idsSpecial, true),
    };
  });
  const out = {
    generated_by: "tools/goldens/tokenizer/gen.mjs",
    oracle: `@huggingface/tokenizers ${pkgVersion("@huggingface/tokenizers")} ` +
            `(@huggingface/transformers ${pkgVersion("@huggingface/transformers")})`,
    tokenizer: `data/tokenizers/${t.dir}` + (t.gpt2 ? " (vocab.json + merges.txt)" : ""),
    corpus: "src/tokenizer/testdata/corpus.json",
    cases,
  };
  const file = path.join(outDir, `expected_${t.name}.json`);
  fs.writeFileSync(file, JSON.stringify(out, null, 0).replace(/\},\{"name"/g, '},\n{"name"') + "\n");
  console.log(`${file}: ${cases.length} cases`);
}
