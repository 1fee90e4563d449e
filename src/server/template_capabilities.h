// What a chat template shows a model can do, read from the template's text: the tool-call
// markup it writes (DetectToolCallFormat) and whether it writes <think> reasoning sections. The
// one reading of it: `loom serve`'s auto parsers (output_parsing.h) and `loom list` / /v1/models
// (model_card.h) both go through it.
#pragma once

#include <optional>
#include <string_view>

#include "server/tool_parser.h"

namespace loom {

struct TemplateCapabilities {
  std::optional<ToolCallFormat> tool_format;  // none: the template shows no known call format
  bool reasoning = false;                     // it writes <think> sections
};

// `source`: the template used when a request has tools (a named "tool_use" one, else the
// default); "" (no template) has no capabilities.
TemplateCapabilities DetectTemplateCapabilities(std::string_view source);

}  // namespace loom
