// Helpers shared by the route families: JSON / error responses, the request id, and turning a
// GenerationRequest into prompt token ids (chat template + tokenizer).
#pragma once

#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "server/api_error.h"
#include "server/choice_collector.h"
#include "server/choice_event.h"
#include "server/generation_request.h"
#include "server/http_message.h"
#include "server/response_id.h"
#include "server/server_context.h"

namespace loom {

// The id the pre-routing handler assigned to this request (its x-request-id header), for logs.
std::string RequestIdHeader(const HttpResponse& res);

void SendJson(HttpResponse& res, int status, const nlohmann::ordered_json& body);
void SendError(HttpResponse& res, ApiFlavor flavor, const ApiError& error);

// The server's request defaults with the vocabulary size of the model (its tokenizer's, else the
// engine's), so that token ids in requests can be checked.
RequestDefaults RequestDefaultsOf(const ServerContext& ctx);

// Rejects requests while draining (503) or when the model has no tokenizer and one is needed.
// Returns false after writing the error.
bool CheckServing(ServerContext* ctx, ApiFlavor flavor, HttpResponse& res);

// Refuses, before it is tokenized, a prompt `text` whose token count is bounded
// (TextCodec::MinTokenCount) at or beyond `max_model_len`: the OutOfRange error (400
// context_length_exceeded) the check after tokenization gives, naming the estimate and the
// limit. OK when the prompt may fit (then the exact check decides). Skips texts shorter than
// `max_model_len` bytes, whose tokenization is cheap anyway.
Status CheckPromptLength(const TextCodec& codec, std::string_view text, bool add_special_tokens,
                         int max_model_len);

// Prompt ids of `req`: chat messages rendered with the chat template then encoded without
// special tokens (as transformers' apply_chat_template does), or the completions prompt
// (encoded with special tokens, or the ids as sent). Errors set *param. With `check_context`
// (generation) a text that cannot fit the context is refused before it is tokenized
// (CheckPromptLength); count_tokens passes false: it counts prompts of any length.
// `rendered`, when given, receives the chat template's output ("" for completions).
StatusOr<std::vector<TokenId>> BuildPrompt(const ServerContext& ctx, const GenerationRequest& req,
                                           std::string* param, std::string* rendered = nullptr,
                                           bool check_context = true);

// What a prompt error names: `prompt` for the conversation / prompt (a template error, an
// over-long prompt), `max_tokens` for a max_tokens that does not fit the context.
struct PromptFields {
  std::string prompt = "messages";
  std::string max_tokens = "max_tokens";
};

// The steps of every generation route after parsing `req`: the output parsers
// (PrepareOutputParsing), the prompt (BuildPrompt), the grammar (CompileRequestGrammar), the
// engine request (Generation::Start) and the parsers around it (WrapOutputParsers). Returns the
// source to stream or collect; null after setting *error (in the API's terms, naming the field).
// `rendered`, when given, receives the chat template's output.
std::unique_ptr<ChoiceEventSource> StartChoiceSource(ServerContext* ctx, GenerationRequest* req,
                                                     ApiFlavor flavor, const PromptFields& fields,
                                                     ApiError* error);

// What a non-streamed request answers once every choice finished: writes the response from the
// collected choices and the source's final usage.
using CollectedRespond = std::function<void(const ChoiceEventSource& source,
                                            const ChoiceCollector& collector, HttpResponse& res)>;

// Answers a non-streaming request when it ends, without holding a thread: `res` becomes a
// deferred response (HttpDeferredResponse) that the server's event loop polls whenever `source`
// has news, adding its events to `collector`. When every choice finished, `respond` writes the
// answer; when a choice failed, the error in `flavor`'s shape is the answer. When the client goes
// away first, the source is aborted (its blocks are freed at the next engine step) and the
// disconnect is counted.
void DeferCollected(ServerContext* ctx, std::unique_ptr<ChoiceEventSource> source,
                    ChoiceCollector collector, ApiFlavor flavor, CollectedRespond respond,
                    HttpResponse& res);

// Unix seconds now.
int64_t UnixNow();

}  // namespace loom
