#include "kv/block_hash.h"

#include <gtest/gtest.h>

#include <vector>

namespace loom {
namespace {

TEST(BlockHashTest, DeterministicAndSensitiveToEveryInput) {
  const BlockHash root = RootBlockHash("model-a", "bf16", "tok-1");
  const std::vector<TokenId> tokens = {1, 2, 3, 4};
  const BlockHash h = HashBlock(root, tokens, "");
  EXPECT_EQ(h, HashBlock(RootBlockHash("model-a", "bf16", "tok-1"), tokens, ""));

  EXPECT_NE(h, HashBlock(RootBlockHash("model-b", "bf16", "tok-1"), tokens, ""));
  EXPECT_NE(h, HashBlock(RootBlockHash("model-a", "f16", "tok-1"), tokens, ""));
  EXPECT_NE(h, HashBlock(RootBlockHash("model-a", "bf16", "tok-2"), tokens, ""));
  EXPECT_NE(h, HashBlock(root, std::vector<TokenId>{1, 2, 3, 5}, ""));
  EXPECT_NE(h, HashBlock(root, std::vector<TokenId>{2, 1, 3, 4}, ""));
  EXPECT_NE(h, HashBlock(root, tokens, "adapter:x"));
  // Chaining: the same tokens under a different parent hash differently.
  EXPECT_NE(HashBlock(h, tokens, ""), h);
}

TEST(BlockHashTest, FieldsAreLengthPrefixed) {
  // Moving a byte between adjacent string fields must change the root.
  EXPECT_NE(RootBlockHash("ab", "c", ""), RootBlockHash("a", "bc", ""));
  EXPECT_NE(RootBlockHash("", "", "x"), RootBlockHash("", "x", ""));
}

TEST(BlockHashTest, ToHexIs32HexDigits) {
  const BlockHash h{0x0123456789abcdefull, 0xfedcba9876543210ull};
  EXPECT_EQ(h.ToHex(), "fedcba98765432100123456789abcdef");
}

TEST(BlockHashTest, FromHexInvertsToHex) {
  const BlockHash h{0x0123456789abcdefull, 0xfedcba9876543210ull};
  EXPECT_EQ(BlockHash::FromHex(h.ToHex()), h);
  EXPECT_EQ(BlockHash::FromHex("fedcba98765432100123456789abcde"), std::nullopt);   // 31 digits
  EXPECT_EQ(BlockHash::FromHex("FEDCBA98765432100123456789ABCDEF"), std::nullopt);  // upper case
  EXPECT_EQ(BlockHash::FromHex("fedcba98765432100123456789abcdeg"), std::nullopt);
}

}  // namespace
}  // namespace loom
