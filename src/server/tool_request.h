// The tool-calling fields of a request (FEATURES.md F16; issue 22 items 4 and 7), shared by the
// OpenAI and Anthropic parsers: tool definitions, tool_choice, and tool calls / tool results in
// the conversation, all normalized to the shape Hugging Face chat templates read (transformers'
// apply_chat_template convention):
//
//   tools:     [{"type": "function", "function": {"name", "description", "parameters"}}]
//   assistant: {"role": "assistant", "content": "...",
//               "tool_calls": [{"id", "type": "function",
//                               "function": {"name", "arguments": {...object...}}}]}
//   result:    {"role": "tool", "tool_call_id", "name", "content": "..."}
//
// Arguments are passed to templates as objects (templates write them with tojson); arguments
// that are not JSON object text stay strings. Errors are InvalidArgument naming the field.
#pragma once

#include <map>
#include <nlohmann/json.hpp>
#include <string>

#include "base/status.h"
#include "server/generation_request.h"

namespace loom {

// OpenAI `tools` ([{"type": "function", "function": {...}}]) or the legacy `functions`
// ([{name, description, parameters}]; `field` = "functions"). Appends to out->tools. A function
// needs a name (no whitespace or control characters, unique) and, if present, a `parameters`
// object; an absent one becomes {"type": "object", "properties": {}}.
Status ParseOpenAiTools(const nlohmann::json& tools, const std::string& field,
                        GenerationRequest* out, std::string* param);
// Anthropic `tools` ([{name, description, input_schema}]). Server tools (a `type` other than
// "custom") are refused: loom cannot run them.
Status ParseAnthropicTools(const nlohmann::json& tools, GenerationRequest* out, std::string* param);

// Responses API `tools`: flat function tools ([{"type": "function", "name", "description",
// "parameters", "strict"}]) and `namespace` groups of them (Codex's), which are flattened (the
// function's namespace goes into *namespaces by function name). web_search tools are skipped:
// the model is not told about them (Codex sends one by default; docs/api.md). Other built-in
// types loom cannot run (file_search, code_interpreter, custom, mcp, ...) are refused.
// `ordered_tools`, when not null, is the same array with its key order (see
// RestoreToolSchemaOrder): parameter schemas keep their declaration order.
Status ParseResponsesTools(const nlohmann::json& tools, const nlohmann::ordered_json* ordered_tools,
                           GenerationRequest* out, std::map<std::string, std::string>* namespaces,
                           std::string* param);
// Responses API `tool_choice` ("none" | "auto" | "required" | {"type": "function", "name"});
// "auto" is accepted without tools.
Status ParseResponsesToolChoice(const nlohmann::json& choice, GenerationRequest* out,
                                std::string* param);

// OpenAI `tool_choice` ("none" | "auto" | "required" | {"type": "function", "function":
// {"name"}}) or the legacy `function_call` ("none" | "auto" | {"name"}). Needs out->tools.
Status ParseOpenAiToolChoice(const nlohmann::json& choice, const std::string& field,
                             GenerationRequest* out, std::string* param);
// Anthropic `tool_choice` ({"type": "auto" | "any" | "tool" | "none", "name",
// "disable_parallel_tool_use"}).
Status ParseAnthropicToolChoice(const nlohmann::json& choice, GenerationRequest* out,
                                std::string* param);

// The normalized tool call of an assistant turn: `arguments` is JSON object text (or, from
// Anthropic, an object); it becomes an object when it parses as one.
nlohmann::ordered_json TemplateToolCall(const std::string& id, const std::string& name,
                                        const nlohmann::json& arguments);

// OpenAI assistant `tool_calls` (`field` names it): validated and normalized into
// message["tool_calls"].
Status ParseOpenAiAssistantToolCalls(const nlohmann::json& calls, const std::string& field,
                                     nlohmann::ordered_json* message, std::string* param);

// The name of the earlier assistant tool call with id `id` in `messages` ("" when none).
std::string ToolNameForCallId(const nlohmann::ordered_json& messages, const std::string& id);

}  // namespace loom
