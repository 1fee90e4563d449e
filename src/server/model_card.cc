#include "server/model_card.h"

#include <cstdio>

namespace loom {
namespace {

using nlohmann::ordered_json;

ordered_json StringOrNull(const std::string& s) {
  return s.empty() ? ordered_json() : ordered_json(s);
}

ordered_json PositiveOrNull(int64_t v) { return v > 0 ? ordered_json(v) : ordered_json(); }

}  // namespace

ordered_json ModelCardJson(const ModelCard& card) {
  const std::optional<ToolCallFormat>& tools = card.capabilities.tool_format;
  return ordered_json{
      {"id", card.id},
      {"source", StringOrNull(card.source)},
      {"path", StringOrNull(card.path)},
      {"revision", StringOrNull(card.revision)},
      {"commit", StringOrNull(card.commit)},
      {"architecture", StringOrNull(card.architecture)},
      {"parameters", PositiveOrNull(card.num_params)},
      {"parameters_source", StringOrNull(card.params_source)},
      {"format", StringOrNull(card.format)},
      {"quantization", StringOrNull(card.quantization)},
      {"context_length", PositiveOrNull(card.context_length)},
      {"size_bytes", card.size_bytes},
      {"chat_template", card.has_chat_template},
      {"capabilities",
       ordered_json{{"tools", tools.has_value()},
                    {"tool_call_format", tools.has_value()
                                             ? ordered_json(std::string(ToolCallFormatName(*tools)))
                                             : ordered_json()},
                    {"reasoning", card.capabilities.reasoning}}},
      {"status", card.problems.empty() ? "ok" : "incomplete"},
      {"problems", card.problems},
  };
}

std::string FormatParams(int64_t num_params) {
  if (num_params <= 0) return "";
  const double n = static_cast<double>(num_params);
  char buf[32];
  if (n >= 1e9) {
    std::snprintf(buf, sizeof(buf), "%.1fB", n / 1e9);
  } else if (n >= 1e6) {
    std::snprintf(buf, sizeof(buf), n >= 1e8 ? "%.0fM" : "%.1fM", n / 1e6);
  } else {
    std::snprintf(buf, sizeof(buf), "%.1fK", n / 1e3);
  }
  return buf;
}

}  // namespace loom
