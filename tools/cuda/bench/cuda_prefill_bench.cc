// cuda_prefill_bench: the prefill side of the H200 issue bar (a 4k-token prompt at >= 65 % of the
// bf16 GEMM rate cuBLAS reaches, attention FLOPs counted).
//
//   cuda_prefill_bench [all|model] [KEY=VALUE ...]   (default all; "model" runs only part c)
//
// The backend's tuning: the defaults, then the KEY=VALUE arguments (backend/cuda_tuning.h, as
// `loom --cuda-tune`).
//
// (a) cuBLASLt bf16 GEMM TFLOP/s (the project's CublasLtGemm) at 4096^3 and at the Llama-3.1-8B
//     prefill shapes (n = 4096 tokens x fused qkv 6144x4096, o 4096x4096, fused gate/up
//     28672x4096, down 4096x14336).
// (b) The paged-attention kernel alone on one 4096-token prompt with 8B heads (32 q / 8 kv heads
//     of 128, block 16): tensor-core prefill kernel (4- and 8-warp tiles) vs the CUDA-core kernel,
//     and their output difference; plus a few other shapes for the new kernel. Causal FLOPs =
//     4 * H * D * sum over rows of the keys each row sees.
// (c) A whole-model 4096-token prefill of a random-weight Llama-3.1-8B (Model::Forward, logits of
//     the last token), in TFLOP/s with the linear layers and attention counted, and as a fraction
//     of (a)'s 4096^3 rate. attn_prefill=0 runs it on the old attention kernel.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "backend/cuda/cublaslt_gemm.h"
#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/cuda_stream.h"
#include "backend/cuda/flash_prefill.cuh"
#include "backend/cuda/paged_attention.cuh"
#include "bench_model.h"
#include "runtime/forward_batch.h"

namespace loom {
namespace {

constexpr int kPrompt = 4096;

// Milliseconds per call of `fn` (events around `reps` calls after `warmup`).
template <typename Fn>
double TimeMs(CudaBackend& be, int warmup, int reps, Fn fn) {
  for (int i = 0; i < warmup; ++i) fn();
  cuda::CudaEvent start, stop;
  start.Record(be.stream());
  for (int i = 0; i < reps; ++i) fn();
  stop.Record(be.stream());
  stop.Synchronize();
  return stop.MillisSince(start) / reps;
}

// ---- (a) ----

struct GemmShape {
  const char* name;
  int64_t n, m, k;
};

constexpr GemmShape kGemms[] = {
    {"square 4096^3", 4096, 4096, 4096},
    {"qkv  n4096 x 6144x4096", kPrompt, 6144, 4096},
    {"o    n4096 x 4096x4096", kPrompt, 4096, 4096},
    {"gate/up n4096 x 28672x4096", kPrompt, 28672, 4096},
    {"down n4096 x 4096x14336", kPrompt, 4096, 14336},
};

// Returns ms per GEMM for each of kGemms.
std::vector<double> GemmBench(CudaBackend& be) {
  std::printf("(a) cuBLASLt bf16 GEMM, out[n, m] = x[n, k] w[m, k]^T, bf16 out:\n");
  cuda::CublasLtGemm gemm(be.allocator(), be.stream(), be.tuning().cublaslt_tune);
  std::vector<double> ms;
  for (const GemmShape& s : kGemms) {
    Tensor x = be.Alloc(DType::kBF16, Shape{s.n, s.k});
    Tensor w = be.Alloc(DType::kBF16, Shape{s.m, s.k});
    Tensor out = be.Alloc(DType::kBF16, Shape{s.n, s.m});
    be.FillUniform(x, 1, -1.f, 2.f);
    be.FillUniform(w, 2, -0.02f, 0.04f);
    const double t = TimeMs(
        be, 3, 20, [&] { gemm.Run(x.data(), w.data(), out.data(), DType::kBF16, s.n, s.m, s.k); });
    ms.push_back(t);
    std::printf("  %-28s %8.3f ms %7.1f TFLOP/s\n", s.name, t,
                2.0 * s.n * s.m * s.k / (t * 1e-3) / 1e12);
  }
  return ms;
}

// ---- (b) ----

struct AttnCase {
  const char* name;
  int heads, kv_heads, head_dim;
  std::vector<std::pair<int, int>> seqs;  // (cached prefix, new tokens)
  int window = 0;
};

// Device buffers of one attention step: q, pools, page tables (sequential pages), out.
struct AttnStep {
  cuda::PagedAttentionArgs args;
  Tensor q, k, v, out, query_start, kv_len, page_indptr, page_indices;
  double flops = 0;  // 4 * H * D * sum of keys seen per row
};

AttnStep MakeStep(CudaBackend& be, const AttnCase& c) {
  constexpr int kBs = 16;
  std::vector<int32_t> qs{0}, kvl, indptr{0}, pages;
  double keys = 0;
  int max_q = 0, max_kv = 0;
  for (auto [prefix, n] : c.seqs) {
    const int kv = prefix + n;
    for (int p = 0; p < (kv + kBs - 1) / kBs; ++p)
      pages.push_back(static_cast<int32_t>(pages.size()));
    qs.push_back(qs.back() + n);
    kvl.push_back(kv);
    indptr.push_back(static_cast<int32_t>(pages.size()));
    for (int j = 0; j < n; ++j) {
      const int pos = prefix + j;
      keys += c.window > 0 ? std::min(pos + 1, c.window) : pos + 1;
    }
    max_q = std::max(max_q, n);
    max_kv = std::max(max_kv, kv);
  }
  auto upload = [&](const std::vector<int32_t>& v) {
    Tensor t = HostTensor(DType::kI32, Shape{static_cast<int64_t>(v.size())});
    std::memcpy(t.data(), v.data(), v.size() * 4);
    return be.Upload(t);
  };
  AttnStep s;
  const int64_t tokens = qs.back(), blocks = static_cast<int64_t>(pages.size());
  s.q = be.Alloc(DType::kBF16, Shape{tokens, int64_t{c.heads} * c.head_dim});
  s.out = be.Alloc(DType::kBF16, Shape{tokens, int64_t{c.heads} * c.head_dim});
  s.k = be.Alloc(DType::kBF16, Shape{blocks, kBs, c.kv_heads, c.head_dim});
  s.v = be.Alloc(DType::kBF16, Shape{blocks, kBs, c.kv_heads, c.head_dim});
  be.FillUniform(s.q, 11, -1.f, 2.f);
  be.FillUniform(s.k, 12, -1.f, 2.f);
  be.FillUniform(s.v, 13, -1.f, 2.f);
  s.query_start = upload(qs);
  s.kv_len = upload(kvl);
  s.page_indptr = upload(indptr);
  s.page_indices = upload(pages);
  cuda::PagedAttentionArgs& a = s.args;
  a.q = s.q.data();
  a.k_pool = s.k.data();
  a.v_pool = s.v.data();
  a.query_start = s.query_start.data_as<const int32_t>();
  a.kv_len = s.kv_len.data_as<const int32_t>();
  a.page_indptr = s.page_indptr.data_as<const int32_t>();
  a.page_indices = s.page_indices.data_as<const int32_t>();
  a.num_seqs = static_cast<int>(c.seqs.size());
  a.num_tokens = static_cast<int>(tokens);
  a.max_query_len = max_q;
  a.max_kv_len = max_kv;
  a.num_heads = c.heads;
  a.num_kv_heads = c.kv_heads;
  a.head_dim = c.head_dim;
  a.block_size = kBs;
  a.sliding_window = c.window;
  a.scale = 1.f / std::sqrt(static_cast<float>(c.head_dim));
  a.out = s.out.data();
  s.flops = 4.0 * c.heads * c.head_dim * keys;
  return s;
}

// tile.warps == 0: the CUDA-core kernel; else the tensor-core kernel with that block shape.
double TimeAttention(CudaBackend& be, AttnStep& s, cuda::FlashPrefillTile tile, int reps) {
  CudaTuning tuning = be.tuning();
  tuning.attn_prefill = tile.warps > 0;
  cuda::PagedAttentionPlan plan = cuda::PlanPagedAttention(s.args, be.num_sms(), tuning);
  if (tile.warps > 0) {
    CHECK(plan.flash) << "flash path not taken";
    plan.flash_tile = tile;
    plan.q_per_tile = cuda::FlashPrefillTokensPerTile(s.args.num_heads / s.args.num_kv_heads, tile);
    plan.grid_tiles = s.args.num_tokens / plan.q_per_tile + s.args.num_seqs;
  }
  Tensor tile_start = be.Alloc(DType::kI32, Shape{plan.tile_start_ints});
  Tensor partial = be.Alloc(DType::kF32, Shape{std::max<int64_t>(plan.partial_floats, 1)});
  Tensor lse = be.Alloc(DType::kF32, Shape{std::max<int64_t>(plan.lse_floats, 1)});
  // Once, as a step does (the model's layers share it).
  cuda::LaunchTileStarts(s.args, plan, tile_start.data_as<int32_t>(), be.stream(),
                         be.tuning().cuda_pdl);
  return TimeMs(be, 1, reps, [&] {
    cuda::LaunchPagedAttention(s.args, plan, tile_start.data_as<int32_t>(),
                               partial.data_as<float>(), lse.data_as<float>(), be.stream(),
                               be.tuning().cuda_pdl);
  });
}

// Block shapes to compare (warps x 16-row tiles a warp); head_dim 256 has only the x1 ones.
std::vector<cuda::FlashPrefillTile> TilesFor(int head_dim) {
  std::vector<cuda::FlashPrefillTile> t = {{8, 1}, {4, 1}};
  if (head_dim <= 128) t.insert(t.end(), {{4, 2}, {8, 2}});
  return t;
}

std::vector<float> ReadBf16(CudaBackend& be, const Tensor& t) {
  std::vector<uint16_t> raw(static_cast<size_t>(t.numel()));
  be.CopyToHost(t, raw.data());
  std::vector<float> f(raw.size());
  for (size_t i = 0; i < raw.size(); ++i) {
    const uint32_t bits = uint32_t{raw[i]} << 16;
    std::memcpy(&f[i], &bits, 4);
  }
  return f;
}

// The 8B 4096-token prompt: every block shape vs the CUDA-core kernel; then other shapes.
void AttentionBench(CudaBackend& be) {
  AttnStep s = MakeStep(be, {"8B prompt 4096", 32, 8, 128, {{0, kPrompt}}});
  const cuda::FlashPrefillTile chosen =
      cuda::FlashPrefillTileFor(s.args, be.num_sms(), be.tuning());
  std::printf(
      "\n(b) attention alone (q/out bf16, bf16 KV pool, block 16); tile chosen for the "
      "4096 prompt %dx%d (warps x 16-row tiles a warp):\n",
      chosen.warps, chosen.m_tiles);
  const double old_ms = TimeAttention(be, s, {0, 0}, 3);
  const std::vector<float> ref = ReadBf16(be, s.out);
  double best = 1e30;
  for (cuda::FlashPrefillTile tile : TilesFor(128)) {
    const double ms = TimeAttention(be, s, tile, 10);
    const std::vector<float> got = ReadBf16(be, s.out);
    double num = 0, den = 0;
    for (size_t i = 0; i < ref.size(); ++i) {
      num += (got[i] - ref[i]) * double(got[i] - ref[i]);
      den += ref[i] * double(ref[i]);
    }
    best = std::min(best, ms);
    std::printf(
        "  8B prompt 4096, tensor cores %dx%d: %8.3f ms %6.1f TFLOP/s  (vs old kernel: "
        "normalized diff %.2e)\n",
        tile.warps, tile.m_tiles, ms, s.flops / (ms * 1e-3) / 1e12,
        std::sqrt(num / std::max(den, 1e-30)));
  }
  std::printf(
      "  8B prompt 4096, old CUDA-core kernel: %8.3f ms %6.1f TFLOP/s -> best speedup "
      "%.1fx\n",
      old_ms, s.flops / (old_ms * 1e-3) / 1e12, old_ms / best);

  const AttnCase others[] = {
      {"8B 4 x 1024 prompts", 32, 8, 128, {{0, 1024}, {0, 1024}, {0, 1024}, {0, 1024}}},
      {"8B chunk 512 on 3584 cached", 32, 8, 128, {{3584, 512}}},
      {"8B prompt 16384", 32, 8, 128, {{0, 16384}}},
      {"d64 32/8 prompt 4096", 32, 8, 64, {{0, kPrompt}}},
      {"d256 16/8 prompt 4096", 16, 8, 256, {{0, kPrompt}}},
      {"8B prompt 4096 window 1024", 32, 8, 128, {{0, kPrompt}}, 1024},
  };
  for (const AttnCase& c : others) {
    AttnStep o = MakeStep(be, c);
    std::printf("  %-28s", c.name);
    for (cuda::FlashPrefillTile tile : TilesFor(c.head_dim)) {
      const double ms = TimeAttention(be, o, tile, 5);
      std::printf(" %dx%d %7.3f ms %5.1f TF/s", tile.warps, tile.m_tiles, ms,
                  o.flops / (ms * 1e-3) / 1e12);
    }
    std::printf("\n");
  }
}

// ---- (c) ----

void ModelPrefill(CudaBackend& be, double square_tflops) {
  const ModelConfig cfg = Llama31_8BConfig();
  std::unique_ptr<Model> model = MakeBenchModel(&be);
  constexpr int kBs = 16;
  const int pages = kPrompt / kBs;
  std::vector<KvLayer> kv = model->AllocateKv(pages + 2, kBs, DType::kBF16);
  std::vector<int32_t> prompt(kPrompt), table(pages);
  for (int i = 0; i < kPrompt; ++i) prompt[static_cast<size_t>(i)] = (i * 31) % cfg.vocab_size;
  for (int p = 0; p < pages; ++p) table[static_cast<size_t>(p)] = p;
  double best = 1e30;
  for (int rep = 0; rep < 4; ++rep) {
    std::vector<SeqSlice> seqs = {SeqSlice{prompt, 0, table, true}};
    HostForwardBatch hb = BuildHostForwardBatch(seqs, kBs);
    ForwardInput in = UploadForwardBatch(hb, kBs, &be);
    Tensor logits = be.Alloc(DType::kF32, Shape{1, cfg.vocab_size});
    be.Synchronize();
    const auto w0 = std::chrono::steady_clock::now();
    CHECK_OK(model->Forward(in, kv, logits));
    be.Synchronize();
    const double ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - w0).count();
    if (rep > 0) best = std::min(best, ms);
  }
  // Linear layers: 2 flop per weight per token (qkv, o, gate, up, down); lm_head for 1 token.
  const double h = cfg.hidden_size, ffn = cfg.intermediate_size;
  const double kvw = double(cfg.num_kv_heads) * cfg.head_dim;
  const double per_layer = h * (h + 2 * kvw) + h * h + 3 * h * ffn;
  const double linear = 2.0 * per_layer * cfg.num_layers * kPrompt + 2.0 * h * cfg.vocab_size;
  const double attn =
      4.0 * cfg.num_heads * cfg.head_dim * (double(kPrompt) * (kPrompt + 1) / 2) * cfg.num_layers;
  const double tflops = (linear + attn) / (best * 1e-3) / 1e12;
  std::printf(
      "\n(c) Llama-3.1-8B (random bf16) prefill of %d tokens, attn_prefill=%s "
      "attn_prefill_tile=%s: "
      "%.2f ms (%.0f tok/s); %.1f + %.1f TFLOP (linear + attention) -> %.1f TFLOP/s = "
      "%.1f %% of the 4096^3 GEMM rate (%.1f TFLOP/s)\n",
      kPrompt, CudaTuningValue(be.tuning(), "attn_prefill").c_str(),
      CudaTuningValue(be.tuning(), "attn_prefill_tile").c_str(), best, kPrompt * 1e3 / best,
      linear / 1e12, attn / 1e12, tflops, 100 * tflops / square_tflops, square_tflops);
}

}  // namespace
}  // namespace loom

int main(int argc, char** argv) {
  using namespace loom;
  const bool model_only = argc > 1 && std::strcmp(argv[1], "model") == 0;
  const bool has_mode = argc > 1 && std::strchr(argv[1], '=') == nullptr;
  // KEY=VALUE arguments over the defaults (no environment: the LOOM_<KEY> variables are the
  // CLI's).
  const std::vector<std::string> tune_args(argv + (has_mode ? 2 : 1), argv + argc);
  StatusOr<CudaTuning> tuning =
      ResolveCudaTuning(tune_args, [](const char*) -> const char* { return nullptr; });
  if (!tuning.ok()) {
    std::fprintf(stderr, "cuda_prefill_bench: %s\n", tuning.status().message().c_str());
    return 2;
  }
  if (CudaBackend::DeviceCount() == 0) {
    std::fprintf(stderr, "cuda_prefill_bench: no CUDA device\n");
    return 1;
  }
  CudaBackendOptions options;
  options.tuning = *tuning;
  auto be_or = CudaBackend::Create(options);
  CHECK_OK(be_or.status());
  CudaBackend& be = **be_or;
  std::printf("device: %s\n", be.name().c_str());
  const std::vector<double> gemm_ms = GemmBench(be);
  const double square_tflops = 2.0 * 4096.0 * 4096 * 4096 / (gemm_ms[0] * 1e-3) / 1e12;
  if (!model_only) AttentionBench(be);
  ModelPrefill(be, square_tflops);
  return 0;
}
