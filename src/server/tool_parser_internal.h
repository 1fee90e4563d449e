// The pieces the per-family tool-call parsers (tool_parser*.cc) share; not for use outside them.
//
//   MarkupParser      the base of every format: the input buffer, the text / tentative-markup /
//                     call bookkeeping and the ToolCallParser contract (chunking invariance)
//   JsonValueScanner  the extent of one JSON value, char by char, across chunks
//   ArgsValue         a call's arguments value: streamed when an object, decoded when a string
//   CallObject        a {"name": ..., "arguments": ...} object (Hermes, Llama 3, JSON lists)
//   TypedArgs         name/value pairs (Qwen3-Coder, GLM) → arguments JSON typed by the schema
//   LiteralArgs       arguments written as literals (Gemma 4's, Python's) → JSON, streamed
//
// How a format is written: Step() looks at Rest() (the unconsumed input), consumes a prefix and
// emits events, or returns false when it needs more input to decide. Every decision depends only
// on the input, never on where a chunk ended, which is what makes chunking not matter. Markup is
// "tentative" from its first marker (BeginTentative) until the call's name is known (StartCall):
// what is consumed meanwhile is kept, and if the markup turns out malformed (Malformed) or the
// output ends first, the marker comes out as text and the rest is scanned again as text.
#pragma once

#include <cstddef>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "server/tool_parser.h"

namespace loom::tool_parser_internal {

inline constexpr std::string_view kWhitespace = " \t\r\n";

// The earliest occurrence of any of `markers` in `s`: {position, marker index}; {npos, -1} if none.
struct Found {
  size_t pos = std::string_view::npos;
  int idx = -1;
};
Found FindFirst(std::string_view s, std::span<const std::string_view> markers);
// The length of the longest suffix of `s` that is a proper prefix of one of `markers`.
size_t PartialMarkerAtEnd(std::string_view s, std::span<const std::string_view> markers);
// Whether `s` (the input so far) could still become `marker`: s is a proper prefix of it.
inline bool MayBecome(std::string_view s, std::string_view marker) {
  return s.size() < marker.size() && marker.starts_with(s);
}

std::string_view Trim(std::string_view s);  // less leading and trailing whitespace

// The end (one past the closing quote) of the JSON string starting at s[0] == '"'; nullopt while
// the closing quote has not arrived.
std::optional<size_t> JsonStringEnd(std::string_view s);
// `text` as a JSON string literal (invalid UTF-8 replaced, not thrown on).
std::string JsonQuote(std::string_view text);
// The text of `s` inside a JSON string literal (byte by byte, so pieces escape to the pieces of
// the whole; UTF-8 passes unchanged).
std::string JsonEscape(std::string_view s);

// The extent of one JSON value, fed in pieces. Structure is only checked as far as finding the
// end needs: brackets must match, a value must start like one.
class JsonValueScanner {
 public:
  enum class Result { kMore, kDone, kBad };
  // Scans the next piece `s` of the value (the first piece starts at the value's first char);
  // `*consumed` is how much of `s` belongs to the value. A scalar (number, true, ...) ends at the
  // first char that cannot continue it (not consumed) or at `eof`. kBad: `*consumed` is where
  // the value went wrong (what came before it was still the value).
  Result Scan(std::string_view s, bool eof, size_t* consumed);
  // The value's first char ('{', '[', '"', or a scalar's); 0 before any.
  char first() const { return first_; }

 private:
  char first_ = 0;
  std::string closers_;  // the brackets still open, innermost last
  bool in_string_ = false;
  bool escaped_ = false;
};

// A call's arguments value. An object (or array) is passed through as it arrives; a string is
// held to its end and, when it holds JSON (some models write the arguments that way), decoded;
// null becomes "{}".
class ArgsValue {
 public:
  // Like JsonValueScanner::Scan; appends the text decided so far to `*emit`.
  JsonValueScanner::Result Feed(std::string_view s, bool eof, size_t* consumed, std::string* emit);
  bool started() const { return scanner_.first() != 0; }

 private:
  std::string Decided() const;
  JsonValueScanner scanner_;
  std::string held_;  // a string or scalar value so far
};

class MarkupParser : public ToolCallParser {
 public:
  void Feed(std::string_view chunk, std::vector<ToolParseEvent>* out) final;
  void Flush(std::vector<ToolParseEvent>* out) final;

  // --- for the formats (and CallObject) ---
  std::string_view Rest() const { return std::string_view(buf_).substr(pos_); }
  void Consume(size_t n);
  void SkipWhitespace();
  // Text state: emits the text before the earliest of `markers` and returns that marker's index
  // (the marker not consumed), or emits all but a possible partial marker and returns -1. Once
  // after EndCall, leading whitespace is dropped first.
  int ScanText(std::span<const std::string_view> markers, bool eof);
  // Content text. Trailing whitespace is held until more text comes (then it is emitted) or a
  // call starts (then it is dropped) or the output ends (emitted).
  void EmitText(std::string_view text);
  // Reasoning text (harmony's analysis channel); held trailing content whitespace goes first.
  void EmitReasoning(std::string_view text);
  // Markup starts at Rest(): from here until StartCall, what is consumed is kept; its first
  // `marker_len` chars are the marker that Malformed emits as text.
  void BeginTentative(size_t marker_len);
  bool tentative() const { return tentative_; }
  // The tentative markup was well formed but is no call (a harmony message header): it is
  // dropped, and what follows is not rescanned.
  void AcceptMarkup();
  // The call's name is known: emits kCallStart (dropping held whitespace and the tentative text).
  void StartCall(std::string name);
  void EmitArgs(std::string_view fragment);
  // The call's markup ended; whitespace right after it is dropped.
  void EndCall();
  bool in_call() const { return in_call_; }
  // The markup at hand is not what the format writes. Tentative: the marker comes out as text and
  // the rest is queued again; in a started call: the call ends there. Then OnMalformed().
  void Malformed();

 protected:
  // One step at Rest(); false when more input is needed to decide (or, at eof, nothing is left).
  virtual bool Step(bool eof) = 0;
  // After Malformed: go to the state that scans the queued text as content.
  virtual void OnMalformed() = 0;
  // The output ended inside a started call: emit what is needed to close its arguments.
  virtual void EndAtEof() {}

 private:
  void Run(bool eof);

  std::vector<ToolParseEvent>* out_ = nullptr;  // during Feed / Flush
  std::string buf_;                             // input; buf_[pos_..] not yet consumed
  size_t pos_ = 0;
  std::string held_whitespace_;   // trailing whitespace of the content so far
  bool skip_whitespace_ = false;  // drop leading whitespace at the next ScanText (after a call)
  bool tentative_ = false;
  std::string tentative_text_;  // consumed since BeginTentative
  size_t marker_len_ = 0;
  bool in_call_ = false;
};

// After whitespace (consumed): true when `marker` comes (consumed too), false when something else
// does, nullopt while the input could still become it.
std::optional<bool> TakeMarker(MarkupParser& p, std::string_view marker, bool eof);

// A {"name": "...", "arguments": {...}} object: Step consumes it from a MarkupParser's input.
// The call starts once the name is known (kOnName) or once the name and the arguments key are
// (kOnNameAndArgsKey, for formats where any JSON object might be content, e.g. Llama 3's, which
// also rejects unknown keys before the start); arguments before the name are held until it comes.
class CallObject {
 public:
  enum class Policy { kOnName, kOnNameAndArgsKey };
  enum class Result { kMore, kProgress, kDone, kBad };
  explicit CallObject(Policy policy) : policy_(policy) {}
  // Ready for the next object (Rest() at or before its '{').
  void Reset();
  Result Step(MarkupParser& p, bool eof);
  // The output ended inside the object, after the call started.
  void EndAtEof(MarkupParser& p);

 private:
  enum class State { kOpen, kKeyOrEnd, kColon, kValueStart, kValue, kAfterValue };
  enum class ValueKind { kArgs, kOther };
  Result Finish(MarkupParser& p);
  void MaybeStart(MarkupParser& p);

  Policy policy_;
  State state_ = State::kOpen;
  ValueKind kind_ = ValueKind::kOther;
  std::string key_;
  std::optional<std::string> name_;
  bool started_ = false;
  bool args_seen_ = false;  // the arguments key came
  std::string args_held_;   // arguments text decided before the call started
  ArgsValue args_;
  JsonValueScanner skip_;  // a value of another key
};

// The arguments JSON of a call written as untyped name/value pairs (Qwen3-Coder, GLM): each value
// typed by the tool's "parameters" schema, one leading and one trailing newline of it being
// markup. A value the schema says is a string streams as it comes ({"P": "... then the rest,
// then the quote); any other is typed at its end ({"P": 3). Each method returns the fragment to
// emit; Begin/Feed/EndValue go in that order, once per parameter.
class TypedArgs {
 public:
  TypedArgs(const std::vector<ToolSpec>* tools, std::string function);
  std::string BeginValue(std::string_view key);
  std::string FeedValue(std::string_view text);
  std::string EndValue();
  // The closing fragment ("}" or "{}" when no parameter came).
  std::string Close() const { return count_ == 0 ? "{}" : "}"; }

 private:
  std::string Separator() { return count_++ == 0 ? "{" : ", "; }

  const nlohmann::json* schema_ = nullptr;  // the tool's parameters.properties; null if unknown
  int count_ = 0;
  // The value in progress.
  std::string key_;
  const nlohmann::json* property_ = nullptr;  // its schema; null if unknown
  bool streaming_ = false;                    // a string, streamed
  bool leading_decided_ = false;              // streaming: its leading newline dropped or not
  std::string value_;  // typed at the end: all of it; streaming: a held trailing newline
};

// The JSON types a parameter's schema names ("type", a name or a list, and those of its anyOf /
// oneOf branches), appended to `types`. Json: nlohmann::json or ordered_json.
template <typename Json>
void AddSchemaTypes(const Json& schema, std::vector<std::string>* types) {
  if (!schema.is_object()) return;
  if (const auto t = schema.find("type"); t != schema.end()) {
    if (t->is_string()) types->push_back(t->template get<std::string>());
    if (t->is_array()) {
      for (const auto& e : *t) {
        if (e.is_string()) types->push_back(e.template get<std::string>());
      }
    }
  }
  for (const char* key : {"anyOf", "oneOf"}) {
    if (const auto alts = schema.find(key); alts != schema.end() && alts->is_array()) {
      for (const auto& alt : *alts) AddSchemaTypes(alt, types);
    }
  }
}

// A parameter whose schema names the string type only: the XML formats write its value as raw
// text (Qwen3-Coder, GLM), where other values are JSON.
template <typename Json>
bool IsStringOnlySchema(const Json& schema) {
  std::vector<std::string> types;
  AddSchemaTypes(schema, &types);
  return types.size() == 1 && types[0] == "string";
}

// `raw` typed for the property schema `property` (null: unknown): a JSON value's text.
std::string TypedValueJson(const nlohmann::json* property, std::string_view raw);

// A call's arguments written as literals, converted to a JSON object's text as they stream in
// (strings as they come, scalars when they end, structure as it opens and closes):
//   kGemma4  {key:value,...}: strings <|"|>...<|"|> (raw, no escapes), keys bare (or quoted so),
//            numbers / true / false / null bare, objects {...}, arrays [...]
//   kPython  (key=value, ...): keyword arguments whose values are Python literals: '...' / "..."
//            strings with escapes, ints, floats, True / False / None, lists, tuples, dicts
// A bare word that is no JSON scalar becomes a string.
class LiteralArgs {
 public:
  enum class Dialect { kGemma4, kPython };
  explicit LiteralArgs(Dialect dialect) : dialect_(dialect) {}
  // Like JsonValueScanner::Scan from the opening '{' / '(' to its match; appends the JSON
  // decided so far to `*emit`. At `eof` a scalar or string cut short is emitted as it is.
  JsonValueScanner::Result Feed(std::string_view s, bool eof, size_t* consumed, std::string* emit);

 private:
  enum class State { kOpen, kKeyOrClose, kSep, kValueOrClose, kValue, kString, kAfterValue, kDone };
  struct Frame {
    char close;  // '}', ']' or ')'
    char sep;    // between key and value: ':' or '='; 0 for an array
    int count = 0;
  };
  void Close(std::string* emit);
  // A key's or value's string opens at quote `c` (Python's ' or ", or Gemma's <|"|>): emits the
  // JSON quote; returns the bytes of the opening quote.
  size_t OpenString(char c, bool key, std::string* emit);
  // Python: one escape sequence at s[0] == '\\' appended to `*out` as UTF-8; 0 while incomplete.
  static size_t PythonEscape(std::string_view s, bool eof, std::string* out);

  Dialect dialect_;
  State state_ = State::kOpen;
  std::vector<Frame> stack_;
  char quote_ = 0;           // Python: the open string's quote
  bool string_key_ = false;  // the open string is a key
};

std::unique_ptr<ToolCallParser> MakeHermesParser();
std::unique_ptr<ToolCallParser> MakeLlama3JsonParser();
std::unique_ptr<ToolCallParser> MakeMistralParser();
std::unique_ptr<ToolCallParser> MakePhi4MiniParser();
std::unique_ptr<ToolCallParser> MakeDeepSeekParser(bool v31);
std::unique_ptr<ToolCallParser> MakeQwen3CoderParser(std::vector<ToolSpec> tools);
std::unique_ptr<ToolCallParser> MakeGlm45Parser(std::vector<ToolSpec> tools);
std::unique_ptr<ToolCallParser> MakeGemma4Parser();
std::unique_ptr<ToolCallParser> MakeGemmaToolCodeParser();
std::unique_ptr<ToolCallParser> MakeHarmonyParser();

}  // namespace loom::tool_parser_internal
