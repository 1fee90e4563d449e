// Finds and loads the tokenizer that belongs to a model path: a Hugging Face directory
// (tokenizer.json [+ tokenizer_config.json], or vocab.json + merges.txt), a .gguf file (its
// tokenizer.ggml.* vocabulary), or a bare tokenizer.json file.
#pragma once

#include <memory>
#include <string>

#include "io/gguf.h"
#include "tokenizer/tokenizer.h"

namespace loom {

StatusOr<std::unique_ptr<Tokenizer>> LoadTokenizerFor(const std::string& path);

// The GGUF vocabulary metadata as the tokenizer room's plain struct.
StatusOr<GgufVocab> ReadGgufVocab(const GgufFile& file);

}  // namespace loom
