// Finds and loads the tokenizer that belongs to a model path: a Hugging Face directory
// (tokenizer.json [+ tokenizer_config.json], or vocab.json + merges.txt), a .gguf file (its
// tokenizer.ggml.* vocabulary), or a bare tokenizer.json file.
#pragma once

#include <memory>
#include <string>

#include "io/gguf.h"
#include "tokenizer/chat_template/chat_template.h"
#include "tokenizer/tokenizer.h"

namespace loom {

StatusOr<std::unique_ptr<Tokenizer>> LoadTokenizerFor(const std::string& path);

// The GGUF vocabulary metadata as the tokenizer room's plain struct.
StatusOr<GgufVocab> ReadGgufVocab(const GgufFile& file);

// A model's chat templates (null when it has none).
struct ModelChatTemplates {
  std::shared_ptr<const ChatTemplate> plain;  // what transformers uses without tools
  std::shared_ptr<const ChatTemplate> tools;  // with tools (a named "tool_use" one), else == plain
  std::string bos_token, eos_token;           // what templates see
};

// `override_file` (--chat-template) wins; else the directory's chat_template.jinja /
// tokenizer_config.json, else the GGUF's tokenizer.chat_template. `tokenizer` (may be null)
// supplies bos/eos strings when the config does not. A model without any template is not an
// error; a template that does not parse is.
StatusOr<ModelChatTemplates> LoadChatTemplatesFor(const std::string& path,
                                                  const std::string& override_file,
                                                  const Tokenizer* tokenizer);

}  // namespace loom
