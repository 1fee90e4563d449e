#include "backend/cuda_tuning.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <optional>

namespace loom {
namespace {

// How a key is stored: a bool, an int in [lo, hi], or the prefill tile (two ints).
struct Field {
  CudaTuningKey key;
  bool CudaTuning::*flag = nullptr;
  int CudaTuning::*number = nullptr;
  int lo = 0, hi = 0;
};

constexpr CudaTuningKey kAttnPrefillTile{
    "attn_prefill_tile", "auto",
    "the tensor-core prefill kernel's block, WxM (warps x 16-row tiles a warp): 4x1, 4x2, 8x1 or "
    "8x2; auto: the largest that gives about every SM a block (head_dim 256 always one tile a "
    "warp)"};

// The table of CudaTuning's fields, in the header's order (the tile is handled apart).
const std::vector<Field>& Fields() {
  using T = CudaTuning;
  static const std::vector<Field> fields = {
      {{"attn_decode", "1",
        "decode-only steps take the bandwidth-bound decode kernel (decode_attention.cuh); 0: the "
        "generic paged kernel"},
       &T::attn_decode},
      {{"attn_decode_splits", "0",
        "force the decode kernel's split-KV count (1..64); 0: auto (fill the GPU's block slots)"},
       nullptr,
       &T::attn_decode_splits,
       0,
       64},
      {{"attn_cluster_splits", "16",
        "most splits of a sequence merged in one thread-block cluster (2..16); 12 is faster at "
        "short contexts, slower at long ones"},
       nullptr,
       &T::attn_cluster_splits,
       2,
       16},
      {{"attn_cluster_merge", "1",
        "merge a sequence's decode splits in a thread-block cluster (Hopper); 0: the combine "
        "kernel"},
       &T::attn_cluster_merge},
      {{"attn_decode_mma", "1",
        "tensor-core decode kernel for head_dim 64/128; 0: the CUDA-core kernel"},
       &T::attn_decode_mma},
      {{"attn_decode_unroll", "0",
        "decode kernel keys per iteration: CUDA-core keys per lane group (2 or 4), tensor-core "
        "8-key tiles per warp (1 or 2); 0: auto (4 for GQA <= 4 else 2; tensor cores 2)"},
       nullptr,
       &T::attn_decode_unroll,
       0,
       4},
      {{"attn_decode_prefetch", "1",
        "decode kernel prefetches the next iteration's K/V (tensor cores: only with 1 tile); 0: "
        "off"},
       &T::attn_decode_prefetch},
      {{"attn_early_kv", "1",
        "tensor-core decode kernel loads its first K/V tile before the PDL wait; 0: after it"},
       &T::attn_early_kv},
      {{"attn_prefill", "1",
        "multi-token queries take the tensor-core prefill kernel (flash_prefill.cuh); 0: the "
        "generic paged kernel"},
       &T::attn_prefill},
      {kAttnPrefillTile},
      {{"attn_split_target", "2",
        "generic paged kernel: split the keys until there are this many blocks per SM (1..64)"},
       nullptr,
       &T::attn_split_target,
       1,
       64},
      {{"gemv_stream", "1",
        "one-row GEMVs take the TMA-streamed kernel on Hopper (stream_gemv.cuh); 0: the "
        "small-batch kernel"},
       &T::gemv_stream},
      {{"gemv_rope", "1",
        "batch-1 qkv projection does the rope and KV stores in the streamed GEMV's epilogue; 0: "
        "two launches"},
       &T::gemv_rope},
      {{"gemv_queue", "1",
        "the streamed logits GEMV takes its last row groups from a work queue; 0: static blocks"},
       &T::gemv_queue},
      {{"cublaslt_tune", "1",
        "time cuBLASLt's first N heuristic candidates per shape on the real operands (eager steps "
        "only) and keep the fastest (1..64); 1: the heuristic's pick"},
       nullptr,
       &T::cublaslt_tune,
       1,
       64},
      {{"quant_weights", "1",
        "GGUF q8_0 / q4_0 / q4_K / q6_K weights stay quantized on the GPU (quant_gemv.cuh); 0: "
        "dequantized to bf16 at load"},
       &T::quant_weights},
      {{"quant_q5k", "1",
        "GGUF q5_K weights stay quantized on the GPU too (with quant_weights); 0: q5_K alone "
        "dequantized to bf16 at load"},
       &T::quant_q5k},
      {{"quant_fp8", "0",
        "fp8 weights (FP8 checkpoints, --quantize fp8) stay in 1 byte on the GPU too (with "
        "quant_weights): half the weight memory and faster decode at batch 1, but slower batched "
        "decode and prefill until an fp8 tensor-core GEMM exists; 0: dequantized to bf16 at load"},
       &T::quant_fp8},
      {{"quant_gemv_rows", "8",
        "MatMuls of quantized weights with at most N rows take the quantized GEMV (0..8); more "
        "rows dequantize the weight in chunks for cuBLASLt"},
       nullptr,
       &T::quant_gemv_rows,
       0,
       8},
      {{"cuda_pdl", "1",
        "launch the decode chain's kernels with programmatic dependent launch (launch.cuh); 0: "
        "plain stream order (A/B, debugging)"},
       &T::cuda_pdl},
      {{"cuda_fuse", "1",
        "fused q|k|v and gate|up weights and fused ops (norm into GEMV, rope + KV store); 0: "
        "separate weights, unfused ops"},
       &T::cuda_fuse},
      {{"kv_copy_engine", "1",
        "KV blocks copied into page-locked host memory (the host tier) go through a device "
        "staging ring and the copy engine, overlapping the next step; 0: one kernel writing "
        "host memory in place, synchronously"},
       &T::kv_copy_engine},
      {{"kv_upload_engine", "0",
        "KV blocks copied up from page-locked host memory (host-tier and SSD restores) go "
        "through the copy engine into the device staging ring, then a kernel scatters them "
        "into the pool; 0: one kernel reading host memory in place"},
       &T::kv_upload_engine},
      {{"graph_lookahead", "1",
        "greedy decode steps of at most N rows queue the next step before their ids reach the "
        "host (0..4096; 0: off)"},
       nullptr,
       &T::graph_lookahead,
       0,
       4096},
      {{"graph_tail", "1",
        "the batch-1 decode graph ends with the argmax and the lookahead's input advance; 0: "
        "they run after the graph"},
       &T::graph_tail},
      {{"graph_tail_fused", "1",
        "that batch-1 tail as one kernel; 0: argmax, combine and advance as three kernels"},
       &T::graph_tail_fused},
  };
  return fields;
}

const std::vector<CudaTuningKey>& Retired() {
  static const std::vector<CudaTuningKey> retired = {
      {"attn_small_rows", "1",
       "the generic kernel's 4/8-row decode instances are always used (the 32-row one measured "
       "4,905 vs 7,000 tok/s at 8B C = 64, and decode steps take the decode kernel)"},
      {"gemv_ring_kb", "128",
       "the streamed GEMV's ring is 128 KB (64, 96 and 160 KB measured slower: "
       "docs/benchmarks.md, sessions 5 and 12)"},
      {"gemv_spread", "1",
       "the streamed GEMV's two-blocks-an-SM rule is always on for the weights that fit one stage "
       "a block (0 and 2 measured slower: docs/benchmarks.md, session 12)"},
  };
  return retired;
}

const Field* FindField(std::string_view key) {
  for (const Field& f : Fields()) {
    if (f.key.name == key) return &f;
  }
  return nullptr;
}

const CudaTuningKey* FindRetired(std::string_view key) {
  for (const CudaTuningKey& k : Retired()) {
    if (k.name == key) return &k;
  }
  return nullptr;
}

std::string Lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

std::optional<bool> ParseBool(std::string_view v) {
  const std::string s = Lower(v);
  if (s == "1" || s == "true" || s == "on") return true;
  if (s == "0" || s == "false" || s == "off") return false;
  return std::nullopt;
}

std::optional<int> ParseInt(std::string_view v) {
  int out = 0;
  const char* end = v.data() + v.size();
  auto [ptr, ec] = std::from_chars(v.data(), end, out);
  if (ec != std::errc() || ptr != end || v.empty()) return std::nullopt;
  return out;
}

std::string KnownKeys() {
  std::string out;
  for (const Field& f : Fields()) out += (out.empty() ? "" : ", ") + std::string(f.key.name);
  return out;
}

std::string RangeText(const Field& f) {
  if (f.number == &CudaTuning::attn_decode_unroll) return "must be 0, 1, 2 or 4";
  return "must be an integer in [" + std::to_string(f.lo) + ", " + std::to_string(f.hi) + "]";
}

// Why `value` is not acceptable for the int field `f` ("" when it is).
std::string IntProblem(const Field& f, int value) {
  if (value < f.lo || value > f.hi) return RangeText(f);
  if (f.number == &CudaTuning::attn_decode_unroll && value == 3) return RangeText(f);
  return "";
}

bool ValidTile(int warps, int m_tiles) {
  if (warps == 0 && m_tiles == 0) return true;
  return (warps == 4 || warps == 8) && (m_tiles == 1 || m_tiles == 2);
}

// The reason `key`=`value` is rejected, or "" after setting it.
std::string Set(std::string_view key, std::string_view value, CudaTuning* t) {
  if (const CudaTuningKey* r = FindRetired(key)) return "retired: " + std::string(r->help);
  const Field* f = FindField(key);
  if (f == nullptr) return "unknown key (known: " + KnownKeys() + ")";
  if (f->key.name == kAttnPrefillTile.name) {
    if (Lower(value) == "auto") {
      t->attn_prefill_warps = t->attn_prefill_m_tiles = 0;
      return "";
    }
    const size_t x = value.find('x');
    const std::optional<int> w =
        x == std::string_view::npos ? std::nullopt : ParseInt(value.substr(0, x));
    const std::optional<int> m =
        x == std::string_view::npos ? std::nullopt : ParseInt(value.substr(x + 1));
    if (!w || !m || *w == 0 || !ValidTile(*w, *m)) return "must be auto, 4x1, 4x2, 8x1 or 8x2";
    t->attn_prefill_warps = *w;
    t->attn_prefill_m_tiles = *m;
    return "";
  }
  if (f->flag != nullptr) {
    const std::optional<bool> b = ParseBool(value);
    if (!b) return "must be 0 or 1 (or true/false, on/off)";
    t->*(f->flag) = *b;
    return "";
  }
  const std::optional<int> n = ParseInt(value);
  if (!n) return RangeText(*f);
  if (std::string why = IntProblem(*f, *n); !why.empty()) return why;
  t->*(f->number) = *n;
  return "";
}

}  // namespace

Status CudaTuning::Validate() const {
  for (const Field& f : Fields()) {
    if (f.number == nullptr) continue;
    if (std::string why = IntProblem(f, this->*(f.number)); !why.empty()) {
      return InvalidArgumentError("cuda tuning " + std::string(f.key.name) + "=" +
                                  std::to_string(this->*(f.number)) + ": " + why);
    }
  }
  if (!ValidTile(attn_prefill_warps, attn_prefill_m_tiles)) {
    return InvalidArgumentError(
        "cuda tuning attn_prefill_tile=" + std::to_string(attn_prefill_warps) + "x" +
        std::to_string(attn_prefill_m_tiles) + ": must be auto, 4x1, 4x2, 8x1 or 8x2");
  }
  return OkStatus();
}

const std::vector<CudaTuningKey>& CudaTuningKeys() {
  static const std::vector<CudaTuningKey> keys = [] {
    std::vector<CudaTuningKey> out;
    for (const Field& f : Fields()) out.push_back(f.key);
    return out;
  }();
  return keys;
}

const std::vector<CudaTuningKey>& RetiredCudaTuningKeys() { return Retired(); }

Status SetCudaTuning(std::string_view key, std::string_view value, CudaTuning* tuning) {
  if (std::string why = Set(key, value, tuning); !why.empty()) {
    return InvalidArgumentError(std::string(key) + "=" + std::string(value) + ": " + why);
  }
  return OkStatus();
}

Status ApplyCudaTuneArg(std::string_view key_value, CudaTuning* tuning) {
  const size_t eq = key_value.find('=');
  if (eq == std::string_view::npos || eq == 0) {
    return InvalidArgumentError("--cuda-tune " + std::string(key_value) +
                                ": expected KEY=VALUE (keys: " + KnownKeys() + ")");
  }
  const std::string_view key = key_value.substr(0, eq), value = key_value.substr(eq + 1);
  if (std::string why = Set(key, value, tuning); !why.empty()) {
    return InvalidArgumentError("--cuda-tune " + std::string(key_value) + ": " + why);
  }
  return OkStatus();
}

std::string CudaTuningValue(const CudaTuning& tuning, std::string_view key) {
  const Field* f = FindField(key);
  if (f == nullptr) return "";
  if (f->key.name == kAttnPrefillTile.name) {
    if (tuning.attn_prefill_warps == 0) return "auto";
    return std::to_string(tuning.attn_prefill_warps) + "x" +
           std::to_string(tuning.attn_prefill_m_tiles);
  }
  if (f->flag != nullptr) return tuning.*(f->flag) ? "1" : "0";
  return std::to_string(tuning.*(f->number));
}

std::string DescribeCudaTuning(const CudaTuning& tuning) {
  const CudaTuning defaults;
  std::string out;
  for (const Field& f : Fields()) {
    const std::string v = CudaTuningValue(tuning, f.key.name);
    if (v == CudaTuningValue(defaults, f.key.name)) continue;
    out += (out.empty() ? "" : " ") + std::string(f.key.name) + "=" + v;
  }
  return out;
}

std::string CudaTuningEnvName(std::string_view key) {
  std::string out = "LOOM_";
  for (char c : key) out += static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return out;
}

Status ApplyCudaTuningEnv(const EnvLookup& env, CudaTuning* tuning,
                          std::vector<std::string>* warnings) {
  for (const CudaTuningKey& r : Retired()) {
    const std::string name = CudaTuningEnvName(r.name);
    const char* v = env(name.c_str());
    if (v != nullptr && v[0] != '\0' && warnings != nullptr) {
      warnings->push_back(name + " is ignored: " + std::string(r.help));
    }
  }
  CudaTuning out = *tuning;
  for (const Field& f : Fields()) {
    const std::string name = CudaTuningEnvName(f.key.name);
    const char* v = env(name.c_str());
    if (v == nullptr || v[0] == '\0') continue;
    if (std::string why = Set(f.key.name, v, &out); !why.empty()) {
      return InvalidArgumentError(name + "=" + v + ": " + why + " (the environment's name for " +
                                  "--cuda-tune " + std::string(f.key.name) + ")");
    }
  }
  *tuning = out;
  return OkStatus();
}

StatusOr<CudaTuning> ResolveCudaTuning(const std::vector<std::string>& cuda_tune_args,
                                       const EnvLookup& env, std::vector<std::string>* warnings) {
  CudaTuning t;
  RETURN_IF_ERROR(ApplyCudaTuningEnv(env, &t, warnings));
  for (const std::string& arg : cuda_tune_args) RETURN_IF_ERROR(ApplyCudaTuneArg(arg, &t));
  RETURN_IF_ERROR(t.Validate());
  return t;
}

}  // namespace loom
