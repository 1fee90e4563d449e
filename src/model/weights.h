// Weights: every tensor the decoder reads, by role, already on the backend's device. Optional
// tensors are undefined Tensors (t.defined() == false). Shapes are PyTorch Linear layout
// [out_features, in_features]; quantized weights keep their GGUF block format.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "base/progress.h"
#include "model/model_config.h"

namespace loom {

struct LayerWeights {
  Tensor attn_norm;       // [hidden]                       input RMSNorm
  Tensor wq, wk, wv;      // [H*D, hidden], [KV*D, hidden], [KV*D, hidden]  (unless fused)
  Tensor wqkv;            // [(H + 2 KV) * D, hidden]       fused (Phi-3, or by FuseProjections)
  Tensor bq, bk, bv, bo;  // biases, when the checkpoint has them
  Tensor bqkv;            // [(H + 2 KV) * D]               bq|bk|bv fused with wqkv
  Tensor wo;              // [hidden, H*D]
  Tensor q_norm, k_norm;  // [D]                            per-head norms (Qwen3, Gemma 3)
  Tensor sinks;           // [H] f32                        attention sinks (gpt-oss)
  Tensor post_attn_norm;  // [hidden]                       sandwich norm after attention (Gemma)
  Tensor ffn_norm;        // [hidden]                       RMSNorm before the MLP
  Tensor post_ffn_norm;   // [hidden]                       sandwich norm after the MLP (Gemma)
  Tensor w_gate, w_up;    // [F, hidden] each               (unless fused)
  Tensor w_gate_up;       // [2F, hidden]                   fused: gate rows first (Phi-3), or
                          //                                FuseProjections' backend layout
  Tensor w_down;          // [hidden, F]
  // A sparse (MoE) layer's MLP instead of the dense one above (ModelConfig::is_moe): the router
  // [E, hidden] and the experts stacked, [E, Fe, hidden] gate and up, [E, hidden, Fe] down; the
  // shared expert (Qwen2-MoE) [Fs, hidden] x2, [hidden, Fs] and its gate [1, hidden]; gpt-oss's
  // biases (f32) [E], [E, Fe] x2, [E, hidden].
  Backend::MoeWeights moe;
};

struct Weights {
  Tensor embed;       // [vocab, hidden]
  Tensor final_norm;  // [hidden]
  Tensor lm_head;     // [vocab, hidden] (== embed when tied)
  std::vector<LayerWeights> layers;
  size_t total_bytes = 0;     // bytes of all distinct weight tensors
  DType dtype = DType::kF32;  // the dtype holding most of the matrices' bytes (the ready card)
};

// Where tensors come from: a safetensors directory (HF names) or a GGUF file (GGUF names).
class TensorSource {
 public:
  virtual ~TensorSource() = default;
  virtual bool Has(const std::string& name) const = 0;
  virtual StatusOr<Tensor> Get(const std::string& name) const = 0;  // host tensor (may be mmap'd)
  virtual std::string Describe() const = 0;                         // path, for error messages
  // Bytes of tensor data the source holds (the files' sizes), for progress; 0 = unknown.
  virtual int64_t data_bytes() const { return 0; }
};

// Tensor names of one checkpoint flavour.
enum class TensorNaming { kHuggingFace, kGguf };

// OK when `backend` can run a model of `cfg`: its attention head size, and for a mixture of
// experts its MoE layers and their shapes; else Unimplemented naming what it lacks. Asked at
// load (checkpoint or dummy weights), before any weight is read or made.
Status CheckBackendRunsModel(const ModelConfig& cfg, const Backend& backend);

// How weights are stored after load (the CLI's --quantize).
struct WeightOptions {
  // Re-encode the decoder layers' float matrices (projections, experts; not the embedding, the
  // output head or routers) as this dtype at load (QuantizeRow, one scale per 128 elements of a
  // row for fp8; a matrix whose rows are not a multiple of the block is kept). Matrices already
  // quantized are kept as they are. nullopt: as stored.
  std::optional<DType> quantize;
};

// Whether `dtype` is a --quantize target (fp8 today).
bool IsLoadQuantizeDType(DType dtype);

// Loads and shape-checks every tensor `cfg` needs from `source`, uploads them to `backend`.
// Errors name the tensor, the expected and actual shapes, and the source. `progress` (may be
// empty) hears the bytes read and uploaded after each tensor, out of source.data_bytes(); its
// last call, on success, has done == total == the bytes read.
StatusOr<Weights> LoadWeights(const ModelConfig& cfg, const TensorSource& source,
                              TensorNaming naming, Backend* backend,
                              const ProgressFn& progress = nullptr,
                              const WeightOptions& options = {});

// Concatenates each layer's separate q/k/v (and their biases) into wqkv (Backend::ConcatRows) and
// gate/up into w_gate_up in the backend's layout (Backend::FuseGateUp; a checkpoint's fused
// gate|up is re-laid out the same way), dropping the separate ones, for backends that prefer one
// wide GEMV to several narrow ones.
void FuseProjections(Weights* weights, Backend* backend);

// Host helpers for stacked expert tensors (gpt-oss's layouts; tools/goldens/hf_to_gguf too):
// [E, a, b] -> [E, b, a] (elements of 2 or 4 bytes), and rows 0, 2, 4, ... (half 0) or 1, 3, 5,
// ... (half 1) of every expert's slab, [E, 2n, ...] -> [E, n, ...] (any dtype: whole rows).
Tensor TransposeExperts(const Tensor& t);
Tensor EveryOtherRow(const Tensor& t, int half);

}  // namespace loom
