// Model: a loaded decoder-only transformer (config + weights on a backend) and its forward pass
// over one flat step batch (prefill chunks and decodes of many sequences, no padding).
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "model/model_config.h"
#include "model/weights.h"

namespace loom {

// Inputs of one forward step, already on the backend's device.
struct ForwardInput {
  Tensor token_ids;    // [num_tokens] i32
  Tensor positions;    // [num_tokens] i32
  Tensor sample_rows;  // [max(num_sample_rows, 1)] i32: rows of the batch whose logits are wanted
  int num_sample_rows = 0;  // 0: no logits this step (a prompt chunk that samples nothing)
  // sample_rows is 0 .. num_tokens - 1 (every row, in order: decode steps); the forward then
  // reads the rows in place instead of gathering them.
  bool sample_rows_all = false;
  // Rows of the batch whose final hidden states (after the final norm) are wanted: embeddings.
  Tensor hidden_rows;       // [max(num_hidden_rows, 1)] i32
  int num_hidden_rows = 0;  // 0: none this step
  AttentionMeta meta;       // page tables for the step (see backend.h)
};

// Called with named activations (e.g. "embed", "attn_norm.3", "attn_out.3", "ffn_out.3",
// "hidden.3" = residual stream after layer 3, "final_norm", "logits"), for debugging against the
// oracle. The tensor is only valid during the call.
using ActivationSink = std::function<void(const std::string& name, const Tensor& t)>;

// Where the model comes from, as resolved by LoadModel.
struct ModelInfo {
  std::string path;         // the directory or .gguf file
  std::string format;       // "safetensors" or "gguf"
  std::string fingerprint;  // stable id of the weights (for prefix-cache keys)
};

class Model {
 public:
  Model(ModelConfig config, Weights weights, ModelInfo info, Backend* backend);

  const ModelConfig& config() const { return config_; }
  const Weights& weights() const { return weights_; }
  const ModelInfo& info() const { return info_; }
  Backend* backend() const { return backend_; }

  // Allocates KV pools for `num_blocks` blocks of `block_size` tokens per layer.
  std::vector<KvLayer> AllocateKv(int num_blocks, int block_size, KvFormat format) const;
  // Bytes of KV per token (all layers, K and V).
  size_t KvBytesPerToken(KvFormat format) const;

  // Runs the decoder over the step: writes this step's K/V into `kv` and fills `logits`
  // [num_sample_rows, vocab] (f32) and, when in.num_hidden_rows > 0, `hidden`
  // [num_hidden_rows, hidden_size] (the backend's act dtype) with the final-normed hidden states
  // of in.hidden_rows (what lm_head would read). `sink` may be null.
  Status Forward(const ForwardInput& in, const std::vector<KvLayer>& kv, const Tensor& logits,
                 const ActivationSink* sink = nullptr, const Tensor& hidden = Tensor()) const;

 private:
  ModelConfig config_;
  Weights weights_;
  ModelInfo info_;
  Backend* backend_;
  RopeTable rope_global_;
  RopeTable rope_local_;
};

// Loads a model from a Hugging Face directory (config.json + *.safetensors) or a .gguf file.
// `progress` (may be empty) hears the weight bytes read so far (LoadWeights); `options` as
// LoadWeights'. An FP8 checkpoint's weights load as fp8 blocks (hf_quantization.h).
StatusOr<std::unique_ptr<Model>> LoadModel(const std::string& path, Backend* backend,
                                           const ProgressFn& progress = nullptr,
                                           const WeightOptions& options = {});

}  // namespace loom
