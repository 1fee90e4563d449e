// The grammar of a model family's tool calls (issue 22 item 4): each format's call markup as GBNF
// around grammar parts for the tools' parameter schemas (GrammarPart), so that
//
//   - tool_choice required / named (forced) constrains the whole reply to calls of the tools
//     (one, or several with parallel_tool_calls), each valid against its parameter schema;
//   - tool_choice auto gets the lazy grammar: free text, and a call the model opens (the
//     format's trigger: `<tool_call>`, `[TOOL_CALLS]`, ...) must continue as a valid call.
//
// JSON formats write the call object the way the family's template does ({"name": "f",
// "arguments": {...}} with spaces after the separators, the arguments compact). XML formats
// (Qwen3-Coder, GLM-4.5) write parameters in the schema's order, required ones always, optional
// ones or not; a string parameter's value is raw text up to the closing tag (its enum values when
// it has them; other string keywords are not enforced there), any other value is JSON valid
// against the parameter's schema. Gemma 4 and Gemma 3's tool_code write the arguments as literals
// of their own syntax (literal_schema_grammar.h says which schema keywords hold there); harmony
// (gpt-oss) writes one call a reply, a message to functions.NAME with the arguments' JSON.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "base/status.h"
#include "grammar/grammar_cache.h"
#include "server/tool_parser.h"

namespace loom {

struct ToolGrammarRequest {
  ToolCallFormat format = ToolCallFormat::kHermes;
  // Mistral: the v11 form [TOOL_CALLS]NAME[ARGS]{...} (true) or the list [TOOL_CALLS][{...}].
  bool mistral_v11 = true;
  // The request's tools ({"type": "function", "function": {"name", "parameters"}} each, as
  // tool_request.h normalizes them). Not owned.
  const nlohmann::ordered_json* tools = nullptr;
  std::string only;  // non-empty: calls of this tool only (tool_choice named)
  bool forced = false;
  bool parallel = true;  // several calls (forced: one or more; lazy: each trigger opens one)
  // Forced harmony: the model may reason first (an analysis message); false when the request
  // turns thinking off. (The <think>-like sections, Gemma 4's thought channel included, come
  // first through output_parsing.h's reasoning wrap instead.)
  bool reasoning = true;
};

// The grammar spec (kGbnf with parts; the lazy one with its trigger). A forced grammar's parts
// have no fallback (a schema the engine cannot express is an error naming its keyword when it
// compiles); the lazy one's fall back to any arguments of the right JSON type. InvalidArgument
// (naming the tool and the keyword) for a forced grammar of the literal formats that cannot
// write a tool's schema or name, and for a grammar left with no tool it can write.
StatusOr<GrammarSpec> ToolCallGrammar(const ToolGrammarRequest& req);

// The special-token markers of `format` that its grammar writes as text (token_mask.h
// FromTokenizer's special_as_text): [TOOL_CALLS], [ARGS], DeepSeek's <｜tool▁…｜>, Gemma 4's
// <|tool_call>, harmony's <|channel|>...
std::vector<std::string> ToolCallGrammarMarkers(ToolCallFormat format);

}  // namespace loom
