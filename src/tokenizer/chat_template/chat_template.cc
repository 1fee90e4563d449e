#include "tokenizer/chat_template/chat_template.h"

#include <filesystem>
#include <nlohmann/json.hpp>

#include "base/mapped_file.h"
#include "tokenizer/chat_template/error.h"
#include "tokenizer/chat_template/interpreter.h"
#include "tokenizer/chat_template/parser.h"

namespace loom {

using chat_template::Body;
using chat_template::Interpreter;
using chat_template::TemplateError;
using chat_template::Value;

struct ChatTemplate::State {
  std::string source;
  Body body;
};

namespace {

Status ToStatus(const TemplateError& e, bool parsing) {
  std::string where = "chat template";
  if (e.pos().line > 0) {
    where += " line " + std::to_string(e.pos().line) + ", column " + std::to_string(e.pos().column);
  }
  switch (e.kind()) {
    case TemplateError::Kind::kRaised:
      return InvalidArgumentError(std::string(e.what()) + " (raised by the " + where + ")");
    case TemplateError::Kind::kLimit:
      return ResourceExhaustedError(where + ": " + e.what());
    case TemplateError::Kind::kSyntax:
    case TemplateError::Kind::kRuntime:
      break;
  }
  return InvalidArgumentError(where + (parsing ? ": syntax error: " : ": ") + e.what());
}

}  // namespace

StatusOr<ChatTemplate> ChatTemplate::Parse(std::string source) {
  const size_t bad = chat_template::FindInvalidUtf8(source);
  if (bad != std::string::npos) {
    return InvalidArgumentError("chat template is not valid UTF-8 (byte " + std::to_string(bad) +
                                ")");
  }
  auto state = std::make_shared<State>();
  try {
    state->body = chat_template::ParseTemplate(source);
  } catch (const TemplateError& e) {
    return ToStatus(e, /*parsing=*/true);
  }
  state->source = std::move(source);
  return ChatTemplate(std::move(state));
}

template <typename Json>
StatusOr<std::string> ChatTemplate::RenderImpl(const Json& context,
                                               const RenderOptions& options) const {
  if (!context.is_object())
    return InvalidArgumentError("chat template context must be a JSON object");
  Value ctx;
  std::string error;
  if (!Value::FromJson(context, &ctx, &error)) {
    return InvalidArgumentError("chat template context: " + error);
  }
  std::string out;
  try {
    Interpreter interp(options, ctx);
    interp.Render(state_->body, &out);
  } catch (const TemplateError& e) {
    return ToStatus(e, /*parsing=*/false);
  } catch (const std::bad_alloc&) {
    return ResourceExhaustedError("chat template: out of memory while rendering");
  }
  return out;
}

StatusOr<std::string> ChatTemplate::Render(const nlohmann::ordered_json& context,
                                           const RenderOptions& options) const {
  return RenderImpl(context, options);
}

StatusOr<std::string> ChatTemplate::Render(const nlohmann::json& context,
                                           const RenderOptions& options) const {
  return RenderImpl(context, options);
}

const std::string& ChatTemplate::source() const { return state_->source; }

StatusOr<LoadedChatTemplate> LoadChatTemplate(std::string_view tokenizer_config_json,
                                              const std::string& chat_template_jinja_path,
                                              std::string_view name, bool has_tools) {
  nlohmann::json config = nlohmann::json::parse(tokenizer_config_json, nullptr,
                                                /*allow_exceptions=*/false);
  if (config.is_discarded() || !config.is_object()) {
    return InvalidArgumentError("tokenizer_config.json is not a valid JSON object");
  }
  LoadedChatTemplate out;
  auto token_text = [&](const char* key) -> std::string {
    const auto it = config.find(key);
    if (it == config.end()) return "";
    if (it->is_string()) return it->get<std::string>();
    if (it->is_object() && it->contains("content") && (*it)["content"].is_string()) {
      return (*it)["content"].get<std::string>();
    }
    return "";
  };
  out.bos_token = token_text("bos_token");
  out.eos_token = token_text("eos_token");

  if (!chat_template_jinja_path.empty()) {
    ASSIGN_OR_RETURN(out.source, ReadFileToString(chat_template_jinja_path));
    return out;
  }
  const auto it = config.find("chat_template");
  if (it == config.end() || it->is_null()) {
    return NotFoundError(
        "tokenizer_config.json has no \"chat_template\" (and no chat_template.jinja was given)");
  }
  if (it->is_string()) {
    out.source = it->get<std::string>();
    return out;
  }
  if (!it->is_array()) {
    return InvalidArgumentError(
        "tokenizer_config.json \"chat_template\" must be a string or a list of {name, template}");
  }
  auto find = [&](std::string_view wanted) -> const nlohmann::json* {
    for (const auto& e : *it) {
      if (e.is_object() && e.contains("name") && e["name"].is_string() &&
          e["name"].get<std::string>() == wanted && e.contains("template") &&
          e["template"].is_string()) {
        return &e["template"];
      }
    }
    return nullptr;
  };
  const nlohmann::json* chosen = nullptr;
  if (!name.empty()) {
    chosen = find(name);
    if (chosen == nullptr) {
      return InvalidArgumentError("tokenizer_config.json has no chat template named \"" +
                                  std::string(name) + "\"");
    }
  } else if (has_tools && (chosen = find("tool_use")) != nullptr) {
  } else if ((chosen = find("default")) == nullptr) {
    return InvalidArgumentError(
        "tokenizer_config.json has several chat templates and none named \"default\"; pass a "
        "template name");
  }
  out.source = chosen->get<std::string>();
  return out;
}

}  // namespace loom
