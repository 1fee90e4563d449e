// The structured-output fields of an OpenAI chat request (FEATURES.md F17; issue 22 item 3),
// parsed into GenerationRequest::grammar: `response_format` (json_object, json_schema), vLLM's
// `guided_json` / `guided_regex` / `guided_choice` / `guided_grammar` and `structured_outputs`,
// and llama.cpp's `grammar` (GBNF) / `json_schema`. At most one of them per request. The grammar
// is compiled later, by the route (CompileRequestGrammar), so that compile errors are 400s naming
// the field the spec came from.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "base/status.h"
#include "server/generation_request.h"

namespace loom {

// `body` is the parsed request; `body_text` its text, re-read for the schemas' key order
// (nlohmann::json sorts object keys, and a schema's property order is the order its grammar
// writes them in).
Status ParseOpenAiGrammarFields(const nlohmann::json& body, const std::string& body_text,
                                GenerationRequest* out, std::string* param);

// The Responses API's `text.format` ({"type": "text"} | {"type": "json_object"} |
// {"type": "json_schema", "name", "schema", "strict"}) into out->grammar; errors name
// "text.format..." fields.
Status ParseResponsesTextFormat(const nlohmann::json& text, const std::string& body_text,
                                GenerationRequest* out, std::string* param);

// Puts back the declaration order of the tools' parameter schemas (tools[i].function.parameters,
// functions[i].parameters, Anthropic tools[i].input_schema) from `body_text`: chat templates
// print them with tojson and forced tool calls follow their property order.
void RestoreToolSchemaOrder(const std::string& body_text, GenerationRequest* out);

}  // namespace loom
