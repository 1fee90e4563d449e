// ModelCard: what loom says about a model it can serve, in one shape for `loom list --json` (each
// local model) and GET /v1/models (the served one, under the "loom" key, beside the fields the
// OpenAI SDK reads). Filled by the CLI (cli/model_description.h) from the files, without loading
// the weights.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "server/template_capabilities.h"

namespace loom {

struct ModelCard {
  std::string id;            // what MODEL names it by (and /v1/models serves it as)
  std::string source;        // "path", "models-dir" or "hf-cache"
  std::string path;          // the model directory or .gguf file
  std::string revision;      // hf-cache: the refs naming the snapshot ("main"); else ""
  std::string commit;        // hf-cache: the snapshot's commit; else ""
  std::string architecture;  // config.json model_type / GGUF general.architecture; "" = unknown
  int64_t num_params = 0;    // 0 = unknown
  // How num_params was counted: "safetensors headers" and "gguf tensors" are exact sums of the
  // tensors' elements; "config.json shapes" is the dense decoder's formula (approximate).
  std::string params_source;
  std::string format;          // "safetensors" or "gguf"
  std::string quantization;    // "bf16", "Q4_K_M", "gptq 4-bit", ...; "" = unknown
  int64_t context_length = 0;  // the model's own (max_position_embeddings); 0 = unknown
  int64_t size_bytes = 0;      // on disk; blobs shared by several files counted once
  bool has_chat_template = false;
  TemplateCapabilities capabilities;  // of the chat template used with tools
  std::vector<std::string> problems;  // why it cannot be loaded as it is; empty = complete
};

// {"id", "source", "path", "revision", "commit", "architecture", "parameters",
//  "parameters_source", "format", "quantization", "context_length", "size_bytes",
//  "chat_template", "capabilities": {"tools", "tool_call_format", "reasoning"}, "status",
//  "problems"}; unknown values are null, "status" is "ok" or "incomplete".
nlohmann::ordered_json ModelCardJson(const ModelCard& card);

// "8.2B", "596M", "4.6M", "" for 0: the parameter count as model names write it.
std::string FormatParams(int64_t num_params);

}  // namespace loom
