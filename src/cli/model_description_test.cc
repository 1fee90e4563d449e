// DescribeModel / DescribeLibraryEntry (what `loom list` and /v1/models say of a model) over
// model directories and GGUF files built in a temp dir: the parameter count from the weights'
// headers or config.json's sizes, the dtype or GGUF file type, the context length, the chat
// template's capabilities, and broken models described, never a crash. ModelCardJson's shape.
#include "cli/model_description.h"

#include <gtest/gtest.h>

#include <filesystem>

#include "io/gguf_writer.h"
#include "io/io_test_util.h"

namespace loom {
namespace {

namespace fs = std::filesystem;
using testing::ScratchDir;
using testing::StTensor;
using testing::WriteBytes;

// A Qwen3-shaped config: attention 8*4*(2+2*1) + 2*4*8 = 192, MLP 3*8*16 = 384, norms 2*8 per
// layer; 2 layers + tied embeddings 32*8 + the final norm 8 = 1448 parameters by the formula.
const char* const kConfig = R"({
  "model_type": "qwen3", "hidden_size": 8, "num_hidden_layers": 2, "num_attention_heads": 2,
  "num_key_value_heads": 1, "head_dim": 4, "intermediate_size": 16, "vocab_size": 32,
  "max_position_embeddings": 4096, "tie_word_embeddings": true, "torch_dtype": "bfloat16"})";

std::string Bytes(size_t n) { return std::string(n, '\0'); }

int64_t DirBytes(const std::string& dir) {
  int64_t total = 0;
  for (const auto& e : fs::recursive_directory_iterator(dir)) {
    if (e.is_regular_file()) total += static_cast<int64_t>(e.file_size());
  }
  return total;
}

TEST(ModelDescriptionTest, HfDirectoryFromHeadersConfigAndTemplate) {
  const std::string dir = ScratchDir();
  WriteBytes(dir + "/config.json", kConfig);
  // Two shards named by the index (43 elements, 38 of them bf16); consolidated.safetensors is
  // not part of the model (Mistral repos ship both) and must not be counted.
  WriteBytes(dir + "/model.safetensors.index.json",
             R"({"weight_map": {"a": "model-1.safetensors", "b": "model-2.safetensors",
                                "c": "model-2.safetensors"}})");
  WriteBytes(dir + "/model-1.safetensors",
             testing::MakeSafetensors({StTensor{"a", "BF16", {4, 8}, Bytes(64)}}));
  WriteBytes(dir + "/model-2.safetensors",
             testing::MakeSafetensors(
                 {StTensor{"b", "BF16", {2, 3}, Bytes(12)}, StTensor{"c", "F32", {5}, Bytes(20)}}));
  WriteBytes(dir + "/consolidated.safetensors",
             testing::MakeSafetensors({StTensor{"x", "F32", {100}, Bytes(400)}}));
  WriteBytes(dir + "/tokenizer_config.json",
             R"({"chat_template": "{{ messages }}<tool_call>{{ tools }}</tool_call><think>"})");

  const ModelCard card = DescribeModel(dir);
  EXPECT_EQ(card.id, fs::path(dir).filename().string());
  EXPECT_EQ(card.architecture, "qwen3");
  EXPECT_EQ(card.format, "safetensors");
  EXPECT_EQ(card.num_params, 43);
  EXPECT_EQ(card.params_source, "safetensors headers");
  EXPECT_EQ(card.quantization, "bf16");
  EXPECT_EQ(card.context_length, 4096);
  EXPECT_EQ(card.size_bytes, DirBytes(dir));
  EXPECT_TRUE(card.has_chat_template);
  EXPECT_EQ(card.capabilities.tool_format, ToolCallFormat::kHermes);
  EXPECT_TRUE(card.capabilities.reasoning);
  EXPECT_TRUE(card.problems.empty()) << card.problems[0];

  // Without the weights: config.json's sizes, and its torch_dtype.
  for (const char* f : {"model-1.safetensors", "model-2.safetensors"}) fs::remove(dir + "/" + f);
  const ModelCard bare = DescribeModel(dir);
  EXPECT_EQ(bare.num_params, 1448);
  EXPECT_EQ(bare.params_source, "config.json shapes");
  EXPECT_EQ(bare.quantization, "bf16");
}

// gpt-oss's MXFP4 experts: a `_blocks` byte is two weights, `_scales` are not weights.
TEST(ModelDescriptionTest, Mxfp4BlocksCountTwoWeightsAByte) {
  const std::string dir = ScratchDir();
  WriteBytes(dir + "/config.json",
             R"({"model_type": "gpt_oss", "quantization_config": {"quant_method": "mxfp4"}})");
  WriteBytes(
      dir + "/model.safetensors",
      testing::MakeSafetensors({StTensor{"e.gate_up_proj_blocks", "U8", {2, 4, 1, 16}, Bytes(128)},
                                StTensor{"e.gate_up_proj_scales", "U8", {2, 4, 1}, Bytes(8)},
                                StTensor{"e.gate_up_proj_bias", "BF16", {2, 4}, Bytes(16)}}));
  const ModelCard card = DescribeModel(dir);
  EXPECT_EQ(card.num_params, 2 * 4 * 32 + 8);
  EXPECT_EQ(card.quantization, "mxfp4");
}

TEST(ModelDescriptionTest, TheToolUseTemplateDecidesTheToolCapability) {
  const std::string dir = ScratchDir();
  WriteBytes(dir + "/config.json", kConfig);
  WriteBytes(dir + "/tokenizer_config.json", R"({"chat_template": [
      {"name": "default", "template": "{{ messages }}"},
      {"name": "tool_use", "template": "{{ messages }}[TOOL_CALLS][ARGS]"}]})");
  const ModelCard card = DescribeModel(dir);
  EXPECT_EQ(card.capabilities.tool_format, ToolCallFormat::kMistral);
  EXPECT_FALSE(card.capabilities.reasoning);
  // No template at all: no capabilities, not a problem.
  fs::remove(dir + "/tokenizer_config.json");
  const ModelCard none = DescribeModel(dir);
  EXPECT_FALSE(none.has_chat_template);
  EXPECT_EQ(none.capabilities.tool_format, std::nullopt);
  EXPECT_TRUE(none.problems.empty());
}

TEST(ModelDescriptionTest, GgufFromItsHeader) {
  GgufWriter w;
  w.SetString("general.architecture", "qwen3");
  w.SetU32("general.file_type", 7);
  w.SetU32("qwen3.context_length", 32768);
  w.SetString("tokenizer.chat_template", "{{ messages }}<tool_call>");
  w.AddTensor("a", DType::kF32, Shape{2, 3}, testing::FloatBytes({0, 1, 2, 3, 4, 5}));
  w.AddTensor("b", DType::kF32, Shape{4}, testing::FloatBytes({0, 1, 2, 3}));
  const std::string path = ScratchDir() + "/m-Q8_0.gguf";
  ASSERT_TRUE(w.WriteFile(path).ok());
  const ModelCard card = DescribeModel(path);
  EXPECT_EQ(card.architecture, "qwen3");
  EXPECT_EQ(card.format, "gguf");
  EXPECT_EQ(card.num_params, 10);
  EXPECT_EQ(card.params_source, "gguf tensors");
  EXPECT_EQ(card.quantization, "Q8_0");
  EXPECT_EQ(card.context_length, 32768);
  EXPECT_EQ(card.size_bytes, static_cast<int64_t>(fs::file_size(path)));
  EXPECT_EQ(card.capabilities.tool_format, ToolCallFormat::kHermes);
  EXPECT_TRUE(card.problems.empty());
}

TEST(ModelDescriptionTest, BrokenModelsAreDescribedWithTheirProblems) {
  const std::string dir = ScratchDir();
  WriteBytes(dir + "/junk.gguf", "not a gguf file");
  const ModelCard junk = DescribeModel(dir + "/junk.gguf");
  EXPECT_EQ(junk.format, "gguf");
  ASSERT_EQ(junk.problems.size(), 1u);
  EXPECT_NE(junk.problems[0].find("wrong magic"), std::string::npos) << junk.problems[0];

  LibraryEntry entry;
  entry.id = "org/broken";
  entry.source = "hf-cache";
  entry.path = dir + "/nowhere";
  entry.commit = std::string(40, 'a');
  entry.problems = {"no config.json"};
  const ModelCard card = DescribeLibraryEntry(entry);
  EXPECT_EQ(card.id, "org/broken");
  EXPECT_EQ(card.problems, entry.problems);
  const nlohmann::ordered_json j = ModelCardJson(card);
  EXPECT_EQ(j["status"], "incomplete");
  EXPECT_EQ(j["problems"], nlohmann::ordered_json::array({"no config.json"}));
  EXPECT_TRUE(j["parameters"].is_null());
  EXPECT_TRUE(j["capabilities"]["tool_call_format"].is_null());
  std::vector<std::string> keys;
  for (const auto& [k, v] : j.items()) keys.push_back(k);
  EXPECT_EQ(keys, (std::vector<std::string>{
                      "id", "source", "path", "revision", "commit", "architecture", "parameters",
                      "parameters_source", "format", "quantization", "context_length", "size_bytes",
                      "chat_template", "capabilities", "status", "problems"}));
}

TEST(ModelDescriptionTest, FormatParamsAsModelNamesWriteThem) {
  EXPECT_EQ(FormatParams(8'190'735'360), "8.2B");
  EXPECT_EQ(FormatParams(596'049'920), "596M");
  EXPECT_EQ(FormatParams(4'600'000), "4.6M");
  EXPECT_EQ(FormatParams(1448), "1.4K");
  EXPECT_EQ(FormatParams(0), "");
}

}  // namespace
}  // namespace loom
