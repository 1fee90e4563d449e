#include "engine/output_stream.h"

#include <gtest/gtest.h>

#include <thread>

namespace loom {
namespace {

using namespace std::chrono_literals;

TEST(OutputStreamTest, CoalescesPendingTokensAndEndsOnce) {
  OutputStream s(/*num_prompt_tokens=*/7);
  EXPECT_FALSE(s.TryPop().has_value());
  EXPECT_FALSE(s.Pop(1ms).has_value());  // timeout
  s.SetCachedTokens(4);
  s.Push({5, -0.5f, {}});
  s.Push({6, -1.5f, {}});
  std::optional<StreamChunk> c = s.TryPop();
  ASSERT_TRUE(c.has_value());
  ASSERT_EQ(c->tokens.size(), 2u);
  EXPECT_EQ(c->tokens[1].token, 6);
  EXPECT_FALSE(c->finish_reason.has_value());
  EXPECT_EQ(c->num_prompt_tokens, 7);
  EXPECT_EQ(c->num_cached_tokens, 4);

  s.Push({8, 0.0f, {}});
  EXPECT_TRUE(s.Finish(FinishReason::kStop, OkStatus(), 2));
  EXPECT_FALSE(s.Finish(FinishReason::kAbort));  // first finish wins
  s.Push({9, 0.0f, {}});                         // ignored after finish
  c = s.Pop(10ms);
  ASSERT_TRUE(c.has_value());
  ASSERT_EQ(c->tokens.size(), 1u);
  EXPECT_EQ(c->finish_reason, FinishReason::kStop);
  EXPECT_EQ(c->stop_token, 2);
  EXPECT_TRUE(s.done());
  EXPECT_FALSE(s.Pop(1ms).has_value());
  EXPECT_FALSE(s.TryPop().has_value());
}

TEST(OutputStreamTest, ListenerHearsPushAndFinishUntilCleared) {
  OutputStream s(1);
  s.Push({3, 0.0f, {}});
  int calls = 0;
  s.SetListener([&] { ++calls; });
  EXPECT_EQ(calls, 1);  // output was already waiting
  s.Push({4, 0.0f, {}});
  EXPECT_EQ(calls, 2);
  ASSERT_TRUE(s.TryPop().has_value());
  s.SetListener(nullptr);
  s.Push({5, 0.0f, {}});
  EXPECT_EQ(calls, 2);
  s.SetListener([&] { ++calls; });
  EXPECT_EQ(calls, 3);
  s.Finish(FinishReason::kLength);
  EXPECT_EQ(calls, 4);
  s.Push({6, 0.0f, {}});  // ignored after the finish: no call
  EXPECT_EQ(calls, 4);
}

TEST(OutputStreamTest, BlockingPopWakesOnPushFromAnotherThread) {
  OutputStream s(1);
  std::thread writer([&] {
    std::this_thread::sleep_for(20ms);
    s.Push({3, 0.0f, {}});
    s.Finish(FinishReason::kError, InternalError("boom"));
  });
  std::vector<TokenId> got;
  std::optional<FinishReason> reason;
  Status error;
  while (!s.done()) {
    std::optional<StreamChunk> c = s.Pop(5s);
    ASSERT_TRUE(c.has_value());
    for (const TokenOutput& t : c->tokens) got.push_back(t.token);
    if (c->finish_reason) {
      reason = c->finish_reason;
      error = c->error;
    }
  }
  writer.join();
  EXPECT_EQ(got, (std::vector<TokenId>{3}));
  EXPECT_EQ(reason, FinishReason::kError);
  EXPECT_EQ(error.message(), "boom");
  EXPECT_STREQ(FinishReasonName(FinishReason::kLength), "length");
}

}  // namespace
}  // namespace loom
