// Feature tests: every hand-written case of testdata/feature_cases.json (one Jinja feature each:
// whitespace control, loops, macros, filters, tests, methods, Python semantics, errors) must
// render exactly as jinja2 configured like transformers (testdata/expected_features.json,
// written by tools/goldens/chat_template/gen_transformers.py). Plus API-level unit tests.
#include "tokenizer/chat_template/chat_template.h"

#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "base/mapped_file.h"
#include "tokenizer/chat_template/value.h"

namespace loom {
namespace {

using nlohmann::ordered_json;

const std::string kTestdata =
    std::string(LOOM_SOURCE_DIR) + "/src/tokenizer/chat_template/testdata/";

ordered_json ReadJson(const std::string& path) {
  auto text = ReadFileToString(path);
  CHECK(text.ok()) << text.status().ToString();
  return ordered_json::parse(*text);
}

StatusOr<std::string> RenderText(const std::string& source,
                                 const ordered_json& ctx = ordered_json::object(),
                                 const RenderOptions& options = {}) {
  ASSIGN_OR_RETURN(ChatTemplate tpl, ChatTemplate::Parse(source));
  return tpl.Render(ctx, options);
}

TEST(ChatTemplateFeatures, MatchJinja2) {
  const ordered_json cases = ReadJson(kTestdata + "feature_cases.json")["cases"];
  const ordered_json expected = ReadJson(kTestdata + "expected_features.json")["results"];
  ASSERT_EQ(cases.size(), expected.size());
  RenderOptions options;
  options.now_unix_seconds = ReadJson(kTestdata + "expected_hf_jinja.json")["fixed_epoch_seconds"];
  options.utc = true;
  int num_outputs = 0;
  for (size_t i = 0; i < cases.size(); ++i) {
    const std::string name = cases[i]["name"];
    SCOPED_TRACE(name + ": " + cases[i]["template"].get<std::string>());
    ASSERT_EQ(name, expected[i]["name"].get<std::string>());
    auto got = RenderText(cases[i]["template"], cases[i]["context"], options);
    if (expected[i].contains("output")) {
      ++num_outputs;
      ASSERT_TRUE(got.ok()) << got.status().ToString();
      EXPECT_EQ(*got, expected[i]["output"].get<std::string>());
    } else {
      EXPECT_FALSE(got.ok()) << "jinja2 raised " << expected[i]["error_type"] << ": "
                             << expected[i]["error"] << "\nloom rendered: " << *got;
      if (!got.ok() && expected[i]["error_type"] == "TemplateError") {
        EXPECT_NE(got.status().message().find(expected[i]["error"].get<std::string>()),
                  std::string::npos)
            << got.status().ToString();
      }
    }
  }
  EXPECT_GT(num_outputs, 50);
}

TEST(ChatTemplate, ErrorsCarryLineAndColumn) {
  auto raised =
      RenderText("line one\n{% if true %}\n  {{ raise_exception('bad role: ' ~ 3) }}\n{% endif %}");
  ASSERT_FALSE(raised.ok());
  EXPECT_EQ(raised.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(raised.status().message(),
            "bad role: 3 (raised by the chat template line 3, column 6)");

  auto syntax = ChatTemplate::Parse("ok\n{{ 1 + }}");
  ASSERT_FALSE(syntax.ok());
  EXPECT_NE(syntax.status().message().find("line 2, column 8"), std::string::npos)
      << syntax.status().ToString();

  auto runtime = RenderText("{% for m in messages %}\n{{ m.content + 1 }}{% endfor %}",
                            {{"messages", {{{"content", "x"}}}}});
  ASSERT_FALSE(runtime.ok());
  EXPECT_NE(runtime.status().message().find("line 2"), std::string::npos)
      << runtime.status().ToString();
  EXPECT_NE(runtime.status().message().find("can only concatenate str"), std::string::npos);

  auto unclosed = ChatTemplate::Parse("{% for x in y %}never closed");
  ASSERT_FALSE(unclosed.ok());
  EXPECT_NE(unclosed.status().message().find("endfor"), std::string::npos);
}

TEST(ChatTemplate, ContextKeyOrderIsKept) {
  ordered_json tool = ordered_json::object();
  tool["type"] = "function";
  tool["function"] = {{"name", "f"}};
  auto out = RenderText("{{ tools | tojson }}", {{"tools", ordered_json::array({tool})}});
  ASSERT_TRUE(out.ok());
  EXPECT_EQ(*out, R"([{"type": "function", "function": {"name": "f"}}])");
  // Plain nlohmann::json sorts keys; it is accepted too.
  auto sorted =
      ChatTemplate::Parse("{{ x | tojson }}")->Render(nlohmann::json{{"x", {{"b", 1}, {"a", 2}}}});
  EXPECT_EQ(*sorted, R"({"a": 2, "b": 1})");
}

TEST(ChatTemplate, StrftimeNowUsesTheGivenClock) {
  RenderOptions options;
  options.now_unix_seconds = 0;
  options.utc = true;
  EXPECT_EQ(*RenderText("{{ strftime_now('%d %B %Y') }}", ordered_json::object(), options),
            "01 January 1970");
}

TEST(ChatTemplate, ParsedTemplateIsReusableAndCopyable) {
  auto tpl = ChatTemplate::Parse("{% for m in messages %}[{{ m }}]{% endfor %}");
  ASSERT_TRUE(tpl.ok());
  ChatTemplate copy = *tpl;
  EXPECT_EQ(*copy.Render(ordered_json{{"messages", {"a", "b"}}}), "[a][b]");
  EXPECT_EQ(*tpl->Render(ordered_json{{"messages", {1}}}), "[1]");
  EXPECT_EQ(copy.source(), tpl->source());
}

TEST(ChatTemplateValue, PythonFloatRepr) {
  using chat_template::PyFloatRepr;
  EXPECT_EQ(PyFloatRepr(1.0), "1.0");
  EXPECT_EQ(PyFloatRepr(0.1), "0.1");
  EXPECT_EQ(PyFloatRepr(-2.5), "-2.5");
  EXPECT_EQ(PyFloatRepr(1e16), "1e+16");
  EXPECT_EQ(PyFloatRepr(1234567890123456.0), "1234567890123456.0");
  EXPECT_EQ(PyFloatRepr(0.0001), "0.0001");
  EXPECT_EQ(PyFloatRepr(0.00001), "1e-05");
  EXPECT_EQ(PyFloatRepr(1.5e-300), "1.5e-300");
  EXPECT_EQ(PyFloatRepr(-0.0), "-0.0");
}

TEST(ChatTemplateValue, Utf8Validation) {
  using chat_template::FindInvalidUtf8;
  EXPECT_EQ(FindInvalidUtf8("héllo 🚀"), std::string::npos);
  EXPECT_EQ(FindInvalidUtf8("ab\xff"), 2u);
  EXPECT_EQ(FindInvalidUtf8("\xc3"), 0u);               // truncated
  EXPECT_EQ(FindInvalidUtf8("\xc0\xaf"), 0u);           // overlong
  EXPECT_EQ(FindInvalidUtf8("\xed\xa0\x80"), 0u);       // surrogate
  EXPECT_EQ(FindInvalidUtf8("x\xf4\x90\x80\x80"), 1u);  // > U+10FFFF
}

}  // namespace
}  // namespace loom
