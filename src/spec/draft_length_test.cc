#include "spec/draft_length.h"

#include <gtest/gtest.h>

#include <cmath>

namespace loom {
namespace {

TEST(DraftLengthTest, DraftWhileTheChanceOfAcceptanceBeatsTheCost) {
  // alpha^k > c: 0.8, 0.64, 0.512, 0.41, 0.328 ...
  EXPECT_EQ(DraftLength(0.8, 0.5, 10), 3);
  EXPECT_EQ(DraftLength(0.8, 0.0, 10), 10);  // free drafts: as many as allowed
  EXPECT_EQ(DraftLength(0.8, 0.8, 10), 0);   // the first is not worth it
  EXPECT_EQ(DraftLength(1.0, 0.99, 4), 4);
  EXPECT_EQ(DraftLength(0.0, 0.0, 4), 0);  // never accepted
  EXPECT_EQ(DraftLength(0.9, 0.1, 0), 0);
}

TEST(DraftLengthTest, DraftTokenCostGoesFromFreeToOneOutputTokenAsTheStepGrows) {
  EXPECT_DOUBLE_EQ(DraftTokenCost(0.0, 1, 1), 0.0);
  // Batch 1, a token costs 1% of the step: 0.01 / 1.01.
  EXPECT_NEAR(DraftTokenCost(0.01, 1, 1), 0.0099, 1e-4);
  // Compute-bound batch (r N >> 1): a draft token costs about one output token.
  EXPECT_NEAR(DraftTokenCost(0.01, 1024, 1024), 1024 * 0.01 / 11.24, 1e-9);
  EXPECT_GT(DraftTokenCost(1e3, 64, 64), 0.99);
}

TEST(DraftLengthTest, AcceptanceRateFollowsTheRoundsAndForgets) {
  AcceptanceRate a;
  EXPECT_DOUBLE_EQ(a.alpha(), 0.5);
  for (int i = 0; i < 50; ++i) a.Round(4, 4);  // every draft accepted
  EXPECT_GT(a.alpha(), 0.97);
  for (int i = 0; i < 50; ++i) a.Round(4, 0);  // then none
  EXPECT_LT(a.alpha(), 0.05);
  AcceptanceRate b;
  for (int i = 0; i < 400; ++i) b.Round(10, 3);  // 3 successes, 1 failure a round: 0.75
  EXPECT_NEAR(b.alpha(), 0.75, 1e-3);
  b.Round(0, 0);  // no drafts: no information
  EXPECT_NEAR(b.alpha(), 0.75, 1e-3);
}

TEST(DraftLengthTest, StepCostFitsTheMarginalCostOfATokenOnceStepSizesDiffer) {
  StepCost s;
  for (int i = 0; i < 20; ++i) s.Observe(8, 0.010);
  EXPECT_FALSE(s.TokenCost().has_value());  // every step the same size: no slope
  // 10 ms fixed + 0.1 ms a token: r = 0.01.
  StepCost t;
  for (int i = 0; i < 40; ++i) t.Observe(1 + (i % 5) * 4, 0.010 + 0.0001 * (1 + (i % 5) * 4));
  ASSERT_TRUE(t.TokenCost().has_value());
  EXPECT_NEAR(*t.TokenCost(), 0.01, 1e-9);
  // All per-token work: r is capped, so c is rows / tokens.
  StepCost u;
  for (int i = 0; i < 40; ++i) u.Observe(1 + i % 7, 0.001 * (1 + i % 7));
  ASSERT_TRUE(u.TokenCost().has_value());
  EXPECT_GT(DraftTokenCost(*u.TokenCost(), 1, 1), 0.99);
  // Larger steps not slower: tokens are free.
  StepCost v;
  for (int i = 0; i < 40; ++i) v.Observe(1 + i % 7, 0.005);
  EXPECT_EQ(v.TokenCost(), 0.0);
  // Bad samples are ignored.
  v.Observe(0, 1.0);
  v.Observe(3, -1.0);
  v.Observe(3, std::nan(""));
  EXPECT_EQ(v.TokenCost(), 0.0);
}

}  // namespace
}  // namespace loom
