// GBNF, llama.cpp's grammar syntax, compiled to a Grammar:
//
//   root   ::= "{" ws pair ("," ws pair)* "}"     # rules, one `name ::= alternatives` each
//   pair   ::= [a-z_]+ ws ":" ws value            # rule names: letters, digits, '-', '_'
//   value  ::= "true" | [0-9]{1,3} | [^"\\]* | . | (ws "x")? | other-rule
//
// Literals "..." and classes [...] take \n \r \t \\ \" \' \[ \] \- \^ \/ \xHH \uHHHH \UHHHHHHHH;
// classes are over code points ([^...] = any other code point), `.` is any code point; the
// quantifiers are * + ? {m} {m,} {m,n} (at most 10000). A rule ends where the next `name ::=`
// starts, so alternatives may continue on the next line. `#` starts a comment to the end of line.
// Left-recursive rules are rejected (as llama.cpp does), with the rule named.
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/status.h"
#include "grammar/grammar.h"

namespace loom {

// The grammar of `text`, rooted at rule "root". InvalidArgument "GBNF line L, column C: ..." for
// a syntax error, naming the rule for an undefined or left-recursive one.
StatusOr<Grammar> CompileGbnf(std::string_view text);

// The same, built on top of `base`: `externals` are rules of `base` the text may refer to by
// name (a grammar assembled from parts, e.g. a tool call's markup around each tool's JSON Schema
// grammar, Grammar::Embed). Defining one of their names in the text is an error.
StatusOr<Grammar> CompileGbnf(std::string_view text, Grammar base,
                              const std::vector<std::pair<std::string, int32_t>>& externals);

}  // namespace loom
