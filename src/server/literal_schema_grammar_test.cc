// LiteralSchemaGrammar through the forced tool-call grammars of Gemma 4 and Gemma 3's tool_code:
// per dialect, argument literals the grammar must accept (each read back by the format's parser
// as the JSON it means) and ones it must refuse, over one schema using each keyword it writes.
#include "server/literal_schema_grammar.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "grammar/matcher.h"
#include "server/tool_grammar.h"

namespace loom {
namespace {

using nlohmann::json;
using nlohmann::ordered_json;

ordered_json Parameters() {
  return ordered_json::parse(R"({"type": "object", "properties": {
      "name": {"type": "string"},
      "mode": {"enum": ["fast", "slow"]},
      "n": {"type": "integer", "minimum": 1, "maximum": 5},
      "ratio": {"type": "number"},
      "on": {"type": "boolean"},
      "note": {"type": ["string", "null"]},
      "tags": {"type": "array", "items": {"type": "string"}, "minItems": 1, "maxItems": 2},
      "where": {"$ref": "#/$defs/place"},
      "size": {"anyOf": [{"type": "integer"}, {"const": "auto"}]},
      "meta": {"type": "object", "additionalProperties": {"type": "integer"}},
      "my key": {"type": "boolean"},
      "code": {"type": "string", "minLength": 2, "maxLength": 3}},
    "required": ["name", "n"],
    "$defs": {"place": {"type": "object", "properties": {"city": {"type": "string"},
      "zip": {"type": "string", "pattern": "^[0-9]{5}$"}}, "required": ["city"]}}})");
}

std::shared_ptr<const CompiledGrammar> Compile(ToolCallFormat format,
                                               const ordered_json& parameters,
                                               bool parallel = true) {
  const ordered_json tools = {
      {{"type", "function"}, {"function", {{"name", "t"}, {"parameters", parameters}}}}};
  ToolGrammarRequest req;
  req.format = format;
  req.tools = &tools;
  req.forced = true;
  req.parallel = parallel;
  const StatusOr<GrammarSpec> spec = ToolCallGrammar(req);
  EXPECT_TRUE(spec.ok()) << spec.status().ToString();
  if (!spec.ok()) return nullptr;
  auto g = CompileGrammarSpec(*spec);
  EXPECT_TRUE(g.ok()) << g.status().ToString() << "\n" << spec->text;
  return g.ok() ? *g : nullptr;
}

// The arguments text the format's parser reads from `call` (all its calls').
std::string ArgumentsText(ToolCallFormat format, const std::string& call) {
  auto parser = MakeToolCallParser(format);
  std::vector<ToolParseEvent> events;
  parser->Feed(call, &events);
  parser->Flush(&events);
  std::string args;
  for (const ToolParseEvent& e : events) {
    if (e.kind == ToolParseEvent::Kind::kCallArgs) args += e.text;
  }
  return args;
}

// The arguments the format's parser reads from `call` (its only call); null if none.
json ParsedArguments(ToolCallFormat format, const std::string& call) {
  auto parser = MakeToolCallParser(format);
  std::vector<ToolParseEvent> events;
  parser->Feed(call, &events);
  parser->Flush(&events);
  std::string args;
  int calls = 0;
  for (const ToolParseEvent& e : events) {
    if (e.kind == ToolParseEvent::Kind::kCallStart) ++calls;
    if (e.kind == ToolParseEvent::Kind::kCallArgs) args += e.text;
  }
  return calls == 1 ? json::parse(args, nullptr, false) : json();
}

struct Case {
  std::string args;  // the literal arguments
  const char* json;  // what they mean; nullptr: the grammar refuses them
};

void Check(ToolCallFormat format, const std::string& open, const std::string& close,
           const std::vector<Case>& cases) {
  const auto g = Compile(format, Parameters());
  ASSERT_NE(g, nullptr);
  for (const Case& c : cases) {
    const std::string call = open + c.args + close;
    GrammarMatcher m(g);
    const bool accepted = m.AcceptBytes(call) && m.IsAccepting();
    EXPECT_EQ(accepted, c.json != nullptr) << call;
    if (accepted && c.json != nullptr) {
      EXPECT_EQ(ParsedArguments(format, call), json::parse(c.json)) << call;
    }
  }
}

TEST(LiteralSchemaGrammarTest, Gemma4) {
  const std::string q = "<|\"|>";
  Check(ToolCallFormat::kGemma4, "<|tool_call>call:t", "<tool_call|>",
        {
            {"{n:3,name:" + q + "Ann" + q + "}", R"({"n": 3, "name": "Ann"})"},
            // Every property, in dictsort order (case-insensitive), a quoted key where a bare
            // one cannot be read; strings raw (quotes, braces, newlines).
            {"{meta:{a:1,b:-2},mode:" + q + "slow" + q + ",my key:true,n:5,name:" + q +
                 "A \"q\" {x}\n" + q + ",note:null,on:false,ratio:-0.5e3,size:" + q + "auto" + q +
                 ",tags:[" + q + "a" + q + "," + q + "b" + q + "],where:{city:" + q + "Rome" + q +
                 ",zip:" + q + "00100" + q + "}}",
             nullptr},
            {"{meta:{a:1,b:-2},mode:" + q + "slow" + q + "," + q + "my key" + q + ":true,n:5," +
                 "name:" + q + "A \"q\" {x}\n" + q + ",note:null,on:false,ratio:-0.5e3,size:" + q +
                 "auto" + q + ",tags:[" + q + "a" + q + "," + q + "b" + q + "],where:{city:" + q +
                 "Rome" + q + ",zip:" + q + "00100" + q + "}}",
             R"({"meta": {"a": 1, "b": -2}, "mode": "slow", "my key": true, "n": 5,
                 "name": "A \"q\" {x}\n", "note": null, "on": false, "ratio": -500.0,
                 "size": "auto", "tags": ["a", "b"], "where": {"city": "Rome", "zip": "00100"}})"},
            {"{n:1,name:" + q + q + ",note:" + q + "x" + q + ",size:7}",
             R"({"n": 1, "name": "", "note": "x", "size": 7})"},
            // A raw string's pattern is not enforced (see the header).
            {"{n:1,name:" + q + "a" + q + ",where:{city:" + q + "R" + q + ",zip:" + q + "abc" + q +
                 "}}",
             R"({"n": 1, "name": "a", "where": {"city": "R", "zip": "abc"}})"},
            // Lengths hold (as code points other than '<').
            {"{code:" + q + "é<" + q + ",n:1,name:" + q + "a" + q + "}", nullptr},
            {"{code:" + q + "éa" + q + ",n:1,name:" + q + "a" + q + "}",
             R"({"code": "éa", "n": 1, "name": "a"})"},
            {"{code:" + q + "a" + q + ",n:1,name:" + q + "a" + q + "}", nullptr},
            {"{code:" + q + "abcd" + q + ",n:1,name:" + q + "a" + q + "}", nullptr},
            {"{name:" + q + "Ann" + q + ",n:3}", nullptr},        // out of order
            {"{n:3}", nullptr},                                   // name missing
            {"{n:6,name:" + q + "A" + q + "}", nullptr},          // maximum
            {"{n:3,name:" + q + "A" + q + ",tags:[]}", nullptr},  // minItems
            {"{n:3,name:" + q + "A" + q + ",tags:[" + q + "a" + q + "," + q + "b" + q + "," + q +
                 "c" + q + "]}",
             nullptr},                                                                  // maxItems
            {"{mode:" + q + "medium" + q + ",n:3,name:" + q + "A" + q + "}", nullptr},  // enum
            {"{meta:{a:" + q + "x" + q + "},n:3,name:" + q + "A" + q + "}", nullptr},   // values
            {"{n:3,name:" + q + "A" + q + ",where:{zip:" + q + "1" + q + "}}", nullptr},
            {"{n:3,name:" + q + "A" + q + ",size:" + q + "big" + q + "}", nullptr},
            {"{n:3,name:" + q + "A" + q + ",on:True}", nullptr},  // Gemma spells true
            {"{n:3,name:" + q + "A" + q + ",x:1}", nullptr},      // undeclared
            {"{n: 3,name:" + q + "A" + q + "}", nullptr},         // no whitespace
        });
}

TEST(LiteralSchemaGrammarTest, Python) {
  Check(
      ToolCallFormat::kGemmaToolCode, "```tool_code\nt", "\n```",
      {
          {"(name=\"Ann\", n=3)", R"({"name": "Ann", "n": 3})"},
          {"(name='A\\'b\\n\\x41\\u00e9', n=3)", R"({"name": "A'b\nAé", "n": 3})"},
          {"(name=\"A \\\"q\\\" {x}\", mode='fast', n=5, ratio=-0.5e3, on=False, note=None,"
           "tags=[\"a\", 'b'], where={\"city\": \"Rome\", 'zip': \"00100\"}, size=\"auto\", "
           "meta={'a': 1,\"b\":-2})",
           R"({"name": "A \"q\" {x}", "mode": "fast", "n": 5, "ratio": -500.0, "on": false,
                 "note": null, "tags": ["a", "b"], "where": {"city": "Rome", "zip": "00100"},
                 "size": "auto", "meta": {"a": 1, "b": -2}})"},
          {"(name=\"\", n=1, note='x', size=7)", R"({"name": "", "n": 1, "note": "x", "size": 7})"},
          // "my key" cannot be a keyword argument: never written.
          {"(name=\"A\", n=1, my_key=True)", nullptr},
          {"(name=\"A\", n=1, code=\"abc\")", R"({"name": "A", "n": 1, "code": "abc"})"},
          {"(name=\"A\", n=1, code='abcd')", nullptr},
          {"(name=\"A\", n=1, code='\\n\\x41')", R"({"name": "A", "n": 1, "code": "\nA"})"},
          {"(name=\"A\", n=1, code=\"a\\/\")", nullptr},  // \/ is no escape in Python
          {"(n=3, name=\"A\")", nullptr},                 // out of order
          {"(name=\"A\")", nullptr},                      // n missing
          {"(name=\"A\", n=0)", nullptr},                 // minimum
          {"(name=\"a\nb\", n=1)", nullptr},              // a line break in a string
          {"(name=\"A\", n=3, on=true)", nullptr},        // Python spells True
          {"(name=\"A\", n=3, where={\"city\": \"R\", \"zip\": \"123\"})", nullptr},  // pattern
          {"(name=\"A\", n=3, tags=[])", nullptr},
          {"(name=\"A\", n=3, mode=\"medium\")", nullptr},
      });
}

// A random document of `g` (bytes drawn from those it allows next: ASCII, often the syntaxes'
// punctuation and the rest of a closing marker begun, so that strings end), or "" when it grows
// past `max_bytes`.
std::string RandomDocument(const std::shared_ptr<const CompiledGrammar>& g, std::mt19937* rng,
                           size_t max_bytes) {
  static constexpr std::string_view kPunctuation = "<|\"'>{}[](),:=_\\n";
  GrammarMatcher m(g);
  std::string doc;
  while (doc.size() < max_bytes) {
    if (m.IsAccepting() && std::uniform_int_distribution<int>(0, 3)(*rng) == 0) return doc;
    std::vector<uint8_t> ascii, punct, other;
    for (int b = 0; b < 256; ++b) {
      if (!m.NextBytes().Contains(static_cast<uint8_t>(b))) continue;
      if (kPunctuation.find(static_cast<char>(b)) != std::string_view::npos) {
        punct.push_back(static_cast<uint8_t>(b));
      } else if (b >= 0x20 && b < 0x7f) {
        ascii.push_back(static_cast<uint8_t>(b));
      } else {
        other.push_back(static_cast<uint8_t>(b));
      }
    }
    // Mostly go on with a closing marker begun (else Gemma 4's strings would rarely end), and
    // begin one often.
    std::optional<uint8_t> next;
    for (const std::string_view marker : {"<|\"|>", "<tool_call|>"}) {
      for (size_t n = marker.size() - 1; n > 0 && !next; --n) {
        if (std::string_view(doc).ends_with(marker.substr(0, n)) &&
            m.NextBytes().Contains(static_cast<uint8_t>(marker[n]))) {
          next = static_cast<uint8_t>(marker[n]);
        }
      }
    }
    if (!next && m.NextBytes().Contains('<') &&
        std::uniform_int_distribution<int>(0, 9)(*rng) == 0) {
      next = '<';
    }
    if (next) {
      EXPECT_TRUE(m.AcceptByte(*next));
      doc += static_cast<char>(*next);
      continue;
    }
    // Bytes past ASCII only when nothing else may come: a string of UpTo's is any bytes, which
    // a detokenizer never hands a parser unless they are UTF-8.
    const bool use_punct =
        !punct.empty() && (std::uniform_int_distribution<int>(0, 9)(*rng) < 4 || ascii.empty());
    const std::vector<uint8_t>& from = use_punct ? punct : !ascii.empty() ? ascii : other;
    if (from.empty()) return m.IsAccepting() ? doc : "";
    const uint8_t b = from[std::uniform_int_distribution<size_t>(0, from.size() - 1)(*rng)];
    EXPECT_TRUE(m.AcceptByte(b));
    doc += static_cast<char>(b);
  }
  return "";
}

// Random calls of the forced grammars, read back by the parsers: one call each, its arguments
// a JSON object that keeps the schema's checkable promises.
TEST(LiteralSchemaGrammarTest, RandomCallsReadBackValid) {
  for (const ToolCallFormat format : {ToolCallFormat::kGemma4, ToolCallFormat::kGemmaToolCode}) {
    SCOPED_TRACE(std::string(ToolCallFormatName(format)));
    const auto g = Compile(format, Parameters(), /*parallel=*/false);
    ASSERT_NE(g, nullptr);
    std::mt19937 rng(7);
    int num_checked = 0;
    for (int i = 0; i < 400; ++i) {
      const std::string doc = RandomDocument(g, &rng, 600);
      if (doc.empty()) continue;
      ++num_checked;
      const json args = ParsedArguments(format, doc);
      ASSERT_TRUE(args.is_object()) << doc << "\n" << ArgumentsText(format, doc);
      ASSERT_TRUE(args.contains("name") && args["name"].is_string()) << doc;
      ASSERT_TRUE(args.contains("n") && args["n"].is_number_integer()) << doc;
      EXPECT_GE(args["n"].get<int>(), 1) << doc;
      EXPECT_LE(args["n"].get<int>(), 5) << doc;
      if (args.contains("tags")) {
        EXPECT_TRUE(args["tags"].size() >= 1 && args["tags"].size() <= 2) << doc;
      }
      if (args.contains("mode")) {
        EXPECT_TRUE(args["mode"] == "fast" || args["mode"] == "slow") << doc;
      }
      if (args.contains("on")) {
        EXPECT_TRUE(args["on"].is_boolean()) << doc;
      }
      if (args.contains("where")) {
        EXPECT_TRUE(args["where"]["city"].is_string()) << doc;
      }
      if (args.contains("code")) {  // 2 to 3 code points
        const std::string code = args["code"].get<std::string>();
        const auto num_chars = std::count_if(code.begin(), code.end(), [](char c) {
          return (static_cast<unsigned char>(c) & 0xC0) != 0x80;
        });
        EXPECT_TRUE(num_chars >= 2 && num_chars <= 3) << doc;
      }
      for (const auto& [k, v] : args.items()) {
        EXPECT_TRUE(Parameters()["properties"].contains(k)) << k << " in " << doc;
      }
    }
    EXPECT_GT(num_checked, 100);
  }
}

// Keywords the literal syntaxes cannot hold: an error naming them when forced; the lazy grammar
// leaves them out.
TEST(LiteralSchemaGrammarTest, UnsupportedKeywordFailsForcedOnly) {
  const ordered_json parameters = ordered_json::parse(R"({"type": "object", "properties": {
      "x": {"allOf": [{"type": "integer"}]}}})");
  const ordered_json tools = {
      {{"type", "function"}, {"function", {{"name", "t"}, {"parameters", parameters}}}}};
  for (const ToolCallFormat format : {ToolCallFormat::kGemma4, ToolCallFormat::kGemmaToolCode}) {
    ToolGrammarRequest req;
    req.format = format;
    req.tools = &tools;
    req.forced = true;
    const StatusOr<GrammarSpec> forced = ToolCallGrammar(req);
    ASSERT_FALSE(forced.ok());
    EXPECT_NE(forced.status().message().find("#/properties/x: keyword \"allOf\""),
              std::string::npos)
        << forced.status().ToString();
    req.forced = false;
    const StatusOr<GrammarSpec> lazy = ToolCallGrammar(req);
    ASSERT_TRUE(lazy.ok()) << lazy.status().ToString();
    EXPECT_TRUE(CompileGrammarSpec(*lazy).ok());
  }
}

// A recursive $ref (a tree) is a recursive rule.
TEST(LiteralSchemaGrammarTest, RecursiveRef) {
  const ordered_json parameters = ordered_json::parse(R"({"type": "object",
      "properties": {"root": {"$ref": "#/$defs/node"}}, "required": ["root"],
      "$defs": {"node": {"type": "object", "properties": {"v": {"type": "integer"},
        "kids": {"type": "array", "items": {"$ref": "#/$defs/node"}}}, "required": ["v"]}}})");
  const auto g = Compile(ToolCallFormat::kGemma4, parameters);
  ASSERT_NE(g, nullptr);
  const std::string call = "<|tool_call>call:t{root:{kids:[{v:2},{kids:[],v:3}],v:1}}<tool_call|>";
  GrammarMatcher m(g);
  EXPECT_TRUE(m.AcceptBytes(call) && m.IsAccepting());
  EXPECT_EQ(ParsedArguments(ToolCallFormat::kGemma4, call),
            json::parse(R"({"root": {"kids": [{"v": 2}, {"kids": [], "v": 3}], "v": 1}})"));
}

}  // namespace
}  // namespace loom
