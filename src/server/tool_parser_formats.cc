// The formats whose calls carry JSON: Hermes (<tool_call>{json}</tool_call>), Llama 3 (bare JSON
// at the start), Mistral ([TOOL_CALLS] with a JSON list or NAME[ARGS]{json}), Phi-4-mini
// (functools[...]) and DeepSeek V3 / V3.1 (<｜tool▁call▁begin｜>...<｜tool▁sep｜>...).
#include <string>

#include "server/tool_parser_internal.h"

namespace loom::tool_parser_internal {
namespace {

constexpr size_t kMaxNameBytes = 256;  // longer "names" are not markup

constexpr std::string_view kToolCallOpen = "<tool_call>";
constexpr std::string_view kToolCallClose = "</tool_call>";
constexpr std::string_view kPythonTag = "<|python_tag|>";
constexpr std::string_view kMistralCalls = "[TOOL_CALLS]";
constexpr std::string_view kMistralArgs = "[ARGS]";
constexpr std::string_view kMistralCallId = "[CALL_ID]";
constexpr std::string_view kPhi4Calls = "functools[";
constexpr std::string_view kDsCallsBegin = "<｜tool▁calls▁begin｜>";
constexpr std::string_view kDsCallsEnd = "<｜tool▁calls▁end｜>";
constexpr std::string_view kDsCallBegin = "<｜tool▁call▁begin｜>";
constexpr std::string_view kDsCallEnd = "<｜tool▁call▁end｜>";
constexpr std::string_view kDsSep = "<｜tool▁sep｜>";
constexpr std::string_view kFence = "```";

// One CallObject step for a MarkupParser's Step: Step's result; `*done` when the object ended.
bool StepObject(MarkupParser& p, CallObject& obj, bool eof, bool* done) {
  switch (obj.Step(p, eof)) {
    case CallObject::Result::kMore:
      return false;
    case CallObject::Result::kProgress:
      return true;
    case CallObject::Result::kDone:
      *done = true;
      return true;
    case CallObject::Result::kBad:
      p.Malformed();
      return true;
  }
  return false;
}

// Streams an arguments value that follows a marker ([ARGS], <｜tool▁sep｜>): Step's result;
// `*done` when it ended. Leading whitespace is skipped.
bool StepArgs(MarkupParser& p, ArgsValue& args, bool eof, bool* done) {
  if (!args.started()) {
    p.SkipWhitespace();
    if (p.Rest().empty()) return false;
  }
  size_t n = 0;
  std::string emit;
  const JsonValueScanner::Result r = args.Feed(p.Rest(), eof, &n, &emit);
  p.Consume(n);
  p.EmitArgs(emit);
  if (r == JsonValueScanner::Result::kBad) {
    p.Malformed();
    return true;
  }
  *done = r == JsonValueScanner::Result::kDone;
  return *done || n > 0;
}

// <tool_call>\n{"name": "f", "arguments": {...}}\n</tool_call>, any number, content before.
class HermesParser final : public MarkupParser {
 private:
  enum class State { kText, kObject, kClose };

  bool Step(bool eof) override {
    switch (state_) {
      case State::kText: {
        static constexpr std::string_view kMarkers[] = {kToolCallOpen};
        if (ScanText(kMarkers, eof) < 0) return false;
        BeginTentative(kToolCallOpen.size());
        Consume(kToolCallOpen.size());
        object_.Reset();
        state_ = State::kObject;
        return true;
      }
      case State::kObject: {
        bool done = false;
        const bool progress = StepObject(*this, object_, eof, &done);
        if (done) state_ = State::kClose;
        return progress;
      }
      case State::kClose: {
        if (!TakeMarker(*this, kToolCallClose, eof)) return false;
        EndCall();  // without </tool_call> too: what follows is content
        state_ = State::kText;
        return true;
      }
    }
    return false;
  }
  void OnMalformed() override { state_ = State::kText; }
  void EndAtEof() override {
    if (state_ == State::kObject) object_.EndAtEof(*this);
  }

  State state_ = State::kText;
  CallObject object_{CallObject::Policy::kOnName};
};

// [<|python_tag|>]{"name": "f", "parameters": {...}}[; {...}]: only at the start of the output
// (after whitespace); an output that starts otherwise, or whose JSON is no call, is content.
class Llama3JsonParser final : public MarkupParser {
 private:
  enum class State { kStart, kObject, kAfterCall, kText };

  bool Step(bool eof) override {
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
        const bool tag = rest.starts_with(kPythonTag);
        if (tag || rest[0] == '{') {
          EmitText(r.substr(0, first));
          Consume(first);
          BeginTentative(tag ? kPythonTag.size() : 0);
          if (tag) Consume(kPythonTag.size());
          object_.Reset();
          state_ = State::kObject;
          return true;
        }
        if (!eof && MayBecome(rest, kPythonTag)) return false;
        state_ = State::kText;
        return true;
      }
      case State::kObject: {
        bool done = false;
        const bool progress = StepObject(*this, object_, eof, &done);
        if (done) {
          EndCall();
          state_ = State::kAfterCall;
        }
        return progress;
      }
      case State::kAfterCall: {
        SkipWhitespace();
        const std::string_view r = Rest();
        if (r.empty()) return false;
        if (r[0] == ';' || r[0] == '{') {  // the next call ("; " as the model card shows)
          BeginTentative(0);
          if (r[0] == ';') Consume(1);
          object_.Reset();
          state_ = State::kObject;
          return true;
        }
        state_ = State::kText;
        return true;
      }
      case State::kText:
        EmitText(Rest());
        Consume(Rest().size());
        return false;
    }
    return false;
  }
  void OnMalformed() override { state_ = State::kText; }
  void EndAtEof() override {
    if (state_ == State::kObject) object_.EndAtEof(*this);
  }

  State state_ = State::kStart;
  CallObject object_{CallObject::Policy::kOnNameAndArgsKey};
};

bool IsNameChar(char c) {
  return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' ||
         c == '-' || c == '.';
}

// Mistral: [TOOL_CALLS] then a JSON list [{"name", "arguments", "id"?}, ...] (before v11) or
// NAME[ARGS]{...} / NAME[CALL_ID]id[ARGS]{...} (v11+, one [TOOL_CALLS] per call).
// Phi-4-mini: functools[{"name", "arguments"}, ...]. Content may come before either.
class JsonListParser final : public MarkupParser {
 public:
  explicit JsonListParser(bool mistral) : mistral_(mistral) {}

 private:
  enum class State { kText, kAfterMarker, kItem, kObject, kSeparator, kName, kCallId, kArgs };

  bool Step(bool eof) override {
    switch (state_) {
      case State::kText: {
        const std::string_view marker = mistral_ ? kMistralCalls : kPhi4Calls;
        const std::string_view markers[] = {marker};
        if (ScanText(markers, eof) < 0) return false;
        BeginTentative(marker.size());
        Consume(marker.size());
        state_ = mistral_ ? State::kAfterMarker : State::kItem;
        return true;
      }
      case State::kAfterMarker: {
        SkipWhitespace();
        const std::string_view r = Rest();
        if (r.empty()) return false;
        if (r[0] == '[') {
          Consume(1);
          state_ = State::kItem;
        } else {
          state_ = State::kName;
        }
        return true;
      }
      case State::kItem: {
        SkipWhitespace();
        const std::string_view r = Rest();
        if (r.empty()) return false;
        if (r[0] != '{') {
          Malformed();
          return true;
        }
        object_.Reset();
        state_ = State::kObject;
        return true;
      }
      case State::kObject: {
        bool done = false;
        const bool progress = StepObject(*this, object_, eof, &done);
        if (done) {
          EndCall();
          state_ = State::kSeparator;
        }
        return progress;
      }
      case State::kSeparator: {
        SkipWhitespace();
        const std::string_view r = Rest();
        if (r.empty()) return false;
        if (r[0] == ',') {
          BeginTentative(0);  // a malformed next item is content, ", " included
          Consume(1);
          state_ = State::kItem;
          return true;
        }
        if (r[0] == ']') Consume(1);
        state_ = State::kText;
        return true;
      }
      case State::kName:
        return StepName();
      case State::kCallId: {
        const std::string_view r = Rest();
        size_t i = 0;
        while (i < r.size() && IsNameChar(r[i])) ++i;
        if (i > kMaxNameBytes) {
          Malformed();
          return true;
        }
        if (i == r.size()) return false;
        const std::string_view tail = r.substr(i);
        if (i > 0 && tail.starts_with(kMistralArgs)) {
          Consume(i + kMistralArgs.size());
          StartCall(std::move(name_));
          args_ = ArgsValue();
          state_ = State::kArgs;
          return true;
        }
        if (i > 0 && MayBecome(tail, kMistralArgs)) return false;
        Malformed();
        return true;
      }
      case State::kArgs: {
        bool done = false;
        const bool progress = StepArgs(*this, args_, eof, &done);
        if (done) {
          EndCall();
          state_ = State::kText;
        }
        return progress;
      }
    }
    return false;
  }

  // NAME[ARGS] or NAME[CALL_ID]
  bool StepName() {
    const std::string_view r = Rest();
    size_t i = 0;
    while (i < r.size() && IsNameChar(r[i])) ++i;
    if (i > kMaxNameBytes) {
      Malformed();
      return true;
    }
    if (i == r.size()) return false;
    const std::string_view tail = r.substr(i);
    if (i > 0 && tail.starts_with(kMistralArgs)) {
      const std::string name(r.substr(0, i));
      Consume(i + kMistralArgs.size());
      StartCall(name);
      args_ = ArgsValue();
      state_ = State::kArgs;
      return true;
    }
    if (i > 0 && tail.starts_with(kMistralCallId)) {
      name_ = std::string(r.substr(0, i));
      Consume(i + kMistralCallId.size());
      state_ = State::kCallId;
      return true;
    }
    if (i > 0 && (MayBecome(tail, kMistralArgs) || MayBecome(tail, kMistralCallId))) return false;
    Malformed();
    return true;
  }

  void OnMalformed() override { state_ = State::kText; }
  void EndAtEof() override {
    if (state_ == State::kObject) object_.EndAtEof(*this);
    if (state_ == State::kArgs && !args_.started()) EmitArgs("{}");
  }

  bool mistral_;
  State state_ = State::kText;
  CallObject object_{CallObject::Policy::kOnName};
  std::string name_;  // v11: the name, while the call id is read
  ArgsValue args_;
};

// DeepSeek V3 / R1:  <｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>NAME\n
//                    ```json\n{...}\n```<｜tool▁call▁end｜>...<｜tool▁calls▁end｜>
// DeepSeek V3.1:     <｜tool▁calls▁begin｜><｜tool▁call▁begin｜>NAME<｜tool▁sep｜>{...}
//                    <｜tool▁call▁end｜>...<｜tool▁calls▁end｜>
// A call may also begin without the calls-begin marker; the fence is optional in V3's form.
class DeepSeekParser final : public MarkupParser {
 public:
  explicit DeepSeekParser(bool v31) : v31_(v31) {}

 private:
  enum class State { kText, kCallsBegun, kCallBegun, kName, kFence, kArgs, kAfterArgs, kBetween };

  bool Step(bool eof) override {
    switch (state_) {
      case State::kText: {
        static constexpr std::string_view kMarkers[] = {kDsCallsBegin, kDsCallBegin};
        const int m = ScanText(kMarkers, eof);
        if (m < 0) return false;
        BeginTentative(kMarkers[m].size());
        Consume(kMarkers[m].size());
        state_ = m == 0 ? State::kCallsBegun : State::kCallBegun;
        return true;
      }
      case State::kCallsBegun: {
        const std::optional<bool> begin = TakeMarker(*this, kDsCallBegin, eof);
        if (!begin) return false;
        if (!*begin) {
          Malformed();
          return true;
        }
        state_ = State::kCallBegun;
        return true;
      }
      case State::kCallBegun: {
        // V3: the call's type ("function"); V3.1: its name; either way up to the separator,
        // without whitespace (judged on what has come, so chunking does not matter).
        const std::string_view r = Rest();
        const size_t sep = r.find(kDsSep);
        const std::string_view before = r.substr(0, sep);
        const size_t max = kMaxNameBytes + (sep == std::string_view::npos ? kDsSep.size() : 0);
        if (before.find_first_of(kWhitespace) != std::string_view::npos || before.size() > max ||
            (sep != std::string_view::npos && before.empty())) {
          Malformed();
          return true;
        }
        if (sep == std::string_view::npos) return false;
        const std::string name(before);
        Consume(sep + kDsSep.size());
        if (v31_) {
          StartCall(name);
          args_ = ArgsValue();
          state_ = State::kArgs;
        } else {
          state_ = State::kName;
        }
        return true;
      }
      case State::kName: {  // V3: NAME, up to the line's end (or the fence)
        const std::string_view r = Rest();
        const size_t end = r.find_first_of("\n`<");
        if (end == std::string_view::npos) {
          if (r.size() > kMaxNameBytes) {
            Malformed();
            return true;
          }
          return false;
        }
        const std::string_view name = Trim(r.substr(0, end));
        if (name.empty() || end > kMaxNameBytes) {
          Malformed();
          return true;
        }
        const std::string n(name);
        Consume(end);
        StartCall(n);
        args_ = ArgsValue();
        state_ = State::kFence;
        return true;
      }
      case State::kFence: {  // ```json\n, when there
        SkipWhitespace();
        const std::string_view r = Rest();
        if (r.empty()) return false;
        if (r.starts_with(kFence)) {
          const size_t nl = r.find('\n');
          if (nl == std::string_view::npos) return false;
          Consume(nl + 1);
        } else if (MayBecome(r, kFence)) {
          return false;
        }
        state_ = State::kArgs;
        return true;
      }
      case State::kArgs: {
        if (!args_.started()) {
          SkipWhitespace();
          const std::string_view r = Rest();
          if (r.starts_with(kDsCallEnd)) {  // a call without arguments
            EmitArgs("{}");
            state_ = State::kAfterArgs;
            return true;
          }
          if (r.empty() || MayBecome(r, kDsCallEnd)) return false;
        }
        bool done = false;
        const bool progress = StepArgs(*this, args_, eof, &done);
        if (done) state_ = State::kAfterArgs;
        return progress;
      }
      case State::kAfterArgs: {
        SkipWhitespace();
        const std::string_view r = Rest();
        if (r.starts_with(kFence)) {
          Consume(kFence.size());
          return true;
        }
        if (r.starts_with(kDsCallEnd)) {
          Consume(kDsCallEnd.size());
          EndCall();
          state_ = State::kBetween;
          return true;
        }
        if (!eof && (r.empty() || MayBecome(r, kFence) || MayBecome(r, kDsCallEnd))) {
          return false;
        }
        EndCall();
        state_ = State::kText;
        return true;
      }
      case State::kBetween: {
        SkipWhitespace();
        const std::string_view r = Rest();
        if (r.starts_with(kDsCallBegin)) {
          BeginTentative(kDsCallBegin.size());
          Consume(kDsCallBegin.size());
          state_ = State::kCallBegun;
          return true;
        }
        if (r.starts_with(kDsCallsEnd)) {
          Consume(kDsCallsEnd.size());
          state_ = State::kText;
          return true;
        }
        if (!eof && (r.empty() || MayBecome(r, kDsCallBegin) || MayBecome(r, kDsCallsEnd))) {
          return false;
        }
        state_ = State::kText;
        return true;
      }
    }
    return false;
  }
  void OnMalformed() override { state_ = State::kText; }
  void EndAtEof() override {
    if ((state_ == State::kFence || state_ == State::kArgs) && !args_.started()) EmitArgs("{}");
  }

  bool v31_;
  State state_ = State::kText;
  ArgsValue args_;
};

}  // namespace

std::unique_ptr<ToolCallParser> MakeHermesParser() { return std::make_unique<HermesParser>(); }
std::unique_ptr<ToolCallParser> MakeLlama3JsonParser() {
  return std::make_unique<Llama3JsonParser>();
}
std::unique_ptr<ToolCallParser> MakeMistralParser() {
  return std::make_unique<JsonListParser>(/*mistral=*/true);
}
std::unique_ptr<ToolCallParser> MakePhi4MiniParser() {
  return std::make_unique<JsonListParser>(/*mistral=*/false);
}
std::unique_ptr<ToolCallParser> MakeDeepSeekParser(bool v31) {
  return std::make_unique<DeepSeekParser>(v31);
}

}  // namespace loom::tool_parser_internal
