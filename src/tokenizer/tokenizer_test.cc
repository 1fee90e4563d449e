// Golden tests: every string of testdata/corpus.json, encoded (with and without special tokens)
// and decoded by each real tokenizer in ../shared/data/tokenizers, must match the oracle files
// testdata/expected_<name>.json produced by tools/goldens/tokenizer/gen.mjs (HF tokenizers).
#include "tokenizer/tokenizer.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <sstream>

#include "base/mapped_file.h"
#include "support/test_data.h"
#include "tokenizer/incremental_decoder.h"
#include "tokenizer/unicode.h"

namespace loom {
namespace {

using nlohmann::json;

struct TokenizerCase {
  const char* name;  // expected_<name>.json
  const char* dir;   // under ../shared/data/tokenizers (or tests/tokenizers: TokenizerDir)
};

std::string Printable(const std::vector<int32_t>& ids) {
  std::ostringstream os;
  os << "[";
  for (size_t i = 0; i < ids.size(); ++i) os << (i ? "," : "") << ids[i];
  os << "]";
  return os.str();
}

json LoadJson(const std::string& path) {
  auto text = ReadFileToString(path);
  CHECK(text.ok()) << text.status().ToString();
  return json::parse(*text);
}

class GoldenTest : public ::testing::TestWithParam<TokenizerCase> {};

TEST_P(GoldenTest, MatchesHfTokenizers) {
  const TokenizerCase& c = GetParam();
  const std::string dir = testing::TokenizerDir(c.dir);
  LOOM_NEED_FILE(dir);
  auto tok_or = Tokenizer::FromHfDirectory(dir);
  ASSERT_TRUE(tok_or.ok()) << tok_or.status().ToString();
  const Tokenizer& tok = **tok_or;

  const std::string testdata = std::string(LOOM_SOURCE_DIR) + "/src/tokenizer/testdata/";
  const json corpus = LoadJson(testdata + "corpus.json")["cases"];
  const json expected = LoadJson(testdata + "expected_" + c.name + ".json")["cases"];
  ASSERT_EQ(corpus.size(), expected.size());

  int failures = 0;
  for (size_t i = 0; i < corpus.size(); ++i) {
    const std::string text = corpus[i]["text"];
    const json& e = expected[i];
    ASSERT_EQ(corpus[i]["name"], e["name"]);
    const auto ids = tok.Encode(text, /*add_special_tokens=*/false);
    const auto ids_special = tok.Encode(text, /*add_special_tokens=*/true);
    const auto want = e["ids"].get<std::vector<int32_t>>();
    const auto want_special = e["ids_with_special"].get<std::vector<int32_t>>();
    if (ids != want) {
      ADD_FAILURE() << c.name << " case '" << e["name"].get<std::string>() << "' ids\n got "
                    << Printable(ids) << "\nwant " << Printable(want);
      ++failures;
    }
    EXPECT_EQ(ids_special, want_special) << c.name << " case " << e["name"] << " (special)";
    // Decodes are checked on the oracle's ids so that an encode bug does not hide them.
    const std::string decoded = tok.Decode(want, /*skip_special_tokens=*/false);
    EXPECT_EQ(decoded, e["decoded"].get<std::string>()) << c.name << " case " << e["name"];
    const std::string decoded_skip = tok.Decode(want_special, /*skip_special_tokens=*/true);
    EXPECT_EQ(decoded_skip, e["decoded_skip_special"].get<std::string>())
        << c.name << " case " << e["name"] << " (skip special)";

    // Streaming: the deltas are valid UTF-8 and concatenate to the full decode.
    for (bool skip : {false, true}) {
      const auto& seq = skip ? want_special : want;
      IncrementalDecoder dec(tok, skip);
      std::string streamed;
      for (int32_t id : seq) {
        const std::string delta = dec.Add(id);
        EXPECT_TRUE(unicode::IsValidUtf8(delta)) << c.name << " " << e["name"];
        streamed += delta;
      }
      streamed += dec.Flush();
      EXPECT_EQ(streamed, tok.Decode(seq, skip))
          << c.name << " case " << e["name"] << " streaming, skip=" << skip;
    }
  }
  EXPECT_EQ(failures, 0);
}

INSTANTIATE_TEST_SUITE_P(RealTokenizers, GoldenTest,
                         ::testing::Values(TokenizerCase{"llama3_1", "tokenizer-llama3_1-lenml"},
                                           TokenizerCase{"llama2", "tokenizer-llama2-ortx"},
                                           TokenizerCase{"mistral_v0_1",
                                                         "tokenizer-mistral-v0.1-lenml"},
                                           TokenizerCase{"qwen3", "tokenizer-qwen3-lenml"},
                                           TokenizerCase{"gemma3", "tokenizer-gemma3-lenml"},
                                           TokenizerCase{"phi3", "tokenizer-phi3-mini-ortx"},
                                           TokenizerCase{"gpt2", "tokenizer-gpt2-ortx"}),
                         [](const ::testing::TestParamInfo<TokenizerCase>& info) {
                           return std::string(info.param.name);
                         });

}  // namespace
}  // namespace loom
