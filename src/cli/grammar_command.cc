// `loom grammar (--json-schema FILE | --regex R | --gbnf FILE | --choice a,b) [--tokenizer MODEL]
// [--check DOC ...] [--bench]`: the grammar engine from the command line (llama.cpp has
// gbnf-validator), for users checking their schemas and for our benchmarks. Prints the compile
// time, then one line per DOC: `accept`, or `reject <byte offset>` (the first byte the grammar
// refuses; the document's length when it stops short of a complete one). With --tokenizer each
// DOC is also walked token by token as the engine would generate it (its encoding, masked by
// the grammar), and --bench prints the mask time per token over those walks (p50 / p99 / max).
// Exit status 0 unless the grammar does not compile (then 2 and the error).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>
#include <sstream>
#include <string>
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

struct GrammarFlags {
  std::string json_schema, regex, gbnf, choice;
  std::string tokenizer;
  std::vector<std::string> check;
  bool bench = false;
};

std::string ReadOrFail(const std::string& path) {
  auto text = ReadFileToString(path);
  if (!text.ok()) Fail(std::string(text.status().message()));
  return *std::move(text);
}

GrammarSpec SpecOf(const GrammarFlags& f) {
  const int given = !f.json_schema.empty() + !f.regex.empty() + !f.gbnf.empty() + !f.choice.empty();
  if (given != 1)
    Fail("give exactly one of --json-schema FILE, --regex R, --gbnf FILE, --choice a,b");
  if (!f.json_schema.empty()) return {GrammarKind::kJsonSchema, ReadOrFail(f.json_schema)};
  if (!f.gbnf.empty()) return {GrammarKind::kGbnf, ReadOrFail(f.gbnf)};
  if (!f.regex.empty()) return {GrammarKind::kRegex, AnchorWholeMatch(f.regex)};
  nlohmann::json choices = nlohmann::json::array();
  std::stringstream ss(f.choice);
  for (std::string item; std::getline(ss, item, ',');) choices.push_back(item);
  return {GrammarKind::kChoice, choices.dump()};
}

double Percentile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<size_t>(q * static_cast<double>(v.size())))];
}

void RunGrammar(const GrammarFlags& f) {
  using Clock = std::chrono::steady_clock;
  const GrammarSpec spec = SpecOf(f);
  const auto t0 = Clock::now();
  auto grammar = CompileGrammarSpec(spec);
  const double compile_ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
  if (!grammar.ok()) {
    std::fprintf(stderr, "error: %s\n", std::string(grammar.status().message()).c_str());
    throw CLI::RuntimeError(2);
  }
  std::printf("compiled in %.2f ms\n", compile_ms);

  std::unique_ptr<Tokenizer> tok;
  std::unique_ptr<TokenVocabulary> vocab;
  if (!f.tokenizer.empty()) {
    auto t = LoadTokenizerFor(f.tokenizer);
    if (!t.ok()) Fail(std::string(t.status().message()));
    tok = *std::move(t);
    auto v = TokenVocabulary::FromTokenizer(*tok);
    if (!v.ok()) Fail(std::string(v.status().message()));
    vocab = std::make_unique<TokenVocabulary>(*std::move(v));
  } else if (f.bench) {
    Fail("--bench needs --tokenizer MODEL (the masks are over a vocabulary)");
  }

  std::vector<double> mask_us;
  std::vector<uint32_t> mask(vocab != nullptr ? vocab->mask_words() : 0);
  for (const std::string& path : f.check) {
    const std::string doc = ReadOrFail(path);
    GrammarMatcher m(*grammar);
    size_t offset = 0;
    while (offset < doc.size() && m.AcceptByte(static_cast<uint8_t>(doc[offset]))) ++offset;
    const bool bytes_ok = offset == doc.size() && m.IsAccepting();
    std::string line = bytes_ok ? "accept" : "reject " + std::to_string(offset);
    if (vocab != nullptr) {
      // The engine's view: the document's tokens, each one checked against the mask.
      GrammarState state(*grammar, vocab.get());
      const std::vector<int32_t> ids = tok->Encode(doc, /*add_special_tokens=*/false);
      size_t at = 0, i = 0;
      for (; i < ids.size(); ++i) {
        const auto t = Clock::now();
        state.FillMask(mask.data());
        mask_us.push_back(std::chrono::duration<double, std::micro>(Clock::now() - t).count());
        const bool allowed = (mask[ids[i] / 32] >> (ids[i] % 32)) & 1;
        if (!allowed || !state.AcceptToken(ids[i])) break;
        at += vocab->token_bytes(ids[i]).size();
      }
      if (i == ids.size()) {
        const bool eos_ok = !vocab->eos_ids().empty() && state.AcceptToken(vocab->eos_ids()[0]);
        line += eos_ok ? "; tokens: accept (" + std::to_string(ids.size()) + " tokens + EOS)"
                       : "; tokens: reject " + std::to_string(at) + " (no EOS: incomplete)";
      } else {
        line += "; tokens: reject " + std::to_string(at) + " (token " + std::to_string(i) +
                ", id " + std::to_string(ids[i]) + ")";
      }
    }
    std::printf("%s: %s\n", path.c_str(), line.c_str());
  }
  if (f.bench) {
    std::printf("mask: %zu tokens, p50 %.1f us, p99 %.1f us, max %.1f us\n", mask_us.size(),
                Percentile(mask_us, 0.5), Percentile(mask_us, 0.99), Percentile(mask_us, 1.0));
  }
}

}  // namespace

void AddGrammarCommand(CLI::App& root) {
  auto f = std::make_shared<GrammarFlags>();
  CLI::App* cmd =
      root.add_subcommand("grammar",
                          "compile a JSON Schema / regex / GBNF / choice grammar, check documents "
                          "against it and time its token masks");
  cmd->add_option("--json-schema", f->json_schema, "a JSON Schema file")->check(CLI::ExistingFile);
  cmd->add_option("--regex", f->regex, "a regex the whole document must match");
  cmd->add_option("--gbnf", f->gbnf, "a GBNF grammar file (llama.cpp's syntax)")
      ->check(CLI::ExistingFile);
  cmd->add_option("--choice", f->choice, "comma-separated alternatives");
  cmd->add_option("--tokenizer", f->tokenizer,
                  "a model directory, tokenizer.json or .gguf: also walk each DOC token by token");
  cmd->add_option("--check", f->check, "documents to check (accept / reject <byte offset>)")
      ->check(CLI::ExistingFile);
  cmd->add_flag("--bench", f->bench, "print the mask time per token over the DOCs' walks");
  cmd->callback([f] { RunGrammar(*f); });
}

}  // namespace loom
