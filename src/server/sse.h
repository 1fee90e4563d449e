// Server-sent events framing (text/event-stream), as OpenAI and Anthropic stream.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

namespace loom {

// "data: <json>\n\n"
inline std::string SseData(const nlohmann::ordered_json& payload) {
  return "data: " + payload.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n\n";
}
// "event: <name>\ndata: <json>\n\n"
inline std::string SseEvent(std::string_view name, const nlohmann::ordered_json& payload) {
  return "event: " + std::string(name) + "\n" + SseData(payload);
}
inline constexpr std::string_view kSseDone = "data: [DONE]\n\n";

}  // namespace loom
