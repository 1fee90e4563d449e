// Parser for Anthropic's POST /v1/messages (and /v1/messages/count_tokens) bodies: JSON text →
// GenerationRequest. `system` (string or text blocks) becomes a leading system message; text
// content blocks are joined; tools, tool_use / tool_result and image blocks are rejected as not
// supported yet. `thinking: {"type": "enabled"}` sets enable_thinking. On error, *param names
// the field (Anthropic's error JSON has no param; the message names it too).
#pragma once

#include <string>

#include "base/status.h"
#include "server/generation_request.h"

namespace loom {

// `for_count_tokens`: max_tokens is not required (count_tokens bodies omit it).
StatusOr<GenerationRequest> ParseMessagesRequest(const std::string& body,
                                                 const RequestDefaults& defaults,
                                                 std::string* param, bool for_count_tokens = false);

}  // namespace loom
