#include "server/output_parsing.h"

#include "server/template_capabilities.h"
#include "server/text_codec.h"
#include "server/tool_call_source.h"
#include "server/tool_grammar.h"

namespace loom {
namespace {

// True when `prompt` ends (trailing whitespace aside) with `marker`.
bool EndsWithMarker(const std::string& prompt, const std::string& marker) {
  const size_t end = prompt.find_last_not_of(" \n\r\t");
  if (end == std::string::npos || end + 1 < marker.size()) return false;
  return prompt.compare(end + 1 - marker.size(), marker.size(), marker) == 0;
}

// gpt-oss: a chat reply is harmony messages (analysis, commentary, final) whether or not the
// request has tools, so its parser runs on every chat reply (analysis as reasoning, final as
// content); the markers are special tokens the detokenizer must keep.
bool HasChannels(const OutputParsers& parsers, const GenerationRequest& req) {
  return parsers.tool_format == ToolCallFormat::kHarmony && req.kind != ApiKind::kCompletions;
}

}  // namespace

StatusOr<OutputParsers> ResolveOutputParsers(const std::string& tool_parser,
                                             const std::string& reasoning_parser,
                                             const TextCodec* codec) {
  OutputParsers out;
  const std::string tools_source =
      codec != nullptr ? codec->chat_template_source(/*tools=*/true) : std::string();
  const TemplateCapabilities detected = DetectTemplateCapabilities(tools_source);
  if (tool_parser == "auto") {
    out.tool_format = detected.tool_format;
    out.tool_format_why =
        out.tool_format.has_value()
            ? std::string(ToolCallFormatName(*out.tool_format)) + " (from the chat template)"
            : "none (the chat template shows no known tool-call format)";
  } else if (tool_parser == "none") {
    out.tool_format_why = "off (--tool-parser none)";
  } else {
    out.tool_format = ToolCallFormatFromName(tool_parser);
    if (!out.tool_format.has_value()) {
      return InvalidArgumentError("--tool-parser \"" + tool_parser +
                                  "\" is unknown; expected auto, none or one of " +
                                  ToolCallFormatNames());
    }
    out.tool_format_why = tool_parser + " (--tool-parser)";
  }
  // Mistral's templates before v11 (Nemo) write a JSON list after [TOOL_CALLS]; later ones
  // NAME[ARGS]{...}. Without a template to tell, the newer form.
  out.mistral_v11 = tools_source.empty() || tools_source.find("[ARGS]") != std::string::npos;
  if (reasoning_parser == "think" || (reasoning_parser == "auto" && detected.reasoning)) {
    out.reasoning = ReasoningMarkers{};
  } else if (reasoning_parser == "auto" &&
             tools_source.find("<|channel>thought") != std::string::npos) {
    // Gemma 4's template writes '<|channel>thought\n' + thinking + '\n<channel|>' (and closes
    // an empty one in the generation prompt when thinking is off).
    out.reasoning = ReasoningMarkers{"<|channel>thought\n", "<channel|>"};
    out.reasoning_special_tokens = true;
  } else if (reasoning_parser != "auto" && reasoning_parser != "none") {
    return InvalidArgumentError("--reasoning-parser \"" + reasoning_parser +
                                "\" is unknown; expected auto, none or think");
  }
  return out;
}

Status PrepareOutputParsing(const OutputParsers& parsers, GenerationRequest* req,
                            std::string* param) {
  // Harmony's channels are every reply's structure, tools or not: its parser splits them.
  if (HasChannels(parsers, *req) ||
      (parsers.reasoning_special_tokens && req->kind != ApiKind::kCompletions)) {
    req->skip_special_tokens = false;
  }
  if (req->tools.empty() || req->tool_choice == ToolChoiceMode::kNone) return OkStatus();
  if (!parsers.tool_format.has_value()) {
    *param = "tools";
    return InvalidArgumentError(
        "tools: this server cannot read the model's tool calls: its tool parser is " +
        parsers.tool_format_why + "; restart loom serve with --tool-parser NAME (" +
        ToolCallFormatNames() + ")");
  }
  if (ToolCallFormatUsesSpecialTokens(*parsers.tool_format)) req->skip_special_tokens = false;
  const bool forced =
      req->tool_choice == ToolChoiceMode::kRequired || req->tool_choice == ToolChoiceMode::kNamed;
  if (req->grammar.has_value()) {
    // tool_choice auto with a grammar of the request's own: the grammar wins, calls stay free.
    if (!forced) return OkStatus();
    *param = "tool_choice";
    return InvalidArgumentError("tool_choice: a forced tool call and " + req->grammar_field +
                                " both constrain the output; send one of them");
  }
  ToolGrammarRequest tg;
  tg.format = *parsers.tool_format;
  tg.mistral_v11 = parsers.mistral_v11;
  tg.tools = &req->tools;
  if (req->tool_choice == ToolChoiceMode::kNamed) tg.only = req->tool_choice_name;
  tg.forced = forced;
  tg.parallel = req->parallel_tool_calls;
  const auto thinking = req->template_kwargs.find("enable_thinking");
  tg.reasoning =
      thinking == req->template_kwargs.end() || !thinking->is_boolean() || thinking->get<bool>();
  StatusOr<GrammarSpec> spec = ToolCallGrammar(tg);
  if (!spec.ok()) {
    if (!forced) return OkStatus();  // calls are read, not constrained
    *param = "tool_choice";
    return InvalidArgumentError("tool_choice: " + std::string(spec.status().message()));
  }
  req->grammar = *std::move(spec);
  if (forced) {
    req->grammar_field = "tool_choice";
  } else {
    // The lazy grammar: free text; a call the model opens must be a valid one. A tool schema
    // the engine cannot express falls back to any arguments, and a grammar that still does not
    // compile must not fail an agent's request: its calls are then unconstrained.
    req->grammar_field = "tools";
    req->grammar_optional = true;
  }
  return OkStatus();
}

Status CompileRequestGrammar(const OutputParsers& parsers, GrammarCache* cache,
                             const TokenVocabulary* vocab, const std::string& rendered_prompt,
                             GenerationRequest* req, std::string* param) {
  if (!req->grammar.has_value()) return OkStatus();
  if ((vocab == nullptr || cache == nullptr) && req->grammar_optional) {
    req->grammar.reset();
    return OkStatus();
  }
  if (vocab == nullptr || cache == nullptr) {
    *param = req->grammar_field;
    return InvalidArgumentError(req->grammar_field +
                                ": grammar-constrained output needs the model's tokenizer, and "
                                "this model has none loom can map to bytes");
  }
  GrammarSpec spec = *req->grammar;
  if (req->kind != ApiKind::kCompletions && parsers.reasoning.has_value()) {
    const ReasoningMarkers& m = *parsers.reasoning;
    // A prompt that closed the section (thinking off) leaves no reasoning to wait for.
    if (!EndsWithMarker(rendered_prompt, m.close)) {
      spec.reasoning_open = m.open;
      spec.reasoning_close = m.close;
      spec.reasoning_already_open = EndsWithMarker(rendered_prompt, m.open);
    }
  }
  StatusOr<std::shared_ptr<const CompiledGrammar>> compiled = cache->Get(spec);
  if (!compiled.ok() && req->grammar_optional) {
    req->grammar.reset();
    return OkStatus();
  }
  if (!compiled.ok()) {
    *param = req->grammar_field;
    return InvalidArgumentError(req->grammar_field + ": " +
                                std::string(compiled.status().message()));
  }
  req->compiled_grammar = *std::move(compiled);
  return OkStatus();
}

void ResolveReasoningBudget(const OutputParsers& parsers, const TextCodec* codec,
                            const std::string& rendered_prompt, int default_budget,
                            GenerationRequest* req) {
  req->engine_reasoning_budget.reset();
  const int max_tokens = req->reasoning_budget.value_or(default_budget);
  if (max_tokens < 0 || req->kind == ApiKind::kCompletions || !parsers.reasoning.has_value() ||
      codec == nullptr) {
    return;
  }
  const ReasoningMarkers& m = *parsers.reasoning;
  if (EndsWithMarker(rendered_prompt, m.close)) return;  // thinking off: no section to come
  ReasoningBudget b;
  b.max_tokens = max_tokens;
  b.starts_open = EndsWithMarker(rendered_prompt, m.open);
  StatusOr<std::vector<TokenId>> open = codec->Encode(m.open, /*add_special_tokens=*/false);
  StatusOr<std::vector<TokenId>> close = codec->Encode(m.close, false);
  StatusOr<std::vector<TokenId>> forced = codec->Encode("\n" + m.close + "\n\n", false);
  if (!open.ok() || !close.ok() || !forced.ok()) return;
  b.open = *std::move(open);
  b.close = *std::move(close);
  b.forced = *std::move(forced);
  if (b.close.empty() || b.forced.empty() || (!b.starts_open && b.open.empty())) return;
  req->engine_reasoning_budget = std::move(b);
}

std::unique_ptr<ChoiceEventSource> WrapOutputParsers(const OutputParsers& parsers,
                                                     const GenerationRequest& req,
                                                     const std::string& rendered_prompt,
                                                     std::unique_ptr<ChoiceEventSource> source,
                                                     ApiFlavor flavor) {
  if (req.kind == ApiKind::kCompletions) return source;
  if (parsers.reasoning.has_value()) {
    const bool starts_in = EndsWithMarker(rendered_prompt, parsers.reasoning->open);
    source = std::make_unique<ReasoningSource>(std::move(source), *parsers.reasoning, starts_in);
  }
  const bool calls = !req.tools.empty() && req.tool_choice != ToolChoiceMode::kNone;
  if ((calls && parsers.tool_format.has_value()) || HasChannels(parsers, req)) {
    std::vector<ToolSpec> specs;
    for (const auto& t : req.tools) {
      if (!calls) break;  // harmony without tools: its channels only
      specs.push_back(ToolSpec{t["function"]["name"].get<std::string>(),
                               nlohmann::json(t["function"]["parameters"])});
    }
    const ToolCallFormat format = *parsers.tool_format;
    auto make = [format, specs = std::move(specs)] { return MakeToolCallParser(format, specs); };
    source = std::make_unique<ToolCallSource>(std::move(source), std::move(make),
                                              flavor == ApiFlavor::kAnthropic ? "toolu_" : "call_",
                                              req.parallel_tool_calls);
  }
  return source;
}

}  // namespace loom
