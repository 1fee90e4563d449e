// The JSON pieces of the tool-call parsers: marker search, a JSON value's extent across chunks,
// a call's arguments value, and the {"name", "arguments"} object (tool_parser_internal.h).
#include <algorithm>
#include <nlohmann/json.hpp>

#include "server/tool_parser_internal.h"

namespace loom::tool_parser_internal {

using nlohmann::json;

Found FindFirst(std::string_view s, std::span<const std::string_view> markers) {
  Found found;
  for (size_t i = 0; i < markers.size(); ++i) {
    const size_t pos = s.find(markers[i]);
    if (pos < found.pos) found = {pos, static_cast<int>(i)};
  }
  return found;
}

size_t PartialMarkerAtEnd(std::string_view s, std::span<const std::string_view> markers) {
  size_t best = 0;
  for (std::string_view marker : markers) {
    for (size_t k = std::min(s.size(), marker.size() - 1); k > best; --k) {
      if (s.substr(s.size() - k) == marker.substr(0, k)) {
        best = k;
        break;
      }
    }
  }
  return best;
}

std::string_view Trim(std::string_view s) {
  const size_t b = s.find_first_not_of(kWhitespace);
  if (b == std::string_view::npos) return {};
  return s.substr(b, s.find_last_not_of(kWhitespace) - b + 1);
}

std::optional<bool> TakeMarker(MarkupParser& p, std::string_view marker, bool eof) {
  p.SkipWhitespace();
  const std::string_view r = p.Rest();
  if (r.starts_with(marker)) {
    p.Consume(marker.size());
    return true;
  }
  if (!eof && (r.empty() || MayBecome(r, marker))) return std::nullopt;
  return false;
}

std::optional<size_t> JsonStringEnd(std::string_view s) {
  for (size_t i = 1; i < s.size(); ++i) {
    if (s[i] == '\\') {
      ++i;
    } else if (s[i] == '"') {
      return i + 1;
    }
  }
  return std::nullopt;
}

std::string JsonQuote(std::string_view text) {
  return json(std::string(text)).dump(-1, ' ', false, json::error_handler_t::replace);
}

namespace {

bool IsScalarChar(char c) {
  return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '+' ||
         c == '-' || c == '.';
}

}  // namespace

JsonValueScanner::Result JsonValueScanner::Scan(std::string_view s, bool eof, size_t* consumed) {
  size_t i = 0;
  *consumed = 0;
  if (first_ == 0) {
    if (s.empty()) return Result::kMore;
    const char c = s[0];
    if (c == '{' || c == '[') {
      closers_.push_back(c == '{' ? '}' : ']');
    } else if (c == '"') {
      in_string_ = true;
    } else if (!(c == '-' || (c >= '0' && c <= '9') || c == 't' || c == 'f' || c == 'n')) {
      return Result::kBad;
    }
    first_ = c;
    i = 1;
  }
  if (first_ != '{' && first_ != '[' && first_ != '"') {  // a scalar: up to the first non-scalar
    while (i < s.size() && IsScalarChar(s[i])) ++i;
    *consumed = i;
    return i < s.size() || eof ? Result::kDone : Result::kMore;
  }
  bool done = !in_string_ && closers_.empty();
  while (i < s.size() && !done) {
    const char c = s[i++];
    if (in_string_) {
      if (escaped_) {
        escaped_ = false;
      } else if (c == '\\') {
        escaped_ = true;
      } else if (c == '"') {
        in_string_ = false;
        done = closers_.empty();
      }
    } else if (c == '"') {
      in_string_ = true;
    } else if (c == '{' || c == '[') {
      closers_.push_back(c == '{' ? '}' : ']');
    } else if (c == '}' || c == ']') {
      if (closers_.back() != c) {
        *consumed = i - 1;  // what came before the mismatch was still the value
        return Result::kBad;
      }
      closers_.pop_back();
      done = closers_.empty();
    }
  }
  *consumed = i;
  return done ? Result::kDone : Result::kMore;
}

JsonValueScanner::Result ArgsValue::Feed(std::string_view s, bool eof, size_t* consumed,
                                         std::string* emit) {
  const JsonValueScanner::Result r = scanner_.Scan(s, eof, consumed);
  const std::string_view piece = s.substr(0, *consumed);
  const char first = scanner_.first();
  if (first == '{' || first == '[') {
    emit->append(piece);
  } else if (r != JsonValueScanner::Result::kBad) {
    held_.append(piece);
    if (r == JsonValueScanner::Result::kDone) emit->append(Decided());
  }
  return r;
}

// A whole string or scalar value as the arguments' text.
std::string ArgsValue::Decided() const {
  if (held_ == "null") return "{}";
  if (scanner_.first() != '"') return held_;
  const json decoded = json::parse(held_, nullptr, /*allow_exceptions=*/false);
  if (decoded.is_string()) {
    const std::string& inner = decoded.get_ref<const std::string&>();
    const json parsed = json::parse(inner, nullptr, /*allow_exceptions=*/false);
    if (parsed.is_object()) {
      const size_t b = inner.find_first_not_of(kWhitespace);
      const size_t e = inner.find_last_not_of(kWhitespace);
      return inner.substr(b, e - b + 1);
    }
  }
  return held_;  // a string that is not JSON: the string itself
}

void CallObject::Reset() { *this = CallObject(policy_); }

CallObject::Result CallObject::Step(MarkupParser& p, bool eof) {
  if (state_ != State::kValue) {
    p.SkipWhitespace();
    if (p.Rest().empty()) return Result::kMore;
  }
  const std::string_view r = p.Rest();
  switch (state_) {
    case State::kOpen:
      if (r[0] != '{') return Result::kBad;
      p.Consume(1);
      state_ = State::kKeyOrEnd;
      return Result::kProgress;
    case State::kKeyOrEnd: {
      if (r[0] == '}') {
        p.Consume(1);
        return Finish(p);
      }
      if (r[0] != '"') return Result::kBad;
      const std::optional<size_t> end = JsonStringEnd(r);
      if (!end) return Result::kMore;
      const json key = json::parse(r.substr(0, *end), nullptr, false);
      if (!key.is_string()) return Result::kBad;
      key_ = key.get<std::string>();
      p.Consume(*end);
      state_ = State::kColon;
      return Result::kProgress;
    }
    case State::kColon:
      if (r[0] != ':') return Result::kBad;
      p.Consume(1);
      state_ = State::kValueStart;
      return Result::kProgress;
    case State::kValueStart:
      if (key_ == "name" && !name_) {
        if (r[0] != '"') return Result::kBad;
        const std::optional<size_t> end = JsonStringEnd(r);
        if (!end) return Result::kMore;
        const json name = json::parse(r.substr(0, *end), nullptr, false);
        if (!name.is_string() || name.get_ref<const std::string&>().empty()) return Result::kBad;
        name_ = name.get<std::string>();
        p.Consume(*end);
        state_ = State::kAfterValue;
        MaybeStart(p);
        return Result::kProgress;
      }
      if ((key_ == "arguments" || key_ == "parameters") && !args_seen_) {
        args_seen_ = true;
        kind_ = ValueKind::kArgs;
        state_ = State::kValue;
        MaybeStart(p);
        return Result::kProgress;
      }
      if (policy_ == Policy::kOnNameAndArgsKey && !started_) return Result::kBad;
      kind_ = ValueKind::kOther;
      skip_ = JsonValueScanner();
      state_ = State::kValue;
      return Result::kProgress;
    case State::kValue: {
      size_t n = 0;
      JsonValueScanner::Result res;
      if (kind_ == ValueKind::kArgs) {
        std::string emit;
        res = args_.Feed(r, eof, &n, &emit);
        p.Consume(n);
        if (started_) {
          p.EmitArgs(emit);
        } else {
          args_held_ += emit;
        }
      } else {
        res = skip_.Scan(r, eof, &n);
        p.Consume(n);
      }
      if (res == JsonValueScanner::Result::kBad) return Result::kBad;
      if (res == JsonValueScanner::Result::kDone) {
        state_ = State::kAfterValue;
        return Result::kProgress;
      }
      return n > 0 ? Result::kProgress : Result::kMore;
    }
    case State::kAfterValue:
      if (r[0] == ',') {
        p.Consume(1);
        state_ = State::kKeyOrEnd;
        return Result::kProgress;
      }
      if (r[0] == '}') {
        p.Consume(1);
        return Finish(p);
      }
      return Result::kBad;
  }
  return Result::kBad;
}

void CallObject::MaybeStart(MarkupParser& p) {
  if (started_ || !name_) return;
  if (policy_ == Policy::kOnNameAndArgsKey && !args_seen_) return;
  started_ = true;
  p.StartCall(*name_);
  p.EmitArgs(args_held_);
  args_held_.clear();
}

CallObject::Result CallObject::Finish(MarkupParser& p) {
  if (!name_) return Result::kBad;
  if (!started_) {
    if (policy_ == Policy::kOnNameAndArgsKey && !args_seen_) return Result::kBad;
    MaybeStart(p);
  }
  if (!args_seen_) p.EmitArgs("{}");
  return Result::kDone;
}

void CallObject::EndAtEof(MarkupParser& p) {
  if (started_ && !args_seen_) p.EmitArgs("{}");
}

}  // namespace loom::tool_parser_internal
