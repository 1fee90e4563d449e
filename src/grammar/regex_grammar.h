// Regular expressions (the ECMAScript subset that JSON Schema's `pattern` uses) compiled to a
// Grammar.
//
// Supported: literals (UTF-8), escapes \d \w \s \D \W \S \n \r \t \f \v \0 \xHH \uXXXX (a surrogate
// pair \uD83D\uDE00 is the one code point it encodes, as in ECMAScript's unicode mode) and escaped
// punctuation, classes [a-z] [^...] (with class escapes inside), `.` (any code point but \n \r
// U+2028 U+2029, as in ECMAScript), groups ( ) (?: ) (?<name> ), alternation, quantifiers
// * + ? {m} {m,} {m,n} (at most 10000; a lazy `?` suffix is accepted: same language).
// Anchors: `^` only at the start and `$` only at the end of a top-level alternative. Matching is
// whole-string; like JSON Schema's search semantics, a side without its anchor is padded with
// "any string" (so "ab" means .*ab.* and "^ab$" exactly ab).
// Refused with an error naming them: backreferences (\1, \k<n>), lookaround ((?= (?! (?<= (?<!),
// word boundaries (\b \B), anchors elsewhere, \cX, \p{..}, octal escapes (\0 before a digit).
// regex_pcre2_test.cc checks both semantics against PCRE2.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "grammar/grammar.h"

namespace loom {

enum class RegexTarget {
  kRaw,         // the matched text itself, as UTF-8
  kJsonString,  // the text as the content of a JSON string literal: `"` `\` and control
                // characters appear as their escapes (the canonical one: \" \\ \n \t \r \b \f,
                // else \u00xx), every other character raw
};

// A grammar whose root matches the strings `pattern` matches. InvalidArgument
// "regex /.../ at offset N: ..." on a syntax error or an unsupported construct.
StatusOr<Grammar> CompileRegex(std::string_view pattern);

// `pattern` anchored at both ends ("^(?:" pattern ")$", the leading ^ and unescaped trailing $ of
// each of its top-level alternatives dropped first), for the regexes that must match a whole
// output (vLLM's guided_regex, `loom grammar --regex`) rather than be searched for as JSON
// Schema's `pattern` is.
std::string AnchorWholeMatch(std::string pattern);

// Lowers `pattern` into `grammar` (adding helper rules) and returns the sequence that matches it.
StatusOr<GrammarSequence> LowerRegex(std::string_view pattern, RegexTarget target,
                                     Grammar* grammar);

// One code point out of `ranges` as it appears inside a JSON string literal
// (RegexTarget::kJsonString rules: `"` `\` and control characters by their canonical escape).
GrammarElement JsonStringCharClass(const std::vector<CodePointRange>& ranges, Grammar* grammar);

// The canonical JSON string escape of `cp` (`"` `\` or a control character): \" \\ \n ... \u00xx.
std::string JsonEscape(char32_t cp);

}  // namespace loom
