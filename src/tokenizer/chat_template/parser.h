// Parser: turns the Lexer's tokens into a syntax tree (ast.h) following jinja2's grammar and
// operator precedence. Filters and tests are resolved at parse time, as jinja2 does: an unknown
// filter or test makes the whole template fail to parse.
#pragma once

#include <string_view>

#include "tokenizer/chat_template/ast.h"

namespace loom::chat_template {

// Maximum nesting of blocks and sub-expressions (guards the recursive descent's stack).
inline constexpr int kMaxParseDepth = 200;
// Maximum height of an expression tree (long operator/filter/attribute chains such as
// a + a + ... are parsed iteratively but evaluated recursively).
inline constexpr int kMaxExprHeight = 1000;

// Parses a template source. Throws TemplateError(kSyntax) with the line/column of the problem.
Body ParseTemplate(std::string_view source);

// Builtin registries (builtins.cc); null when unknown.
FilterFn FindFilter(std::string_view name);
TestFn FindTest(std::string_view name);

}  // namespace loom::chat_template
