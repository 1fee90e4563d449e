// MarkupParser (the bookkeeping every format shares), the format names, detection from a chat
// template, and the factory. The formats: tool_parser_formats.cc (JSON-bodied calls) and
// tool_parser_xml.cc (name/value-pair calls); JSON helpers: tool_parser_json.cc.
#include "server/tool_parser.h"

#include <array>
#include <utility>

#include "base/check.h"
#include "server/tool_parser_internal.h"

namespace loom {
namespace tool_parser_internal {

void MarkupParser::Feed(std::string_view chunk, std::vector<ToolParseEvent>* out) {
  out_ = out;
  buf_.append(chunk);
  Run(/*eof=*/false);
  out_ = nullptr;
}

void MarkupParser::Flush(std::vector<ToolParseEvent>* out) {
  out_ = out;
  Run(/*eof=*/true);
  if (in_call_) {
    EndAtEof();
    in_call_ = false;
  }
  if (!held_whitespace_.empty()) {
    out_->push_back({ToolParseEvent::Kind::kText, std::move(held_whitespace_)});
    held_whitespace_.clear();
  }
  buf_.clear();
  pos_ = 0;
  out_ = nullptr;
}

void MarkupParser::Run(bool eof) {
  while (true) {
    if (Step(eof)) continue;
    // At the end, markup still undecided is not a call: its text is content.
    if (eof && tentative_) {
      Malformed();
      continue;
    }
    break;
  }
  buf_.erase(0, pos_);
  pos_ = 0;
}

void MarkupParser::Consume(size_t n) {
  CHECK_LE(n, buf_.size() - pos_) << "MarkupParser: consuming past the input";
  if (tentative_) tentative_text_.append(buf_, pos_, n);
  pos_ += n;
}

void MarkupParser::SkipWhitespace() {
  const std::string_view r = Rest();
  const size_t n = r.find_first_not_of(kWhitespace);
  Consume(n == std::string_view::npos ? r.size() : n);
}

int MarkupParser::ScanText(std::span<const std::string_view> markers, bool eof) {
  if (skip_whitespace_) {
    SkipWhitespace();
    if (Rest().empty()) return -1;
    skip_whitespace_ = false;
  }
  const std::string_view r = Rest();
  const Found found = FindFirst(r, markers);
  if (found.idx >= 0) {
    EmitText(r.substr(0, found.pos));
    Consume(found.pos);
    return found.idx;
  }
  const size_t keep = eof ? 0 : PartialMarkerAtEnd(r, markers);
  EmitText(r.substr(0, r.size() - keep));
  Consume(r.size() - keep);
  return -1;
}

void MarkupParser::EmitText(std::string_view text) {
  if (text.empty()) return;
  const size_t last = text.find_last_not_of(kWhitespace);
  if (last == std::string_view::npos) {
    held_whitespace_.append(text);
    return;
  }
  std::string decided = std::move(held_whitespace_);
  decided.append(text.substr(0, last + 1));
  held_whitespace_.assign(text.substr(last + 1));
  if (!out_->empty() && out_->back().kind == ToolParseEvent::Kind::kText) {
    out_->back().text += decided;
  } else {
    out_->push_back({ToolParseEvent::Kind::kText, std::move(decided)});
  }
}

void MarkupParser::EmitReasoning(std::string_view text) {
  if (text.empty()) return;
  if (!held_whitespace_.empty()) {
    if (!out_->empty() && out_->back().kind == ToolParseEvent::Kind::kText) {
      out_->back().text += held_whitespace_;
    } else {
      out_->push_back({ToolParseEvent::Kind::kText, held_whitespace_});
    }
    held_whitespace_.clear();
  }
  if (!out_->empty() && out_->back().kind == ToolParseEvent::Kind::kReasoning) {
    out_->back().text += text;
  } else {
    out_->push_back({ToolParseEvent::Kind::kReasoning, std::string(text)});
  }
}

void MarkupParser::BeginTentative(size_t marker_len) {
  CHECK(!in_call_) << "MarkupParser: markup begins inside a call";
  tentative_ = true;
  tentative_text_.clear();
  marker_len_ = marker_len;
}

void MarkupParser::AcceptMarkup() {
  CHECK(tentative_) << "MarkupParser: no markup to accept";
  tentative_ = false;
  tentative_text_.clear();
}

void MarkupParser::StartCall(std::string name) {
  CHECK(!in_call_) << "MarkupParser: a call starts inside another";
  tentative_ = false;
  tentative_text_.clear();
  held_whitespace_.clear();  // content right before a call ends where its text ends
  in_call_ = true;
  out_->push_back({ToolParseEvent::Kind::kCallStart, std::move(name)});
}

void MarkupParser::EmitArgs(std::string_view fragment) {
  CHECK(in_call_) << "MarkupParser: arguments outside a call";
  if (fragment.empty()) return;
  if (!out_->empty() && out_->back().kind == ToolParseEvent::Kind::kCallArgs) {
    out_->back().text += fragment;
  } else {
    out_->push_back({ToolParseEvent::Kind::kCallArgs, std::string(fragment)});
  }
}

void MarkupParser::EndCall() {
  in_call_ = false;
  skip_whitespace_ = true;
}

void MarkupParser::Malformed() {
  if (tentative_) {
    tentative_ = false;
    const std::string text = std::move(tentative_text_);
    tentative_text_.clear();
    EmitText(std::string_view(text).substr(0, marker_len_));
    buf_ = text.substr(marker_len_) + buf_.substr(pos_);
    pos_ = 0;
  } else if (in_call_) {
    EndCall();
  }
  OnMalformed();
}

}  // namespace tool_parser_internal

namespace {

constexpr std::array<std::pair<ToolCallFormat, std::string_view>, 11> kFormatNames = {{
    {ToolCallFormat::kHermes, "hermes"},
    {ToolCallFormat::kQwen3Coder, "qwen3_coder"},
    {ToolCallFormat::kLlama3Json, "llama3_json"},
    {ToolCallFormat::kMistral, "mistral"},
    {ToolCallFormat::kDeepSeekV3, "deepseek_v3"},
    {ToolCallFormat::kDeepSeekV31, "deepseek_v31"},
    {ToolCallFormat::kGlm45, "glm45"},
    {ToolCallFormat::kPhi4Mini, "phi4_mini"},
    {ToolCallFormat::kGemma4, "gemma4"},
    {ToolCallFormat::kGemmaToolCode, "gemma_tool_code"},
    {ToolCallFormat::kHarmony, "harmony"},
}};

}  // namespace

std::unique_ptr<ToolCallParser> MakeToolCallParser(ToolCallFormat format,
                                                   std::vector<ToolSpec> tools) {
  using namespace tool_parser_internal;
  switch (format) {
    case ToolCallFormat::kHermes:
      return MakeHermesParser();
    case ToolCallFormat::kQwen3Coder:
      return MakeQwen3CoderParser(std::move(tools));
    case ToolCallFormat::kLlama3Json:
      return MakeLlama3JsonParser();
    case ToolCallFormat::kMistral:
      return MakeMistralParser();
    case ToolCallFormat::kDeepSeekV3:
      return MakeDeepSeekParser(/*v31=*/false);
    case ToolCallFormat::kDeepSeekV31:
      return MakeDeepSeekParser(/*v31=*/true);
    case ToolCallFormat::kGlm45:
      return MakeGlm45Parser(std::move(tools));
    case ToolCallFormat::kPhi4Mini:
      return MakePhi4MiniParser();
    case ToolCallFormat::kGemma4:
      return MakeGemma4Parser();
    case ToolCallFormat::kGemmaToolCode:
      return MakeGemmaToolCodeParser();
    case ToolCallFormat::kHarmony:
      return MakeHarmonyParser();
  }
  CHECK(false) << "MakeToolCallParser: unknown format " << static_cast<int>(format);
  return nullptr;
}

std::string_view ToolCallFormatName(ToolCallFormat format) {
  for (const auto& [f, name] : kFormatNames) {
    if (f == format) return name;
  }
  CHECK(false) << "ToolCallFormatName: unknown format " << static_cast<int>(format);
  return "";
}

std::optional<ToolCallFormat> ToolCallFormatFromName(std::string_view name) {
  for (const auto& [f, n] : kFormatNames) {
    if (n == name) return f;
  }
  return std::nullopt;
}

std::string ToolCallFormatNames() {
  std::string names;
  for (const auto& [f, name] : kFormatNames) {
    if (!names.empty()) names += ", ";
    names += name;
  }
  return names;
}

// The order matters where one family's markup contains another's: Qwen3-Coder's and GLM's
// templates also write <tool_call>, DeepSeek-V3's ```json form is told from V3.1's by the fence.
// Llama 3 is known by <|python_tag|> or its instruction for the bare JSON ({"name": ...,
// "parameters": dictionary ...}), and not when the template shows Functionary's / Llama 3.1's
// <function=NAME>{...}</function> syntax, which is no format here. Firefunction-v2 writes
// functools[...] as Phi-4-mini does. Gemma 3's tool_code has no template to be known by.
std::optional<ToolCallFormat> DetectToolCallFormat(std::string_view source) {
  auto has = [&](std::string_view s) { return source.find(s) != std::string_view::npos; };
  if (has("<|tool_call>call:")) return ToolCallFormat::kGemma4;
  if (has("<|channel|>") && has("<|call|>")) return ToolCallFormat::kHarmony;
  const bool function_tag = has("<function=");
  if (function_tag && has("<parameter=")) return ToolCallFormat::kQwen3Coder;
  if (has("<arg_key>")) return ToolCallFormat::kGlm45;
  if (has("<｜tool▁sep｜>")) {
    return has("```json") ? ToolCallFormat::kDeepSeekV3 : ToolCallFormat::kDeepSeekV31;
  }
  if (has("[TOOL_CALLS]")) return ToolCallFormat::kMistral;
  if (has("functools")) return ToolCallFormat::kPhi4Mini;
  if (has("<tool_call>")) return ToolCallFormat::kHermes;
  if (!function_tag && (has("<|python_tag|>") || has("\"parameters\": dictionary"))) {
    return ToolCallFormat::kLlama3Json;
  }
  return std::nullopt;
}

bool ToolCallFormatUsesSpecialTokens(ToolCallFormat format) {
  switch (format) {
    case ToolCallFormat::kLlama3Json:
    case ToolCallFormat::kMistral:
    case ToolCallFormat::kDeepSeekV3:
    case ToolCallFormat::kDeepSeekV31:
    case ToolCallFormat::kGemma4:
    case ToolCallFormat::kHarmony:
      return true;
    case ToolCallFormat::kHermes:
    case ToolCallFormat::kQwen3Coder:
    case ToolCallFormat::kGlm45:
    case ToolCallFormat::kPhi4Mini:
    case ToolCallFormat::kGemmaToolCode:
      return false;
  }
  return false;
}

}  // namespace loom
