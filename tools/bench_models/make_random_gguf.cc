// make_random_gguf: writes a Llama-architecture GGUF with seeded random weights, for speed
// comparisons (loom vs llama.cpp on the same file). Tensor names and metadata keys are
// llama.cpp's, and the tokenizer.ggml.* metadata (vocabulary) is copied from a donor GGUF so that
// llama.cpp can load the result.
//
//   make_random_gguf --donor llama-2-tiny-random.gguf --dtype q8_0 --out model.gguf
//
// Weights (every 2-D tensor) are N(0, 0.02^2) quantized with QuantizeRow into --dtype; norms are
// f32 N(1, 0.02^2). Defaults give Llama-2 style shapes of about 134M parameters
// (hidden 768, 12 layers, 12 heads, ffn 2048, vocab 32000, untied output).
#include <CLI/CLI.hpp>
#include <cstdint>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "base/status.h"
#include "io/gguf.h"
#include "io/gguf_writer.h"
#include "tensor/quant.h"

namespace loom {
namespace {

struct Options {
  std::string out;
  std::string donor;
  std::string dtype = "f16";
  int hidden = 768;
  int layers = 12;
  int heads = 12;
  int kv_heads = 12;
  int ffn = 2048;
  int vocab = 32000;
  int context = 2048;
  bool tied = false;
  uint64_t seed = 1;
};

StatusOr<DType> ParseDType(const std::string& s) {
  if (s == "f32") return DType::kF32;
  if (s == "f16") return DType::kF16;
  if (s == "bf16") return DType::kBF16;
  if (s == "q8_0") return DType::kQ8_0;
  if (s == "q4_0") return DType::kQ4_0;
  if (s == "q4_K") return DType::kQ4_K;
  if (s == "q5_K") return DType::kQ5_K;
  if (s == "q6_K") return DType::kQ6_K;
  return InvalidArgumentError("--dtype '" + s +
                              "' is not one of f32, f16, bf16, q8_0, q4_0, q4_K, q5_K, q6_K");
}

// llama.cpp's `enum llama_ftype` for a model whose weights are all `dtype`.
uint32_t FileType(DType dtype) {
  switch (dtype) {
    case DType::kF32:
      return 0;  // LLAMA_FTYPE_ALL_F32
    case DType::kF16:
      return 1;  // LLAMA_FTYPE_MOSTLY_F16
    case DType::kQ4_0:
      return 2;  // LLAMA_FTYPE_MOSTLY_Q4_0
    case DType::kQ8_0:
      return 7;  // LLAMA_FTYPE_MOSTLY_Q8_0
    case DType::kQ4_K:
      return 15;  // LLAMA_FTYPE_MOSTLY_Q4_K_M
    case DType::kQ5_K:
      return 17;  // LLAMA_FTYPE_MOSTLY_Q5_K_M
    case DType::kQ6_K:
      return 18;  // LLAMA_FTYPE_MOSTLY_Q6_K
    case DType::kBF16:
      return 32;  // LLAMA_FTYPE_MOSTLY_BF16
    default:
      CHECK(false) << "no file type for " << DTypeName(dtype);
  }
  return 0;
}

// A per-tensor seed so that every tensor's values depend only on (--seed, its name).
uint64_t TensorSeed(uint64_t seed, const std::string& name) {
  uint64_t h = 1469598103934665603ull ^ seed;  // FNV-1a
  for (unsigned char c : name) h = (h ^ c) * 1099511628211ull;
  return h;
}

class Builder {
 public:
  Builder(const Options& o, DType dtype) : o_(o), dtype_(dtype) {}

  // A [rows, cols] weight of N(0, 0.02^2) values in the model dtype.
  void Matrix(const std::string& name, int64_t rows, int64_t cols) {
    std::mt19937_64 rng(TensorSeed(o_.seed, name));
    std::normal_distribution<float> dist(0.f, 0.02f);
    const size_t row_bytes = RowBytes(dtype_, cols);
    std::string bytes(static_cast<size_t>(rows) * row_bytes, '\0');
    std::vector<float> row(static_cast<size_t>(cols));
    for (int64_t r = 0; r < rows; ++r) {
      for (float& x : row) x = dist(rng);
      QuantizeRow(dtype_, row.data(), bytes.data() + static_cast<size_t>(r) * row_bytes, cols);
    }
    w_.AddTensor(name, dtype_, Shape{rows, cols}, bytes);
    params_ += rows * cols;
  }

  // An f32 norm weight of N(1, 0.02^2) values.
  void Norm(const std::string& name, int64_t n) {
    std::mt19937_64 rng(TensorSeed(o_.seed, name));
    std::normal_distribution<float> dist(1.f, 0.02f);
    std::vector<float> v(static_cast<size_t>(n));
    for (float& x : v) x = dist(rng);
    w_.AddTensor(name, DType::kF32, Shape{n},
                 std::string_view(reinterpret_cast<const char*>(v.data()), v.size() * 4));
    params_ += n;
  }

  GgufWriter& writer() { return w_; }
  int64_t params() const { return params_; }

 private:
  const Options& o_;
  DType dtype_;
  GgufWriter w_;
  int64_t params_ = 0;
};

Status Run(const Options& o) {
  ASSIGN_OR_RETURN(DType dtype, ParseDType(o.dtype));
  if (o.hidden % o.heads != 0) {
    return InvalidArgumentError("--hidden must be a multiple of --heads");
  }
  if (o.heads % o.kv_heads != 0) {
    return InvalidArgumentError("--heads must be a multiple of --kv-heads");
  }
  const int block = GetDTypeInfo(dtype).block_elems;
  if (o.hidden % block != 0 || o.ffn % block != 0) {
    return InvalidArgumentError("--hidden and --ffn must be multiples of " + std::to_string(block) +
                                " (the " + o.dtype + " block size)");
  }
  ASSIGN_OR_RETURN(auto donor, GgufFile::Open(o.donor));
  const int head_dim = o.hidden / o.heads;
  const int kv_dim = o.kv_heads * head_dim;

  Builder b(o, dtype);
  GgufWriter& w = b.writer();
  w.SetString("general.architecture", "llama");
  w.SetString("general.name", "loom random llama " + o.dtype);
  w.SetU32("general.file_type", FileType(dtype));
  w.SetU32("llama.context_length", static_cast<uint32_t>(o.context));
  w.SetU32("llama.embedding_length", static_cast<uint32_t>(o.hidden));
  w.SetU32("llama.block_count", static_cast<uint32_t>(o.layers));
  w.SetU32("llama.feed_forward_length", static_cast<uint32_t>(o.ffn));
  w.SetU32("llama.rope.dimension_count", static_cast<uint32_t>(head_dim));
  w.SetU32("llama.attention.head_count", static_cast<uint32_t>(o.heads));
  w.SetU32("llama.attention.head_count_kv", static_cast<uint32_t>(o.kv_heads));
  w.SetF32("llama.attention.layer_norm_rms_epsilon", 1e-5f);
  w.SetF32("llama.rope.freq_base", 10000.f);
  int copied = 0;
  for (const std::string& key : donor->metadata_keys()) {
    if (key.rfind("tokenizer.ggml.", 0) != 0) continue;
    w.Set(key, *donor->Find(key));
    ++copied;
  }
  if (copied == 0) {
    return InvalidArgumentError(o.donor + ": no tokenizer.ggml.* metadata to copy");
  }
  ASSIGN_OR_RETURN(auto tokens, donor->GetStringArray("tokenizer.ggml.tokens"));
  if (static_cast<int>(tokens.size()) != o.vocab) {
    return InvalidArgumentError(o.donor + ": tokenizer.ggml.tokens has " +
                                std::to_string(tokens.size()) + " entries but --vocab is " +
                                std::to_string(o.vocab));
  }

  // Tensor order as llama.cpp's converter writes it.
  b.Matrix("token_embd.weight", o.vocab, o.hidden);
  for (int i = 0; i < o.layers; ++i) {
    const std::string p = "blk." + std::to_string(i) + ".";
    b.Matrix(p + "attn_q.weight", o.hidden, o.hidden);
    b.Matrix(p + "attn_k.weight", kv_dim, o.hidden);
    b.Matrix(p + "attn_v.weight", kv_dim, o.hidden);
    b.Matrix(p + "attn_output.weight", o.hidden, o.hidden);
    b.Matrix(p + "ffn_gate.weight", o.ffn, o.hidden);
    b.Matrix(p + "ffn_up.weight", o.ffn, o.hidden);
    b.Matrix(p + "ffn_down.weight", o.hidden, o.ffn);
    b.Norm(p + "attn_norm.weight", o.hidden);
    b.Norm(p + "ffn_norm.weight", o.hidden);
  }
  b.Norm("output_norm.weight", o.hidden);
  if (!o.tied) b.Matrix("output.weight", o.vocab, o.hidden);

  RETURN_IF_ERROR(w.WriteFile(o.out));
  std::printf("%s: llama, %s, %.1fM params, %d tokenizer keys from %s\n", o.out.c_str(),
              o.dtype.c_str(), static_cast<double>(b.params()) / 1e6, copied, o.donor.c_str());
  return OkStatus();
}

}  // namespace
}  // namespace loom

int main(int argc, char** argv) {
  loom::Options o;
  CLI::App app("Write a random-weight Llama GGUF (llama.cpp names and metadata)");
  app.add_option("--out", o.out, "output GGUF path")->required();
  app.add_option("--donor", o.donor, "GGUF whose tokenizer.ggml.* metadata is copied")->required();
  app.add_option("--dtype", o.dtype, "weight dtype: f32 f16 bf16 q8_0 q4_0 q4_K q5_K q6_K");
  app.add_option("--hidden", o.hidden)->check(CLI::Range(1, 1 << 16));
  app.add_option("--layers", o.layers)->check(CLI::Range(1, 1024));
  app.add_option("--heads", o.heads)->check(CLI::Range(1, 1024));
  app.add_option("--kv-heads", o.kv_heads)->check(CLI::Range(1, 1024));
  app.add_option("--ffn", o.ffn)->check(CLI::Range(1, 1 << 18));
  app.add_option("--vocab", o.vocab, "must equal the donor's vocabulary size")
      ->check(CLI::Range(1, 1 << 22));
  app.add_option("--context", o.context)->check(CLI::Range(1, 1 << 22));
  app.add_flag("--tied", o.tied, "omit output.weight (tied embeddings)");
  app.add_option("--seed", o.seed);
  CLI11_PARSE(app, argc, argv);
  loom::Status s = loom::Run(o);
  if (!s.ok()) {
    std::fprintf(stderr, "make_random_gguf: %s\n", std::string(s.message()).c_str());
    return 1;
  }
  return 0;
}
