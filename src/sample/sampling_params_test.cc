#include "sample/sampling_params.h"

#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <vector>

namespace loom {
namespace {

struct Case {
  std::string name;
  std::function<void(SamplingParams&)> mutate;
  std::string message;  // expected error message; empty = valid
};

TEST(SamplingParamsTest, ValidateTable) {
  const std::vector<Case> cases = {
      {"defaults", [](SamplingParams&) {}, ""},
      {"greedy", [](SamplingParams& p) { p.temperature = 0; }, ""},
      {"neg temp", [](SamplingParams& p) { p.temperature = -1; },
       "temperature must be >= 0, got -1"},
      {"top_p 0", [](SamplingParams& p) { p.top_p = 0; }, "top_p must be in (0, 1], got 0"},
      {"top_p 1.5", [](SamplingParams& p) { p.top_p = 1.5f; }, "top_p must be in (0, 1], got 1.5"},
      {"top_k -2", [](SamplingParams& p) { p.top_k = -2; },
       "top_k must be >= -1 (0 or -1 disables it), got -2"},
      {"min_p", [](SamplingParams& p) { p.min_p = 2; }, "min_p must be in [0, 1], got 2"},
      {"rep", [](SamplingParams& p) { p.repetition_penalty = 0; },
       "repetition_penalty must be > 0, got 0"},
      {"presence", [](SamplingParams& p) { p.presence_penalty = 3; },
       "presence_penalty must be in [-2, 2], got 3"},
      {"bias id",
       [](SamplingParams& p) {
         p.logit_bias = {{32, 1.0f}};
       },
       "logit_bias: token id 32 is out of the vocabulary [0, 32)"},
      {"bias value",
       [](SamplingParams& p) {
         p.logit_bias = {{3, 101.0f}};
       },
       "logit_bias values must be in [-100, 100], got 101"},
      {"logprobs", [](SamplingParams& p) { p.num_logprobs = 21; },
       "top_logprobs must be in [0, 20], got 21"},
      {"max_tokens", [](SamplingParams& p) { p.max_tokens = 0; }, "max_tokens must be >= 1, got 0"},
      {"min_tokens", [](SamplingParams& p) { p.min_tokens = 17; },
       "min_tokens must be in [0, max_tokens], got 17"},
      {"stop id", [](SamplingParams& p) { p.stop_token_ids = {-1}; },
       "stop_token_ids: token id -1 is out of the vocabulary [0, 32)"},
      {"xtc", [](SamplingParams& p) { p.xtc_probability = 1.5f; },
       "xtc_probability must be in [0, 1], got 1.5"},
  };
  for (const Case& c : cases) {
    SamplingParams p;
    c.mutate(p);
    Status s = p.Validate(32);
    if (c.message.empty()) {
      EXPECT_TRUE(s.ok()) << c.name << ": " << s.ToString();
    } else {
      EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << c.name;
      EXPECT_EQ(s.message(), c.message) << c.name;
    }
  }
}

}  // namespace
}  // namespace loom
