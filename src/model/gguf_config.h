// ModelConfig from GGUF metadata (llama.cpp's key names: "<arch>.block_count", ...).
#pragma once

#include "io/gguf.h"
#include "model/model_config.h"

namespace loom {

// Supported general.architecture values: llama (incl. Mistral), qwen2, qwen3. Errors name the file
// and the missing or unsupported key.
StatusOr<ModelConfig> ModelConfigFromGguf(const GgufFile& file);

}  // namespace loom
