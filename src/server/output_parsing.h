// Which parsers a chat response goes through (issue 22 items 4 and 5), decided once at startup
// from --tool-parser / --reasoning-parser and the chat template, and per request from its tools:
//
//   Generation → [ReasoningSource: <think> sections → kReasoning]
//              → [ToolCallSource: the family's call markup → kToolCallStart / kToolCallArgs]
//              → a StreamEncoder or a ChoiceCollector
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "base/status.h"
#include "server/api_error.h"
#include "server/choice_event.h"
#include "server/generation_request.h"
#include "server/reasoning_parser.h"
#include "server/tool_parser.h"

namespace loom {

class TextCodec;

// The parsers of the served model, resolved from the flags and the chat template.
struct OutputParsers {
  std::optional<ToolCallFormat> tool_format;  // none: requests with tools get a 400
  std::string tool_format_why;                // how it was chosen (the ready card prints it)
  std::optional<ReasoningMarkers> reasoning;  // none: no reasoning split
};

// `tool_parser`: "auto" (detect from the chat template), "none", or a format name
// (ToolCallFormatNames()); `reasoning_parser`: "auto" (on when the template writes <think>),
// "none" or "think". InvalidArgument naming the flag for an unknown name.
StatusOr<OutputParsers> ResolveOutputParsers(const std::string& tool_parser,
                                             const std::string& reasoning_parser,
                                             const TextCodec* codec);

// Per request, before the prompt is built: checks that a request with tools can be parsed
// (InvalidArgument naming "tools" otherwise) and keeps special tokens in the detokenized text
// when the format's markers are special tokens.
Status PrepareOutputParsing(const OutputParsers& parsers, GenerationRequest* req,
                            std::string* param);

// Wraps `source` in the parsers `req` needs. `rendered_prompt` is the chat template's output: a
// prompt that ends inside an open <think> makes the reply start in reasoning.
std::unique_ptr<ChoiceEventSource> WrapOutputParsers(const OutputParsers& parsers,
                                                     const GenerationRequest& req,
                                                     const std::string& rendered_prompt,
                                                     std::unique_ptr<ChoiceEventSource> source,
                                                     ApiFlavor flavor);

}  // namespace loom
