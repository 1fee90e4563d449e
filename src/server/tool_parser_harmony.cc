// gpt-oss's harmony format: the reply is a sequence of messages, each a header, <|message|>, a
// body and an end marker:
//   <|channel|>analysis<|message|>REASONING<|end|>
//   <|start|>assistant<|channel|>commentary to=functions.NAME <|constrain|>json<|message|>
//     {ARGS}<|call|>                                            (one line in the output)
//   <|start|>assistant<|channel|>final<|message|>ANSWER<|return|>
// The first message's header follows the prompt's "<|start|>assistant" (so it starts with
// <|channel|>, or with " to=functions.NAME" as the chat template writes a past call). A message
// to functions.NAME is a call (its body the arguments' JSON), the analysis channel reasoning, the
// final and commentary channels (commentary without a recipient is a preamble to the user)
// content. Text outside any message is content too.
#include <string>

#include "server/tool_parser_internal.h"

namespace loom::tool_parser_internal {
namespace {

constexpr size_t kMaxHeaderBytes = 512;  // longer "headers" are not markup

constexpr std::string_view kStart = "<|start|>";
constexpr std::string_view kChannel = "<|channel|>";
constexpr std::string_view kMessage = "<|message|>";
constexpr std::string_view kEnd = "<|end|>";
constexpr std::string_view kCall = "<|call|>";
constexpr std::string_view kReturn = "<|return|>";
constexpr std::string_view kRecipient = "to=";
constexpr std::string_view kFunctions = "functions.";

// A header's word after `at`: up to whitespace or the next <|...|> marker.
std::string_view WordAt(std::string_view header, size_t at) {
  const std::string_view rest = header.substr(at);
  return rest.substr(0, rest.find_first_of(" \t\r\n<"));
}

class HarmonyParser final : public MarkupParser {
 private:
  enum class State { kStart, kText, kHeader, kBody, kArgs, kAfterArgs };

  bool Step(bool eof) override {
    static constexpr std::string_view kEnds[] = {kEnd, kCall, kReturn};
    switch (state_) {
      case State::kStart: {
        const std::string_view r = Rest();
        const size_t first = r.find_first_not_of(kWhitespace);
        if (first == std::string_view::npos) {
          if (!eof) return false;
          state_ = State::kText;
          return true;
        }
        const std::string_view rest = r.substr(first);
        if (rest.starts_with(kRecipient)) {
          Consume(first);  // " to=...": the space is the header's
          BeginTentative(0);
          header_prefix_ = "";
          state_ = State::kHeader;
          return true;
        }
        if (!eof && MayBecome(rest, kRecipient)) return false;
        state_ = State::kText;
        return true;
      }
      case State::kText: {
        static constexpr std::string_view kMarkers[] = {kStart, kChannel};
        const int m = ScanText(kMarkers, eof);
        if (m < 0) return false;
        BeginTentative(kMarkers[m].size());
        Consume(kMarkers[m].size());
        header_prefix_ = kMarkers[m];
        state_ = State::kHeader;
        return true;
      }
      case State::kHeader:
        return StepHeader();
      case State::kBody: {  // up to the end marker (consumed) or the next message's start
        static constexpr std::string_view kMarkers[] = {kEnd, kCall, kReturn, kStart, kChannel};
        const std::string_view r = Rest();
        const Found found = FindFirst(r, kMarkers);
        const size_t keep = found.idx >= 0 ? r.size() - found.pos
                            : eof          ? 0
                                           : PartialMarkerAtEnd(r, kMarkers);
        const std::string_view body = r.substr(0, r.size() - keep);
        if (reasoning_) {
          EmitReasoning(body);
        } else {
          EmitText(body);
        }
        Consume(body.size());
        if (found.idx < 0) return false;
        if (found.idx < 3) Consume(kMarkers[found.idx].size());
        state_ = State::kText;
        return true;
      }
      case State::kArgs: {
        if (!args_.started()) {
          SkipWhitespace();
          const std::string_view r = Rest();
          if (FindFirst(r, kEnds).pos == 0) {  // a call without arguments
            EmitArgs("{}");
            state_ = State::kAfterArgs;
            return true;
          }
          if (r.empty() || (!eof && PartialMarkerAtEnd(r, kEnds) == r.size())) return false;
        }
        size_t n = 0;
        std::string emit;
        const JsonValueScanner::Result res = args_.Feed(Rest(), eof, &n, &emit);
        Consume(n);
        EmitArgs(emit);
        if (res == JsonValueScanner::Result::kBad) {
          Malformed();
          return true;
        }
        if (res == JsonValueScanner::Result::kDone) state_ = State::kAfterArgs;
        return res == JsonValueScanner::Result::kDone || n > 0;
      }
      case State::kAfterArgs: {
        SkipWhitespace();
        const std::string_view r = Rest();
        const Found found = FindFirst(r, kEnds);
        if (found.pos == 0) {
          Consume(kEnds[found.idx].size());
        } else if (!eof && PartialMarkerAtEnd(r, kEnds) == r.size()) {
          return false;  // empty, or the start of an end marker
        }
        EndCall();  // without an end marker too: what follows is another message or content
        state_ = State::kText;
        return true;
      }
    }
    return false;
  }

  // A header (<|start|>ROLE..., <|channel|>..., or to=...; its first marker, header_prefix_,
  // consumed) up to <|message|>.
  bool StepHeader() {
    const std::string_view r = Rest();
    const size_t m = r.find(kMessage);
    const std::string header = std::string(header_prefix_) + std::string(r.substr(0, m));
    // A header is short and holds no end or start marker (past its own first).
    static constexpr std::string_view kForeign[] = {kEnd, kCall, kReturn};
    const size_t limit = kMaxHeaderBytes + (m == std::string_view::npos ? kMessage.size() : 0);
    if (header.size() > limit || FindFirst(header, kForeign).idx >= 0 ||
        header.find(kStart, 1) != std::string::npos) {
      Malformed();
      return true;
    }
    if (m == std::string_view::npos) return false;  // at the end: the header becomes text
    const size_t channel_at = header.find(kChannel);
    const std::string_view channel =
        channel_at == std::string::npos ? "" : WordAt(header, channel_at + kChannel.size());
    const size_t to_at = header.find(kRecipient);
    const std::string_view recipient =
        to_at == std::string::npos ? "" : WordAt(header, to_at + kRecipient.size());
    if (recipient.starts_with(kFunctions) && recipient.size() > kFunctions.size()) {
      const std::string name(recipient.substr(kFunctions.size()));
      Consume(m + kMessage.size());
      StartCall(name);
      args_ = ArgsValue();
      state_ = State::kArgs;
      return true;
    }
    // A message to another recipient (a built-in tool) or without a channel is no call of the
    // request's tools: its markup stays content.
    if (channel.empty() || to_at != std::string::npos) {
      Malformed();
      return true;
    }
    Consume(m + kMessage.size());
    AcceptMarkup();
    reasoning_ = channel == "analysis";
    state_ = State::kBody;
    return true;
  }

  void OnMalformed() override { state_ = State::kText; }
  void EndAtEof() override {
    if (state_ == State::kArgs && !args_.started()) EmitArgs("{}");
  }

  State state_ = State::kStart;
  std::string_view header_prefix_;  // the marker the header began with ("" for to=)
  bool reasoning_ = false;          // the body is the analysis channel's
  ArgsValue args_;
};

}  // namespace

std::unique_ptr<ToolCallParser> MakeHarmonyParser() { return std::make_unique<HarmonyParser>(); }

}  // namespace loom::tool_parser_internal
