// A JSON Schema's values written as the literals of another syntax, as GBNF rules: the arguments
// of the tool-call formats whose parsers convert literals to JSON (tool_parser_internal.h
// LiteralArgs), for their grammars (tool_grammar.h).
//
//   kGemma4  {key:value,...}: keys bare (<|"|>quoted<|"|> when not a bare word) in the order of
//            Gemma 4's template (dictsort: by the lowercased key), strings <|"|>raw text<|"|>,
//            true / false / null, numbers, [a,b]; no whitespace, as the template writes them
//   kPython  keyword arguments (key=value, ...) in the schema's order, Python literals: "..." /
//            '...' strings with escapes, True / False / None, numbers, [a, b], {"k": v}
//
// Keywords: type (a name or a list), nullable, enum / const, anyOf / oneOf (as alternatives),
// $ref to a local JSON pointer ("#/$defs/x"; recursion included), properties / required (only
// the declared properties, as the JSON Schema front end's strict default; without properties,
// any keys with values of additionalProperties), items, minItems / maxItems. An integer or a
// number is a JSON Schema part (grammar_cache.h GrammarPart): JSON spells them as both syntaxes
// do, so every numeric keyword of the JSON Schema front end applies. A Python string with a
// pattern or format is a JSON string through a part too (spelled canonically there, its escapes
// mean the same in Python); with minLength / maxLength, Python's own string of that many
// characters (each escape one). A Gemma 4 string is raw
// text up to <|"|>: enum / const constrain it, minLength / maxLength too (as code points other
// than '<', so that the length is what the parser reads), pattern and format do not (as in the
// XML formats' raw strings). uniqueItems false is accepted. Any other keyword is an error naming
// it when the grammar is forced, and ignored in the lazy grammar (which then lets through values
// the schema might refuse).
#pragma once

#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "grammar/grammar_cache.h"

namespace loom {

enum class LiteralDialect { kGemma4, kPython };

// `s` as a GBNF string literal (raw UTF-8 passes through; quotes, backslashes and control bytes
// are escaped).
std::string GbnfLiteral(std::string_view s);

// Writes the rules of one grammar's tool arguments; one instance per grammar (its helper rules
// are shared by every tool's). Not thread-safe.
class LiteralSchemaGrammar {
 public:
  // Rules go to `*text`, parts to `*parts` (both outlive this), every name starting `prefix`.
  // `forced`: unsupported keywords are errors (else ignored), integer / number parts have no
  // fallback (else they fall back to any value of their type).
  LiteralSchemaGrammar(LiteralDialect dialect, bool forced, std::string prefix, std::string* text,
                       std::vector<GrammarPart>* parts);

  // A GBNF expression for a call's arguments under the tool parameters `schema` (an object
  // schema; $refs resolve against it): Gemma 4's {...}, Python's (...). InvalidArgument naming
  // the schema pointer and the keyword it cannot write (forced grammars only).
  StatusOr<std::string> Arguments(const nlohmann::ordered_json& schema);

 private:
  struct Member {
    std::string key_gbnf;  // the key and its separator, as GBNF
    std::string value;     // GBNF
    bool required;
  };
  std::string Value(const nlohmann::ordered_json& s, const std::string& path);
  std::string Typed(const nlohmann::ordered_json& s, const std::string& type,
                    const std::string& path);
  std::string Object(const nlohmann::ordered_json& s, const std::string& path, bool kwargs);
  std::string Array(const nlohmann::ordered_json& s, const std::string& path);
  std::string Literal(const nlohmann::ordered_json& v);
  std::string LiteralString(const std::string& s);
  std::string Members(const std::vector<Member>& members, const std::string& sep);
  std::string JsonPart(const nlohmann::ordered_json& s, const std::string& type);
  std::string Ref(const std::string& pointer, const std::string& path);
  std::string AnyValue();
  std::string String();
  std::string BoundedString(const nlohmann::ordered_json& s);
  // A Python string's GBNF, its characters repeated by `count` ("*", "{2,3}").
  std::string PythonString(const std::string& count) const;
  std::string NewRule(const std::string& body);
  void Fail(const std::string& path, const std::string& why);

  const LiteralDialect dialect_;
  const bool forced_;
  const std::string prefix_;
  std::string* text_;
  std::vector<GrammarPart>* parts_;
  int num_rules_ = 0;
  std::string any_, string_, python_escape_;      // the shared rules, once written
  const nlohmann::ordered_json* root_ = nullptr;  // the schema being written
  std::map<std::string, std::string> refs_;       // its $ref pointers -> rule names
  Status error_;
};

}  // namespace loom
