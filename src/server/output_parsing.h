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
#include "grammar/grammar_cache.h"
#include "grammar/token_mask.h"
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
  bool mistral_v11 = true;                    // Mistral calls as NAME[ARGS]{...}, else a list
  std::optional<ReasoningMarkers> reasoning;  // none: no reasoning split
  // The reasoning markers are special tokens (Gemma 4's <|channel>thought ... <channel|>): chat
  // replies keep special tokens in their text for the split to see them.
  bool reasoning_special_tokens = false;
};

// `tool_parser`: "auto" (detect from the chat template), "none", or a format name
// (ToolCallFormatNames()); `reasoning_parser`: "auto" (on when the template writes <think>, or
// Gemma 4's <|channel>thought channel), "none" or "think". InvalidArgument naming the flag for
// an unknown name.
StatusOr<OutputParsers> ResolveOutputParsers(const std::string& tool_parser,
                                             const std::string& reasoning_parser,
                                             const TextCodec* codec);

// Per request, before the prompt is built: checks that a request with tools can be parsed
// (InvalidArgument naming "tools" otherwise), keeps special tokens in the detokenized text when
// the format's markers are special tokens, and sets the tool-call grammar (tool_grammar.h): under
// tool_choice required / named the reply is calls of the tools in the format's markup, valid
// against their schemas (grammar_field "tool_choice"; a request grammar besides is a 400); under
// auto, unless the request brings its own grammar, the lazy one (grammar_field "tools",
// optional: a grammar that does not compile leaves the calls unconstrained).
Status PrepareOutputParsing(const OutputParsers& parsers, GenerationRequest* req,
                            std::string* param);

// Compiles req->grammar (through `cache`) into req->compiled_grammar, first wrapped so that it
// applies after a reasoning section when the chat template may start one (`rendered_prompt`
// opened it: the section comes first; the prompt closed it: no wrap; else an optional section).
// InvalidArgument naming req->grammar_field for a grammar that does not compile or an
// unsupported schema keyword, and when `vocab` is null (no tokenizer, or one without a
// per-token stream plan).
Status CompileRequestGrammar(const OutputParsers& parsers, GrammarCache* cache,
                             const TokenVocabulary* vocab, const std::string& rendered_prompt,
                             GenerationRequest* req, std::string* param);

// Per request, after the prompt is built: the engine's reasoning budget (req->reasoning_budget,
// else `default_budget`; -1 = none) into req->engine_reasoning_budget, when the model's reasoning
// parser is on, the request is a chat one and `rendered_prompt` leaves a section to come (a
// prompt that opened it: the reply starts in it; one that closed it: no budget). The markers are
// tokenized with `codec`: the close marker, "\n" close "\n\n" forced (what Qwen3's and
// DeepSeek-R1's templates write after reasoning) and the open marker. No budget otherwise.
void ResolveReasoningBudget(const OutputParsers& parsers, const TextCodec* codec,
                            const std::string& rendered_prompt, int default_budget,
                            GenerationRequest* req);

// Wraps `source` in the parsers `req` needs. `rendered_prompt` is the chat template's output: a
// prompt that ends inside an open <think> makes the reply start in reasoning.
std::unique_ptr<ChoiceEventSource> WrapOutputParsers(const OutputParsers& parsers,
                                                     const GenerationRequest& req,
                                                     const std::string& rendered_prompt,
                                                     std::unique_ptr<ChoiceEventSource> source,
                                                     ApiFlavor flavor);

}  // namespace loom
