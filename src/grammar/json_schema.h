// JSON Schema -> Grammar: the grammar of the JSON documents that satisfy a schema.
//
// Output form: compact JSON (no whitespace between tokens) unless flexible_whitespace; object
// properties in the schema's declaration order; strings with any valid escape (except where a
// `pattern` / `format` / enum constant fixes the canonical spelling, below).
//
// Supported keywords (everything else is refused with "#/json/pointer: keyword "k" is not
// supported", never silently dropped):
//   type (a name or a list), enum, const (any JSON values, matched in their compact
//   nlohmann::json dump spelling), anyOf, oneOf (as alternatives: oneOf's exclusivity is not
//   enforced), allOf (merged when the members are simple: properties / required unioned, equal or
//   min/max-tightenable keywords combined; else an error), $ref to "#", "#/$defs/..",
//   "#/definitions/.." or any local JSON pointer (recursion included), $defs / definitions,
//   properties, required, additionalProperties (false / true / a schema), items, prefixItems,
//   (draft-4 items-array + additionalItems), minItems, maxItems, minLength / maxLength (code
//   points; an escape counts as one), pattern (regex_grammar.h, over the decoded string), format
//   (date-time, date, time, uuid, email, uri, ipv4, hostname; on integers and numbers OpenAPI's
//   int32 / int64 as bounds, float / double as nothing to check), minimum / maximum /
//   exclusiveMinimum / exclusiveMaximum on integers (exact, any int64 range, as a digit-range
//   grammar; the draft-4 boolean exclusive* form too), "minimum": 0 on numbers (no other number
//   bound: refused), uniqueItems: false.
// Ignored annotations: title, description, default, examples, $schema, $id, $comment,
//   deprecated, readOnly, writeOnly.
//
// Choices stricter than the spec (the usual ones of constrained decoding, as in xgrammar and
// llguidance), for a grammar that makes a model emit what the schema *intends*:
//   - additionalProperties absent: no extra properties when options.strict_additional (default,
//     like OpenAI's strict mode) and the object declares "properties" (an object schema without
//     them, {"type": "object"}, allows any members); the spec's "anything allowed" otherwise. Extra
//     keys allowed by additionalProperties exclude the declared names (canonical spelling;
//     duplicates among the extras are not prevented).
//   - No "type": inferred from the keywords present (properties -> object, items -> array,
//     minLength -> string, ...); none at all -> any JSON value.
//   - A pattern / format string and enum constants are spelled canonically: only the escapes
//     \" \\ \b \f \n \r \t and \u00xx for other control characters; everything else raw.
//   - pattern together with minLength / maxLength, and format together with pattern: refused.
#pragma once

#include <nlohmann/json.hpp>
#include <string_view>

#include "base/status.h"
#include "grammar/grammar.h"

namespace loom {

struct JsonSchemaOptions {
  // additionalProperties absent means false (see above); false: the spec's default (true).
  bool strict_additional = true;
  // Allow [ \t\n\r]* between JSON tokens; default: none (compact).
  bool flexible_whitespace = false;
  // Separators ", " and ": " (Python's json.dumps, so what chat templates' tojson renders and
  // models write in tool calls) instead of "," and ":"; unused with flexible_whitespace.
  bool spaced_separators = false;
};

// The grammar of the documents satisfying `schema`. Property order is the key order of `schema`
// (nlohmann::json sorts keys; use CompileJsonSchemaText to keep the declaration order).
// InvalidArgument naming the JSON pointer of the offending schema and the keyword.
// `budget` is checked at every schema node.
StatusOr<Grammar> CompileJsonSchema(const nlohmann::json& schema,
                                    const JsonSchemaOptions& options = {},
                                    const GrammarBudget& budget = {});
// Same from the schema's text, parsed keeping the declaration order of properties.
StatusOr<Grammar> CompileJsonSchemaText(std::string_view schema_text,
                                        const JsonSchemaOptions& options = {},
                                        const GrammarBudget& budget = {});

// The grammar of any JSON value (what the schema `{}` compiles to).
Grammar JsonAnyValueGrammar(const JsonSchemaOptions& options = {});

}  // namespace loom
