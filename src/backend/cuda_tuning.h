// CudaTuning: the A/B switches of the CUDA backend's kernels and of its decode graphs, as one
// plain struct (CudaBackendOptions::tuning). Defaults are the measured choices
// (docs/benchmarks.md); the other settings are the lab's alternatives, kept so that each choice
// can be measured again. Plain C++17 (no CUDA; the .cu files, compiled as C++17, include it), so
// the CLI parses and validates it in every build.
//
// Where values come from: the CLI (src/cli/) only. `--cuda-tune KEY=VALUE` (repeatable) and,
// for compatibility, the environment variable LOOM_<KEY> (KEY upper-cased); a flag wins over the
// environment. The kernels receive the struct (or the fields they need) from CudaBackend as
// parameters; nothing below reads the environment.
//
//   key                   default  selects
//   attn_decode           1        decode-only steps take the decode kernel (0: generic kernel)
//   attn_decode_splits    0        forced split-KV count of the decode kernel, 1..64 (0: auto)
//   attn_cluster_splits   16       most splits merged in one thread-block cluster, 2..16
//   attn_cluster_merge    1        merge a sequence's splits in a cluster (0: combine kernel)
//   attn_decode_mma       1        tensor-core decode kernel for head_dim <= 128 (0: CUDA cores)
//   attn_decode_unroll    0        keys per lane group (CUDA cores: 2, 4) / 8-key tiles per warp
//                                  (tensor cores: 1, 2; 4 on fp8 / int8 KV) per iteration (0: auto)
//   attn_decode_prefetch  1        prefetch the next iteration's K/V (0: off)
//   attn_early_kv         1        first K/V tile loaded before the PDL wait (0: after it)
//   attn_prefill          1        tensor-core prefill kernel for multi-token queries (0: generic)
//   attn_prefill_tile     auto     the prefill kernel's block: WxM (warps x 16-row tiles a warp:
//                                  4x1, 4x2, 8x1, 8x2)
//   attn_split_target     2        generic kernel: split KV until blocks >= this x SMs (1..64)
//   gemv_stream           1        batch-1 GEMVs take the TMA-streamed kernel (0: small-batch one)
//   gemv_rope             1        batch-1 qkv rope + KV store in the streamed GEMV's epilogue
//   gemv_queue            1        logits GEMV's last row groups from a work queue (0: static)
//   cublaslt_tune         1        time cuBLASLt's first N heuristic candidates, keep the fastest
//   quant_weights         1        GGUF q8_0/q4_0/q4_K/q6_K weights stay quantized on the GPU
//                                  (0: dequantized to bf16 at load)
//   quant_q5k             1        GGUF q5_K weights too (0: q5_K alone dequantized to bf16)
//   quant_fp8             0        fp8 weights (FP8 checkpoints, --quantize fp8) too (faster at
//                                  batch 1, slower batched and in prefill until an fp8
//                                  tensor-core GEMM exists: dequantized to bf16 at load by default)
//   quant_gemv_rows       8        MatMuls of quantized weights with <= N rows take the
//                                  quantized GEMV; more rows dequantize chunks for cuBLASLt
//   cuda_pdl              1        programmatic dependent launch on the decode kernels (0: off)
//   cuda_fuse             1        fused weights (q|k|v, gate|up) and fused ops (0: unfused)
//   kv_copy_engine        1        KV blocks into page-locked host memory through a device
//                                  staging ring and the copy engine, overlapping the next step
//                                  (0: a kernel writing host memory in place, synchronously)
//   kv_upload_engine      0        KV blocks copied up from page-locked host memory by the copy
//                                  engine into the staging ring, then scattered by a kernel
//                                  (0: a kernel reading host memory in place)
//   graph_lookahead       1        greedy decode steps of <= N rows queue the next step (0: off)
//   graph_tail            1        the batch-1 graph ends with argmax + input advance
//   graph_tail_fused      1        that tail as one kernel (0: three kernels)
//
// The graph_* keys are CudaGraphOptions' (runtime/cuda_graph_runner.h): the CLI copies them
// there; CudaBackend ignores them.
#pragma once

#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace loom {

struct CudaTuning {
  // ---- decode attention (backend/cuda/decode_attention.cuh) ----
  bool attn_decode = true;
  int attn_decode_splits = 0;    // 0: auto; else 1..64
  int attn_cluster_splits = 16;  // 2..16
  bool attn_cluster_merge = true;
  bool attn_decode_mma = true;
  int attn_decode_unroll = 0;  // 0: auto; 1, 2 or 4
  bool attn_decode_prefetch = true;
  bool attn_early_kv = true;
  // ---- prefill and the generic kernel (paged_attention.cuh, flash_prefill.cuh) ----
  bool attn_prefill = true;
  int attn_prefill_warps = 0;    // attn_prefill_tile W: 4 or 8; 0 (with m_tiles 0): auto
  int attn_prefill_m_tiles = 0;  // attn_prefill_tile M: 1 or 2
  int attn_split_target = 2;     // 1..64
  // ---- GEMV and GEMM (stream_gemv.cuh, cublaslt_gemm.h) ----
  bool gemv_stream = true;
  bool gemv_rope = true;
  bool gemv_queue = true;
  int cublaslt_tune = 1;  // 1..64 candidates (1: cuBLASLt's heuristic pick)
  // ---- quantized weights (quant_gemv.cuh) ----
  bool quant_weights = true;
  bool quant_q5k = true;
  bool quant_fp8 = false;
  int quant_gemv_rows = 8;  // 0..8
  // ---- launches and fusion (launch.cuh, CudaBackend::prefers_fused_ops) ----
  bool cuda_pdl = true;
  bool cuda_fuse = true;
  // ---- KV tiers (CudaBackend::StartKvCopyToHost) ----
  bool kv_copy_engine = true;
  bool kv_upload_engine = false;
  // ---- decode graphs (CudaGraphOptions; CudaBackend ignores these) ----
  int graph_lookahead = 1;  // 0..4096 rows
  bool graph_tail = true;
  bool graph_tail_fused = true;

  // OK when every field is in its range (the table above); otherwise InvalidArgument naming
  // the key and its value.
  Status Validate() const;
};

// One key of the table: its name, its default as --cuda-tune spells it, what it selects.
struct CudaTuningKey {
  std::string_view name;
  std::string_view default_value;
  std::string_view help;
};

// Every key, in the order of the table above.
const std::vector<CudaTuningKey>& CudaTuningKeys();
// Keys that existed as LOOM_* variables and were retired (help: why); setting one is an error
// for --cuda-tune and a warning for the environment.
const std::vector<CudaTuningKey>& RetiredCudaTuningKeys();

// Sets `key` to `value` ("attn_cluster_splits", "12"). Booleans take 0/1/true/false/on/off.
// InvalidArgument, naming the key and the value, for an unknown or retired key, a malformed
// value or one out of range; *tuning is unchanged then.
Status SetCudaTuning(std::string_view key, std::string_view value, CudaTuning* tuning);
// The same for "key=value" (one --cuda-tune argument); the error names the argument.
Status ApplyCudaTuneArg(std::string_view key_value, CudaTuning* tuning);

// The value of `key` in `tuning` as SetCudaTuning reads it ("" for an unknown key).
std::string CudaTuningValue(const CudaTuning& tuning, std::string_view key);
// "key=value" for every key that differs from the defaults, space-separated ("" when none).
std::string DescribeCudaTuning(const CudaTuning& tuning);

// The compatibility environment variable of `key`: "LOOM_" + key upper-cased.
std::string CudaTuningEnvName(std::string_view key);

// name -> value, or nullptr when unset (the CLI passes the process environment).
using EnvLookup = std::function<const char*(const char*)>;

// Applies every LOOM_<KEY> variable `env` has (empty values count as unset). A retired variable
// adds a line to *warnings (when not null) and changes nothing. InvalidArgument naming the
// variable and its value on a bad value.
Status ApplyCudaTuningEnv(const EnvLookup& env, CudaTuning* tuning,
                          std::vector<std::string>* warnings = nullptr);

// The tuning a command runs with: the defaults, then the environment (ApplyCudaTuningEnv), then
// each --cuda-tune argument in order (so a flag wins over the environment and a later flag
// over an earlier one), validated.
StatusOr<CudaTuning> ResolveCudaTuning(const std::vector<std::string>& cuda_tune_args,
                                       const EnvLookup& env,
                                       std::vector<std::string>* warnings = nullptr);

}  // namespace loom
