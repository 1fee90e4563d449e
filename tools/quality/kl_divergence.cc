// kl_divergence: how far a quantized model's next-token distributions are from a reference's, the
// measure llama.cpp's `llama-perplexity --kl-divergence` reports. On the CPU backend (f32
// activations), the text is tokenized once and cut into windows of --ctx tokens, each run from
// position 0 with every row's logits; per position:
//   KL(ref || model) = sum_v p_ref(v) (log p_ref(v) - log p_model(v)),
// whether the two argmax tokens agree, and each model's negative log-likelihood of the next token
// (perplexity = exp(mean NLL)).
//
//   kl_divergence --tokenizer DIR --text FILE [--ctx 256] [--max-tokens 4096] REF MODEL...
// A MODEL is a path (HF directory or .gguf), optionally with `+fp8` for --quantize fp8 at load
// (REF+fp8 is the reference re-encoded) and/or `+kv=S` for a quantized KV cache (`--kv-quant S`:
// fp8, 8, 4, turbo[:kXvY]; `+kv=K/V` sets keys and values apart, e.g. +kv=8/4 or
// +kv=turbo8/turbo3; +kv=bf16 / +kv=f16 for the
// half-precision caches; REF+kv=fp8 is the reference
// with its cache quantized; every window's own tokens are read back from the cache). One line
// per model: mean and p99 KL, top-1 agreement, perplexity, the weights' dtype and bytes, the KV
// cache's name and bytes per token.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "model/model.h"
#include "runtime/forward_batch.h"
#include "tokenizer/tokenizer.h"

namespace loom {
namespace {

[[noreturn]] void Die(const std::string& what) {
  std::fprintf(stderr, "kl_divergence: %s\n", what.c_str());
  std::exit(2);
}

struct Loaded {
  std::string label;
  std::unique_ptr<Model> model;
  KvFormat kv;
};

KvQuant ParseQuantOrDie(const std::string& s) {
  StatusOr<KvQuant> q = ParseKvQuant(s);
  if (!q.ok()) Die(std::string(q.status().message()));
  return *q;
}

Loaded Load(const std::string& spec, Backend* backend) {
  std::string path = spec;
  WeightOptions options;
  KvFormat kv(DType::kF32);
  for (;;) {  // suffixes, last first
    const size_t plus = path.rfind('+');
    if (plus == std::string::npos || plus == 0) break;
    const std::string suffix = path.substr(plus + 1);
    if (suffix == "fp8") {
      options.quantize = DType::kFP8;
    } else if (suffix == "kv=bf16" || suffix == "kv=f16") {
      kv.dtype = suffix == "kv=bf16" ? DType::kBF16 : DType::kF16;
    } else if (suffix.starts_with("kv=")) {
      const std::string schemes = suffix.substr(3);
      const size_t slash = schemes.find('/');
      if (slash == std::string::npos) {
        StatusOr<KvQuantPair> p = ParseKvQuantPair(schemes);
        if (!p.ok()) Die(std::string(p.status().message()));
        kv.k = p->k;
        kv.v = p->v;
      } else {
        kv.k = ParseQuantOrDie(schemes.substr(0, slash));
        kv.v = ParseQuantOrDie(schemes.substr(slash + 1));
      }
    } else {
      break;
    }
    path.resize(plus);
  }
  StatusOr<std::unique_ptr<Model>> m = LoadModel(path, backend, nullptr, options);
  if (!m.ok()) Die(std::string(m.status().message()));
  const int hd = (*m)->config().head_dim;
  if (!KvQuantFits(kv.k, hd) || !KvQuantFits(kv.v, hd)) {
    Die(spec + ": head_dim " + std::to_string(hd) + " does not suit " + kv.Name());
  }
  return {spec, std::move(*m), kv};
}

// Log-softmax of each row of `logits` ([rows, vocab]) in place, in double.
void LogSoftmax(std::vector<float>* logits, int64_t vocab) {
  const int64_t rows = static_cast<int64_t>(logits->size()) / vocab;
  for (int64_t r = 0; r < rows; ++r) {
    float* row = logits->data() + r * vocab;
    const float mx = *std::max_element(row, row + vocab);
    double sum = 0;
    for (int64_t v = 0; v < vocab; ++v) sum += std::exp(static_cast<double>(row[v] - mx));
    const double lse = mx + std::log(sum);
    for (int64_t v = 0; v < vocab; ++v) row[v] = static_cast<float>(row[v] - lse);
  }
}

// All rows' log-probabilities for one window of tokens, from position 0.
std::vector<float> WindowLogProbs(const Model& model, KvFormat kv_format,
                                  const std::vector<int32_t>& tokens) {
  constexpr int kBlock = 16;
  Backend& backend = *model.backend();
  const int32_t n = static_cast<int32_t>(tokens.size());
  const int num_blocks = (n + kBlock - 1) / kBlock;
  std::vector<int32_t> blocks(static_cast<size_t>(num_blocks));
  for (int i = 0; i < num_blocks; ++i) blocks[static_cast<size_t>(i)] = i;
  std::vector<KvLayer> kv = model.AllocateKv(num_blocks, kBlock, kv_format);
  const SeqSlice seq{tokens, 0, blocks, n};
  HostForwardBatch hb = BuildHostForwardBatch(std::span<const SeqSlice>(&seq, 1), kBlock);
  ForwardInput in = UploadForwardBatch(hb, kBlock, &backend);
  const int64_t vocab = model.config().vocab_size;
  Tensor logits = backend.Alloc(DType::kF32, Shape{n, vocab});
  const Status s = model.Forward(in, kv, logits);
  if (!s.ok()) Die(s.ToString());
  std::vector<float> out(static_cast<size_t>(n * vocab));
  backend.CopyToHost(logits, out.data());
  LogSoftmax(&out, vocab);
  return out;
}

struct Stats {
  std::vector<double> kl;
  int64_t agree = 0, positions = 0;
  double nll = 0;
};

int Main(int argc, char** argv) {
  std::string tokenizer_dir, text_path;
  int ctx = 256;
  int64_t max_tokens = 4096;
  std::vector<std::string> specs;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) Die(a + " needs a value");
      return argv[++i];
    };
    if (a == "--tokenizer") {
      tokenizer_dir = next();
    } else if (a == "--text") {
      text_path = next();
    } else if (a == "--ctx") {
      ctx = std::atoi(next().c_str());
    } else if (a == "--max-tokens") {
      max_tokens = std::atoll(next().c_str());
    } else {
      specs.push_back(a);
    }
  }
  if (tokenizer_dir.empty() || text_path.empty() || specs.size() < 2 || ctx < 2) {
    Die("usage: kl_divergence --tokenizer DIR --text FILE [--ctx N] [--max-tokens N] REF MODEL...");
  }
  StatusOr<std::unique_ptr<Tokenizer>> tok = Tokenizer::FromHfDirectory(tokenizer_dir);
  if (!tok.ok()) Die(std::string(tok.status().message()));
  std::ifstream f(text_path);
  if (!f) Die("cannot read " + text_path);
  std::stringstream ss;
  ss << f.rdbuf();
  std::vector<int32_t> ids = (*tok)->Encode(ss.str(), /*add_special_tokens=*/false);
  if (static_cast<int64_t>(ids.size()) > max_tokens) ids.resize(static_cast<size_t>(max_tokens));
  const size_t windows = ids.size() / static_cast<size_t>(ctx);
  if (windows == 0) Die("the text has fewer tokens than --ctx");

  CpuBackendOptions cpu;
  cpu.num_threads = 2;
  CpuBackend backend(cpu);
  Loaded ref = Load(specs[0], &backend);
  std::vector<Loaded> models;
  for (size_t i = 1; i < specs.size(); ++i) models.push_back(Load(specs[i], &backend));
  const int64_t vocab = ref.model->config().vocab_size;
  for (const Loaded& m : models) {
    if (m.model->config().vocab_size != vocab) Die(m.label + ": another vocabulary than the ref's");
  }
  std::vector<Stats> stats(models.size());
  double ref_nll = 0;
  for (size_t w = 0; w < windows; ++w) {
    const std::vector<int32_t> window(ids.begin() + static_cast<int64_t>(w * ctx),
                                      ids.begin() + static_cast<int64_t>((w + 1) * ctx));
    const std::vector<float> p = WindowLogProbs(*ref.model, ref.kv, window);
    for (int t = 0; t + 1 < ctx; ++t) ref_nll -= p[t * vocab + window[t + 1]];
    for (size_t mi = 0; mi < models.size(); ++mi) {
      const std::vector<float> q = WindowLogProbs(*models[mi].model, models[mi].kv, window);
      Stats& s = stats[mi];
      for (int t = 0; t < ctx; ++t) {
        const float* pr = p.data() + t * vocab;
        const float* qr = q.data() + t * vocab;
        double kl = 0;
        for (int64_t v = 0; v < vocab; ++v) kl += std::exp(double{pr[v]}) * (pr[v] - qr[v]);
        s.kl.push_back(std::max(kl, 0.0));
        s.agree += std::max_element(pr, pr + vocab) - pr == std::max_element(qr, qr + vocab) - qr;
        ++s.positions;
        if (t + 1 < ctx) s.nll -= qr[window[t + 1]];
      }
    }
  }
  const double predicted = static_cast<double>(windows) * (ctx - 1);
  auto bytes = [](const Model& m) { return static_cast<double>(m.weights().total_bytes) / 1e6; };
  std::printf("%zu windows of %d tokens (%zu tokens of %s)\n", windows, ctx, windows * ctx,
              text_path.c_str());
  auto kv_bytes = [](const Loaded& l) { return l.model->KvBytesPerToken(l.kv); };
  std::printf("%-44s %-6s %9s %-14s %9s %10s %10s %8s %9s\n", "model", "dtype", "MB", "kv",
              "KV B/tok", "mean KL", "p99 KL", "top-1 %", "PPL");
  std::printf("%-44s %-6s %9.2f %-14s %9zu %10s %10s %8s %9.3f\n", ref.label.c_str(),
              std::string(DTypeName(ref.model->weights().dtype)).c_str(), bytes(*ref.model),
              ref.kv.Name().c_str(), kv_bytes(ref), "-", "-", "-", std::exp(ref_nll / predicted));
  for (size_t mi = 0; mi < models.size(); ++mi) {
    Stats& s = stats[mi];
    std::vector<double> sorted = s.kl;
    std::sort(sorted.begin(), sorted.end());
    double mean = 0;
    for (double k : s.kl) mean += k;
    mean /= static_cast<double>(s.kl.size());
    const double p99 = sorted[std::min(sorted.size() - 1, sorted.size() * 99 / 100)];
    std::printf("%-44s %-6s %9.2f %-14s %9zu %10.6f %10.6f %8.2f %9.3f\n", models[mi].label.c_str(),
                std::string(DTypeName(models[mi].model->weights().dtype)).c_str(),
                bytes(*models[mi].model), models[mi].kv.Name().c_str(), kv_bytes(models[mi]), mean,
                p99, 100.0 * static_cast<double>(s.agree) / static_cast<double>(s.positions),
                std::exp(s.nll / predicted));
  }
  return 0;
}

}  // namespace
}  // namespace loom

int main(int argc, char** argv) { return loom::Main(argc, argv); }
