// ToolCallParser, every format, on hand-written outputs: the expected events (adjacent kText and
// kCallArgs merged) from the whole output, and the same events from every one- and two-cut
// chunking and byte by byte. Then transcripts of real chat templates: an assistant turn with a
// tool call rendered by loom's Jinja engine, cut out of the prompt and parsed back to the same
// name and arguments. And the names, DetectToolCallFormat on those templates.
#include "server/tool_parser.h"

#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <ostream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "grammar/grammar_cache.h"
#include "grammar/matcher.h"
#include "server/tool_grammar.h"
#include "support/test_data.h"
#ifdef LOOM_HAVE_CHAT_TEMPLATE
#include "tokenizer/chat_template/chat_template.h"
#endif

namespace loom {
namespace {

using nlohmann::json;
using nlohmann::ordered_json;
using Kind = ToolParseEvent::Kind;

// An expected event: 'T' text, 'C' call start (the name), 'A' arguments, 'R' reasoning.
struct Ev {
  char kind;
  std::string text;
  bool operator==(const Ev&) const = default;
};
void PrintTo(const Ev& e, std::ostream* os) { *os << e.kind << "[" << e.text << "]"; }

std::string Describe(const std::vector<Ev>& events) {
  std::string s;
  for (const Ev& e : events) s += std::string(1, e.kind) + "[" + e.text + "] ";
  return s;
}

// The events of `output` fed in the pieces `cuts` makes, merged.
std::vector<Ev> Parse(ToolCallFormat format, const std::vector<ToolSpec>& tools,
                      std::string_view output, const std::vector<size_t>& cuts) {
  std::unique_ptr<ToolCallParser> parser = MakeToolCallParser(format, tools);
  std::vector<ToolParseEvent> events;
  size_t at = 0;
  for (size_t cut : cuts) {
    parser->Feed(output.substr(at, cut - at), &events);
    at = cut;
  }
  parser->Feed(output.substr(at), &events);
  parser->Flush(&events);
  std::vector<Ev> merged;
  for (const ToolParseEvent& e : events) {
    EXPECT_FALSE(e.text.empty() && e.kind != Kind::kCallStart) << "an empty event";
    const char k = e.kind == Kind::kText        ? 'T'
                   : e.kind == Kind::kCallStart ? 'C'
                   : e.kind == Kind::kReasoning ? 'R'
                                                : 'A';
    if (k != 'C' && !merged.empty() && merged.back().kind == k) {
      merged.back().text += e.text;
    } else {
      merged.push_back({k, e.text});
    }
  }
  return merged;
}

// Whole output, every one- and two-cut chunking and byte by byte: all give `expected`.
void ExpectChunkingInvariant(const std::string& name, ToolCallFormat format,
                             const std::vector<ToolSpec>& tools, const std::string& output,
                             const std::vector<Ev>& expected, bool two_cuts = true) {
  const std::string want = Describe(expected);
  ASSERT_EQ(Describe(Parse(format, tools, output, {})), want) << name << ": whole output";
  const size_t n = output.size();
  for (size_t i = 0; i <= n; ++i) {
    ASSERT_EQ(Describe(Parse(format, tools, output, {i})), want) << name << ": cut at " << i;
    if (!two_cuts) continue;
    for (size_t j = i; j <= n; ++j) {
      ASSERT_EQ(Describe(Parse(format, tools, output, {i, j})), want)
          << name << ": cuts at " << i << ", " << j;
    }
  }
  std::vector<size_t> bytes;
  for (size_t i = 1; i < n; ++i) bytes.push_back(i);
  ASSERT_EQ(Describe(Parse(format, tools, output, bytes)), want) << name << ": byte by byte";
}

std::vector<ToolSpec> WeatherTools() {
  return {{"get_weather", json::parse(R"({"type": "object", "properties": {
             "city": {"type": "string"}, "days": {"type": "integer"}, "unit": {"type": "string"},
             "verbose": {"type": "boolean"}, "filters": {"type": "object"},
             "ratio": {"type": ["number", "null"]},
             "note": {"anyOf": [{"type": "string"}, {"type": "integer"}]}},
             "required": ["city"]})")}};
}

struct Case {
  const char* name;
  ToolCallFormat format;
  std::string output;
  std::vector<Ev> expected;
};

const std::vector<Case>& Cases() {
  using F = ToolCallFormat;
  static const std::vector<Case> cases = {
      // --- hermes ---
      {"hermes: content only", F::kHermes, "Hello, world.\n", {{'T', "Hello, world.\n"}}},
      {"hermes: content + call",
       F::kHermes,
       "Let me check.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": "
       "\"Paris\"}}\n</tool_call>",
       {{'T', "Let me check."}, {'C', "get_weather"}, {'A', R"({"city": "Paris"})"}}},
      {"hermes: two calls",
       F::kHermes,
       "<tool_call>\n{\"name\": \"a\", \"arguments\": {\"x\": 1}}\n</tool_call>\n"
       "<tool_call>\n{\"name\": \"b\", \"arguments\": {}}\n</tool_call>\n",
       {{'C', "a"}, {'A', R"({"x": 1})"}, {'C', "b"}, {'A', "{}"}}},
      {"hermes: nested args, braces and quotes in strings, unicode",
       F::kHermes,
       R"(<tool_call>{"name": "f", "arguments": {"q": "a {b} \"c\" [d] \\", "n": {"x": [1, {"y": null}]}, "u": "é→😀\u00e9"}}</tool_call>)",
       {{'C', "f"},
        {'A', R"({"q": "a {b} \"c\" [d] \\", "n": {"x": [1, {"y": null}]}, "u": "é→😀\u00e9"})"}}},
      {"hermes: arguments before the name",
       F::kHermes,
       R"(<tool_call>{"arguments": {"a": [1, "}"]}, "name": "f"}</tool_call>)",
       {{'C', "f"}, {'A', R"({"a": [1, "}"]})"}}},
      {"hermes: arguments as a string holding JSON",
       F::kHermes,
       R"(<tool_call>{"name": "f", "arguments": "{\"a\": \"b\\\"c\"}"}</tool_call>)",
       {{'C', "f"}, {'A', R"({"a": "b\"c"})"}}},
      {"hermes: a call without arguments",
       F::kHermes,
       R"(<tool_call>{"name": "ping"}</tool_call>)",
       {{'C', "ping"}, {'A', "{}"}}},
      {"hermes: null arguments, other keys, escaped name",
       F::kHermes,
       R"(<tool_call>{"id": 7, "name": "get_\u0077eather", "arguments": null}</tool_call>)",
       {{'C', "get_weather"}, {'A', "{}"}}},
      {"hermes: malformed markup is content",
       F::kHermes,
       "<tool_call>not json</tool_call> ok",
       {{'T', "<tool_call>not json</tool_call> ok"}}},
      {"hermes: a malformed call, then a good one",
       F::kHermes,
       "<tool_call>oops <tool_call>{\"name\":\"f\",\"arguments\":{}}</tool_call>",
       {{'T', "<tool_call>oops"}, {'C', "f"}, {'A', "{}"}}},
      {"hermes: an object without a name is content",
       F::kHermes,
       R"(<tool_call>{"arguments": {}}</tool_call>)",
       {{'T', R"(<tool_call>{"arguments": {}}</tool_call>)"}}},
      {"hermes: partial marker at the end",
       F::kHermes,
       "Answer <tool_ca",
       {{'T', "Answer <tool_ca"}}},
      {"hermes: looks like a marker but is not",
       F::kHermes,
       "a <tool_calx> b <tool_call",
       {{'T', "a <tool_calx> b <tool_call"}}},
      {"hermes: output ends before the name",
       F::kHermes,
       "Hi <tool_call>{\"na",
       {{'T', "Hi <tool_call>{\"na"}}},
      {"hermes: output ends inside the arguments",
       F::kHermes,
       R"(<tool_call>{"name": "f", "arguments": {"a": 1)",
       {{'C', "f"}, {'A', R"({"a": 1)"}}},
      {"hermes: text after the call, no close tag",
       F::kHermes,
       "<tool_call>{\"name\":\"f\",\"arguments\":{\"k\":true}}\n\nDone.",
       {{'C', "f"}, {'A', R"({"k":true})"}, {'T', "Done."}}},
      {"hermes: text between calls",
       F::kHermes,
       "A <tool_call>{\"name\": \"a\", \"arguments\": {}}</tool_call> B\n"
       "<tool_call>{\"name\": \"b\", \"arguments\": {\"k\": \"\\u00e9\\n\"}}</tool_call> C",
       {{'T', "A"},
        {'C', "a"},
        {'A', "{}"},
        {'T', "B"},
        {'C', "b"},
        {'A', R"({"k": "\u00e9\n"})"},
        {'T', "C"}}},
      // --- qwen3_coder ---
      {"qwen3_coder: one call, typed values",
       F::kQwen3Coder,
       "<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n"
       "<parameter=days>\n3\n</parameter>\n</function>\n</tool_call>",
       {{'C', "get_weather"}, {'A', R"({"city": "Paris", "days": 3})"}}},
      {"qwen3_coder: content, multi-line string with quotes, object, boolean, bad integer",
       F::kQwen3Coder,
       "I'll look.\n\n<tool_call>\n<function=get_weather>\n<parameter=city>\nNew \"York\"\n"
       "{line 2}\n</parameter>\n<parameter=filters>\n{\"a\": [1, 2]}\n</parameter>\n"
       "<parameter=verbose>\nTrue\n</parameter>\n<parameter=days>\nthree\n</parameter>\n"
       "</function>\n</tool_call>",
       {{'T', "I'll look."},
        {'C', "get_weather"},
        {'A',
         R"({"city": "New \"York\"\n{line 2}", "filters": {"a":[1,2]}, "verbose": true, "days": "three"})"}}},
      {"qwen3_coder: union types, unknown parameter, unknown function",
       F::kQwen3Coder,
       "<tool_call>\n<function=get_weather>\n<parameter=ratio>\nnull\n</parameter>\n"
       "<parameter=note>\n12\n</parameter>\n<parameter=extra>\n[1]\n</parameter>\n</function>\n"
       "</tool_call>\n<tool_call>\n<function=other>\n<parameter=n>\n4\n</parameter>\n"
       "<parameter=s>\nhé llo\n</parameter>\n</function>\n</tool_call>",
       {{'C', "get_weather"},
        {'A', R"({"ratio": null, "note": 12, "extra": [1]})"},
        {'C', "other"},
        {'A', R"({"n": 4, "s": "hé llo"})"}}},
      {"qwen3_coder: no parameters; </parameter> left out",
       F::kQwen3Coder,
       "<tool_call>\n<function=ping>\n</function>\n</tool_call>\n<tool_call>\n"
       "<function=get_weather>\n<parameter=city>\nParis\n<parameter=days>\n2\n</function>\n"
       "</tool_call>",
       {{'C', "ping"},
        {'A', "{}"},
        {'C', "get_weather"},
        {'A', R"({"city": "Paris", "days": 2})"}}},
      {"qwen3_coder: </function> left out",
       F::kQwen3Coder,
       "<tool_call>\n<function=f>\n<parameter=a>\nx\n</parameter>\n</tool_call>\nok",
       {{'C', "f"}, {'A', R"({"a": "x"})"}, {'T', "ok"}}},
      {"qwen3_coder: CRLF and blank values",
       F::kQwen3Coder,
       "<tool_call>\n<function=get_weather>\n<parameter=city>\r\nA\r\n\r\n</parameter>\n"
       "<parameter=note>\n\n</parameter>\n<parameter=unit>\n\n</parameter>\n</function>",
       {{'C', "get_weather"}, {'A', R"({"city": "A\r\n", "note": "", "unit": ""})"}}},
      {"qwen3_coder: malformed markup is content",
       F::kQwen3Coder,
       "<tool_call>\nnot a function</tool_call>",
       {{'T', "<tool_call>\nnot a function</tool_call>"}}},
      {"qwen3_coder: partial marker at the end",
       F::kQwen3Coder,
       "hi <tool_call>\n<funct",
       {{'T', "hi <tool_call>\n<funct"}}},
      {"qwen3_coder: <function= without <tool_call>; ends inside a value",
       F::kQwen3Coder,
       "<function=get_weather>\n<parameter=city>\nPar",
       {{'C', "get_weather"}, {'A', R"({"city": "Par"})"}}},
      {"qwen3_coder: looks like a marker",
       F::kQwen3Coder,
       "<tool_cal> <function x",
       {{'T', "<tool_cal> <function x"}}},
      // --- llama3_json ---
      {"llama3_json: plain text",
       F::kLlama3Json,
       "The weather is nice.",
       {{'T', "The weather is nice."}}},
      {"llama3_json: one call",
       F::kLlama3Json,
       R"({"name": "get_weather", "parameters": {"city": "Paris", "days": 3}})",
       {{'C', "get_weather"}, {'A', R"({"city": "Paris", "days": 3})"}}},
      {"llama3_json: python tag, whitespace, arguments key",
       F::kLlama3Json,
       "\n<|python_tag|>{\"name\": \"f\", \"arguments\": {\"a\": [1, \"x}\"]}}",
       {{'C', "f"}, {'A', R"({"a": [1, "x}"]})"}}},
      {"llama3_json: several calls",
       F::kLlama3Json,
       R"({"name": "a", "parameters": {}}; {"name": "b", "parameters": {"x": "y;z"}})",
       {{'C', "a"}, {'A', "{}"}, {'C', "b"}, {'A', R"({"x": "y;z"})"}}},
      {"llama3_json: JSON content is not a call",
       F::kLlama3Json,
       R"({"answer": 42})",
       {{'T', R"({"answer": 42})"}}},
      {"llama3_json: an object with a name but other keys",
       F::kLlama3Json,
       R"({"name": "Bob", "age": 3})",
       {{'T', R"({"name": "Bob", "age": 3})"}}},
      {"llama3_json: a name without parameters",
       F::kLlama3Json,
       R"( {"name": "f"})",
       {{'T', R"( {"name": "f"})"}}},
      {"llama3_json: not at the start",
       F::kLlama3Json,
       R"(Sure: {"name": "f", "parameters": {}})",
       {{'T', R"(Sure: {"name": "f", "parameters": {}})"}}},
      {"llama3_json: partial python tag at the end",
       F::kLlama3Json,
       " <|python_t",
       {{'T', " <|python_t"}}},
      {"llama3_json: builtin-tool call syntax is content",
       F::kLlama3Json,
       "<|python_tag|>brave_search.call(query=\"x\")",
       {{'T', "<|python_tag|>brave_search.call(query=\"x\")"}}},
      {"llama3_json: ends inside the parameters",
       F::kLlama3Json,
       R"({"name": "f", "parameters": {"a": "b)",
       {{'C', "f"}, {'A', R"({"a": "b)"}}},
      {"llama3_json: a malformed second call is content",
       F::kLlama3Json,
       R"({"name":"a","parameters":{}}; oops)",
       {{'C', "a"}, {'A', "{}"}, {'T', "; oops"}}},
      // --- mistral ---
      {"mistral: content only",
       F::kMistral,
       "Bonjour [not a call]",
       {{'T', "Bonjour [not a call]"}}},
      {"mistral: JSON list (pre-v11)",
       F::kMistral,
       R"([TOOL_CALLS] [{"name": "get_weather", "arguments": {"city": "Paris"}, "id": "abc123def"}, {"name": "b", "arguments": {"s": "]}"}}])",
       {{'C', "get_weather"}, {'A', R"({"city": "Paris"})"}, {'C', "b"}, {'A', R"({"s": "]}"})"}}},
      {"mistral: v11 NAME[ARGS], content before",
       F::kMistral,
       R"(Sure.[TOOL_CALLS]get_weather[ARGS]{"city": "Paris", "q": "{\"x\"}"})",
       {{'T', "Sure."}, {'C', "get_weather"}, {'A', R"({"city": "Paris", "q": "{\"x\"}"})"}}},
      {"mistral: v11 with [CALL_ID], two calls",
       F::kMistral,
       R"([TOOL_CALLS]get_weather[CALL_ID]abc123def[ARGS]{"city": "Paris"}[TOOL_CALLS]f2[ARGS]{})",
       {{'C', "get_weather"}, {'A', R"({"city": "Paris"})"}, {'C', "f2"}, {'A', "{}"}}},
      {"mistral: v11, text after the call",
       F::kMistral,
       "[TOOL_CALLS]f[ARGS] {\"a\": [\"[ARGS]\"]}\n\nDone.",
       {{'C', "f"}, {'A', R"({"a": ["[ARGS]"]})"}, {'T', "Done."}}},
      {"mistral: malformed markup is content",
       F::kMistral,
       "[TOOL_CALLS] hello there",
       {{'T', "[TOOL_CALLS] hello there"}}},
      {"mistral: partial marker at the end",
       F::kMistral,
       "text [TOOL_CA",
       {{'T', "text [TOOL_CA"}}},
      {"mistral: looks like a marker",
       F::kMistral,
       "[TOOL_CALL] x [TOOL_CALLSX",
       {{'T', "[TOOL_CALL] x [TOOL_CALLSX"}}},
      {"mistral: a malformed second list item is content",
       F::kMistral,
       R"([TOOL_CALLS][{"name": "a", "arguments": {}}, oops])",
       {{'C', "a"}, {'A', "{}"}, {'T', ", oops]"}}},
      {"mistral: v11 call without arguments at the end",
       F::kMistral,
       "[TOOL_CALLS]ping[ARGS]",
       {{'C', "ping"}, {'A', "{}"}}},
      // --- deepseek_v3 ---
      {"deepseek_v3: content + call",
       F::kDeepSeekV3,
       "Let me look.<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>get_weather\n"
       "```json\n{\"city\": \"Paris\", \"s\": \"```\"}\n```<｜tool▁call▁end｜><｜tool▁calls▁end｜>",
       {{'T', "Let me look."}, {'C', "get_weather"}, {'A', R"({"city": "Paris", "s": "```"})"}}},
      {"deepseek_v3: two calls, then text",
       F::kDeepSeekV3,
       "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>a\n```json\n{}\n```"
       "<｜tool▁call▁end｜>\n<｜tool▁call▁begin｜>function<｜tool▁sep｜>b\n```json\n{\"x\": [1]}\n"
       "```<｜tool▁call▁end｜><｜tool▁calls▁end｜> after",
       {{'C', "a"}, {'A', "{}"}, {'C', "b"}, {'A', R"({"x": [1]})"}, {'T', "after"}}},
      {"deepseek_v3: malformed markup is content",
       F::kDeepSeekV3,
       "<｜tool▁calls▁begin｜>oops",
       {{'T', "<｜tool▁calls▁begin｜>oops"}}},
      {"deepseek_v3: partial marker at the end",
       F::kDeepSeekV3,
       "abc<｜tool▁ca",
       {{'T', "abc<｜tool▁ca"}}},
      // --- deepseek_v31 ---
      {"deepseek_v31: one call",
       F::kDeepSeekV31,
       "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>get_weather<｜tool▁sep｜>{\"city\": \"Paris\"}"
       "<｜tool▁call▁end｜><｜tool▁calls▁end｜>",
       {{'C', "get_weather"}, {'A', R"({"city": "Paris"})"}}},
      {"deepseek_v31: content, two calls, one without arguments",
       F::kDeepSeekV31,
       "ok<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>a<｜tool▁sep｜>{\"k\": \"<｜tool▁sep｜>\"}"
       "<｜tool▁call▁end｜><｜tool▁call▁begin｜>b<｜tool▁sep｜><｜tool▁call▁end｜><"
       "｜tool▁calls▁end｜>",
       {{'T', "ok"}, {'C', "a"}, {'A', R"({"k": "<｜tool▁sep｜>"})"}, {'C', "b"}, {'A', "{}"}}},
      {"deepseek_v31: a name with a newline is content",
       F::kDeepSeekV31,
       "<｜tool▁call▁begin｜>a b\nc",
       {{'T', "<｜tool▁call▁begin｜>a b\nc"}}},
      {"deepseek_v31: looks like a marker",
       F::kDeepSeekV31,
       "<｜tool▁call▁bogus｜> x",
       {{'T', "<｜tool▁call▁bogus｜> x"}}},
      // --- glm45 ---
      {"glm45: one call, typed values",
       F::kGlm45,
       "<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>Paris</arg_value>\n"
       "<arg_key>days</arg_key>\n<arg_value>3</arg_value>\n</tool_call>",
       {{'C', "get_weather"}, {'A', R"({"city": "Paris", "days": 3})"}}},
      {"glm45: content, two calls, one without arguments, unicode",
       F::kGlm45,
       "Voilà.\n<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>Zürich \"Z\""
       "</arg_value>\n<arg_key>filters</arg_key>\n<arg_value>{\"a\": {}}</arg_value>\n"
       "</tool_call>\n<tool_call>ping\n</tool_call>",
       {{'T', "Voilà."},
        {'C', "get_weather"},
        {'A', R"({"city": "Zürich \"Z\"", "filters": {"a":{}}})"},
        {'C', "ping"},
        {'A', "{}"}}},
      {"glm45: a lone CR, a control character",
       F::kGlm45,
       "<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>\r</arg_value>\n"
       "<arg_key>unit</arg_key>\n<arg_value>\x01\t</arg_value>\n</tool_call>",
       {{'C', "get_weather"}, {'A', R"({"city": "\r", "unit": "\u0001\t"})"}}},
      {"glm45: JSON inside <tool_call> is content",
       F::kGlm45,
       R"(<tool_call>{"name": "f"}</tool_call>)",
       {{'T', R"(<tool_call>{"name": "f"}</tool_call>)"}}},
      {"glm45: partial marker at the end", F::kGlm45, "x <tool_c", {{'T', "x <tool_c"}}},
      {"glm45: ends inside a value",
       F::kGlm45,
       "<tool_call>get_weather\n<arg_key>days</arg_key>\n<arg_value>1",
       {{'C', "get_weather"}, {'A', R"({"days": 1})"}}},
      // --- gemma4 ---
      {"gemma4: content + call",
       F::kGemma4,
       "Let me check.<|tool_call>call:get_weather{city:<|\"|>Paris<|\"|>,days:3}<tool_call|>",
       {{'T', "Let me check."}, {'C', "get_weather"}, {'A', R"({"city": "Paris", "days": 3})"}}},
      {"gemma4: two calls, nesting, scalars; <|tool_response> after them dropped",
       F::kGemma4,
       "<|tool_call>call:a{x:1.5,flags:[true,false,null],o:{k:<|\"|>v<|\"|>,e:{},l:[]}}"
       "<tool_call|><|tool_call>call:b{}<tool_call|><|tool_response>",
       {{'C', "a"},
        {'A', R"({"x": 1.5, "flags": [true, false, null], "o": {"k": "v", "e": {}, "l": []}})"},
        {'C', "b"},
        {'A', "{}"}}},
      {"gemma4: unicode, quotes, braces and markup inside strings; text after",
       F::kGemma4,
       "<|tool_call>call:get_weather{city:<|\"|>Zürich \"Z\" {x} <|tool_call> 😀\\\n<|\"|>,"
       "note:<|\"|><|\"|>}<tool_call|> Done.",
       {{'C', "get_weather"},
        {'A', R"({"city": "Zürich \"Z\" {x} <|tool_call> 😀\\\n", "note": ""})"},
        {'T', "Done."}}},
      {"gemma4: content after the calls (as the template writes it)",
       F::kGemma4,
       "<|tool_call>call:f{a:<|\"|>x<|\"|>}<tool_call|>Checking.<|tool_response>",
       {{'C', "f"}, {'A', R"({"a": "x"})"}, {'T', "Checking."}}},
      {"gemma4: quoted keys, Python spellings, a bare word",
       F::kGemma4,
       "<|tool_call>call:f{<|\"|>my key<|\"|>:None, b : True,c:-2e3,d:word}<tool_call|>",
       {{'C', "f"}, {'A', R"({"my key": null, "b": true, "c": -2e3, "d": "word"})"}}},
      {"gemma4: partial marker at the end",
       F::kGemma4,
       "Answer <|tool_ca",
       {{'T', "Answer <|tool_ca"}}},
      {"gemma4: malformed markup is content",
       F::kGemma4,
       "<|tool_call>oops<tool_call|> ok <|tool_call>call:{a:1}<tool_call|>",
       {{'T', "<|tool_call>oops<tool_call|> ok <|tool_call>call:{a:1}<tool_call|>"}}},
      {"gemma4: <|tool_response> before any call is content",
       F::kGemma4,
       "a <|tool_response> b",
       {{'T', "a <|tool_response> b"}}},
      {"gemma4: output ends before the arguments",
       F::kGemma4,
       "Hi <|tool_call>call:get_wea",
       {{'T', "Hi <|tool_call>call:get_wea"}}},
      {"gemma4: output ends inside a string",
       F::kGemma4,
       "<|tool_call>call:f{a:<|\"|>Par",
       {{'C', "f"}, {'A', R"({"a": "Par)"}}},
      // --- gemma_tool_code ---
      {"gemma_tool_code: content + call",
       F::kGemmaToolCode,
       "Let me check.\n```tool_code\nget_weather(city=\"Paris\", days=3)\n```",
       {{'T', "Let me check."}, {'C', "get_weather"}, {'A', R"({"city": "Paris", "days": 3})"}}},
      {"gemma_tool_code: two calls, text after",
       F::kGemmaToolCode,
       "```tool_code\nget_weather(city='Paris')\nping()\n```\n\nDone.",
       {{'C', "get_weather"},
        {'A', R"({"city": "Paris"})"},
        {'C', "ping"},
        {'A', "{}"},
        {'T', "Done."}}},
      {"gemma_tool_code: Python literals, escapes, unicode",
       F::kGemmaToolCode,
       "```tool_code\nf(s='it\\'s \"q\" \\n\\u00e9 \\x41 é😀 {x}', l=[1, 2.5, -3, True, None],\n"
       "  t=(1,), d={'k': {\"n\": False}, 2: []}, e=1_000, g=.5,)\n```",
       {{'C', "f"},
        {'A',
         R"({"s": "it's \"q\" \né A é😀 {x}", "l": [1, 2.5, -3, true, null], "t": [1], "d": {"k": {"n": false}, "2": []}, "e": 1000, "g": 0.5})"}}},
      {"gemma_tool_code: print(...) around the call",
       F::kGemmaToolCode,
       "```tool_code\nprint(get_weather(city=\"Paris\"))\n```",
       {{'C', "get_weather"}, {'A', R"({"city": "Paris"})"}}},
      {"gemma_tool_code: partial marker at the end",
       F::kGemmaToolCode,
       "ok ```tool_co",
       {{'T', "ok ```tool_co"}}},
      {"gemma_tool_code: positional arguments are content",
       F::kGemmaToolCode,
       "```tool_code\nget_weather(\"Paris\")\n```",
       {{'T', "```tool_code\nget_weather(\"Paris\")\n```"}}},
      {"gemma_tool_code: other code blocks and an empty one are content",
       F::kGemmaToolCode,
       "```python\nprint(f(a=1))\n```\n```tool_code\n```",
       {{'T', "```python\nprint(f(a=1))\n```\n```tool_code\n```"}}},
      {"gemma_tool_code: a malformed second line is content",
       F::kGemmaToolCode,
       "```tool_code\nf(a=1)\nx = 2\n```",
       {{'C', "f"}, {'A', R"({"a": 1})"}, {'T', "x = 2\n```"}}},
      {"gemma_tool_code: a comparison is no call",
       F::kGemmaToolCode,
       "```tool_code\nf(a == 1)\n```",
       {{'T', "```tool_code\nf(a == 1)\n```"}}},
      {"gemma_tool_code: output ends inside a string",
       F::kGemmaToolCode,
       "```tool_code\nf(a='Par",
       {{'C', "f"}, {'A', R"({"a": "Par)"}}},
      // --- harmony ---
      {"harmony: a final answer",
       F::kHarmony,
       "<|channel|>final<|message|>Hello, world.<|return|>",
       {{'T', "Hello, world."}}},
      {"harmony: reasoning, then a call",
       F::kHarmony,
       "<|channel|>analysis<|message|>Need the weather.<|end|><|start|>assistant<|channel|>"
       "commentary to=functions.get_weather <|constrain|>json<|message|>{\"city\":\"Paris\"}"
       "<|call|>",
       {{'R', "Need the weather."}, {'C', "get_weather"}, {'A', R"({"city":"Paris"})"}}},
      {"harmony: a call as the chat template writes it",
       F::kHarmony,
       " to=functions.get_weather<|channel|>commentary json<|message|>{\"city\": \"Paris\", "
       "\"days\": 3}<|call|>",
       {{'C', "get_weather"}, {'A', R"({"city": "Paris", "days": 3})"}}},
      {"harmony: unicode and quotes in reasoning and answer",
       F::kHarmony,
       "<|channel|>analysis<|message|>User says \"hi\" 😀 {x}<|end|><|start|>assistant"
       "<|channel|>final<|message|>Zürich \"Z\" <tool_call><|return|>",
       {{'R', "User says \"hi\" 😀 {x}"}, {'T', "Zürich \"Z\" <tool_call>"}}},
      {"harmony: two calls, markers inside a string, one without arguments",
       F::kHarmony,
       "<|channel|>commentary to=functions.a <|constrain|>json<|message|>{\"s\": \"<|call|>\"}"
       "<|call|><|start|>assistant<|channel|>commentary to=functions.b json<|message|><|call|>",
       {{'C', "a"}, {'A', R"({"s": "<|call|>"})"}, {'C', "b"}, {'A', "{}"}}},
      {"harmony: a preamble, then a call",
       F::kHarmony,
       "<|channel|>commentary<|message|>Checking.<|end|><|start|>assistant<|channel|>commentary "
       "to=functions.get_weather<|message|>{\"city\": \"Paris\"}<|call|>",
       {{'T', "Checking."}, {'C', "get_weather"}, {'A', R"({"city": "Paris"})"}}},
      {"harmony: plain text, partial marker at the end",
       F::kHarmony,
       "Answer <|chan",
       {{'T', "Answer <|chan"}}},
      {"harmony: malformed headers are content",
       F::kHarmony,
       "<|channel|>final oops<|end|> rest <|channel|>analysis to=browser.search<|message|>{}",
       {{'T',
         "<|channel|>final oops<|end|> rest <|channel|>analysis to=browser.search<|message|>{}"}}},
      {"harmony: output ends inside a header",
       F::kHarmony,
       "<|channel|>analysis<|mess",
       {{'T', "<|channel|>analysis<|mess"}}},
      {"harmony: output ends inside the arguments",
       F::kHarmony,
       "<|channel|>commentary to=functions.f<|message|>{\"a\": 1",
       {{'C', "f"}, {'A', R"({"a": 1)"}}},
      // --- phi4_mini ---
      {"phi4_mini: one call",
       F::kPhi4Mini,
       R"(functools[{"name": "get_weather", "arguments": {"city": "Paris"}}])",
       {{'C', "get_weather"}, {'A', R"({"city": "Paris"})"}}},
      {"phi4_mini: two calls",
       F::kPhi4Mini,
       R"(functools[{"name": "a", "arguments": {"l": [[]]}}, {"name": "b"}])",
       {{'C', "a"}, {'A', R"({"l": [[]]})"}, {'C', "b"}, {'A', "{}"}}},
      {"phi4_mini: the word functools is content",
       F::kPhi4Mini,
       "use functools.partial or functools [x]",
       {{'T', "use functools.partial or functools [x]"}}},
      {"phi4_mini: malformed markup is content",
       F::kPhi4Mini,
       "functools[oops]",
       {{'T', "functools[oops]"}}},
      {"phi4_mini: partial marker at the end",
       F::kPhi4Mini,
       "ok functools",
       {{'T', "ok functools"}}},
  };
  return cases;
}

TEST(ToolCallParserTest, WholeOutput) {
  for (const Case& c : Cases()) {
    EXPECT_EQ(Describe(Parse(c.format, WeatherTools(), c.output, {})), Describe(c.expected))
        << c.name;
  }
}

TEST(ToolCallParserTest, EveryChunkingGivesTheSameEvents) {
  for (const Case& c : Cases()) {
    ExpectChunkingInvariant(c.name, c.format, WeatherTools(), c.output, c.expected);
  }
}

// Random outputs glued from each format's markup pieces (whole, cut short, malformed) and text:
// random chunkings give the whole output's events, and an output in which no call started comes
// out as content, byte for byte.
TEST(ToolCallParserTest, RandomMarkupSoupKeepsTheContract) {
  using F = ToolCallFormat;
  const std::vector<std::string> common = {"text ",
                                           "\n",
                                           "\r",
                                           " ",
                                           "{",
                                           "}",
                                           "[",
                                           "]",
                                           "\"",
                                           ",",
                                           ":",
                                           "\"name\": \"f\"",
                                           "\"arguments\": ",
                                           "\"parameters\": ",
                                           "{\"a\": 1}",
                                           "\"x\\\"y\"",
                                           "null",
                                           "3",
                                           "<",
                                           ">",
                                           ";",
                                           "é",
                                           "😀"};
  const std::vector<std::pair<F, std::vector<std::string>>> pieces = {
      {F::kHermes, {"<tool_call>", "</tool_call>", "<tool_", "</tool_c"}},
      {F::kQwen3Coder,
       {"<tool_call>", "</tool_call>", "<function=get_weather>", "<function=", "<parameter=city>",
        "<parameter=days>", "</parameter>", "</function>", "<param"}},
      {F::kLlama3Json, {"<|python_tag|>", "<|python", "{\"name\": \"f\", \"parameters\": "}},
      {F::kMistral, {"[TOOL_CALLS]", "[ARGS]", "[CALL_ID]", "get_weather", "id123", "[TOOL_"}},
      {F::kDeepSeekV3,
       {"<｜tool▁calls▁begin｜>", "<｜tool▁call▁begin｜>", "function<｜tool▁sep｜>", "f\n",
        "```json\n", "\n```", "<｜tool▁call▁end｜>", "<｜tool▁calls▁end｜>", "<｜tool"}},
      {F::kDeepSeekV31,
       {"<｜tool▁calls▁begin｜>", "<｜tool▁call▁begin｜>", "f<｜tool▁sep｜>", "<｜tool▁sep｜>",
        "<｜tool▁call▁end｜>", "<｜tool▁calls▁end｜>", "<｜tool▁"}},
      {F::kGlm45,
       {"<tool_call>", "get_weather\n", "<arg_key>", "city", "days", "</arg_key>", "<arg_value>",
        "</arg_value>", "</tool_call>", "<arg_"}},
      {F::kPhi4Mini, {"functools[", "functools", "{\"name\": \"f\", \"arguments\": {}}"}},
      {F::kGemma4,
       {"<|tool_call>", "call:", "get_weather{", "city:", "<|\"|>", "<|\"", "<tool_call|>",
        "<|tool_response>", "<|tool_", "[", "true"}},
      {F::kGemmaToolCode,
       {"```tool_code\n", "```tool_code", "```", "get_weather(", "print(", "city=", "'a\\'b'", "(",
        ")", "\\u00e9", "True", "="}},
  };
  std::mt19937 rng(20261202);
  for (const auto& [format, own] : pieces) {
    std::vector<std::string> all = common;
    for (int i = 0; i < 3; ++i) all.insert(all.end(), own.begin(), own.end());  // markup-heavy
    for (int round = 0; round < 300; ++round) {
      std::string output;
      const int n = 1 + static_cast<int>(rng() % 14);
      for (int i = 0; i < n; ++i) output += all[rng() % all.size()];
      const std::vector<Ev> whole = Parse(format, WeatherTools(), output, {});
      bool any_call = false;
      for (const Ev& e : whole) any_call |= e.kind == 'C';
      if (!any_call) {
        ASSERT_EQ(Describe(whole), output.empty() ? "" : "T[" + output + "] ")
            << ToolCallFormatName(format) << ": " << output;
      }
      for (int k = 0; k < 20; ++k) {
        std::vector<size_t> cuts;
        for (size_t i = 1; i < output.size(); ++i) {
          if (rng() % 4 == 0) cuts.push_back(i);
        }
        ASSERT_EQ(Describe(Parse(format, WeatherTools(), output, cuts)), Describe(whole))
            << ToolCallFormatName(format) << ": " << output;
      }
    }
  }
}

// Harmony's markup soup: random chunkings give the whole output's events (well-formed messages
// that are no calls are not content byte for byte here: their headers are dropped).
TEST(ToolCallParserTest, HarmonyMarkupSoupIsChunkingInvariant) {
  const std::vector<std::string> pieces = {"text ",
                                           "\n",
                                           " ",
                                           "{",
                                           "}",
                                           "\"",
                                           "{\"a\": 1}",
                                           "é",
                                           "<|start|>",
                                           "assistant",
                                           "<|channel|>",
                                           "analysis",
                                           "final",
                                           "commentary",
                                           " to=functions.f",
                                           " to=browser.x",
                                           " <|constrain|>json",
                                           "<|message|>",
                                           "<|end|>",
                                           "<|call|>",
                                           "<|return|>",
                                           "<|chan",
                                           "<|"};
  std::mt19937 rng(20261203);
  for (int round = 0; round < 400; ++round) {
    std::string output;
    const int n = 1 + static_cast<int>(rng() % 16);
    for (int i = 0; i < n; ++i) output += pieces[rng() % pieces.size()];
    const std::vector<Ev> whole = Parse(ToolCallFormat::kHarmony, {}, output, {});
    for (int k = 0; k < 20; ++k) {
      std::vector<size_t> cuts;
      for (size_t i = 1; i < output.size(); ++i) {
        if (rng() % 4 == 0) cuts.push_back(i);
      }
      ASSERT_EQ(Describe(Parse(ToolCallFormat::kHarmony, {}, output, cuts)), Describe(whole))
          << output;
    }
  }
}

// Where the markup was well formed, each call's arguments are a JSON object's text.
TEST(ToolCallParserTest, ExpectedArgumentsAreJsonObjects) {
  for (const Case& c : Cases()) {
    if (std::string_view(c.name).find("ends inside") != std::string_view::npos) continue;
    for (const Ev& e : c.expected) {
      if (e.kind != 'A') continue;
      const json args = json::parse(e.text, nullptr, false);
      EXPECT_TRUE(args.is_object()) << c.name << ": " << e.text;
    }
  }
}

// Decided text comes out of the Feed that decides it; only a possible marker waits.
TEST(ToolCallParserTest, StreamsArgumentsAndHoldsBackOnlyMarkup) {
  std::unique_ptr<ToolCallParser> p = MakeToolCallParser(ToolCallFormat::kHermes);
  std::vector<ToolParseEvent> events;
  p->Feed("Hi <tool_", &events);
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].text, "Hi");
  events.clear();
  p->Feed("call>\n{\"name\": \"f\", \"arguments\": {\"a\": ", &events);
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events[0].kind, Kind::kCallStart);
  EXPECT_EQ(events[0].text, "f");
  EXPECT_EQ(events[1].kind, Kind::kCallArgs);
  EXPECT_EQ(events[1].text, "{\"a\": ");
  events.clear();
  p->Feed("\"x\"}}\n</tool_call>", &events);
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].text, "\"x\"}");
  events.clear();
  p->Flush(&events);
  EXPECT_TRUE(events.empty());
}

// Qwen3-Coder / GLM: a string parameter streams as it comes, less a newline that may be the
// value's last (markup); other types wait for the value's end.
TEST(ToolCallParserTest, StreamsStringParameters) {
  std::unique_ptr<ToolCallParser> p =
      MakeToolCallParser(ToolCallFormat::kQwen3Coder, WeatherTools());
  std::vector<ToolParseEvent> events;
  p->Feed("<tool_call>\n<function=get_weather>\n<parameter=city>\nSan", &events);
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events[1].text, "{\"city\": \"San");
  events.clear();
  p->Feed(" \"F\"\n", &events);
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].text, " \\\"F\\\"");
  events.clear();
  p->Feed("\n</parameter>\n<parameter=days>\n1", &events);
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].text, "\\n\"");  // the held newline was content after all
  events.clear();
  p->Feed("0\n</parameter>\n</function>", &events);
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].text, ", \"days\": 10}");
}

TEST(ToolCallParserTest, Names) {
  EXPECT_EQ(ToolCallFormatNames(),
            "hermes, qwen3_coder, llama3_json, mistral, deepseek_v3, deepseek_v31, glm45, "
            "phi4_mini, gemma4, gemma_tool_code, harmony");
  for (ToolCallFormat f :
       {ToolCallFormat::kHermes, ToolCallFormat::kQwen3Coder, ToolCallFormat::kLlama3Json,
        ToolCallFormat::kMistral, ToolCallFormat::kDeepSeekV3, ToolCallFormat::kDeepSeekV31,
        ToolCallFormat::kGlm45, ToolCallFormat::kPhi4Mini, ToolCallFormat::kGemma4,
        ToolCallFormat::kGemmaToolCode, ToolCallFormat::kHarmony}) {
    EXPECT_EQ(ToolCallFormatFromName(ToolCallFormatName(f)), f);
  }
  EXPECT_EQ(ToolCallFormatFromName("nope"), std::nullopt);
  EXPECT_TRUE(ToolCallFormatUsesSpecialTokens(ToolCallFormat::kMistral));
  EXPECT_TRUE(ToolCallFormatUsesSpecialTokens(ToolCallFormat::kDeepSeekV31));
  EXPECT_FALSE(ToolCallFormatUsesSpecialTokens(ToolCallFormat::kHermes));
  EXPECT_TRUE(ToolCallFormatUsesSpecialTokens(ToolCallFormat::kGemma4));
  EXPECT_TRUE(ToolCallFormatUsesSpecialTokens(ToolCallFormat::kHarmony));
  EXPECT_FALSE(ToolCallFormatUsesSpecialTokens(ToolCallFormat::kGemmaToolCode));
}

TEST(ToolCallParserTest, DetectFromMarkup) {
  EXPECT_EQ(DetectToolCallFormat("Hello {{ messages }}"), std::nullopt);
  EXPECT_EQ(DetectToolCallFormat("<tool_call>{{ tc | tojson }}</tool_call>"),
            ToolCallFormat::kHermes);
  EXPECT_EQ(DetectToolCallFormat("functools[{{ calls }}]"), ToolCallFormat::kPhi4Mini);
  EXPECT_EQ(DetectToolCallFormat("{{ '<|tool_call>call:' + name }}"), ToolCallFormat::kGemma4);
  EXPECT_EQ(DetectToolCallFormat("<|channel|>commentary {{ args }}<|call|>"),
            ToolCallFormat::kHarmony);
  // Gemma 3's tool_code has no template markup: --tool-parser gemma_tool_code only.
  EXPECT_EQ(DetectToolCallFormat("```tool_code\n{{ call }}\n```"), std::nullopt);
}

// --- real chat templates ---

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

struct TemplateCase {
  const char* file;  // under chat-templates/
  ToolCallFormat format;
  bool arguments_as_string;  // the template concatenates the arguments: pass JSON text
  // The template writes a message's content as a turn of its own after the calls (an empty one
  // too, unless it is null), or the calls only without content: DeepSeek-R1's templates. Their
  // calls are checked with content null.
  bool content_null = false;
  // Render without `tools`: llama.cpp's deepseek-r1 template pipes `map(...)` (a generator in
  // jinja2) into tojson, which jinja2, and so loom, rejects ("not JSON serializable"); its calls
  // render without the tool list.
  bool without_tools = false;
};

const std::vector<TemplateCase>& TemplateCases() {
  using F = ToolCallFormat;
  static const std::vector<TemplateCase> cases = {
      {"chat-templates-llamacpp/Qwen-Qwen2.5-7B-Instruct.jinja", F::kHermes, false},
      {"chat-templates-llamacpp/Qwen-Qwen3-0.6B.jinja", F::kHermes, false},
      {"chat-templates-llamacpp/NousResearch-Hermes-3-Llama-3.1-8B-tool_use.jinja", F::kHermes,
       false},
      {"chat-templates-llamacpp/Qwen3-Coder.jinja", F::kQwen3Coder, false},
      {"chat-templates-llamacpp/meta-llama-Llama-3.1-8B-Instruct.jinja", F::kLlama3Json, false},
      {"chat-templates-llamacpp/meta-llama-Llama-3.2-3B-Instruct.jinja", F::kLlama3Json, false},
      {"chat-templates-llamacpp/meta-llama-Llama-3.3-70B-Instruct.jinja", F::kLlama3Json, false},
      {"chat-templates-llamacpp/mistralai-Mistral-Nemo-Instruct-2407.jinja", F::kMistral, false},
      {"chat-templates-llamacpp/unsloth-mistral-Devstral-Small-2507.jinja", F::kMistral, false},
      {"chat-templates-llamacpp/Mistral-Small-3.2-24B-Instruct-2506.jinja", F::kMistral, false},
      {"chat-templates-mistral-common/v11.jinja", F::kMistral, false},
      {"chat-templates-mistral-common/v13.jinja", F::kMistral, false},
      {"chat-templates-llamacpp/deepseek-ai-DeepSeek-V3.1.jinja", F::kDeepSeekV31, false},
      {"chat-templates-llamacpp/deepseek-ai-DeepSeek-R1-Distill-Qwen-32B.jinja", F::kDeepSeekV3,
       false, true},
      {"chat-templates-llamacpp/deepseek-ai-DeepSeek-R1-Distill-Llama-8B.jinja", F::kDeepSeekV3,
       true, true},
      {"chat-templates-llamacpp/llama-cpp-deepseek-r1.jinja", F::kDeepSeekV3, false, true, true},
      {"chat-templates-llamacpp/GLM-4.6.jinja", F::kGlm45, false},
      // Gemma 4 writes a message's content after its calls: checked with content null here,
      // with content in Gemma4TemplateWritesContentAfterTheCalls.
      {"chat-templates-llamacpp/google-gemma-4-31B-it.jinja", F::kGemma4, false, true},
      // gpt-oss renders a message's first call only, and its content as the analysis channel:
      // ParsesContentAndSeveralCalls leaves it out; HarmonyTemplate* check the rest.
      {"chat-templates-llamacpp/openai-gpt-oss-120b.jinja", F::kHarmony, false},
  };
  return cases;
}

TEST(ToolCallTemplateTest, DetectsEachTemplatesFormat) {
  for (const TemplateCase& c : TemplateCases()) {
    const std::string path = testing::SharedData(std::string("chat-templates/") + c.file);
    LOOM_NEED_FILE(path);
    EXPECT_EQ(DetectToolCallFormat(ReadFile(path)), c.format) << c.file;
  }
  // More of the collection: the same markup in other families' templates.
  const std::vector<std::pair<const char*, std::optional<ToolCallFormat>>> others = {
      {"NousResearch-Hermes-2-Pro-Llama-3-8B-tool_use.jinja", ToolCallFormat::kHermes},
      {"Qwen-QwQ-32B.jinja", ToolCallFormat::kHermes},
      {"ibm-granite-granite-4.0.jinja", ToolCallFormat::kHermes},
      {"Qwen3.5-4B.jinja", ToolCallFormat::kQwen3Coder},
      {"NVIDIA-Nemotron-3-Nano-30B-A3B-BF16.jinja", ToolCallFormat::kQwen3Coder},
      {"GLM-4.7-Flash.jinja", ToolCallFormat::kGlm45},
      {"mistralai-Ministral-3-14B-Reasoning-2512.jinja", ToolCallFormat::kMistral},
      {"fireworks-ai-llama-3-firefunction-v2.jinja", ToolCallFormat::kPhi4Mini},
      {"google-gemma-4-31B-it-interleaved.jinja", ToolCallFormat::kGemma4},
      // Markup none of the formats parses:
      {"CohereForAI-c4ai-command-r7b-12-2024-tool_use.jinja",
       std::nullopt},                                           // ```json, "parameters"
      {"meetkai-functionary-medium-v3.1.jinja", std::nullopt},  // <function=NAME>{...}
      {"moonshotai-Kimi-K2.jinja", std::nullopt},
      {"deepseek-ai-DeepSeek-V3.2.jinja", std::nullopt},
      {"google-gemma-2-2b-it.jinja", std::nullopt},
      {"microsoft-Phi-3.5-mini-instruct.jinja", std::nullopt},
  };
  for (const auto& [file, format] : others) {
    const std::string path =
        testing::SharedData(std::string("chat-templates/chat-templates-llamacpp/") + file);
    LOOM_NEED_FILE(path);
    EXPECT_EQ(DetectToolCallFormat(ReadFile(path)), format) << file;
  }
}

#ifdef LOOM_HAVE_CHAT_TEMPLATE

ordered_json WeatherToolsJson() {
  return ordered_json::parse(R"([{"type": "function", "function": {"name": "get_weather",
      "description": "The weather forecast for a city.", "parameters": {"type": "object",
      "properties": {"city": {"type": "string", "description": "The city."},
                     "days": {"type": "integer", "description": "How many days."},
                     "options": {"type": "object"}},
      "required": ["city", "days"]}}}])");
}

// The assistant turn's text as the model would have written it: the full conversation's
// rendering past the prompt's (with the generation prompt), less the end-of-turn marker and a
// <think> section (the reasoning parser's part).
std::string AssistantTurn(const std::string& prompt, const std::string& full) {
  size_t common = 0;
  while (common < prompt.size() && common < full.size() && prompt[common] == full[common]) {
    ++common;
  }
  if (common < prompt.size()) {  // the generation prompt holds more (e.g. "<think>\n"): back
    const size_t lt = full.rfind('<', common == 0 ? 0 : common - 1);  // off to a whole tag
    if (lt != std::string::npos && full.find('>', lt) >= common) common = lt;
    while (common > 0 && (static_cast<unsigned char>(full[common]) & 0xC0) == 0x80) --common;
  }
  std::string turn = full.substr(common);
  const size_t b = turn.find_first_not_of(" \n");
  if (b != std::string::npos && turn.compare(b, 7, "<think>") == 0) {
    const size_t e = turn.find("</think>");
    if (e != std::string::npos) turn = turn.substr(e + 8);
  }
  static const char* const kEnds[] = {
      "<|im_end|>", "<|eot_id|>", "<|eom_id|>", "</s>", "<｜end▁of▁sentence｜>", "<|endoftext|>"};
  bool stripped = true;
  while (stripped) {
    stripped = false;
    while (!turn.empty() && std::string_view(" \n").find(turn.back()) != std::string::npos) {
      turn.pop_back();
    }
    for (std::string_view end : kEnds) {
      if (std::string_view(turn).ends_with(end)) {
        turn.resize(turn.size() - end.size());
        stripped = true;
      }
    }
  }
  return turn;
}

// Renders [user, assistant with `content` and a get_weather call per `calls`] with `c`'s
// template, cuts the assistant turn out and parses it back: the content (where the template
// writes it) and each call's name and arguments (compared as JSON).
void CheckTemplateRoundTrip(const TemplateCase& c, const std::string& content,
                            const std::vector<ordered_json>& calls) {
  SCOPED_TRACE(c.file);
  const std::string path = testing::SharedData(std::string("chat-templates/") + c.file);
  LOOM_NEED_FILE(path);
  std::vector<ToolSpec> tools;
  for (const auto& t : WeatherToolsJson()) {
    tools.push_back({t["function"]["name"].get<std::string>(),
                     json::parse(t["function"]["parameters"].dump())});
  }
  StatusOr<ChatTemplate> tpl = ChatTemplate::Parse(ReadFile(path));
  ASSERT_TRUE(tpl.ok()) << tpl.status().ToString();
  const ordered_json user = {{"role", "user"}, {"content", "What is the weather in Paris?"}};
  ordered_json tool_calls = ordered_json::array();
  for (size_t i = 0; i < calls.size(); ++i) {
    ordered_json call = {{"id", "call1234" + std::to_string(i)},  // Mistral wants 9 characters
                         {"type", "function"},
                         {"function", {{"name", "get_weather"}, {"arguments", calls[i]}}}};
    if (c.arguments_as_string) call["function"]["arguments"] = calls[i].dump();
    tool_calls.push_back(call);
  }
  ordered_json assistant = {
      {"role", "assistant"}, {"content", content}, {"tool_calls", tool_calls}};
  if (c.content_null && content.empty()) assistant["content"] = nullptr;
  ordered_json ctx = {{"bos_token", "<s>"}, {"eos_token", "</s>"}};
  if (!c.without_tools) ctx["tools"] = WeatherToolsJson();
  ctx["messages"] = ordered_json::array({user});
  ctx["add_generation_prompt"] = true;
  StatusOr<std::string> prompt = tpl->Render(ctx);
  ASSERT_TRUE(prompt.ok()) << prompt.status().ToString();
  ctx["messages"] = ordered_json::array({user, assistant});
  ctx["add_generation_prompt"] = false;
  StatusOr<std::string> full = tpl->Render(ctx);
  ASSERT_TRUE(full.ok()) << full.status().ToString();
  const std::string turn = AssistantTurn(*prompt, *full);
  const std::vector<Ev> events = Parse(c.format, tools, turn, {});
  const bool has_content = !content.empty() && turn.find(content) != std::string::npos;
  ASSERT_EQ(events.size(), 2 * calls.size() + (has_content ? 1 : 0))
      << "turn: " << turn << "\nevents: " << Describe(events);
  size_t e = 0;
  if (has_content) {  // as the template wrote it, e.g. Qwen3's "\n\n" after <think></think>
    EXPECT_EQ(events[e].kind, 'T') << turn;
    EXPECT_EQ(events[e++].text.substr(events[0].text.find_first_not_of('\n')), content) << turn;
  }
  for (const ordered_json& args : calls) {
    EXPECT_EQ(events[e++], (Ev{'C', "get_weather"})) << turn;
    EXPECT_EQ(json::parse(events[e].text, nullptr, false), json::parse(args.dump()))
        << "turn: " << turn << "\nargs: " << events[e].text;
    ++e;
  }
  ExpectChunkingInvariant(c.file, c.format, tools, turn, events, /*two_cuts=*/false);
  // The format's tool-call grammar lets the model write what its template writes: the lazy one
  // the whole turn, the forced one the calls (when the template formats the arguments itself).
  if (c.arguments_as_string) return;
  const ordered_json tools_json = WeatherToolsJson();
  ToolGrammarRequest req;
  req.format = c.format;
  req.mistral_v11 = ReadFile(path).find("[ARGS]") != std::string::npos;
  req.tools = &tools_json;
  for (const bool forced : {false, true}) {
    if (forced && has_content) continue;
    req.forced = forced;
    const StatusOr<GrammarSpec> spec = ToolCallGrammar(req);
    ASSERT_TRUE(spec.ok()) << spec.status().ToString();
    auto g = CompileGrammarSpec(*spec);
    ASSERT_TRUE(g.ok()) << g.status().ToString();
    GrammarMatcher m(*g);
    const size_t start = forced ? turn.find_first_not_of(" \n") : 0;
    const std::string doc = turn.substr(start == std::string::npos ? 0 : start);
    const bool all = m.AcceptBytes(doc);
    EXPECT_TRUE(all && m.IsAccepting())
        << (forced ? "forced" : "lazy") << " grammar refuses the turn" << (all ? " at its end" : "")
        << ": " << doc;
  }
}

TEST(ToolCallTemplateTest, ParsesWhatTheTemplateRenders) {
  for (const TemplateCase& c : TemplateCases()) {
    CheckTemplateRoundTrip(c, "", {{{"city", "Paris"}, {"days", 3}}});
  }
}

// Content before the calls, two calls, unicode, quotes and nesting in the arguments (Llama 3's
// templates take one call only).
TEST(ToolCallTemplateTest, ParsesContentAndSeveralCalls) {
  const ordered_json second = ordered_json::parse(
      R"({"city": "Zürich \"Z\" {x}", "days": 1,
          "options": {"units": "metric", "tags": ["a", "[b]"]}})");
  for (const TemplateCase& c : TemplateCases()) {
    if (c.format == ToolCallFormat::kLlama3Json || c.format == ToolCallFormat::kHarmony) continue;
    CheckTemplateRoundTrip(c, c.content_null ? "" : "Let me check.",
                           {{{"city", "Paris"}, {"days", 3}}, second});
  }
}

// `file`'s rendering of [user, `assistant`] (with the weather tool) past the generation
// prompt's, less end markers (AssistantTurn), into `*turn`.
void RenderTurn(const std::string& path, const ordered_json& assistant, std::string* turn) {
  StatusOr<ChatTemplate> tpl = ChatTemplate::Parse(ReadFile(path));
  ASSERT_TRUE(tpl.ok()) << tpl.status().ToString();
  const ordered_json user = {{"role", "user"}, {"content", "What is the weather in Paris?"}};
  ordered_json ctx = {{"bos_token", "<s>"}, {"eos_token", "</s>"}, {"tools", WeatherToolsJson()}};
  ctx["messages"] = ordered_json::array({user});
  ctx["add_generation_prompt"] = true;
  StatusOr<std::string> prompt = tpl->Render(ctx);
  ASSERT_TRUE(prompt.ok()) << prompt.status().ToString();
  ctx["messages"] = ordered_json::array({user, assistant});
  ctx["add_generation_prompt"] = false;
  StatusOr<std::string> full = tpl->Render(ctx);
  ASSERT_TRUE(full.ok()) << full.status().ToString();
  *turn = AssistantTurn(*prompt, *full);
}

ordered_json WeatherCall(const ordered_json& args) {
  return {{"id", "call12340"},
          {"type", "function"},
          {"function", {{"name", "get_weather"}, {"arguments", args}}}};
}

// Gemma 4's template writes the calls, then the content, then <|tool_response>: all parsed
// back, strings with quotes, braces and unicode included.
TEST(ToolCallTemplateTest, Gemma4TemplateWritesContentAfterTheCalls) {
  const std::string path =
      testing::SharedData("chat-templates/chat-templates-llamacpp/google-gemma-4-31B-it.jinja");
  LOOM_NEED_FILE(path);
  const ordered_json second = ordered_json::parse(
      R"({"city": "Zürich \"Z\" {x}", "days": 1,
          "options": {"units": "metric", "tags": ["a", "[b]"], "ratio": 0.5, "on": true}})");
  ordered_json assistant = {
      {"role", "assistant"},
      {"content", "Let me check."},
      {"tool_calls", {WeatherCall({{"city", "Paris"}, {"days", 3}}), WeatherCall(second)}}};
  std::string turn;
  ASSERT_NO_FATAL_FAILURE(RenderTurn(path, assistant, &turn));
  const std::vector<Ev> events = Parse(ToolCallFormat::kGemma4, {}, turn, {});
  ASSERT_EQ(events.size(), 5u) << turn << "\n" << Describe(events);
  EXPECT_EQ(events[0], (Ev{'C', "get_weather"}));
  EXPECT_EQ(json::parse(events[1].text), json::parse(R"({"city": "Paris", "days": 3})"));
  EXPECT_EQ(events[2], (Ev{'C', "get_weather"}));
  EXPECT_EQ(json::parse(events[3].text), json::parse(second.dump())) << events[3].text;
  EXPECT_EQ(events[4], (Ev{'T', "Let me check."})) << turn;
  ExpectChunkingInvariant(path, ToolCallFormat::kGemma4, {}, turn, events);
}

// gpt-oss: a call after reasoning (the template's `thinking` field) comes back as reasoning and
// the call; a final answer after reasoning as reasoning and content.
TEST(ToolCallTemplateTest, HarmonyTemplateReasoningCallsAndAnswers) {
  const std::string path =
      testing::SharedData("chat-templates/chat-templates-llamacpp/openai-gpt-oss-120b.jinja");
  LOOM_NEED_FILE(path);
  const ordered_json args = ordered_json::parse(
      R"({"city": "Zürich \"Z\" {x}", "days": 1, "options": {"tags": ["<|call|>"]}})");
  ordered_json call_turn = {{"role", "assistant"},
                            {"thinking", "The user wants \"weather\" 😀."},
                            {"tool_calls", {WeatherCall(args)}}};
  std::string turn;
  ASSERT_NO_FATAL_FAILURE(RenderTurn(path, call_turn, &turn));
  std::vector<Ev> events = Parse(ToolCallFormat::kHarmony, {}, turn, {});
  ASSERT_EQ(events.size(), 3u) << turn << "\n" << Describe(events);
  EXPECT_EQ(events[0], (Ev{'R', "The user wants \"weather\" 😀."}));
  EXPECT_EQ(events[1], (Ev{'C', "get_weather"}));
  EXPECT_EQ(json::parse(events[2].text), json::parse(args.dump())) << events[2].text;
  ExpectChunkingInvariant(path, ToolCallFormat::kHarmony, {}, turn, events, /*two_cuts=*/false);

  ordered_json answer_turn = {{"role", "assistant"},
                              {"thinking", "Easy."},
                              {"content", "It is sunny in Zürich, \"mostly\"."}};
  ASSERT_NO_FATAL_FAILURE(RenderTurn(path, answer_turn, &turn));
  events = Parse(ToolCallFormat::kHarmony, {}, turn, {});
  EXPECT_EQ(Describe(events), "R[Easy.] T[It is sunny in Zürich, \"mostly\".] ") << turn;
  ExpectChunkingInvariant(path, ToolCallFormat::kHarmony, {}, turn, events);
}

#endif  // LOOM_HAVE_CHAT_TEMPLATE

}  // namespace
}  // namespace loom
