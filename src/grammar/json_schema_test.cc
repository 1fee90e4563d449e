#include "grammar/json_schema.h"

#include <gtest/gtest.h>

#include "grammar/compiled_grammar.h"
#include "grammar/grammar_test_util.h"
#include "grammar/integer_range.h"
#include "grammar/regex_grammar.h"

namespace loom {
namespace {

using grammar_test::ExpectError;
using grammar_test::GrammarCase;
using grammar_test::Matches;
using grammar_test::MustCompile;
using grammar_test::RunCases;

StatusOr<Grammar> Schema(const std::string& s) { return CompileJsonSchemaText(s); }
StatusOr<Grammar> LooseSchema(const std::string& s) {
  JsonSchemaOptions o;
  o.strict_additional = false;
  return CompileJsonSchemaText(s, o);
}
StatusOr<Grammar> SpacedSchema(const std::string& s) {
  JsonSchemaOptions o;
  o.flexible_whitespace = true;
  return CompileJsonSchemaText(s, o);
}

TEST(JsonSchemaTest, ScalarTypes) {
  const std::vector<GrammarCase> cases = {
      {R"({"type": "null"})", {"null"}, {"", "nul", "Null", "0", "\"null\""}},
      {R"({"type": "boolean"})", {"true", "false"}, {"1", "True", "\"true\"", "null"}},
      {R"({"type": "integer"})",
       {"0", "-1", "42", "1234567890123"},
       {"01", "-0x", "1.0", "1e3", "+1", "", "-", "\"1\""}},
      {R"({"type": "number"})",
       {"0", "-1.5", "3.25e10", "1E-7", "0.0", "-0"},
       {"01", ".5", "1.", "1e", "--1", "+1", "NaN", "Infinity"}},
      {R"({"type": "string"})",
       {R"("")", R"("abc")", R"("a\"b")", R"("\\ \/ \b \f \n \r \t")", R"("\u00e9\uD83D\ude00")",
        R"("\ud7ff\uE000")", "\"é😀\""},
       {R"(abc)", R"("abc)", R"("a"b")", R"("\x")", R"("\u12")", "\"a\nb\"", "\"\x01\"",
        R"("\uD83D")", R"("\uDE00\uD83D")", R"("\ud800x")"}},
      {R"({"type": ["string", "null"]})", {"null", R"("x")"}, {"1", "true"}},
      {R"({"type": ["integer", "boolean"]})", {"7", "false"}, {"7.5", "null"}},
      {R"({})",
       {"null", "1", R"({"a":[1,{"b":null}]})", R"([])", R"("s")"},
       {"", "nul", "[1,]", "{a:1}"}},
      {R"(true)", {"false", "[true]", R"({"k":"v"})"}, {"tru"}},
  };
  EXPECT_EQ(RunCases(cases, Schema), 76);  // accept + reject strings checked
}

TEST(JsonSchemaTest, EnumConstAndCombinators) {
  const std::vector<GrammarCase> cases = {
      {R"({"enum": ["red", "green", 3, null, true, {"a": [1]}]})",
       {R"("red")", R"("green")", "3", "null", "true", R"({"a":[1]})"},
       {R"("blue")", "red", "4", "false", R"({"a":[2]})"}},
      {R"({"const": "fixed"})", {R"("fixed")"}, {R"("Fixed")", R"("fixed ")"}},
      {R"({"const": 3.5})", {"3.5"}, {"3.50", "3"}},
      {R"({"type": "string", "enum": ["a", 1, "b"]})", {R"("a")", R"("b")"}, {"1"}},
      {R"({"enum": ["é", "a\"b"]})", {"\"é\"", R"("a\"b")"}, {R"("\u00e9")"}},
      {R"({"anyOf": [{"type": "integer"}, {"type": "string", "maxLength": 2}]})",
       {"12", R"("ab")"},
       {R"("abc")", "1.5", "null"}},
      {R"({"oneOf": [{"const": 1}, {"const": 2}]})", {"1", "2"}, {"3"}},
      {R"({"oneOf": [{"type": "string"}, {"type": "null"}]})", {"\"a\"", "null"}, {"1"}},
      {R"({"oneOf": [{"type": "object", "properties": {"k": {"const": "a"}, "x": {"type": "integer"}},
                      "required": ["k"]},
                     {"type": "object", "properties": {"k": {"const": "b"}}, "required": ["k"]}]})",
       {R"({"k":"a","x":1})", R"({"k":"b"})"},
       {R"({"k":"c"})", "{}"}},
      {R"({"type": "object", "properties": {"a": {"type": "integer"}},
          "anyOf": [{"required": ["a"]}, {"properties": {"b": {"type": "string"}},
                                           "required": ["b"]}]})",
       {R"({"a":1})", R"({"b":"x"})", R"({"a":1,"b":"x"})"},
       {R"({})", R"({"b":1})"}},
      {R"({"allOf": [{"type": "object", "properties": {"a": {"type": "integer"}},
                      "required": ["a"]},
                     {"properties": {"b": {"type": "boolean"}}, "required": ["b"]}]})",
       {R"({"a":1,"b":true})"},
       {R"({"a":1})", R"({"b":true})", R"({"b":true,"a":1})"}},
      {R"({"allOf": [{"type": "integer", "minimum": 0}, {"maximum": 10}, {"minimum": 5}]})",
       {"5", "7", "10"},
       {"4", "11", "-1"}},
  };
  EXPECT_EQ(RunCases(cases, Schema), 53);  // accept + reject strings checked
}

TEST(JsonSchemaTest, Objects) {
  const std::vector<GrammarCase> cases = {
      // Declaration order kept, required ones mandatory, optional ones skippable.
      {R"({"type": "object", "properties": {"name": {"type": "string"}, "age": {"type": "integer"},
          "tags": {"type": "array", "items": {"type": "string"}}}, "required": ["name"]})",
       {R"({"name":"a"})", R"({"name":"a","age":3})", R"({"name":"a","tags":["x"]})",
        R"({"name":"a","age":3,"tags":[]})"},
       {R"({})", R"({"age":3})", R"({"age":3,"name":"a"})", R"({"name":"a",})",
        R"({"name":"a","extra":1})", R"({"name":"a","age":"3"})", R"({,"name":"a"})"}},
      // All optional: the empty object and any ordered subset.
      {R"({"type": "object", "properties": {"x": {"type": "integer"}, "y": {"type": "integer"}}})",
       {R"({})", R"({"x":1})", R"({"y":2})", R"({"x":1,"y":2})"},
       {R"({"y":2,"x":1})", R"({"x":1,})", R"({,})", R"({"x":1,"x":1})"}},
      // additionalProperties: a schema; extra keys after the declared ones, never a declared name.
      {R"({"type": "object", "properties": {"id": {"type": "integer"}}, "required": ["id"],
          "additionalProperties": {"type": "string"}})",
       {R"({"id":1})", R"({"id":1,"note":"x"})", R"({"id":1,"a":"x","b":"y"})",
        R"({"id":1,"i":"x"})", R"({"id":1,"idx":"x"})", R"({"id":1,"":"x"})"},
       {R"({"id":1,"note":2})", R"({"id":1,"id":"x"})", R"({"note":"x"})"}},
      // additionalProperties: true.
      {R"({"type": "object", "additionalProperties": true})",
       {R"({})", R"({"a":1})", R"({"a":1,"b":[null]})"},
       {R"({"a"})", R"([])"}},
      // additionalProperties: false with no properties: only {}.
      {R"({"type": "object", "additionalProperties": false})", {R"({})"}, {R"({"a":1})"}},
      // Required but undeclared: any value.
      {R"({"type": "object", "required": ["k"]})",
       {R"({"k":1})", R"({"k":{"z":[]}})"},
       {R"({})", R"({"j":1})"}},
      // Property names that need escaping.
      {R"({"type": "object", "properties": {"a\"b": {"type": "integer"}, "é": {"const": 1}},
          "required": ["a\"b"]})",
       {R"({"a\"b":1})", R"({"a\"b":1,"é":1})"},
       {R"({"ab":1})", R"({"a\"b":1,"é":2})"}},
      // A property with schema false cannot appear.
      {R"({"type": "object", "properties": {"a": {"type": "integer"}, "b": false}})",
       {R"({})", R"({"a":1})"},
       {R"({"b":1})"}},
      // No "type": inferred as object from "properties".
      {R"({"properties": {"a": {"type": "null"}}, "required": ["a"]})",
       {R"({"a":null})"},
       {"null", R"({})"}},
  };
  EXPECT_EQ(RunCases(cases, Schema), 49);  // accept + reject strings checked
}

TEST(JsonSchemaTest, NonStrictAdditionalAndWhitespace) {
  const std::vector<GrammarCase> loose = {
      {R"({"type": "object", "properties": {"a": {"type": "integer"}}})",
       {R"({})", R"({"a":1})", R"({"a":1,"b":"x"})", R"({"b":[1]})"},
       {R"({"a":"x"})", R"({"a":1,"a":2})"}},
  };
  EXPECT_EQ(RunCases(loose, LooseSchema), 6);
  const std::vector<GrammarCase> spaced = {
      {R"({"type": "object", "properties": {"a": {"type": "array", "items": {"type": "integer"}}},
          "required": ["a"]})",
       {R"({"a":[1,2]})", " {\n  \"a\" : [ 1 , 2 ]\n} ", "{\"a\":\t[]}"},
       {R"({"a":[1 2]})", "{\"a\":[1,2],}"}},
  };
  EXPECT_EQ(RunCases(spaced, SpacedSchema), 5);
  // Compact by default: no whitespace at all.
  const std::vector<GrammarCase> compact = {
      {R"({"type": "array", "items": {"type": "integer"}})", {"[1,2]"}, {"[1, 2]", " [1]"}},
  };
  EXPECT_EQ(RunCases(compact, Schema), 3);
}

TEST(JsonSchemaTest, Arrays) {
  const std::vector<GrammarCase> cases = {
      {R"({"type": "array", "items": {"type": "integer"}})",
       {"[]", "[1]", "[1,2,3]"},
       {"[", "[1,]", "[,1]", "[1,\"a\"]", "{}"}},
      {R"({"type": "array", "items": {"type": "boolean"}, "minItems": 2, "maxItems": 3})",
       {"[true,false]", "[true,true,true]"},
       {"[]", "[true]", "[true,true,true,true]"}},
      {R"({"type": "array", "minItems": 1})", {"[1]", "[null,\"x\",{}]"}, {"[]"}},
      {R"({"type": "array", "maxItems": 0})", {"[]"}, {"[1]"}},
      {R"({"type": "array", "prefixItems": [{"type": "string"}, {"type": "integer"}]})",
       {"[]", "[\"a\"]", "[\"a\",1]", "[\"a\",1,null,[]]"},
       {"[1]", "[\"a\",\"b\"]"}},
      {R"({"type": "array", "prefixItems": [{"type": "string"}, {"type": "integer"}],
          "items": false})",
       {"[]", "[\"a\"]", "[\"a\",1]"},
       {"[\"a\",1,2]"}},
      {R"({"type": "array", "prefixItems": [{"const": 1}], "items": {"const": 0},
          "minItems": 2, "maxItems": 4})",
       {"[1,0]", "[1,0,0,0]"},
       {"[1]", "[1,1]", "[1,0,0,0,0]", "[0,0]"}},
      {R"({"type": "array", "items": [{"type": "integer"}], "additionalItems": false})",
       {"[]", "[5]"},
       {"[5,6]", "[\"x\"]"}},
      {R"({"items": {"type": "array", "items": {"type": "integer"}, "maxItems": 1}})",
       {"[]", "[[]]", "[[1],[2]]"},
       {"[[1,2]]", "[1]"}},
      {R"({"type": "array", "uniqueItems": false, "items": {"type": "null"}})",
       {"[null,null]"},
       {"[0]"}},
  };
  EXPECT_EQ(RunCases(cases, Schema), 45);  // accept + reject strings checked
}

TEST(JsonSchemaTest, Strings) {
  const std::vector<GrammarCase> cases = {
      {R"({"type": "string", "minLength": 2, "maxLength": 3})",
       {R"("ab")", R"("abc")", R"("éé")", R"("a\n")", R"("\u0041\u0042")"},
       {R"("a")", R"("abcd")", R"("")", R"("é")"}},
      {R"({"type": "string", "maxLength": 0})", {R"("")"}, {R"("a")"}},
      {R"({"type": "string", "minLength": 1})", {R"("x")", R"("long string")"}, {R"("")"}},
      {R"({"type": "string", "pattern": "^[a-z]+-\\d+$"})",
       {R"("abc-12")", R"("x-0")"},
       {R"("abc-")", R"("ABC-1")", R"("abc-12x")", "abc-12"}},
      {R"({"type": "string", "pattern": "ab"})", {R"("ab")", R"("xaby")"}, {R"("a b")"}},
      {R"({"type": "string", "pattern": "^a\"b$"})", {R"("a\"b")"}, {R"("a"b")"}},
      {R"({"type": "string", "format": "date"})",
       {R"("2024-02-29")", R"("1999-12-31")"},
       {R"("2024-13-01")", R"("2024-00-10")", R"("2024-1-01")", R"("2024-01-32")"}},
      {R"({"type": "string", "format": "time"})",
       {R"("23:59:59Z")", R"("08:30:00.123+02:00")", R"("00:00:60z")"},
       {R"("24:00:00Z")", R"("12:00:00")", R"("12:60:00Z")"}},
      {R"({"type": "string", "format": "date-time"})",
       {R"("2024-05-01T12:34:56Z")", R"("2024-05-01t12:34:56.5-07:00")"},
       {R"("2024-05-01 12:34:56Z")", R"("2024-05-01T12:34Z")", R"("2024-05-01")"}},
      {R"({"type": "string", "format": "uuid"})",
       {R"("123e4567-e89b-12d3-a456-426614174000")", R"("ABCDEF01-2345-6789-abcd-ef0123456789")"},
       {R"("123e4567e89b12d3a456426614174000")", R"("123e4567-e89b-12d3-a456-42661417400g")"}},
      {R"({"type": "string", "format": "email"})",
       {R"("a@b.co")", R"("first.last+tag@sub.example.org")", R"("x@localhost")"},
       {R"("a@")", R"("@b.co")", R"("a b@c.d")", R"("a@-b.co")"}},
      {R"({"type": "string", "format": "uri"})",
       {R"("https://example.com/a?b=c#d")", R"("mailto:x@y.z")", R"("urn:isbn:0451450523")"},
       {R"("example.com")", R"("http://a b")", R"("1http://x")", R"("a:")", R"("a:[")",
        R"("http://x/%zz")", R"("http://x:y")"}},
      {R"({"type": "string", "format": "ipv4"})",
       {R"("192.168.0.1")", R"("0.0.0.0")"},
       {R"("256.1.1.1")", R"("1.2.3")", R"("01.2.3.4")"}},
      {R"({"type": "string", "format": "hostname"})",
       {R"("example.com")", R"("a-b.c")"},
       {R"("-a.com")", R"("a_b.com")"}},
  };
  EXPECT_EQ(RunCases(cases, Schema), 72);  // accept + reject strings checked
}

TEST(JsonSchemaTest, PropertyNamesThatOnlySayString) {
  const std::vector<GrammarCase> cases = {
      {R"({"type": "object", "propertyNames": {"type": "string"}})",
       {"{}", R"({"a":1})", R"({"b":[],"c":"x"})"},
       {"[]", "{a:1}"}}};
  EXPECT_EQ(RunCases(cases, LooseSchema), 5);
}

TEST(JsonSchemaTest, IntegerBounds) {
  const std::vector<GrammarCase> cases = {
      {R"({"type": "integer", "minimum": 0})", {"0", "7", "10", "999999999999"}, {"-1", "-0"}},
      {R"({"type": "integer", "minimum": 1, "maximum": 12})",
       {"1", "9", "10", "12"},
       {"0", "13", "20", "100", "-1", "01"}},
      {R"({"type": "integer", "minimum": -5, "maximum": 5})",
       {"-5", "-1", "0", "5"},
       {"-6", "6", "-0", "-10"}},
      {R"({"type": "integer", "exclusiveMinimum": 0, "exclusiveMaximum": 100})",
       {"1", "50", "99"},
       {"0", "100", "-1"}},
      {R"({"type": "integer", "maximum": -10})", {"-10", "-11", "-12345"}, {"-9", "0", "10"}},
      {R"({"type": "integer", "minimum": 1.5, "maximum": 3.5})", {"2", "3"}, {"1", "4"}},
      {R"({"type": "integer", "minimum": 5, "exclusiveMinimum": true})", {"6", "60"}, {"5"}},
      {R"({"type": "integer", "minimum": 123, "maximum": 4567})",
       {"123", "199", "200", "999", "1000", "4567", "4499"},
       {"122", "4568", "5000", "12", "45670"}},
      {R"({"type": "number", "minimum": 0})", {"0", "1.5", "3e2"}, {"-1", "-0.5"}},
      // Number bounds (integer values): the integer part in range with any fraction, the bound
      // itself only with a zero fraction; no exponents.
      {R"({"type": "number", "minimum": 0, "maximum": 10})",
       {"0", "0.5", "9.999", "10", "10.0", "3", "7.25"},
       {"10.5", "11", "-0.5", "-1", "1e1", "100"}},
      {R"({"type": "number", "exclusiveMinimum": 0, "maximum": 1})",
       {"0.5", "0.001", "1", "1.00"},
       {"0", "0.0", "0.000", "1.01", "2", "-0.5"}},
      {R"({"type": "number", "minimum": -2.0, "exclusiveMaximum": 3})",
       {"-2", "-2.0", "-1.5", "-0.25", "0", "2.999", "2"},
       {"-2.01", "-3", "3", "3.0", "4", "-0"}},
      {R"({"type": "number", "maximum": -1})",
       {"-1", "-1.0", "-1.5", "-100.25"},
       {"-0.5", "0", "1", "-1.01e3"}},
      {R"({"type": "number", "minimum": 5, "exclusiveMinimum": true, "maximum": 600})",
       {"5.1", "6", "599.99", "600"},
       {"5", "5.0", "600.5", "601", "4.9"}},
      {R"({"type": "number", "minimum": 3, "maximum": 3})", {"3", "3.0"}, {"3.1", "2.9", "4"}},
      {R"({"type": "number", "exclusiveMinimum": 100})",
       {"100.5", "101", "123456.7"},
       {"100", "100.0", "99.9", "-1"}},
      // OpenAPI's formats on numbers (the grammar must not ignore them: ajv-formats checks them).
      {R"({"type": "integer", "format": "int32"})",
       {"2147483647", "-2147483648", "0"},
       {"2147483648", "-2147483649", "5563116557485"}},
      {R"({"type": "integer", "format": "int32", "minimum": 1})", {"1", "2147483647"}, {"0"}},
      {R"({"type": "number", "format": "int64"})",
       {"9000000000000000000", "-3"},
       {"1.5", "9000000000000000001"}},
      {R"({"type": "number", "format": "double"})", {"1.5", "-2e10"}, {"x"}},
      {R"({"type": "integer", "format": "uuid"})", {"12"}, {"1.5"}},  // a string format: n/a
  };
  EXPECT_EQ(RunCases(cases, Schema), 143);  // accept + reject strings checked
}

// IntegerRangeRegex against every integer of a window, for many ranges.
TEST(IntegerRangeTest, ExhaustiveSmallRanges) {
  const std::vector<std::pair<std::optional<int64_t>, std::optional<int64_t>>> ranges = {
      {0, 0},     {0, 9},       {3, 7},      {1, 100}, {-100, -1}, {-37, 215}, {9, 10},
      {99, 101},  {0, 1000},    {-1000, 0},  {5, {}},  {{}, -5},   {-12, {}},  {{}, 33},
      {100, 199}, {1000, 1999}, {-999, 999}, {10, 99}, {11, 98},   {250, 2500}};
  for (const auto& [lo, hi] : ranges) {
    const std::string re = IntegerRangeRegex(lo, hi);
    SCOPED_TRACE(re);
    const auto g = MustCompile(CompileRegex(re));
    ASSERT_NE(g, nullptr);
    for (int64_t v = -3000; v <= 3000; ++v) {
      const bool in = (!lo || v >= *lo) && (!hi || v <= *hi);
      ASSERT_EQ(Matches(g, std::to_string(v)), in) << v;
    }
    EXPECT_FALSE(Matches(g, "-0"));
  }
}

TEST(IntegerRangeTest, Int64Extremes) {
  const auto g =
      MustCompile(CompileRegex(IntegerRangeRegex(-9000000000000000000, 9000000000000000000)));
  ASSERT_NE(g, nullptr);
  EXPECT_TRUE(Matches(g, "9000000000000000000"));
  EXPECT_TRUE(Matches(g, "-9000000000000000000"));
  EXPECT_TRUE(Matches(g, "0"));
  EXPECT_FALSE(Matches(g, "9000000000000000001"));
  EXPECT_FALSE(Matches(g, "-9000000000000000001"));
}

TEST(JsonSchemaTest, RefsAndRecursion) {
  const std::vector<GrammarCase> cases = {
      {R"({"$defs": {"pos": {"type": "integer", "minimum": 1}},
          "type": "array", "items": {"$ref": "#/$defs/pos"}})",
       {"[]", "[1,2]"},
       {"[0]", "[-1]"}},
      {R"({"definitions": {"s": {"type": "string"}}, "$ref": "#/definitions/s"})",
       {R"("x")"},
       {"1"}},
      // A linked list: recursion through $ref.
      {R"({"$defs": {"node": {"type": "object",
            "properties": {"v": {"type": "integer"}, "next": {"anyOf": [{"$ref": "#/$defs/node"},
                                                                      {"type": "null"}]}},
            "required": ["v", "next"]}},
          "$ref": "#/$defs/node"})",
       {R"({"v":1,"next":null})", R"({"v":1,"next":{"v":2,"next":{"v":3,"next":null}}})"},
       {R"({"v":1})", R"({"v":1,"next":{"v":2}})", R"({"v":1,"next":{"v":"x","next":null}})"}},
      // A tree via "#" (the root itself).
      {R"({"type": "object", "properties": {"name": {"type": "string"},
          "children": {"type": "array", "items": {"$ref": "#"}}}, "required": ["name"]})",
       {R"({"name":"a"})", R"({"name":"a","children":[{"name":"b","children":[{"name":"c"}]}]})"},
       {R"({"name":"a","children":[{}]})", R"({"children":[]})"}},
      // $ref with sibling keywords is merged.
      {R"({"$defs": {"o": {"type": "object", "properties": {"a": {"type": "integer"}}}},
          "$ref": "#/$defs/o", "required": ["a"]})",
       {R"({"a":1})"},
       {R"({})"}},
  };
  EXPECT_EQ(RunCases(cases, Schema), 17);  // accept + reject strings checked
}

TEST(JsonSchemaTest, NlohmannJsonInputUsesItsKeyOrder) {
  // nlohmann::json sorts keys: "a" before "b" whatever the text said.
  const nlohmann::json schema = nlohmann::json::parse(
      R"({"type": "object", "properties": {"b": {"type": "integer"}, "a": {"type": "integer"}},
          "required": ["a", "b"]})");
  const auto g = MustCompile(CompileJsonSchema(schema));
  ASSERT_NE(g, nullptr);
  EXPECT_TRUE(Matches(g, R"({"a":1,"b":2})"));
  EXPECT_FALSE(Matches(g, R"({"b":2,"a":1})"));
}

TEST(JsonSchemaTest, UnsupportedKeywordsNameThePointer) {
  struct ErrorCase {
    const char* schema;
    const char* fragment;
  };
  const std::vector<ErrorCase> cases = {
      {R"({"type": "object", "properties": {"tags": {"type": "array", "uniqueItems": true}}})",
       R"(#/properties/tags: keyword "uniqueItems" is not supported)"},
      {R"({"type": "number", "multipleOf": 2})", R"(#: keyword "multipleOf" is not supported)"},
      {R"({"not": {"type": "null"}})", R"(#: keyword "not" is not supported)"},
      {R"({"if": {}, "then": {}})", R"(keyword "if" is not supported)"},
      {R"({"type": "object", "patternProperties": {"^x": {}}})",
       R"(#: keyword "patternProperties" is not supported)"},
      {R"({"type": "object", "minProperties": 1})", R"(keyword "minProperties")"},
      {R"({"type": "object", "propertyNames": {"pattern": "^a"}})", R"(keyword "propertyNames")"},
      {R"({"type": "object", "propertyNames": {"type": "integer"}})", R"(keyword "propertyNames")"},
      {R"({"oneOf": [{"type": "integer"}, {"minimum": 2}]})",
       R"(#: "oneOf" branches 0 and 1 may both match a document)"},
      {R"({"oneOf": [{"type": "object"}, {"type": "object", "properties": {"a": {"const": 1}}}]})",
       R"("oneOf" branches 0 and 1)"},
      {R"({"type": "array", "contains": {"type": "integer"}})", R"(keyword "contains")"},
      {R"({"type": "array", "items": {"anyOf": [{"type": "string", "dependentRequired": {}}]}})",
       R"(#/items/anyOf/0: keyword "dependentRequired" is not supported)"},
      {R"({"$defs": {"a~b/c": {"unevaluatedProperties": false}}, "$ref": "#/$defs/a~0b~1c"})",
       R"(#/$defs/a~0b~1c: keyword "unevaluatedProperties" is not supported)"},
      {R"({"type": "object", "properties": {"a/b": {"type": "string", "contentEncoding": "x"}}})",
       R"(#/properties/a~1b: keyword "contentEncoding" is not supported)"},
      {R"({"type": "string", "format": "ipv6"})", R"(#: format "ipv6" is not supported)"},
      {R"({"type": "integer", "format": "decimal"})",
       R"(#: format "decimal" is not supported on a number)"},
      {R"({"type": "number", "maximum": 3.5})",
       R"(#: keyword "maximum" on a number is only supported with an integer value (got 3.5))"},
      {R"({"type": "number", "minimum": 2, "exclusiveMaximum": 2})",
       R"(#: the number range is empty)"},
      {R"({"type": "string", "pattern": "(a)\\1"})",
       R"(#: keyword "pattern": regex /(a)\1/ at offset 3: backreferences)"},
      {R"({"type": "string", "pattern": "^a+$", "maxLength": 3})",
       R"(keyword "maxLength" together with "pattern" is not supported)"},
      {R"({"type": "string", "pattern": "a", "format": "date"})",
       R"(keyword "format" together with "pattern")"},
      {R"({"$ref": "#/$defs/missing"})", R"($ref "#/$defs/missing" does not resolve)"},
      {R"({"$ref": "https://example.com/s.json"})", R"(only local references)"},
      {R"({"type": "frog"})", R"(unknown type "frog")"},
      {R"({"type": "integer", "minimum": 5, "maximum": 1})",
       R"(the integer range [5, 1] is empty)"},
      {R"({"type": "string", "minLength": 3, "maxLength": 1})", R"("minLength" is larger)"},
      {R"({"type": "array", "prefixItems": [{}], "items": false, "minItems": 2})",
       R"("minItems" is larger than the number of items)"},
      {R"({"allOf": [{"type": "string"}, {"type": "integer"}]})", R"(no common type)"},
      {R"({"allOf": [{"pattern": "a"}, {"pattern": "b"}]})",
       R"(allOf: keyword "pattern" differs between members)"},
      {R"({"enum": []})", R"("enum" must be a non-empty array)"},
      {R"({"type": "integer", "enum": ["a"]})", R"(no "enum" / "const" value satisfies)"},
      {R"(false)", R"(#: the schema false matches nothing)"},
      {R"({"type": "object", "properties": {"x": 3}})", R"(#/properties/x: a schema must be)"},
      {R"({"type": "object", "required": ["a"], "additionalProperties": false})",
       R"(required property "a" is not in "properties")"},
      {R"({"type": "string", "maxLength": 1000000})", R"(larger than 100000)"},
      {R"([1, 2])", R"(a schema must be an object or a boolean)"},
  };
  for (const ErrorCase& c : cases) {
    SCOPED_TRACE(c.schema);
    ExpectError(CompileJsonSchemaText(c.schema).status(), c.fragment);
  }
  ExpectError(CompileJsonSchemaText("{not json").status(), "not JSON");
}

// A schema past the rule cap or the deadline is refused naming the limit, not compiled.
TEST(JsonSchemaTest, BudgetRefusesHugeAndSlowGrammars) {
  std::string many = R"({"type": "object", "properties": {)";
  for (int i = 0; i < 6; ++i) {
    many += (i ? "," : "") + std::string("\"p") + std::to_string(i) +
            R"(": {"type": "string", "maxLength": 100000})";
  }
  many += "}}";
  const auto huge = CompileJsonSchemaText(many);
  ExpectError(huge.status(), "more than 400000 rules");
  EXPECT_NE(huge.status().message().find("#/properties/p"), std::string::npos)
      << huge.status().message();
  // One such string fits, and compiles.
  const auto one = CompileJsonSchemaText(R"({"type": "string", "maxLength": 100000})");
  ASSERT_TRUE(one.ok()) << one.status().ToString();
  EXPECT_TRUE(CompiledGrammar::Compile(*one).ok());
  // A deadline already behind us.
  GrammarBudget late = GrammarBudget::WithTimeout(1);
  late.start -= std::chrono::seconds(1);
  ExpectError(CompileJsonSchemaText(R"({"type": "integer"})", {}, late).status(),
              "compiling took longer than 1 ms");
  ExpectError(CompiledGrammar::Compile(*one, late).status(), "compiling took longer than 1 ms");
  GrammarBudget small;
  small.max_rules = 10;
  ExpectError(CompiledGrammar::Compile(*one, small).status(), "more than 10 rules");
}

TEST(JsonSchemaTest, AnnotationsAreIgnored) {
  const auto g = MustCompile(CompileJsonSchemaText(
      R"({"$schema": "https://json-schema.org/draft/2020-12/schema", "$id": "x", "title": "T",
          "description": "d", "$comment": "c", "type": "integer", "default": 1, "examples": [2],
          "deprecated": false, "readOnly": true, "writeOnly": false})"));
  ASSERT_NE(g, nullptr);
  EXPECT_TRUE(Matches(g, "12"));
  EXPECT_FALSE(Matches(g, "x"));
}

}  // namespace
}  // namespace loom
