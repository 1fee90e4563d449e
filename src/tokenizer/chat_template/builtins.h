// Helpers shared by the builtin filters, tests, globals and methods (builtins.cc, methods.cc).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/chat_template/value.h"

namespace loom::chat_template {

// The argument at `index` or named `name` (keyword wins), or null when absent.
const Value* FindArg(const CallArgs& args, size_t index, std::string_view name);
// The argument as a value, or `def` when absent.
Value ArgOr(const CallArgs& args, size_t index, std::string_view name, Value def);
// Requires a string argument (or `def` when absent/None).
std::string StrArg(const CallArgs& args, size_t index, std::string_view name,
                   std::string_view def = "");

// Python str methods with the semantics of CPython for ASCII whitespace/letters.
std::string PyStrip(std::string_view s, const Value& chars, bool left, bool right);
std::vector<std::string> PySplit(std::string_view s, const Value& sep, int64_t maxsplit);
std::vector<std::string> PySplitLines(std::string_view s);
std::string AsciiUpper(std::string_view s);
std::string AsciiLower(std::string_view s);
std::string PyTitle(std::string_view s);       // str.title()
std::string PyCapitalize(std::string_view s);  // str.capitalize()

}  // namespace loom::chat_template
