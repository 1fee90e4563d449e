#include "spec/draft_proposer.h"

#include <gtest/gtest.h>

namespace loom {
namespace {

using V = std::vector<TokenId>;

TEST(ReplayProposerTest, DraftsTheRecordedContinuationFromWhereTheOutputIs) {
  ReplayProposer p(/*accept=*/1.0, /*vocab_size=*/100);
  const V prompt = {5, 6, 7};
  p.Record(prompt, V{10, 11, 12, 13, 14});
  V t = prompt;
  EXPECT_EQ(p.Propose(t, 3, 3), (V{10, 11, 12}));
  t.push_back(10);
  t.push_back(11);
  EXPECT_EQ(p.Propose(t, 3, 9), (V{12, 13, 14}));  // cut at the recording's end
  t.push_back(12);
  t.push_back(13);
  t.push_back(14);
  EXPECT_TRUE(p.Propose(t, 3, 4).empty());  // nothing recorded past it
  // Off the recording, another prompt, nonsense arguments: nothing.
  EXPECT_TRUE(p.Propose(V{5, 6, 7, 99}, 3, 4).empty());
  EXPECT_TRUE(p.Propose(V{5, 6, 8}, 3, 4).empty());
  EXPECT_TRUE(p.Propose(V{5, 6, 7}, 3, 0).empty());
  EXPECT_TRUE(p.Propose(V{5, 6, 7}, 4, 2).empty());
}

TEST(ReplayProposerTest, CorruptsEachDraftTokenWithProbabilityOneMinusAccept) {
  V rec(4000);
  for (size_t i = 0; i < rec.size(); ++i) rec[i] = static_cast<TokenId>(i % 50);
  const V prompt = {1, 2};
  for (const double accept : {0.0, 0.6, 1.0}) {
    ReplayProposer p(accept, /*vocab_size=*/50, /*seed=*/3);
    p.Record(prompt, rec);
    V t = prompt;
    t.insert(t.end(), rec.begin(), rec.begin() + 10);
    const V draft = p.Propose(t, 2, 3000);
    ASSERT_EQ(draft.size(), 3000u);
    int same = 0;
    for (size_t j = 0; j < draft.size(); ++j) {
      EXPECT_GE(draft[j], 0);
      EXPECT_LT(draft[j], 50);
      same += draft[j] == rec[10 + j];
    }
    EXPECT_NEAR(same / 3000.0, accept, 0.03) << accept;
    EXPECT_EQ(p.Propose(t, 2, 3000), draft);  // the same draws every time
  }
}

TEST(NgramProposerTest, TheProposerIsProposeNgram) {
  NgramProposer p(NgramConfig{});
  const V t = {4, 5, 6, 7, 8, 9, 5, 6};
  EXPECT_EQ(p.Propose(t, 2, 2), ProposeNgram(t, NgramConfig{}, 2));
}

}  // namespace
}  // namespace loom
