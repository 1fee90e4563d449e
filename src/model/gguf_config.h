// ModelConfig from a GGUF file, read the way llama.cpp reads it (src/llama-model.cpp) from what its
// converter (convert_hf_to_gguf.py) writes: metadata keys "<arch>.block_count", ...; settings
// carried as tensors (`rope_freqs.weight`, Llama 3.1's rope scaling); and the conventions that
// differ from the HF checkpoint (Gemma's norm weights stored as 1 + w; Llama's q/k rows permuted
// for pairwise rotation; Gemma's softmax scale derived from the model size, not stored).
#pragma once

#include <string>
#include <vector>

#include "io/gguf.h"
#include "model/model_config.h"

namespace loom {

// Typed reads of one architecture's metadata keys ("<arch>.<key>"). A key of the wrong type is an
// error naming the file and the key, never silently a default.
class GgufArchKeys {
 public:
  // `file` must outlive this view.
  GgufArchKeys(const GgufFile& file, std::string arch) : file_(file), arch_(std::move(arch)) {}

  const GgufFile& file() const { return file_; }
  const std::string& arch() const { return arch_; }
  bool Has(const std::string& key) const { return file_.Has(arch_ + "." + key); }
  // The value; NOT_FOUND when absent.
  StatusOr<int> RequiredInt(const std::string& key) const;
  // The value, or `def` when the key is absent.
  StatusOr<int> Int(const std::string& key, int def) const;
  StatusOr<float> Float(const std::string& key, float def) const;

 private:
  const GgufFile& file_;
  std::string arch_;
};

// Which layers use sliding-window attention, per "<arch>.attention.sliding_window_pattern" as
// llama.cpp reads it: absent -> `default_period`; a period p -> layer i slides iff
// i % p < p - 1 (p == 0: every layer); an array -> one flag per layer (non-zero = sliding).
StatusOr<std::vector<bool>> GgufSlidingLayers(const GgufArchKeys& keys, int num_layers,
                                              int default_period);

// Reads general.architecture, finds it in the architecture registry (an unsupported one is
// UNIMPLEMENTED naming the supported ones), reads the common keys and tensors, then the
// architecture's own (ArchSpec::from_gguf). Errors name the file and the key or tensor.
StatusOr<ModelConfig> ModelConfigFromGguf(const GgufFile& file);

}  // namespace loom
