// Describing a model from its files without loading its weights: what `loom list` prints for
// each model of the library and what GET /v1/models says of the served one (server/model_card.h).
#pragma once

#include <string>

#include "io/model_library.h"
#include "server/model_card.h"

namespace loom {

// The card of the model at `path`: a Hugging Face directory (config.json, the safetensors
// headers, tokenizer_config.json / chat_template.jinja), a .gguf file (its header) or a bare
// config.json (--dummy-weights). Never fails: what cannot be read is left unknown and named in
// problems. Reads only headers and small JSON files.
ModelCard DescribeModel(const std::string& path);

// DescribeModel of the entry's path, with the entry's id, source, revision, size and problems.
ModelCard DescribeLibraryEntry(const LibraryEntry& entry);

}  // namespace loom
