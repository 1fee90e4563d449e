// The attention block's input half in one kernel, after a fused q|k|v projection (backend.h
// QkvRopeStore): per token and head, optional per-head RMSNorm (Qwen3 / Gemma 3 q_norm, k_norm),
// RoPE (halves or interleaved pairs, rotary_dim <= head_dim, attention factor), then q to q_out
// and k / v straight into their KV-pool slots. Replaces three column copies, two norms, two ropes
// and the KV scatter of the unfused sequence (and their launches: at batch 1 they are the cost).
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "backend/cuda/kv_quant.cuh"

namespace loom::cuda {

struct QkvRopeStoreArgs {
  const void* qkv;           // [n, (H + 2 KVH) * D] bf16
  const int32_t* positions;  // [n]
  const float* inv_freq;     // [rotary_dim / 2]
  int rotary_dim = 0;
  float attention_factor = 1.f;
  bool interleaved = false;
  const float* q_norm = nullptr;  // [D] f32, or null
  const float* k_norm = nullptr;
  float eps = 0.f, norm_offset = 0.f;
  int num_heads = 0, num_kv_heads = 0, head_dim = 0;
  int64_t n = 0;
  const int32_t* slots;  // [n] slot_mapping (slots < 0 or >= num_slots are skipped)
  int64_t num_slots = 0;
  void* q_out;   // [n, H * D] bf16
  void* k_pool;  // [num_slots, KVH, D] bf16 (a layer's pool, blocks x rows flattened)
  void* v_pool;
  // Quantized pools (--kv-quant): rows quantized as QuantizeKvRow does, into the blocks of
  // tensor/kv_quant.h (block_size tokens a block).
  KvPoolDesc k_desc, v_desc;
  int block_size = 0;
};

// head_dim <= 256 and even. pdl: programmatic dependent launch (launch.cuh;
// CudaTuning::cuda_pdl).
void LaunchQkvRopeStore(const QkvRopeStoreArgs& args, cudaStream_t stream, bool pdl);

}  // namespace loom::cuda
