// ChatTemplate: a Hugging Face chat template (Jinja2), parsed once and rendered per request
// exactly as transformers renders it (jinja2 with trim_blocks, lstrip_blocks, the sandbox, and
// transformers' tojson / raise_exception / strftime_now / {% generation %}).
//
//   ASSIGN_OR_RETURN(LoadedChatTemplate loaded, LoadChatTemplate(config_text, jinja_path, "",
//   has_tools)); ASSIGN_OR_RETURN(ChatTemplate tpl, ChatTemplate::Parse(loaded.source));
//   ordered_json ctx = {{"messages", ...}, {"tools", ...}, {"add_generation_prompt", true},
//                       {"bos_token", loaded.bos_token}, {"eos_token", loaded.eos_token}};
//   ASSIGN_OR_RETURN(std::string prompt, tpl.Render(ctx));
#pragma once

#include <memory>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <string_view>

#include "base/status.h"
#include "tokenizer/chat_template/render_options.h"

namespace loom {

using chat_template::RenderOptions;

class ChatTemplate {
 public:
  // Parses `source`. Fails (InvalidArgument, with line/column) on a syntax error, an unknown
  // filter or test (jinja2 rejects those at compile time too), or invalid UTF-8.
  static StatusOr<ChatTemplate> Parse(std::string source);

  // Renders with `context` as the template variables: messages, tools, add_generation_prompt,
  // bos_token, eos_token, enable_thinking and any chat_template_kwargs. Pass ordered_json to keep
  // key order (tojson output shows it). Thread-safe (const; no shared mutable state).
  // Errors: InvalidArgument for template errors and raise_exception (the message names the
  // template line/column), ResourceExhausted when a RenderOptions limit is hit.
  StatusOr<std::string> Render(const nlohmann::ordered_json& context,
                               const RenderOptions& options = {}) const;
  StatusOr<std::string> Render(const nlohmann::json& context,
                               const RenderOptions& options = {}) const;

  const std::string& source() const;

 private:
  struct State;
  explicit ChatTemplate(std::shared_ptr<const State> state) : state_(std::move(state)) {}
  template <typename Json>
  StatusOr<std::string> RenderImpl(const Json& context, const RenderOptions& options) const;

  std::shared_ptr<const State> state_;  // immutable after Parse; shared by copies
};

// The template source a model ships, plus the special tokens templates reference.
struct LoadedChatTemplate {
  std::string source;
  std::string bos_token;  // "" when the config has none
  std::string eos_token;
};

// Picks the chat template as transformers does: `chat_template_jinja_path` (a
// chat_template.jinja file; "" = none) wins over tokenizer_config.json's "chat_template", which
// is either a string or a list of {"name", "template"}: then `name` if given, else "tool_use"
// when `has_tools` and present, else "default". bos/eos come from the config (string or
// {"content": ...}). Errors name the file/field: NotFound when there is no template,
// InvalidArgument for malformed JSON or an unknown name.
StatusOr<LoadedChatTemplate> LoadChatTemplate(std::string_view tokenizer_config_json,
                                              const std::string& chat_template_jinja_path = "",
                                              std::string_view name = "", bool has_tools = false);

}  // namespace loom
