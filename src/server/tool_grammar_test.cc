// Each format's tool-call grammar (tool_grammar.h), forced and lazy: what it must accept and
// reject, and what it accepts the format's parser reads back as the intended calls.
#include "server/tool_grammar.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "grammar/grammar_cache.h"
#include "grammar/matcher.h"

namespace loom {
namespace {

using nlohmann::json;
using nlohmann::ordered_json;
using F = ToolCallFormat;

ordered_json Tools() {
  return ordered_json::parse(R"([
    {"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object",
      "properties": {"city": {"type": "string"}, "days": {"type": "integer", "minimum": 1},
                     "unit": {"type": "string", "enum": ["c", "f"]},
                     "opts": {"type": "object", "properties": {"x": {"type": "boolean"}}}},
      "required": ["city", "days"]}}},
    {"type": "function", "function": {"name": "ping", "parameters": {"type": "object",
      "properties": {}}}}])");
}

std::shared_ptr<const CompiledGrammar> Compile(F format, bool forced, bool parallel = true,
                                               bool mistral_v11 = true, std::string only = "",
                                               bool reasoning = true) {
  const ordered_json tools = Tools();
  ToolGrammarRequest req;
  req.reasoning = reasoning;
  req.format = format;
  req.mistral_v11 = mistral_v11;
  req.tools = &tools;
  req.only = std::move(only);
  req.forced = forced;
  req.parallel = parallel;
  const StatusOr<GrammarSpec> built = ToolCallGrammar(req);
  EXPECT_TRUE(built.ok()) << built.status().ToString();
  if (!built.ok()) return nullptr;
  const GrammarSpec& spec = *built;
  auto g = CompileGrammarSpec(spec);
  EXPECT_TRUE(g.ok()) << g.status().ToString() << "\n" << spec.text;
  return g.ok() ? *g : nullptr;
}

bool Accepts(const std::shared_ptr<const CompiledGrammar>& g, std::string_view s) {
  GrammarMatcher m(g);
  return m.AcceptBytes(s) && m.IsAccepting();
}

// The calls `format`'s parser reads in `text`: name, then arguments as parsed JSON.
std::vector<std::pair<std::string, json>> ParseCalls(F format, const std::string& text) {
  std::vector<ToolSpec> specs;
  for (const auto& t : Tools()) {
    specs.push_back({t["function"]["name"].get<std::string>(),
                     json::parse(t["function"]["parameters"].dump())});
  }
  auto parser = MakeToolCallParser(format, specs);
  std::vector<ToolParseEvent> events;
  parser->Feed(text, &events);
  parser->Flush(&events);
  std::vector<std::pair<std::string, json>> calls;
  std::string args;
  for (const ToolParseEvent& e : events) {
    if (e.kind == ToolParseEvent::Kind::kCallStart) {
      if (!calls.empty()) calls.back().second = json::parse(args, nullptr, false);
      calls.push_back({e.text, json()});
      args.clear();
    } else if (e.kind == ToolParseEvent::Kind::kCallArgs) {
      args += e.text;
    } else {
      EXPECT_TRUE(calls.empty() || e.text.find_first_not_of(" \n") == std::string::npos)
          << "text after a call: " << e.text;
    }
  }
  if (!calls.empty()) calls.back().second = json::parse(args, nullptr, false);
  return calls;
}

struct FormatCase {
  F format;
  bool mistral_v11;
  // Forced grammar: documents of two calls (get_weather Paris 3 with unit c, then ping) and of
  // one call (get_weather Oslo 2 with opts), and ones to reject.
  std::string two_calls, one_call;
  std::vector<std::string> reject;
};

std::vector<FormatCase> Cases() {
  return {
      {F::kHermes,
       true,
       "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", \"days\": 3, "
       "\"unit\": \"c\"}}\n</tool_call>\n<tool_call>\n{\"name\": \"ping\", \"arguments\": {}}\n"
       "</tool_call>",
       "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Oslo\", \"days\": 2, "
       "\"opts\": {\"x\": true}}}\n</tool_call>",
       {"<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n"
        "</tool_call>",
        "<tool_call>\n{\"name\": \"nope\", \"arguments\": {}}\n</tool_call>",
        "Sure. <tool_call>\n{\"name\": \"ping\", \"arguments\": {}}\n</tool_call>",
        "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", \"days\": "
        "0}}\n</tool_call>",
        ""}},
      {F::kQwen3Coder,
       true,
       "<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n"
       "<parameter=days>\n3\n</parameter>\n<parameter=unit>\nc\n</parameter>\n</function>\n"
       "</tool_call>\n<tool_call>\n<function=ping>\n</function>\n</tool_call>",
       "<tool_call>\n<function=get_weather>\n<parameter=city>\nOslo\n</parameter>\n"
       "<parameter=days>\n2\n</parameter>\n<parameter=opts>\n{\"x\": true}\n</parameter>\n"
       "</function>\n</tool_call>",
       {"<tool_call>\n<function=get_weather>\n<parameter=days>\n3\n</parameter>\n</function>\n"
        "</tool_call>",
        "<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n"
        "<parameter=days>\nthree\n</parameter>\n</function>\n</tool_call>",
        "<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n"
        "<parameter=days>\n3\n</parameter>\n<parameter=unit>\nk\n</parameter>\n</function>\n"
        "</tool_call>",
        "<tool_call>\n<function=nope>\n</function>\n</tool_call>"}},
      {F::kLlama3Json,
       true,
       "{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Paris\", \"days\": 3, \"unit\": "
       "\"c\"}}; {\"name\": \"ping\", \"parameters\": {}}",
       "{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Oslo\", \"days\": 2, \"opts\": "
       "{\"x\": true}}}",
       {"{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", \"days\": 3}}",
        "Sure: {\"name\": \"ping\", \"parameters\": {}}"}},
      {F::kMistral,
       true,
       "[TOOL_CALLS]get_weather[ARGS]{\"city\": \"Paris\", \"days\": 3, \"unit\": \"c\"}"
       "[TOOL_CALLS]ping[ARGS]{}",
       "[TOOL_CALLS]get_weather[ARGS]{\"city\": \"Oslo\", \"days\": 2, \"opts\": {\"x\": true}}",
       {"[TOOL_CALLS]get_weather[ARGS]{\"city\": \"Paris\"}", "[TOOL_CALLS]nope[ARGS]{}"}},
      {F::kMistral,
       false,
       "[TOOL_CALLS][{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", \"days\": 3, "
       "\"unit\": \"c\"}}, {\"name\": \"ping\", \"arguments\": {}}]",
       "[TOOL_CALLS][{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Oslo\", \"days\": 2, "
       "\"opts\": {\"x\": true}}}]",
       {"[TOOL_CALLS][]", "[TOOL_CALLS]get_weather[ARGS]{\"city\": \"Paris\", \"days\": 3}"}},
      {F::kPhi4Mini,
       true,
       "functools[{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", \"days\": 3, "
       "\"unit\": \"c\"}}, {\"name\": \"ping\", \"arguments\": {}}]",
       "functools[{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Oslo\", \"days\": 2, "
       "\"opts\": {\"x\": true}}}]",
       {"functools[]", "functools[{\"name\": \"ping\"}]"}},
      {F::kDeepSeekV3,
       true,
       "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>get_weather\n```json\n"
       "{\"city\": \"Paris\", \"days\": 3, \"unit\": \"c\"}\n```<｜tool▁call▁end｜>\n"
       "<｜tool▁call▁begin｜>function<｜tool▁sep｜>ping\n```json\n{}\n```<｜tool▁call▁end｜>"
       "<｜tool▁calls▁end｜>",
       "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>get_weather\n```json\n"
       "{\"city\": \"Oslo\", \"days\": 2, \"opts\": {\"x\": true}}\n```<｜tool▁call▁end｜>"
       "<｜tool▁calls▁end｜>",
       {"<｜tool▁calls▁begin｜><｜tool▁calls▁end｜>"}},
      {F::kDeepSeekV31,
       true,
       "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>get_weather<｜tool▁sep｜>{\"city\": \"Paris\", "
       "\"days\": 3, \"unit\": \"c\"}<｜tool▁call▁end｜><｜tool▁call▁begin｜>ping<｜tool▁sep｜>{}"
       "<｜tool▁call▁end｜><｜tool▁calls▁end｜>",
       "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>get_weather<｜tool▁sep｜>{\"city\": \"Oslo\", "
       "\"days\": 2, \"opts\": {\"x\": true}}<｜tool▁call▁end｜><｜tool▁calls▁end｜>",
       {"<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>get_weather<｜tool▁sep｜>{}<｜tool▁call▁end｜>"
        "<｜tool▁calls▁end｜>"}},
      {F::kGlm45,
       true,
       "<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>Paris</arg_value>\n"
       "<arg_key>days</arg_key>\n<arg_value>3</arg_value>\n<arg_key>unit</arg_key>\n"
       "<arg_value>c</arg_value>\n</tool_call>\n<tool_call>ping\n</tool_call>",
       "<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>Oslo</arg_value>\n"
       "<arg_key>days</arg_key>\n<arg_value>2</arg_value>\n<arg_key>opts</arg_key>\n"
       "<arg_value>{\"x\": true}</arg_value>\n</tool_call>",
       {"<tool_call>get_weather\n<arg_key>days</arg_key>\n<arg_value>3</arg_value>\n"
        "</tool_call>"}},
      // Gemma 4: keys bare in sorted order (the template's dictsort), strings <|"|>raw<|"|>.
      {F::kGemma4,
       true,
       "<|tool_call>call:get_weather{city:<|\"|>Paris<|\"|>,days:3,unit:<|\"|>c<|\"|>}<tool_call|>"
       "<|tool_call>call:ping{}<tool_call|>",
       "<|tool_call>call:get_weather{city:<|\"|>Oslo<|\"|>,days:2,opts:{x:true}}<tool_call|>",
       {"<|tool_call>call:get_weather{city:<|\"|>Paris<|\"|>}<tool_call|>",
        "<|tool_call>call:get_weather{days:3,city:<|\"|>Paris<|\"|>}<tool_call|>",
        "<|tool_call>call:get_weather{city:<|\"|>Paris<|\"|>,days:0}<tool_call|>",
        "<|tool_call>call:get_weather{city:<|\"|>Paris<|\"|>,days:3,unit:<|\"|>k<|\"|>}"
        "<tool_call|>",
        "<|tool_call>call:get_weather{\"city\": \"Paris\", \"days\": 3}<tool_call|>",
        "<|tool_call>call:get_weather{city:<|\"|>Paris<|\"|>,days:3,wind:1}<tool_call|>",
        "<|tool_call>call:nope{}<tool_call|>"}},
      // Gemma 3's tool_code: Python keyword arguments in the schema's order.
      {F::kGemmaToolCode,
       true,
       "```tool_code\nget_weather(city=\"Paris\", days=3, unit='c')\nping()\n```",
       "```tool_code\nget_weather(city='Oslo', days=2, opts={\"x\": True})\n```",
       {"```tool_code\nget_weather(city=\"Paris\")\n```",
        "```tool_code\nget_weather(days=3, city=\"Paris\")\n```",
        "```tool_code\nget_weather(city=\"Paris\", days=0)\n```",
        "```tool_code\nget_weather(city=\"Paris\", days=3, unit=\"k\")\n```",
        "```tool_code\nget_weather(city=\"Par\nis\", days=3)\n```", "```tool_code\nnope()\n```"}},
  };
}

std::string Name(const FormatCase& c) {
  return std::string(ToolCallFormatName(c.format)) + (c.mistral_v11 ? "" : " (list)");
}

TEST(ToolCallGrammarTest, ForcedAcceptsValidCallsTheParserReadsBack) {
  const json paris = {{"city", "Paris"}, {"days", 3}, {"unit", "c"}};
  const json oslo = {{"city", "Oslo"}, {"days", 2}, {"opts", {{"x", true}}}};
  for (const FormatCase& c : Cases()) {
    SCOPED_TRACE(Name(c));
    const auto g = Compile(c.format, /*forced=*/true, /*parallel=*/true, c.mistral_v11);
    ASSERT_NE(g, nullptr);
    EXPECT_TRUE(Accepts(g, c.two_calls));
    EXPECT_TRUE(Accepts(g, c.one_call));
    for (const std::string& bad : c.reject) EXPECT_FALSE(Accepts(g, bad)) << bad;
    // Free text is no forced call.
    EXPECT_FALSE(Accepts(g, "The weather is nice."));
    const auto two = ParseCalls(c.format, c.two_calls);
    ASSERT_EQ(two.size(), 2u);
    EXPECT_EQ(two[0].first, "get_weather");
    EXPECT_EQ(two[0].second, paris);
    EXPECT_EQ(two[1].first, "ping");
    EXPECT_EQ(two[1].second, json::object());
    const auto one = ParseCalls(c.format, c.one_call);
    ASSERT_EQ(one.size(), 1u);
    EXPECT_EQ(one[0].second, oslo);

    // Without parallel calls: one call only; named: that tool only.
    const auto single = Compile(c.format, true, /*parallel=*/false, c.mistral_v11);
    EXPECT_TRUE(Accepts(single, c.one_call));
    EXPECT_FALSE(Accepts(single, c.two_calls));
    const auto named = Compile(c.format, true, true, c.mistral_v11, "ping");
    EXPECT_FALSE(Accepts(named, c.one_call));
  }
}

TEST(ToolCallGrammarTest, LazyLetsTextThroughAndForcesTheCallsItOpens) {
  for (const FormatCase& c : Cases()) {
    SCOPED_TRACE(Name(c));
    const auto g = Compile(c.format, /*forced=*/false, /*parallel=*/true, c.mistral_v11);
    ASSERT_NE(g, nullptr);
    EXPECT_TRUE(Accepts(g, ""));
    EXPECT_TRUE(Accepts(g, "The weather is nice, {no call} [x] <b>."));
    EXPECT_TRUE(Accepts(g, c.two_calls));
    EXPECT_TRUE(Accepts(g, c.one_call));
    for (const std::string& bad : c.reject) {
      // A rejected forced document is still rejected when it opens a call (free text that merely
      // mentions a marker-less call is fine).
      if (bad.empty() || bad.starts_with("Sure")) continue;
      EXPECT_FALSE(Accepts(g, bad)) << bad;
    }
    if (c.format != F::kLlama3Json) {
      // Text, then a call (Llama 3's calls only open a reply).
      EXPECT_TRUE(Accepts(g, "Let me check. " + c.one_call));
    }
  }
}

// Llama 3's lazy grammar: a reply that opens with {"name": " is a call; JSON content is not.
TEST(ToolCallGrammarTest, Llama3LazyGrammarOnlyAtTheStart) {
  const auto g = Compile(F::kLlama3Json, /*forced=*/false);
  ASSERT_NE(g, nullptr);
  EXPECT_TRUE(Accepts(g, "{\"answer\": 42}"));
  EXPECT_TRUE(Accepts(g, "Sure: {\"name\": \"nope\", \"parameters\": 1}"));
  EXPECT_FALSE(Accepts(g, " \n{\"name\": \"nope\", \"parameters\": {}}"));
  EXPECT_TRUE(Accepts(g, " \n{\"name\": \"ping\", \"parameters\": {}}"));
}

// gpt-oss: one call a reply (<|call|> ends the turn), as the model writes its header or as the
// template does, after an analysis message when the request reasons.
TEST(ToolCallGrammarTest, HarmonyOneCallAfterAnalysis) {
  const std::string paris =
      "<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{\"city\": "
      "\"Paris\", \"days\": 3, \"unit\": \"c\"}<|call|>";
  const std::string oslo =
      " to=functions.get_weather<|channel|>commentary json<|message|>{\"city\": \"Oslo\", "
      "\"days\": 2, \"opts\": {\"x\": true}}";
  const std::string analysis = "<|channel|>analysis<|message|>Need the weather.<|end|>";
  const std::string ping =
      analysis +
      "<|start|>assistant<|channel|>commentary to=functions.ping <|constrain|>json"
      "<|message|>{}<|call|>";
  const std::vector<std::string> bad = {
      paris + "<|start|>assistant" + paris.substr(0, paris.size() - 8),  // a second call
      analysis,
      analysis + "<|start|>assistant<|channel|>final<|message|>Sunny.<|return|>",
      "<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{\"city\": "
      "\"Paris\"}",
      "<|channel|>commentary to=functions.nope <|constrain|>json<|message|>{}",
  };
  const auto forced = Compile(F::kHarmony, /*forced=*/true);
  ASSERT_NE(forced, nullptr);
  EXPECT_TRUE(Accepts(forced, paris));
  EXPECT_TRUE(Accepts(forced, paris.substr(0, paris.size() - 8)));  // <|call|> as EOS
  EXPECT_TRUE(Accepts(forced, oslo));
  EXPECT_TRUE(Accepts(forced, ping));
  for (const std::string& b : bad) EXPECT_FALSE(Accepts(forced, b)) << b;
  EXPECT_FALSE(Accepts(Compile(F::kHarmony, true, true, true, "", /*reasoning=*/false), ping));
  EXPECT_FALSE(Accepts(Compile(F::kHarmony, true, true, true, "ping"), paris));

  const auto lazy = Compile(F::kHarmony, /*forced=*/false);
  ASSERT_NE(lazy, nullptr);
  EXPECT_TRUE(Accepts(lazy, ""));
  EXPECT_TRUE(Accepts(lazy, analysis + "<|start|>assistant<|channel|>final<|message|>Sunny."));
  for (const std::string& doc : {paris, oslo, ping}) EXPECT_TRUE(Accepts(lazy, doc)) << doc;
  for (size_t i = 3; i < bad.size(); ++i) EXPECT_FALSE(Accepts(lazy, bad[i])) << bad[i];

  const auto p = ParseCalls(F::kHarmony, paris);
  ASSERT_EQ(p.size(), 1u);
  EXPECT_EQ(p[0].first, "get_weather");
  EXPECT_EQ(p[0].second, json::parse(R"({"city": "Paris", "days": 3, "unit": "c"})"));
  const auto o = ParseCalls(F::kHarmony, oslo);
  ASSERT_EQ(o.size(), 1u);
  EXPECT_EQ(o[0].second, json::parse(R"({"city": "Oslo", "days": 2, "opts": {"x": true}})"));
  const auto r = ParseCalls(F::kHarmony, ping);
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(r[0].first, "ping");
  EXPECT_EQ(r[0].second, json::object());
}

// Gemma 4: a forced reply may end with <|tool_response>, as the template writes it after calls.
TEST(ToolCallGrammarTest, Gemma4ToolResponseAfterTheCalls) {
  const std::string call = "<|tool_call>call:ping{}<tool_call|>";
  const auto g = Compile(F::kGemma4, /*forced=*/true);
  ASSERT_NE(g, nullptr);
  EXPECT_TRUE(Accepts(g, call + "<|tool_response>"));
  EXPECT_TRUE(Accepts(g, call + call + "<|tool_response>"));
  EXPECT_FALSE(Accepts(g, "<|tool_response>"));
  EXPECT_FALSE(Accepts(g, "Sure." + call));
  const auto calls = ParseCalls(F::kGemma4, call + "<|tool_response>");
  ASSERT_EQ(calls.size(), 1u);
  EXPECT_EQ(calls[0].first, "ping");
}

// A parameter whose schema names only the string type through anyOf is raw text in the XML
// formats, as the parser reads it back (not a quoted JSON string the parser would keep quoted).
TEST(ToolCallGrammarTest, XmlStringThroughAnyOfIsRawText) {
  const ordered_json tools = ordered_json::parse(R"([{"type": "function", "function": {
      "name": "t", "parameters": {"type": "object", "properties": {
      "s": {"anyOf": [{"type": "string", "maxLength": 9}]}}, "required": ["s"]}}}])");
  ToolGrammarRequest req;
  req.format = F::kQwen3Coder;
  req.tools = &tools;
  req.forced = true;
  auto g = CompileGrammarSpec(*ToolCallGrammar(req));
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  const std::string raw =
      "<tool_call>\n<function=t>\n<parameter=s>\nParis\n</parameter>\n</function>\n</tool_call>";
  EXPECT_TRUE(Accepts(*g, raw));
  auto parser = MakeToolCallParser(F::kQwen3Coder,
                                   {{"t", json::parse(tools[0]["function"]["parameters"].dump())}});
  std::vector<ToolParseEvent> events;
  parser->Feed(raw, &events);
  parser->Flush(&events);
  std::string args;
  for (const auto& e : events) {
    if (e.kind == ToolParseEvent::Kind::kCallArgs) args += e.text;
  }
  EXPECT_EQ(json::parse(args), json::parse(R"({"s": "Paris"})"));
}

// A tool schema the engine cannot express: the forced grammar fails naming the keyword, the lazy
// one falls back to any arguments object.
TEST(ToolCallGrammarTest, UnsupportedSchemaFailsForcedFallsBackLazy) {
  const ordered_json tools = ordered_json::parse(R"([{"type": "function", "function": {
      "name": "t", "parameters": {"type": "object", "properties": {
      "x": {"type": "number", "maximum": 2.5}}}}}])");
  for (const F format : {F::kHermes, F::kQwen3Coder}) {
    ToolGrammarRequest req;
    req.format = format;
    req.tools = &tools;
    req.forced = true;
    auto forced = CompileGrammarSpec(*ToolCallGrammar(req));
    ASSERT_FALSE(forced.ok());
    EXPECT_NE(forced.status().message().find("maximum"), std::string::npos)
        << forced.status().ToString();
    req.forced = false;
    auto lazy = CompileGrammarSpec(*ToolCallGrammar(req));
    ASSERT_TRUE(lazy.ok()) << lazy.status().ToString();
  }
}

}  // namespace
}  // namespace loom
