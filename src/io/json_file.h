// Loading JSON files (config.json, generation_config.json, tokenizer_config.json,
// model.safetensors.index.json) without letting nlohmann::json exceptions escape.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "base/status.h"

namespace loom {

// Parses `text` as JSON. `name` (a file path or other label) prefixes every error message.
// Invalid JSON -> INVALID_ARGUMENT "<name>: invalid JSON at line L, column C (byte B): <why>".
// Thread-safe (pure function).
StatusOr<nlohmann::json> ParseJson(std::string_view text, std::string_view name);

// Reads and parses the file at `path`. Missing file -> NOT_FOUND naming the path; invalid JSON
// as in ParseJson with the path as the name.
StatusOr<nlohmann::json> LoadJsonFile(const std::string& path);

}  // namespace loom
