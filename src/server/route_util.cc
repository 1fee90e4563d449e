#include "server/route_util.h"

#include <atomic>
#include <chrono>
#include <random>

namespace loom {

using nlohmann::ordered_json;

std::string RequestId(const httplib::Response& res) { return res.get_header_value("x-request-id"); }

void SendJson(httplib::Response& res, int status, const ordered_json& body) {
  res.status = status;
  res.set_content(body.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace),
                  "application/json");
}

void SendError(httplib::Response& res, ApiFlavor flavor, const ApiError& error) {
  SendJson(res, error.http_status, error.ToJson(flavor));
}

bool CheckServing(ServerContext* ctx, ApiFlavor flavor, httplib::Response& res) {
  if (ctx->draining.load()) {
    ApiError e;
    e.http_status = 503;
    e.message = "the server is shutting down";
    SendError(res, flavor, e);
    return false;
  }
  return true;
}

StatusOr<std::vector<TokenId>> BuildPrompt(const ServerContext& ctx, const GenerationRequest& req,
                                           std::string* param) {
  if (req.kind == ApiKind::kCompletions && req.prompt_is_ids) return req.prompt_ids;
  if (ctx.codec == nullptr) {
    *param = req.kind == ApiKind::kCompletions ? "prompt" : "messages";
    return InvalidArgumentError("the model '" + ctx.model.name +
                                "' has no tokenizer; send the prompt to /v1/completions as "
                                "token ids");
  }
  if (req.kind == ApiKind::kCompletions) {
    *param = "prompt";
    return ctx.codec->Encode(req.prompt_text, /*add_special_tokens=*/true);
  }
  *param = "messages";
  if (!ctx.codec->has_chat_template()) {
    // Like vLLM (transformers >= 4.44 has no default template): refuse rather than guess.
    return InvalidArgumentError(
        "the model '" + ctx.model.name +
        "' has no chat template, so chat requests cannot be formatted; start loom serve with "
        "--chat-template FILE, or use /v1/completions with a raw prompt");
  }
  ordered_json context = ordered_json::object();
  context["messages"] = req.messages;
  context["add_generation_prompt"] = req.add_generation_prompt;
  for (auto it = req.template_kwargs.begin(); it != req.template_kwargs.end(); ++it) {
    context[it.key()] = it.value();
  }
  StatusOr<std::string> text = ctx.codec->RenderChat(context);
  if (!text.ok()) {
    return InvalidArgumentError("the chat template failed: " + std::string(text.status().message()));
  }
  return ctx.codec->Encode(*text, /*add_special_tokens=*/false);
}

int64_t UnixNow() {
  return std::chrono::duration_cast<std::chrono::seconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

std::string NewResponseId(const std::string& prefix) {
  static std::atomic<uint64_t> counter{0};
  static const uint64_t salt = std::random_device{}();
  uint64_t x = salt ^ (counter.fetch_add(1) * 0x9E3779B97F4A7C15ull);
  x ^= x >> 31;
  x *= 0xBF58476D1CE4E5B9ull;
  x ^= x >> 27;
  static const char* kDigits = "0123456789abcdefghijklmnopqrstuvwxyz";
  std::string id = prefix;
  for (int i = 0; i < 24; ++i) {
    id.push_back(kDigits[x % 36]);
    x = x / 36 + (static_cast<uint64_t>(i) + 1) * 0x2545F4914F6CDD1Dull;
  }
  return id;
}

}  // namespace loom
