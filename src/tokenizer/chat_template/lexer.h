// Lexer: splits Jinja source into text and tag tokens, applying whitespace control the way
// transformers configures jinja2: trim_blocks (drop the first newline after a block or comment
// tag), lstrip_blocks (drop spaces/tabs before a block or comment tag at the start of a line),
// "-" (strip all whitespace on that side) and "+" (disable lstrip/trim on that side).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/chat_template/error.h"

namespace loom::chat_template {

struct Token {
  enum class Type : uint8_t {
    kText,        // literal template text (after whitespace control); `text`
    kVarBegin,    // {{
    kVarEnd,      // }}
    kBlockBegin,  // {%
    kBlockEnd,    // %}
    kName,        // identifier or keyword; `text`
    kString,      // string literal, escapes decoded; `text`
    kInt,         // `int_value`
    kFloat,       // `float_value`
    kOp,          // operator or punctuation; `text` ("+", "//", "==", "(", ...)
    kEof,
  };
  Type type = Type::kEof;
  std::string text;
  int64_t int_value = 0;
  double float_value = 0;
  SourcePos pos;
};

// Tokenizes `source`. Throws TemplateError(kSyntax) on an unterminated tag, comment or string,
// or an unexpected character. {% raw %}...{% endraw %} becomes a kText token.
std::vector<Token> Tokenize(std::string_view source);

}  // namespace loom::chat_template
