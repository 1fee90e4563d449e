// Helpers shared by the route families: JSON / error responses, the request id, and turning a
// GenerationRequest into prompt token ids (chat template + tokenizer).
#pragma once

#include <string>
#include <vector>

#include <httplib.h>
#include <nlohmann/json.hpp>

#include "server/api_error.h"
#include "server/generation_request.h"
#include "server/server_context.h"

namespace loom {

// The id the pre-routing handler assigned to this request (x-request-id).
std::string RequestId(const httplib::Response& res);

void SendJson(httplib::Response& res, int status, const nlohmann::ordered_json& body);
void SendError(httplib::Response& res, ApiFlavor flavor, const ApiError& error);

// Rejects requests while draining (503) or when the model has no tokenizer and one is needed.
// Returns false after writing the error.
bool CheckServing(ServerContext* ctx, ApiFlavor flavor, httplib::Response& res);

// Prompt ids of `req`: chat messages rendered with the chat template then encoded without
// special tokens (as transformers' apply_chat_template does), or the completions prompt
// (encoded with special tokens, or the ids as sent). Errors set *param.
StatusOr<std::vector<TokenId>> BuildPrompt(const ServerContext& ctx, const GenerationRequest& req,
                                           std::string* param);

// Unix seconds now.
int64_t UnixNow();
// A random-looking id with `prefix` ("chatcmpl-", "cmpl-", "msg_").
std::string NewResponseId(const std::string& prefix);

}  // namespace loom
