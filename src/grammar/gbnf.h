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

#include <string_view>

#include "base/status.h"
#include "grammar/grammar.h"

namespace loom {

// The grammar of `text`, rooted at rule "root". InvalidArgument "GBNF line L, column C: ..." for
// a syntax error, naming the rule for an undefined or left-recursive one.
StatusOr<Grammar> CompileGbnf(std::string_view text);

}  // namespace loom
