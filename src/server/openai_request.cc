#include "server/openai_request.h"

#include <cmath>
#include <limits>

#include "server/grammar_request.h"
#include "server/json_fields.h"
#include "server/tool_request.h"

namespace loom {
namespace {

using nlohmann::json;
using nlohmann::ordered_json;

constexpr int64_t kMaxTokensCap = int64_t{1} << 24;

Status ParseStop(const JsonFields& f, const json& body, const RequestDefaults& d,
                 std::vector<std::string>* stop, const char* key) {
  const json* v = f.Find(key);
  if (v == nullptr) return OkStatus();
  if (v->is_string()) {
    if (!v->get<std::string>().empty()) stop->push_back(v->get<std::string>());
    return OkStatus();
  }
  if (!v->is_array()) {
    return f.Error(key, std::string(key) + " must be a string or an array of strings, got " +
                            JsonTypeName(*v));
  }
  if (static_cast<int>(v->size()) > d.max_stop_strings) {
    return f.Error(key, std::string(key) + " has " + std::to_string(v->size()) +
                            " entries; at most " + std::to_string(d.max_stop_strings) +
                            " are allowed");
  }
  for (size_t i = 0; i < v->size(); ++i) {
    const json& s = (*v)[i];
    std::string name = std::string(key) + "[" + std::to_string(i) + "]";
    if (!s.is_string()) return f.Error(name, name + " must be a string, got " + JsonTypeName(s));
    if (s.get<std::string>().empty()) return f.Error(name, name + " must not be empty");
    stop->push_back(s.get<std::string>());
  }
  return OkStatus();
}

Status ParseLogitBias(const JsonFields& f, const RequestDefaults& d, SamplingParams* p) {
  const json* v = f.Find("logit_bias");
  if (v == nullptr) return OkStatus();
  if (!v->is_object()) {
    return f.Error("logit_bias", "logit_bias must be an object mapping token ids to biases, got " +
                                     JsonTypeName(*v));
  }
  for (auto it = v->begin(); it != v->end(); ++it) {
    const std::string& key = it.key();
    char* end = nullptr;
    long long id = key.empty() ? -1 : std::strtoll(key.c_str(), &end, 10);
    if (key.empty() || *end != '\0' || id < 0 || id > std::numeric_limits<int32_t>::max()) {
      return f.Error("logit_bias", "logit_bias keys must be token ids, got \"" + key + "\"");
    }
    if (d.vocab_size > 0 && id >= d.vocab_size) {
      return f.Error("logit_bias", "logit_bias token id " + key + " is out of the vocabulary [0, " +
                                       std::to_string(d.vocab_size) + ")");
    }
    if (!it->is_number()) {
      return f.Error("logit_bias",
                     "logit_bias[\"" + key + "\"] must be a number, got " + JsonTypeName(*it));
    }
    double bias = it->get<double>();
    if (!std::isfinite(bias) || bias < -100 || bias > 100) {
      return f.Error("logit_bias",
                     "logit_bias[\"" + key + "\"] must be in [-100, 100], got " + it->dump());
    }
    p->logit_bias.emplace_back(static_cast<TokenId>(id), static_cast<float>(bias));
  }
  return OkStatus();
}

// tools / functions, tool_choice / function_call, parallel_tool_calls (chat only).
Status ParseTools(const JsonFields& f, GenerationRequest* out, std::string* param) {
  const json* tools = f.Find("tools");
  const json* functions = f.Find("functions");
  if (tools != nullptr && functions != nullptr) {
    return f.Error("functions", "send tools or the legacy functions, not both");
  }
  if (tools != nullptr) RETURN_IF_ERROR(ParseOpenAiTools(*tools, "tools", out, param));
  if (functions != nullptr) RETURN_IF_ERROR(ParseOpenAiTools(*functions, "functions", out, param));
  const json* choice = f.Find("tool_choice");
  const json* function_call = f.Find("function_call");
  if (choice != nullptr && function_call != nullptr) {
    return f.Error("function_call", "send tool_choice or the legacy function_call, not both");
  }
  if (choice != nullptr) RETURN_IF_ERROR(ParseOpenAiToolChoice(*choice, "tool_choice", out, param));
  if (function_call != nullptr) {
    RETURN_IF_ERROR(ParseOpenAiToolChoice(*function_call, "function_call", out, param));
  }
  return f.Bool("parallel_tool_calls", &out->parallel_tool_calls);
}

// Text of an OpenAI message content: a string, or an array of {"type": "text", "text"} parts.
Status ContentText(const json& content, const std::string& name, std::string* param,
                   std::string* text) {
  return ForEachContentPart(
      content, name, "content parts", param, text,
      [&](const json& part, const std::string& pname, const std::string& type) -> Status {
        if (type == "text") {
          if (!part.contains("text") || !part["text"].is_string()) {
            return FieldError(param, pname + ".text", pname + ".text must be a string");
          }
          if (!text->empty()) text->push_back('\n');
          text->append(part["text"].get<std::string>());
          return OkStatus();
        }
        if (type == "image_url" || type == "input_image" || type == "image" ||
            type == "input_audio" || type == "file") {
          return UnsupportedFieldError(param, pname,
                                       "content part type \"" + type + "\" (images/audio/files)");
        }
        return FieldError(param, pname + ".type",
                          pname + ".type \"" + type + "\" is unknown; expected \"text\"");
      });
}

Status ParseMessages(const json& body, GenerationRequest* out, std::string* param) {
  auto it = body.find("messages");
  if (it == body.end() || it->is_null()) {
    *param = "messages";
    return InvalidArgumentError("messages is required");
  }
  if (!it->is_array()) {
    *param = "messages";
    return InvalidArgumentError("messages must be an array, got " + JsonTypeName(*it));
  }
  if (it->empty()) {
    *param = "messages";
    return InvalidArgumentError("messages must not be empty");
  }
  for (size_t i = 0; i < it->size(); ++i) {
    const json& m = (*it)[i];
    std::string name = "messages[" + std::to_string(i) + "]";
    if (!m.is_object()) {
      *param = name;
      return InvalidArgumentError(name + " must be an object, got " + JsonTypeName(m));
    }
    auto role_it = m.find("role");
    if (role_it == m.end() || !role_it->is_string()) {
      *param = name + ".role";
      return InvalidArgumentError(name + ".role is required and must be a string");
    }
    std::string role = role_it->get<std::string>();
    if (role == "developer") role = "system";
    if (role != "system" && role != "user" && role != "assistant" && role != "tool" &&
        role != "function") {
      *param = name + ".role";
      return InvalidArgumentError(name + ".role \"" + role_it->get<std::string>() +
                                  "\" is unknown; expected system, developer, user, assistant or "
                                  "tool");
    }
    ordered_json message{{"role", role}};
    bool has_calls = false;
    if (role == "assistant") {
      const json* calls =
          m.contains("tool_calls") && !m["tool_calls"].is_null() ? &m["tool_calls"] : nullptr;
      if (const json* fc = m.contains("function_call") && !m["function_call"].is_null()
                               ? &m["function_call"]
                               : nullptr) {
        if (calls != nullptr) {
          *param = name + ".function_call";
          return InvalidArgumentError(name + " has both tool_calls and function_call");
        }
        RETURN_IF_ERROR(ParseOpenAiAssistantToolCalls(
            json::array({json{{"type", "function"}, {"function", *fc}}}), name + ".function_call",
            &message, param));
        has_calls = true;
      } else if (calls != nullptr) {
        RETURN_IF_ERROR(
            ParseOpenAiAssistantToolCalls(*calls, name + ".tool_calls", &message, param));
        has_calls = !message["tool_calls"].empty();
      }
      if (m.contains("reasoning_content") && m["reasoning_content"].is_string()) {
        message["reasoning_content"] = m["reasoning_content"];
      }
    }
    auto c = m.find("content");
    std::string text;
    if (c == m.end() || c->is_null()) {
      if (!has_calls) {
        *param = name + ".content";
        return InvalidArgumentError(name + ".content is required");
      }
    } else {
      RETURN_IF_ERROR(ContentText(*c, name + ".content", param, &text));
    }
    if (text.empty() && (role == "system" || role == "user")) {
      *param = name + ".content";
      return InvalidArgumentError(name + ".content must not be empty");
    }
    if (role == "tool" || role == "function") {
      // A tool's result: role "tool" with the tool_call_id it answers (legacy role "function"
      // names the function instead).
      std::string id, fn_name;
      if (role == "tool") {
        auto id_it = m.find("tool_call_id");
        if (id_it == m.end() || !id_it->is_string()) {
          *param = name + ".tool_call_id";
          return InvalidArgumentError(name + ".tool_call_id is required and must be a string");
        }
        id = id_it->get<std::string>();
        fn_name = ToolNameForCallId(out->messages, id);
        if (fn_name.empty()) {
          *param = name + ".tool_call_id";
          return InvalidArgumentError(name + ".tool_call_id \"" + id +
                                      "\" answers no tool call of an earlier assistant message");
        }
      } else {
        auto n = m.find("name");
        if (n == m.end() || !n->is_string()) {
          *param = name + ".name";
          return InvalidArgumentError(name + ".name is required for role \"function\"");
        }
        fn_name = n->get<std::string>();
      }
      message = ordered_json{{"role", "tool"}, {"tool_call_id", id}, {"name", fn_name}};
    }
    // content right after role, as transformers' examples order the keys (tojson shows it).
    ordered_json normalized{{"role", message["role"]}, {"content", text}};
    for (auto kv = message.begin(); kv != message.end(); ++kv) {
      if (kv.key() != "role") normalized[kv.key()] = kv.value();
    }
    message = std::move(normalized);
    out->messages.push_back(std::move(message));
  }
  return OkStatus();
}

Status ParseTemplateKwargs(const JsonFields& f, const RequestDefaults& d, GenerationRequest* out) {
  if (const json* v = f.Find("chat_template_kwargs")) {
    if (!v->is_object()) {
      return f.Error("chat_template_kwargs",
                     "chat_template_kwargs must be an object, got " + JsonTypeName(*v));
    }
    for (auto it = v->begin(); it != v->end(); ++it) out->template_kwargs[it.key()] = *it;
  }
  // enable_thinking precedence: chat_template_kwargs > reasoning_effort > --thinking.
  if (const json* v = f.Find("reasoning_effort")) {
    if (!v->is_string()) {
      return f.Error("reasoning_effort",
                     "reasoning_effort must be a string, got " + JsonTypeName(*v));
    }
    std::string e = v->get<std::string>();
    if (e != "none" && e != "minimal" && e != "low" && e != "medium" && e != "high") {
      return f.Error("reasoning_effort",
                     "reasoning_effort must be one of none, minimal, low, "
                     "medium, high; got \"" +
                         e + "\"");
    }
    if (!out->template_kwargs.contains("enable_thinking")) {
      out->template_kwargs["enable_thinking"] = e != "none";
    }
    if (!out->template_kwargs.contains("reasoning_effort")) {
      out->template_kwargs["reasoning_effort"] = e;
    }
  }
  if (!out->template_kwargs.contains("enable_thinking") && d.enable_thinking.has_value()) {
    out->template_kwargs["enable_thinking"] = *d.enable_thinking;
  }
  // vLLM's name for a cap on the reasoning section (reasoning_effort sets none: it only reaches
  // the template).
  bool has_budget = false;
  int budget = 0;
  RETURN_IF_ERROR(f.Int("thinking_token_budget", 0, 1 << 30, &budget, &has_budget));
  if (has_budget) {
    out->reasoning_budget = budget;
    out->reasoning_budget_field = "thinking_token_budget";
  }
  return OkStatus();
}

}  // namespace

Status ParseOpenAiSampling(const json& body, const RequestDefaults& d, GenerationRequest* out,
                           std::string* param) {
  JsonFields f(body, param);
  SamplingParams& p = out->params;
  RETURN_IF_ERROR(f.String("model", &out->model));
  RETURN_IF_ERROR(f.String("user", &out->user));
  p.temperature = d.temperature;
  p.top_p = d.top_p;
  p.top_k = d.top_k;
  RETURN_IF_ERROR(f.Number("temperature", 0.0, 2.0, &p.temperature));
  RETURN_IF_ERROR(f.Number("top_p", 0.0, 1.0, &p.top_p));
  if (p.top_p <= 0.0f) return f.Error("top_p", "top_p must be in (0, 1], got 0");
  RETURN_IF_ERROR(f.Int("top_k", -1, 1 << 20, &p.top_k));
  if (p.top_k < 0) p.top_k = 0;
  RETURN_IF_ERROR(f.Number("min_p", 0.0, 1.0, &p.min_p));
  RETURN_IF_ERROR(f.Number("xtc_probability", 0.0, 1.0, &p.xtc_probability));
  RETURN_IF_ERROR(f.Number("xtc_threshold", 0.0, 1.0, &p.xtc_threshold));
  RETURN_IF_ERROR(f.Number("repetition_penalty", 0.0, 100.0, &p.repetition_penalty));
  if (p.repetition_penalty <= 0.0f) {
    return f.Error("repetition_penalty", "repetition_penalty must be > 0");
  }
  RETURN_IF_ERROR(f.Number("presence_penalty", -2.0, 2.0, &p.presence_penalty));
  RETURN_IF_ERROR(f.Number("frequency_penalty", -2.0, 2.0, &p.frequency_penalty));
  RETURN_IF_ERROR(ParseLogitBias(f, d, &p));
  if (const json* v = f.Find("seed")) {
    if (!v->is_number_integer()) {
      // An integer beyond 64 bits parses as a (whole) double.
      const bool too_big = v->is_number_float() && std::isfinite(v->get<double>()) &&
                           v->get<double>() == std::floor(v->get<double>());
      return f.Error("seed", too_big ? "seed must be an integer in [-2^63, 2^64), got " + v->dump()
                                     : "seed must be an integer, got " + JsonTypeName(*v));
    }
    p.seed =
        v->is_number_unsigned() ? v->get<uint64_t>() : static_cast<uint64_t>(v->get<int64_t>());
  }
  bool has_max = false, has_max_completion = false;
  int max_tokens = 0, max_completion_tokens = 0;
  RETURN_IF_ERROR(f.Int("max_tokens", 1, kMaxTokensCap, &max_tokens, &has_max));
  RETURN_IF_ERROR(f.Int("max_completion_tokens", 1, kMaxTokensCap, &max_completion_tokens,
                        &has_max_completion));
  if (has_max_completion) {
    p.max_tokens = max_completion_tokens;
  } else if (has_max) {
    p.max_tokens = max_tokens;
  } else {
    p.max_tokens = d.max_tokens;
  }
  out->max_tokens_set = p.max_tokens > 0;
  RETURN_IF_ERROR(f.Int("min_tokens", 0, kMaxTokensCap, &p.min_tokens));
  if (out->max_tokens_set && p.min_tokens > p.max_tokens) {
    return f.Error("min_tokens", "min_tokens (" + std::to_string(p.min_tokens) +
                                     ") must not exceed max_tokens (" +
                                     std::to_string(p.max_tokens) + ")");
  }
  RETURN_IF_ERROR(f.Bool("ignore_eos", &p.ignore_eos));
  if (const json* v = f.Find("stop_token_ids")) {
    if (!v->is_array()) {
      return f.Error("stop_token_ids", "stop_token_ids must be an array of token ids");
    }
    for (const json& id : *v) {
      if (!id.is_number_integer() || id.get<int64_t>() < 0 ||
          (d.vocab_size > 0 && id.get<int64_t>() >= d.vocab_size)) {
        return f.Error("stop_token_ids", "stop_token_ids entries must be token ids in [0, " +
                                             std::to_string(d.vocab_size) + "), got " + id.dump());
      }
      p.stop_token_ids.push_back(static_cast<TokenId>(id.get<int64_t>()));
    }
  }
  RETURN_IF_ERROR(ParseStop(f, body, d, &out->stop, "stop"));
  RETURN_IF_ERROR(f.Int("n", 1, d.max_n, &out->n));
  RETURN_IF_ERROR(f.Bool("stream", &out->stream));
  if (const json* v = f.Find("stream_options")) {
    if (!v->is_object()) {
      return f.Error("stream_options", "stream_options must be an object, got " + JsonTypeName(*v));
    }
    if (!out->stream) {
      return f.Error("stream_options", "stream_options is only allowed when stream is true");
    }
    JsonFields so(*v, param);
    Status s = so.Bool("include_usage", &out->include_usage);
    if (!s.ok()) {
      *param = "stream_options.include_usage";
      return InvalidArgumentError("stream_options." + std::string(s.message()));
    }
  }
  return OkStatus();
}

namespace {

StatusOr<GenerationRequest> ParseChat(const std::string& body, const RequestDefaults& defaults,
                                      std::string* param) {
  ASSIGN_OR_RETURN(json j, ParseJsonObject(body, param));
  GenerationRequest out;
  out.kind = ApiKind::kChatCompletions;
  RETURN_IF_ERROR(ParseOpenAiSampling(j, defaults, &out, param));
  RETURN_IF_ERROR(ParseMessages(j, &out, param));
  JsonFields f(j, param);
  RETURN_IF_ERROR(ParseTools(f, &out, param));
  RestoreToolSchemaOrder(body, &out);
  RETURN_IF_ERROR(ParseOpenAiGrammarFields(j, body, &out, param));
  RETURN_IF_ERROR(f.Bool("logprobs", &out.logprobs));
  bool has_top = false;
  RETURN_IF_ERROR(f.Int("top_logprobs", 0, 20, &out.top_logprobs, &has_top));
  if (has_top && !out.logprobs) {
    return f.Error("top_logprobs", "top_logprobs requires logprobs to be true");
  }
  RETURN_IF_ERROR(f.Bool("add_generation_prompt", &out.add_generation_prompt));
  bool continue_final = false;
  RETURN_IF_ERROR(f.Bool("continue_final_message", &continue_final));
  if (continue_final) out.add_generation_prompt = false;
  RETURN_IF_ERROR(ParseTemplateKwargs(f, defaults, &out));
  if (out.logprobs) out.params.num_logprobs = out.top_logprobs;
  return out;
}

StatusOr<GenerationRequest> ParseCompletions(const std::string& body,
                                             const RequestDefaults& defaults, std::string* param) {
  ASSIGN_OR_RETURN(json j, ParseJsonObject(body, param));
  GenerationRequest out;
  out.kind = ApiKind::kCompletions;
  RETURN_IF_ERROR(ParseOpenAiSampling(j, defaults, &out, param));
  JsonFields f(j, param);
  RETURN_IF_ERROR(ParseOpenAiGrammarFields(j, body, &out, param));
  for (const char* key : {"tools", "functions", "tool_choice", "function_call"}) {
    if (f.Find(key) != nullptr) {
      return f.Error(key, std::string(key) +
                              " is for /v1/chat/completions; /v1/completions "
                              "takes a raw prompt");
    }
  }
  const json* prompt = f.Find("prompt");
  if (prompt == nullptr) return f.Error("prompt", "prompt is required");
  auto parse_ids = [&](const json& arr, const std::string& name) -> Status {
    for (const json& id : arr) {
      if (!id.is_number_integer() || id.get<int64_t>() < 0 ||
          (defaults.vocab_size > 0 && id.get<int64_t>() >= defaults.vocab_size)) {
        return f.Error(name, name + " token ids must be in [0, " +
                                 std::to_string(defaults.vocab_size) + "), got " + id.dump());
      }
      out.prompt_ids.push_back(static_cast<TokenId>(id.get<int64_t>()));
    }
    out.prompt_is_ids = true;
    return OkStatus();
  };
  if (prompt->is_string()) {
    out.prompt_text = prompt->get<std::string>();
  } else if (prompt->is_array() && !prompt->empty() && (*prompt)[0].is_number()) {
    RETURN_IF_ERROR(parse_ids(*prompt, "prompt"));
  } else if (prompt->is_array() && prompt->size() == 1 && (*prompt)[0].is_string()) {
    out.prompt_text = (*prompt)[0].get<std::string>();
  } else if (prompt->is_array() && prompt->size() == 1 && (*prompt)[0].is_array()) {
    RETURN_IF_ERROR(parse_ids((*prompt)[0], "prompt[0]"));
  } else if (prompt->is_array() && prompt->size() > 1) {
    return UnsupportedFieldError(param, "prompt",
                                 "a batch of several prompts (send one request each)");
  } else {
    return f.Error(
        "prompt", "prompt must be a string or an array of token ids, got " + JsonTypeName(*prompt));
  }
  if (out.prompt_text.empty() && out.prompt_ids.empty()) {
    return f.Error("prompt", "prompt must not be empty");
  }
  if (const json* v = f.Find("suffix")) {
    if (!(v->is_string() && v->get<std::string>().empty())) {
      return UnsupportedFieldError(param, "suffix", "suffix (fill-in-the-middle)");
    }
  }
  RETURN_IF_ERROR(f.Bool("echo", &out.echo));
  bool has_logprobs = false;
  RETURN_IF_ERROR(f.Int("logprobs", 0, 20, &out.top_logprobs, &has_logprobs));
  out.logprobs = has_logprobs;
  if (out.logprobs) out.params.num_logprobs = out.top_logprobs;
  if (const json* v = f.Find("best_of")) {
    if (!(v->is_number_integer() && v->get<int64_t>() == out.n)) {
      return UnsupportedFieldError(param, "best_of", "best_of other than n");
    }
  }
  return out;
}

}  // namespace

StatusOr<GenerationRequest> ParseChatCompletionsRequest(const std::string& body,
                                                        const RequestDefaults& defaults,
                                                        std::string* param) {
  return CatchJsonErrors([&] { return ParseChat(body, defaults, param); });
}

StatusOr<GenerationRequest> ParseCompletionsRequest(const std::string& body,
                                                    const RequestDefaults& defaults,
                                                    std::string* param) {
  return CatchJsonErrors([&] { return ParseCompletions(body, defaults, param); });
}

}  // namespace loom
