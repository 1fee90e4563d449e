#include "server/template_capabilities.h"

namespace loom {

TemplateCapabilities DetectTemplateCapabilities(std::string_view source) {
  TemplateCapabilities out;
  out.tool_format = DetectToolCallFormat(source);
  // ReasoningMarkers' open marker (reasoning_parser.h), where the reasoning parser splits.
  out.reasoning = source.find("<think>") != std::string_view::npos;
  return out;
}

}  // namespace loom
