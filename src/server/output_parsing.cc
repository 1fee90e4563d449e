#include "server/output_parsing.h"

#include "server/text_codec.h"
#include "server/tool_call_source.h"

namespace loom {

StatusOr<OutputParsers> ResolveOutputParsers(const std::string& tool_parser,
                                             const std::string& reasoning_parser,
                                             const TextCodec* codec) {
  OutputParsers out;
  const std::string tools_source =
      codec != nullptr ? codec->chat_template_source(/*tools=*/true) : std::string();
  if (tool_parser == "auto") {
    out.tool_format = DetectToolCallFormat(tools_source);
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
  if (reasoning_parser == "think" ||
      (reasoning_parser == "auto" && tools_source.find("<think>") != std::string::npos)) {
    out.reasoning = ReasoningMarkers{};
  } else if (reasoning_parser != "auto" && reasoning_parser != "none") {
    return InvalidArgumentError("--reasoning-parser \"" + reasoning_parser +
                                "\" is unknown; expected auto, none or think");
  }
  return out;
}

Status PrepareOutputParsing(const OutputParsers& parsers, GenerationRequest* req,
                            std::string* param) {
  if (req->tools.empty() || req->tool_choice == ToolChoiceMode::kNone) return OkStatus();
  if (!parsers.tool_format.has_value()) {
    *param = "tools";
    return InvalidArgumentError(
        "tools: this server cannot read the model's tool calls: its tool parser is " +
        parsers.tool_format_why + "; restart loom serve with --tool-parser NAME (" +
        ToolCallFormatNames() + ")");
  }
  if (ToolCallFormatUsesSpecialTokens(*parsers.tool_format)) req->skip_special_tokens = false;
  return OkStatus();
}

namespace {

// True when `prompt` ends (trailing whitespace aside) with `marker`.
bool EndsWithMarker(const std::string& prompt, const std::string& marker) {
  const size_t end = prompt.find_last_not_of(" \n\r\t");
  if (end == std::string::npos || end + 1 < marker.size()) return false;
  return prompt.compare(end + 1 - marker.size(), marker.size(), marker) == 0;
}

}  // namespace

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
  if (!req.tools.empty() && req.tool_choice != ToolChoiceMode::kNone &&
      parsers.tool_format.has_value()) {
    std::vector<ToolSpec> specs;
    for (const auto& t : req.tools) {
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
