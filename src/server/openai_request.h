// Parsers for OpenAI's POST /v1/chat/completions and POST /v1/completions bodies: JSON text →
// GenerationRequest, validating every field we read (type and range) and rejecting features
// that are not supported yet (tools, response_format other than text, image / audio parts,
// suffix) with a message instead of ignoring them. Unknown fields are ignored, as OpenAI does.
// On error, *param is the offending field ("messages[1].role", "top_p", ...).
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "base/status.h"
#include "server/generation_request.h"

namespace loom {

StatusOr<GenerationRequest> ParseChatCompletionsRequest(const std::string& body,
                                                        const RequestDefaults& defaults,
                                                        std::string* param);
StatusOr<GenerationRequest> ParseCompletionsRequest(const std::string& body,
                                                    const RequestDefaults& defaults,
                                                    std::string* param);

// The sampling / stopping fields shared by both OpenAI routes (and vLLM's extensions: top_k,
// min_p, xtc_*, repetition_penalty, min_tokens, ignore_eos, stop_token_ids). Fills
// out->params, stop, n, stream, include_usage, max_tokens.
Status ParseOpenAiSampling(const nlohmann::json& body, const RequestDefaults& defaults,
                           GenerationRequest* out, std::string* param);

}  // namespace loom
