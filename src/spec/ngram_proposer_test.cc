#include "spec/ngram_proposer.h"

#include <gtest/gtest.h>

namespace loom {
namespace {

using V = std::vector<TokenId>;

TEST(NgramProposerTest, LongestSuffixMatchFirstThenTheMostRecentOccurrence) {
  NgramConfig c;  // 1..3
  // "5 6 7" occurred at 1; the 1-gram "7" also occurs later (at 9), but 3-grams win.
  const V t = {4, 5, 6, 7, 8, 9, 10, 11, 2, 7, 12, 5, 6, 7};
  EXPECT_EQ(ProposeNgram(t, c, 3), (V{8, 9, 10}));
  EXPECT_EQ(ProposeNgram(t, c, 1), (V{8}));
  // Of two occurrences of the same n-gram, the most recent.
  const V u = {1, 2, 30, 9, 1, 2, 40, 9, 1, 2};
  EXPECT_EQ(ProposeNgram(u, c, 2), (V{40, 9}));
  // Only a 1-gram matches.
  const V w = {3, 50, 51, 8, 3};
  EXPECT_EQ(ProposeNgram(w, c, 5), (V{50, 51, 8, 3}));
  // The draft stops at the end of the tokens.
  EXPECT_EQ(ProposeNgram(V{1, 2, 3, 1, 2}, c, 9), (V{3, 1, 2}));
}

TEST(NgramProposerTest, NothingWithoutAMatchOrRoom) {
  NgramConfig c;
  EXPECT_TRUE(ProposeNgram(V{1, 2, 3, 4}, c, 4).empty());
  EXPECT_TRUE(ProposeNgram(V{}, c, 4).empty());
  EXPECT_TRUE(ProposeNgram(V{7}, c, 4).empty());
  EXPECT_TRUE(ProposeNgram(V{1, 2, 1}, c, 0).empty());
  // ngram_min 2: a lone repeated token is not enough.
  c.ngram_min = 2;
  EXPECT_TRUE(ProposeNgram(V{3, 50, 51, 8, 3}, c, 4).empty());
  EXPECT_EQ(ProposeNgram(V{3, 8, 50, 51, 3, 8}, c, 2), (V{50, 51}));
}

TEST(NgramProposerTest, ARepeatedTokenDraftsItsRun) {
  NgramConfig c;
  // The suffix "7 7 7" matches one position back (overlapping), never itself.
  EXPECT_EQ(ProposeNgram(V{1, 7, 7, 7, 7}, c, 4), (V{7}));
  EXPECT_EQ(ProposeNgram(V{7, 7, 7, 7, 7, 7, 7}, c, 2), (V{7, 7}));
}

TEST(NgramProposerTest, TheWindowBoundsTheSearch) {
  NgramConfig c;
  c.window = 4;
  const V t = {9, 8, 100, 101, 102, 103, 9, 8};
  EXPECT_TRUE(ProposeNgram(t, c, 2).empty());  // the match at 0 is out of the window
  c.window = 0;
  EXPECT_EQ(ProposeNgram(t, c, 2), (V{100, 101}));
}

}  // namespace
}  // namespace loom
