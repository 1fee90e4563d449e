// `loom grammar (--json-schema FILE... | --regex R | --gbnf FILE | --choice a,b) [--tokenizer
// MODEL]
// [--check DOC ...] [--sample N [--seed S] [--max-tokens M]] [--bench] [--bench-json OUT]`: the
// grammar engine from the command line (llama.cpp has gbnf-validator), for users checking their
// schemas and for our benchmarks. Prints the compile time, then one line per DOC: `accept`, or
// `reject <byte offset>` (the first byte the grammar refuses; the document's length when it stops
// short of a complete one). With --tokenizer each DOC is also walked token by token as the engine
// would generate it (its encoding, masked by the grammar). --sample N generates N documents as the
// engine would with random logits (a uniform choice among the tokens each mask allows; EOS, when
// allowed, with probability 1/2), each printed as a JSON line {"doc": TEXT, "complete": BOOL}
// (complete: it ended with EOS, i.e. the grammar accepted it; else it ran into --max-tokens).
// --bench prints the mask time per token over those walks and samples (p50 / p99 / max);
// --bench-json OUT writes every compile and mask time (for percentiles across a corpus).
// Several --json-schema files (a corpus) run in one process: each one's lines start with
// "FILE: " (its samples' JSON lines follow its "FILE: compiled in" line), one that does not compile
// prints "FILE: error: MESSAGE" and the others still run.
// Exit status 0 unless a grammar does not compile (then 2 and the error).
#include <algorithm>
#include <bit>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "base/mapped_file.h"
#include "cli/commands.h"
#include "cli/model_tokenizer.h"
#include "grammar/grammar_cache.h"
#include "grammar/grammar_state.h"
#include "grammar/matcher.h"
#include "grammar/regex_grammar.h"
#include "grammar/token_mask.h"
#include "tokenizer/tokenizer.h"

namespace loom {
namespace {

using Clock = std::chrono::steady_clock;

struct GrammarFlags {
  std::vector<std::string> json_schema;
  std::string regex, gbnf, choice;
  std::string tokenizer;
  std::vector<std::string> check;
  int num_samples = 0;
  uint64_t seed = 0;
  int max_tokens = 256;
  bool bench = false;
  std::string bench_json;
};

std::string ReadOrFail(const std::string& path) {
  auto text = ReadFileToString(path);
  if (!text.ok()) Fail(std::string(text.status().message()));
  return *std::move(text);
}

// The grammars to run, each with its name (the schema file; "" for a single grammar).
std::vector<std::pair<std::string, GrammarSpec>> SpecsOf(const GrammarFlags& f) {
  const int given = !f.json_schema.empty() + !f.regex.empty() + !f.gbnf.empty() + !f.choice.empty();
  if (given != 1)
    Fail("give exactly one of --json-schema FILE..., --regex R, --gbnf FILE, --choice a,b");
  if (f.json_schema.size() == 1) {
    return {{"", {GrammarKind::kJsonSchema, ReadOrFail(f.json_schema[0])}}};
  }
  std::vector<std::pair<std::string, GrammarSpec>> specs;
  for (const std::string& path : f.json_schema) {
    specs.push_back({path, {GrammarKind::kJsonSchema, ReadOrFail(path)}});
  }
  if (!specs.empty()) return specs;
  if (!f.gbnf.empty()) return {{"", {GrammarKind::kGbnf, ReadOrFail(f.gbnf)}}};
  if (!f.regex.empty()) return {{"", {GrammarKind::kRegex, AnchorWholeMatch(f.regex)}}};
  nlohmann::json choices = nlohmann::json::array();
  std::stringstream ss(f.choice);
  for (std::string item; std::getline(ss, item, ',');) choices.push_back(item);
  return {{"", {GrammarKind::kChoice, choices.dump()}}};
}

double Percentile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<size_t>(q * static_cast<double>(v.size())))];
}

// state.FillMask into `mask`, its time appended to `mask_us`.
void TimedFillMask(const GrammarState& state, std::vector<uint32_t>* mask,
                   std::vector<double>* mask_us) {
  const auto t = Clock::now();
  state.FillMask(mask->data());
  mask_us->push_back(std::chrono::duration<double, std::micro>(Clock::now() - t).count());
}

bool MaskHas(const std::vector<uint32_t>& mask, TokenId id) {
  return (mask[id / 32] >> (id % 32)) & 1;
}

// `accept`, or `reject <offset of the first byte the grammar refuses>` (the document's length when
// it stops short of a complete one).
std::string CheckBytes(std::shared_ptr<const CompiledGrammar> grammar, const std::string& doc) {
  GrammarMatcher m(std::move(grammar));
  size_t offset = 0;
  while (offset < doc.size() && m.AcceptByte(static_cast<uint8_t>(doc[offset]))) ++offset;
  return offset == doc.size() && m.IsAccepting() ? "accept" : "reject " + std::to_string(offset);
}

// The engine's view of `doc`: its tokens, each one checked against the mask. The line's suffix.
std::string WalkTokens(std::shared_ptr<const CompiledGrammar> grammar, const Tokenizer& tok,
                       const TokenVocabulary& vocab, const std::string& doc,
                       std::vector<uint32_t>* mask, std::vector<double>* mask_us) {
  GrammarState state(std::move(grammar), &vocab);
  const std::vector<int32_t> ids = tok.Encode(doc, /*add_special_tokens=*/false);
  size_t at = 0, i = 0;
  for (; i < ids.size(); ++i) {
    TimedFillMask(state, mask, mask_us);
    if (!MaskHas(*mask, ids[i]) || !state.AcceptToken(ids[i])) break;
    at += vocab.token_bytes(ids[i]).size();
  }
  if (i < ids.size()) {
    return "; tokens: reject " + std::to_string(at) + " (token " + std::to_string(i) + ", id " +
           std::to_string(ids[i]) + ")";
  }
  const bool eos_ok = !vocab.eos_ids().empty() && state.AcceptToken(vocab.eos_ids()[0]);
  return eos_ok ? "; tokens: accept (" + std::to_string(ids.size()) + " tokens + EOS)"
                : "; tokens: reject " + std::to_string(at) + " (no EOS: incomplete)";
}

// The `k`-th set bit (from 0) of `mask`. Precondition: k < the number of set bits.
TokenId NthAllowed(const std::vector<uint32_t>& mask, uint64_t k) {
  for (size_t w = 0;; ++w) {
    const auto n = static_cast<uint64_t>(std::popcount(mask[w]));
    if (k >= n) {
      k -= n;
      continue;
    }
    uint32_t bits = mask[w];
    for (; k > 0; --k) bits &= bits - 1;  // drop the lowest set bit
    return static_cast<TokenId>(w * 32 + std::countr_zero(bits));
  }
}

// One document generated under the grammar as the engine would with random logits: each step
// a uniform choice among the non-EOS tokens the mask allows, or EOS (when allowed) with
// probability 1/2 (always when it is the only choice, or after `max_tokens` tokens: the most a
// document has before its EOS). One step in four chooses among the allowed tokens that contain a
// `"` (when there are any): a model closes its strings, and a uniform choice over 150k tokens of
// which a few dozen close one writes strings of thousands of tokens, so few documents would end.
struct Sample {
  std::string doc;
  bool complete = false;  // ended with EOS
};
class Sampler {
 public:
  explicit Sampler(const TokenVocabulary& vocab)
      : vocab_(vocab),
        quote_tokens_(vocab.mask_words()),
        mask_(vocab.mask_words()),
        scratch_(vocab.mask_words()) {
    for (TokenId id = 0; id < vocab.size(); ++id) {
      if (vocab.token_bytes(id).find('"') != std::string::npos) {
        quote_tokens_[id / 32] |= uint32_t{1} << (id % 32);
      }
    }
  }

  // One document; each mask's time is appended to `mask_us`.
  Sample Run(std::shared_ptr<const CompiledGrammar> grammar, int max_tokens, std::mt19937_64* rng,
             std::vector<double>* mask_us) {
    GrammarState state(std::move(grammar), &vocab_);
    Sample out;
    for (int step = 0; step <= max_tokens; ++step) {
      TimedFillMask(state, &mask_, mask_us);
      bool eos_allowed = false;
      for (TokenId eos : vocab_.eos_ids()) {
        eos_allowed |= MaskHas(mask_, eos);
        mask_[eos / 32] &= ~(uint32_t{1} << (eos % 32));
      }
      uint64_t num_allowed = Count(mask_);
      if (eos_allowed && (num_allowed == 0 || step == max_tokens || (*rng)() % 2 == 0)) {
        out.complete = state.AcceptToken(vocab_.eos_ids()[0]);
        CHECK(out.complete) << "the mask allowed EOS but AcceptToken refused it";
        break;
      }
      if (num_allowed == 0 || step == max_tokens) break;  // a dead end, or out of tokens
      const std::vector<uint32_t>* from = &mask_;
      if ((*rng)() % 4 == 0) {
        for (size_t w = 0; w < mask_.size(); ++w) scratch_[w] = mask_[w] & quote_tokens_[w];
        if (const uint64_t n = Count(scratch_); n > 0) {
          from = &scratch_;
          num_allowed = n;
        }
      }
      const TokenId id =
          NthAllowed(*from, std::uniform_int_distribution<uint64_t>(0, num_allowed - 1)(*rng));
      const bool accepted = state.AcceptToken(id);
      CHECK(accepted) << "the mask allowed token " << id << " but AcceptToken refused it";
      out.doc += vocab_.token_bytes(id);
    }
    return out;
  }

 private:
  static uint64_t Count(const std::vector<uint32_t>& bits) {
    uint64_t n = 0;
    for (uint32_t word : bits) n += static_cast<uint64_t>(std::popcount(word));
    return n;
  }

  const TokenVocabulary& vocab_;
  std::vector<uint32_t> quote_tokens_;    // [mask_words()]: the tokens whose bytes contain a `"`
  std::vector<uint32_t> mask_, scratch_;  // [mask_words()]
};

// {"doc": TEXT, "complete": BOOL}; a complete document that is not valid UTF-8 (a grammar bug)
// is printed with U+FFFD replacements and "invalid_utf8": true.
std::string SampleLine(const Sample& s) {
  nlohmann::ordered_json line = {{"doc", s.doc}, {"complete", s.complete}};
  try {
    return line.dump();
  } catch (const nlohmann::json::type_error&) {
    if (s.complete) line["invalid_utf8"] = true;
    return line.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  }
}

void RunGrammar(const GrammarFlags& f) {
  const auto specs = SpecsOf(f);
  std::unique_ptr<Tokenizer> tok;
  std::unique_ptr<TokenVocabulary> vocab;
  if (!f.tokenizer.empty()) {
    auto t = LoadTokenizerFor(f.tokenizer);
    if (!t.ok()) Fail(std::string(t.status().message()));
    tok = *std::move(t);
    auto v = TokenVocabulary::FromTokenizer(*tok);
    if (!v.ok()) Fail(std::string(v.status().message()));
    vocab = std::make_unique<TokenVocabulary>(*std::move(v));
  } else if (f.bench || !f.bench_json.empty() || f.num_samples > 0) {
    Fail("--bench, --bench-json and --sample need --tokenizer MODEL (masks are over a vocabulary)");
  }

  nlohmann::ordered_json report = nlohmann::ordered_json::array();  // --bench-json
  std::vector<uint32_t> mask(vocab != nullptr ? vocab->mask_words() : 0);
  std::unique_ptr<Sampler> sampler;
  if (f.num_samples > 0) sampler = std::make_unique<Sampler>(*vocab);
  size_t num_failed = 0;
  for (const auto& [name, spec] : specs) {
    const std::string prefix = name.empty() ? "" : name + ": ";
    const auto t0 = Clock::now();
    auto grammar = CompileGrammarSpec(spec);
    const double compile_ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
    nlohmann::ordered_json entry = {{"name", name}, {"compile_ms", compile_ms}};
    if (!grammar.ok()) {
      const std::string message(grammar.status().message());
      if (name.empty()) {
        std::fprintf(stderr, "error: %s\n", message.c_str());
        throw CLI::RuntimeError(2);
      }
      std::printf("%serror: %s\n", prefix.c_str(), message.c_str());
      entry["error"] = message;
      report.push_back(std::move(entry));
      ++num_failed;
      continue;
    }
    std::printf("%scompiled in %.2f ms\n", prefix.c_str(), compile_ms);

    std::vector<double> mask_us;
    for (const std::string& path : f.check) {
      const std::string doc = ReadOrFail(path);
      std::string line = CheckBytes(*grammar, doc);
      if (vocab != nullptr) line += WalkTokens(*grammar, *tok, *vocab, doc, &mask, &mask_us);
      std::printf("%s%s: %s\n", prefix.c_str(), path.c_str(), line.c_str());
    }
    std::mt19937_64 rng(f.seed);  // per grammar: its samples do not depend on the others
    for (int i = 0; i < f.num_samples; ++i) {
      const Sample s = sampler->Run(*grammar, f.max_tokens, &rng, &mask_us);
      std::printf("%s\n", SampleLine(s).c_str());
    }
    if (f.bench) {
      std::printf("%smask: %zu tokens, p50 %.1f us, p99 %.1f us, max %.1f us\n", prefix.c_str(),
                  mask_us.size(), Percentile(mask_us, 0.5), Percentile(mask_us, 0.99),
                  Percentile(mask_us, 1.0));
    }
    entry["mask_us"] = mask_us;
    report.push_back(std::move(entry));
  }
  if (!f.bench_json.empty()) {
    std::ofstream out(f.bench_json);
    out << nlohmann::ordered_json{{"tokenizer", f.tokenizer}, {"grammars", report}}.dump() << "\n";
    if (!out) Fail("cannot write " + f.bench_json);
  }
  if (num_failed > 0) {
    std::fprintf(stderr, "error: %zu of %zu grammars did not compile\n", num_failed, specs.size());
    throw CLI::RuntimeError(2);
  }
}

}  // namespace

void AddGrammarCommand(CLI::App& root) {
  auto f = std::make_shared<GrammarFlags>();
  CLI::App* cmd =
      root.add_subcommand("grammar",
                          "compile a JSON Schema / regex / GBNF / choice grammar, check documents "
                          "against it, sample documents under it and time its token masks");
  cmd->add_option("--json-schema", f->json_schema,
                  "JSON Schema files (several: each one's output lines start with its name)")
      ->check(CLI::ExistingFile);
  cmd->add_option("--regex", f->regex, "a regex the whole document must match");
  cmd->add_option("--gbnf", f->gbnf, "a GBNF grammar file (llama.cpp's syntax)")
      ->check(CLI::ExistingFile);
  cmd->add_option("--choice", f->choice, "comma-separated alternatives");
  cmd->add_option("--tokenizer", f->tokenizer,
                  "a model directory, tokenizer.json or .gguf: also walk each DOC token by token");
  cmd->add_option("--check", f->check, "documents to check (accept / reject <byte offset>)")
      ->check(CLI::ExistingFile);
  cmd->add_option("--sample", f->num_samples,
                  "generate N documents with random logits (needs --tokenizer): one JSON line "
                  "{\"doc\", \"complete\"} each")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--seed", f->seed, "random seed of --sample");
  cmd->add_option("--max-tokens", f->max_tokens, "most tokens of a --sample document")
      ->check(CLI::PositiveNumber);
  cmd->add_flag("--bench", f->bench,
                "print the mask time per token over the DOCs' walks and the samples");
  cmd->add_option("--bench-json", f->bench_json,
                  "write every grammar's compile time and mask times (us) to this JSON file");
  cmd->callback([f] { RunGrammar(*f); });
}

}  // namespace loom
