#include "sample/sampler.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

namespace loom {
namespace {

// Byte-identical edit lists (memcmp of an empty vector's null data() would be undefined).
bool SameBytes(const std::vector<LogitEdit>& a, const std::vector<LogitEdit>& b) {
  return a.size() == b.size() &&
         (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(LogitEdit)) == 0);
}

using Tokens = std::vector<TokenId>;

std::vector<float> LogitsFromProbs(const std::vector<double>& probs) {
  std::vector<float> l;
  for (double p : probs) l.push_back(static_cast<float>(std::log(p)));
  return l;
}

// Samples `n` times with seeds 0..n-1 and returns how often each token came out.
std::map<TokenId, int> Histogram(const std::vector<float>& logits, const SamplingParams& params,
                                 int n) {
  Sampler sampler(static_cast<int>(logits.size()));
  std::map<TokenId, int> counts;
  for (int i = 0; i < n; ++i) {
    std::vector<float> row = logits;
    SampleContext ctx{&params, {}, {}, static_cast<uint64_t>(i), {}};
    auto r = sampler.SampleRow(row, ctx);
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    ++counts[r->token];
  }
  return counts;
}

std::set<TokenId> Support(const std::map<TokenId, int>& h) {
  std::set<TokenId> s;
  for (const auto& [id, n] : h) s.insert(id);
  return s;
}

// Checks empirical frequencies against `expected` (already renormalized) within 5 sigma.
void ExpectFrequencies(const std::map<TokenId, int>& h, const std::map<TokenId, double>& expected,
                       int n) {
  for (const auto& [id, p] : expected) {
    const double freq = h.contains(id) ? static_cast<double>(h.at(id)) / n : 0.0;
    const double sigma = std::sqrt(p * (1 - p) / n);
    EXPECT_NEAR(freq, p, 5 * sigma + 1e-9) << "token " << id;
  }
}

const std::vector<double> kProbs = {0.05, 0.4, 0.3, 0.15, 0.1};  // ids 0..4

TEST(SamplerTest, GreedyTakesTheArgmaxLowestIdOnTies) {
  Sampler sampler(4);
  SamplingParams p;
  p.temperature = 0;
  std::vector<float> row = {1, 3, 3, 2};
  auto r = sampler.SampleRow(row, {&p, {}, {}, 7, {}});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->token, 1);
  p.logit_bias = {{3, 1.5f}};
  row = {1, 3, 3, 2};
  EXPECT_EQ(sampler.SampleRow(row, {&p, {}, {}, 7, {}})->token, 3);
}

// A grammar mask: only its tokens can come out (greedy and drawn; ids beyond a short mask are
// out too), logprobs are the unmasked row's, and an empty intersection is the "masked" error.
TEST(SamplerTest, AllowedMaskRestrictsTheChoice) {
  Sampler sampler(40);
  std::vector<float> logits(40);
  for (int i = 0; i < 40; ++i) logits[i] = static_cast<float>(i % 7);
  const std::vector<uint32_t> mask = {(1u << 3) | (1u << 9)};  // ids 3 and 9; 32-39 beyond it
  SamplingParams greedy;
  greedy.temperature = 0;
  greedy.num_logprobs = 1;
  std::vector<float> row = logits;
  SampleContext ctx{&greedy, {}, {}, 1, {}};
  ctx.allowed = mask;
  auto r = sampler.SampleRow(row, ctx);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->token, 3);  // logit 3 beats id 9's 2; the unmasked best is id 6 (and 34)
  std::vector<float> raw = logits;
  SampleContext free_ctx{&greedy, {}, {}, 1, {}};
  const float raw_best = sampler.SampleRow(raw, free_ctx)->logprob;
  EXPECT_LT(r->logprob, raw_best);  // the log-softmax of the whole row, not renormalized
  SamplingParams draw;
  std::set<TokenId> seen;
  for (uint64_t seed = 0; seed < 200; ++seed) {
    row = logits;
    SampleContext c{&draw, {}, {}, seed, {}};
    c.allowed = mask;
    seen.insert(sampler.SampleRow(row, c)->token);
  }
  EXPECT_EQ(seen, (std::set<TokenId>{3, 9}));
  const std::vector<uint32_t> none = {0};
  row = logits;
  SampleContext c{&draw, {}, {}, 0, {}};
  c.allowed = none;
  auto masked = sampler.SampleRow(row, c);
  ASSERT_FALSE(masked.ok());
  EXPECT_NE(std::string(masked.status().message()).find("masked"), std::string::npos);
}

TEST(SamplerTest, TemperatureOneMatchesTheSoftmax) {
  SamplingParams p;
  const int n = 20000;
  auto h = Histogram(LogitsFromProbs(kProbs), p, n);
  ExpectFrequencies(h, {{0, 0.05}, {1, 0.4}, {2, 0.3}, {3, 0.15}, {4, 0.1}}, n);
}

TEST(SamplerTest, TopKKeepsTheKMostLikely) {
  SamplingParams p;
  p.top_k = 2;
  const int n = 10000;
  auto h = Histogram(LogitsFromProbs(kProbs), p, n);
  EXPECT_EQ(Support(h), (std::set<TokenId>{1, 2}));
  ExpectFrequencies(h, {{1, 0.4 / 0.7}, {2, 0.3 / 0.7}}, n);
}

TEST(SamplerTest, TopPKeepsTheSmallestSetReachingP) {
  SamplingParams p;
  p.top_p = 0.7f;  // 0.4 + 0.3 reaches 0.7
  EXPECT_EQ(Support(Histogram(LogitsFromProbs(kProbs), p, 4000)), (std::set<TokenId>{1, 2}));
  p.top_p = 0.71f;
  auto h = Histogram(LogitsFromProbs(kProbs), p, 10000);
  EXPECT_EQ(Support(h), (std::set<TokenId>{1, 2, 3}));
  ExpectFrequencies(h, {{1, 0.4 / 0.85}, {2, 0.3 / 0.85}, {3, 0.15 / 0.85}}, 10000);
  // top-k first, then top-p over the renormalized survivors: 0.4/0.7 = 0.57 >= 0.5.
  p.top_k = 2;
  p.top_p = 0.5f;
  EXPECT_EQ(Support(Histogram(LogitsFromProbs(kProbs), p, 2000)), (std::set<TokenId>{1}));
}

TEST(SamplerTest, TopPOverALargeVocabularyGrowsTheSortedPrefix) {
  // 5000 tokens of equal mass: the 256-token first pass is not enough for top_p = 0.5.
  std::vector<double> probs(5000, 1.0 / 5000);
  SamplingParams p;
  p.top_p = 0.5f;
  auto h = Histogram(LogitsFromProbs(probs), p, 3000);
  for (const auto& [id, n] : h) EXPECT_LT(id, 2501) << "ties are broken by lower id";
  EXPECT_GT(*Support(h).rbegin(), 2000);
}

TEST(SamplerTest, MinPKeepsTokensAboveAFractionOfTheMax) {
  SamplingParams p;
  p.min_p = 0.3f;  // 0.3 * 0.4 = 0.12: keeps 0.4, 0.3, 0.15
  auto h = Histogram(LogitsFromProbs(kProbs), p, 4000);
  EXPECT_EQ(Support(h), (std::set<TokenId>{1, 2, 3}));
}

TEST(SamplerTest, TemperatureIsAppliedBeforeTruncation) {
  // At a high temperature the distribution flattens, so min_p keeps everything.
  SamplingParams p;
  p.min_p = 0.3f;
  p.temperature = 10.0f;
  EXPECT_EQ(Support(Histogram(LogitsFromProbs(kProbs), p, 4000)),
            (std::set<TokenId>{0, 1, 2, 3, 4}));
}

TEST(SamplerTest, XtcDropsTopChoicesExceptTheLeastLikelyAboveThreshold) {
  SamplingParams p;
  p.xtc_probability = 1.0f;
  p.xtc_threshold = 0.12f;  // above: 0.4, 0.3, 0.15 → keep 0.15 (id 3) and those below
  auto h = Histogram(LogitsFromProbs(kProbs), p, 10000);
  EXPECT_EQ(Support(h), (std::set<TokenId>{0, 3, 4}));
  ExpectFrequencies(h, {{0, 0.05 / 0.3}, {3, 0.15 / 0.3}, {4, 0.1 / 0.3}}, 10000);
  // Only one token above the threshold: nothing removed.
  p.xtc_threshold = 0.35f;
  EXPECT_EQ(Support(Histogram(LogitsFromProbs(kProbs), p, 4000)).size(), 5u);
  // xtc_probability 0.5: the top token survives about half of the time less often.
  p.xtc_probability = 0.5f;
  p.xtc_threshold = 0.12f;
  auto half = Histogram(LogitsFromProbs(kProbs), p, 20000);
  ExpectFrequencies(half, {{1, 0.5 * 0.4}}, 20000);
}

TEST(SamplerTest, SeededDrawsArePureFunctionsOfSeedAndStep) {
  Sampler sampler(5);
  SamplingParams p;
  const std::vector<float> logits = LogitsFromProbs(kProbs);
  Tokens output;
  Tokens first, again, other;
  for (int step = 0; step < 64; ++step) {
    std::vector<float> row = logits;
    first.push_back(sampler.SampleRow(row, {&p, {}, output, 1234, {}})->token);
    output.push_back(first.back());
  }
  output.clear();
  for (int step = 0; step < 64; ++step) {
    // Interleave another request's draws on the same sampler: no effect on this one.
    std::vector<float> noise = logits;
    (void)sampler.SampleRow(noise, {&p, {}, {}, 99, {}});
    std::vector<float> row = logits;
    again.push_back(sampler.SampleRow(row, {&p, {}, output, 1234, {}})->token);
    output.push_back(again.back());
    row = logits;
    other.push_back(sampler.SampleRow(row, {&p, {}, Tokens(step, 0), 4321, {}})->token);
  }
  EXPECT_EQ(first, again);
  EXPECT_NE(first, other);
}

TEST(SamplerTest, PenaltiesMath) {
  SamplingParams p;
  p.repetition_penalty = 2.0f;
  std::vector<float> l = {2.0f, -2.0f, 1.0f, 4.0f};
  ApplyPenalties(p, Tokens{0, 1, 0}, Tokens{}, l);
  EXPECT_EQ(l, (std::vector<float>{1.0f, -4.0f, 1.0f, 4.0f}));  // each once, by sign

  SamplingParams q;
  q.presence_penalty = 0.5f;
  q.frequency_penalty = 0.25f;
  l = {1.0f, 1.0f, 1.0f, 1.0f};
  ApplyPenalties(q, Tokens{3, 3}, Tokens{1, 2, 2, 2}, l);  // prompt does not count
  EXPECT_FLOAT_EQ(l[0], 1.0f);
  EXPECT_FLOAT_EQ(l[1], 1.0f - 0.25f - 0.5f);
  EXPECT_FLOAT_EQ(l[2], 1.0f - 0.75f - 0.5f);
  EXPECT_FLOAT_EQ(l[3], 1.0f);
}

TEST(SamplerTest, LogprobsAreTheRawDistributionAfterPenalties) {
  Sampler sampler(5);
  SamplingParams p;
  p.num_logprobs = 5;
  p.temperature = 0.3f;  // does not change logprobs
  p.top_k = 2;           // nor does truncation
  std::vector<float> row = LogitsFromProbs(kProbs);
  auto r = sampler.SampleRow(row, {&p, {}, {}, 5, {}});
  ASSERT_TRUE(r.ok());
  ASSERT_EQ(r->top_logprobs.size(), 5u);
  double sum = 0;
  for (const TokenLogprob& t : r->top_logprobs) sum += std::exp(t.logprob);
  EXPECT_NEAR(sum, 1.0, 1e-5);
  EXPECT_EQ(r->top_logprobs[0].token, 1);
  EXPECT_NEAR(r->top_logprobs[0].logprob, std::log(0.4), 1e-5);
  EXPECT_EQ(r->top_logprobs[4].token, 0);
  EXPECT_NEAR(r->logprob, std::log(kProbs[r->token]), 1e-5);

  // A bias moves mass: logprobs see it.
  p.logit_bias = {{0, static_cast<float>(std::log(0.4 / 0.05))}};  // token 0 now as likely as 1
  p.num_logprobs = 2;
  row = LogitsFromProbs(kProbs);
  r = sampler.SampleRow(row, {&p, {}, {}, 5, {}});
  EXPECT_EQ(r->top_logprobs[0].token, 0);  // tie with 1, lower id first
  EXPECT_NEAR(r->top_logprobs[0].logprob, r->top_logprobs[1].logprob, 1e-5);
  EXPECT_NEAR(r->top_logprobs[0].logprob, std::log(0.4 / 1.35), 1e-5);
}

TEST(SamplerTest, MinTokensMasksEosAndStopIds) {
  Sampler sampler(4);
  SamplingParams p;
  p.temperature = 0;
  p.min_tokens = 2;
  p.stop_token_ids = {2};
  const Tokens eos = {3};
  const std::vector<float> logits = {0.0f, 1.0f, 5.0f, 9.0f};  // EOS best, then the stop id
  std::vector<float> row = logits;
  EXPECT_EQ(sampler.SampleRow(row, {&p, {}, Tokens{7}, 0, eos})->token, 1);
  row = logits;
  EXPECT_EQ(sampler.SampleRow(row, {&p, {}, Tokens{7, 7}, 0, eos})->token, 3);
}

TEST(SamplerTest, BadRowsAreErrorsNotCrashes) {
  Sampler sampler(3);
  SamplingParams p;
  std::vector<float> row = {0.0f, NAN, 1.0f};
  auto r = sampler.SampleRow(row, {&p, {}, {}, 0, {}});
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(r.status().message(), "the model produced NaN logits");
  // Every token masked by min_tokens.
  p.min_tokens = 1;
  p.stop_token_ids = {0, 1, 2};
  row = {0.0f, 1.0f, 2.0f};
  EXPECT_FALSE(sampler.SampleRow(row, {&p, {}, {}, 0, {}}).ok());
  p.temperature = 0;
  row = {0.0f, 1.0f, 2.0f};
  EXPECT_FALSE(sampler.SampleRow(row, {&p, {}, {}, 0, {}}).ok());
}

// CounterUniform moved to base/counter_uniform.h (shared with the device sampler): the same
// values as the sampler's own definition before the move (printed with %a from it).
TEST(SamplerTest, CounterUniformKeepsItsValues) {
  struct Case {
    uint64_t seed, counter, stream;
    double want;
  };
  const Case cases[] = {
      {0, 0, 0, 0x1.b853db2890e25p-1},
      {1, 0, 0, 0x1.070b04f4def1p-1},
      {0, 1, 0, 0x1.aa31acccc7389p-1},
      {0, 0, 1, 0x1.2b2d423e4ea04p-1},
      {42, 7, 0, 0x1.2c0fadec7fdd8p-3},
      {42, 7, 1, 0x1.da4883bcca1f2p-2},
      {0xFFFFFFFFFFFFFFFFull, 123456789, 0, 0x1.784d9e9d9d47dp-1},
      {1234, 1000000, 0, 0x1.05aa1a8046804p-1},
  };
  for (const Case& c : cases) {
    EXPECT_EQ(CounterUniform(c.seed, c.counter, c.stream), c.want)
        << c.seed << " " << c.counter << " " << c.stream;
  }
}

// Which rows a device runner may sample without the logits: plain greedy (argmax) and plain
// draws (temperature, top-k, top-p, min-p); anything that edits the row, needs the raw logits or
// draws a second uniform (XTC) stays on the host.
TEST(SamplerTest, PlainGreedyAndPlainDrawPredicates) {
  struct Case {
    const char* name;
    void (*edit)(SamplingParams&);
    int num_output;
    bool greedy, draw;
  };
  const Case cases[] = {
      {"temperature 0", [](SamplingParams& p) { p.temperature = 0; }, 0, true, false},
      {"top_k 1", [](SamplingParams& p) { p.top_k = 1; }, 0, true, false},
      {"default draw", [](SamplingParams&) {}, 0, false, true},
      {"top-k/p, min-p",
       [](SamplingParams& p) {
         p.temperature = 0.8f;
         p.top_k = 40;
         p.top_p = 0.9f;
         p.min_p = 0.05f;
       },
       5, false, true},
      {"seeded", [](SamplingParams& p) { p.seed = 3; }, 0, false, true},
      {"logit_bias",
       [](SamplingParams& p) {
         p.logit_bias = {{1, 1.0f}};
       },
       0, false, false},
      {"greedy + bias",
       [](SamplingParams& p) {
         p.temperature = 0;
         p.logit_bias = {{1, 1.0f}};
       },
       0, false, false},
      {"repetition", [](SamplingParams& p) { p.repetition_penalty = 1.1f; }, 0, false, false},
      {"presence", [](SamplingParams& p) { p.presence_penalty = 0.5f; }, 0, false, false},
      {"frequency", [](SamplingParams& p) { p.frequency_penalty = -0.5f; }, 0, false, false},
      {"logprobs", [](SamplingParams& p) { p.num_logprobs = 0; }, 0, false, false},
      {"greedy + logprobs",
       [](SamplingParams& p) {
         p.temperature = 0;
         p.num_logprobs = 2;
       },
       0, false, false},
      {"xtc", [](SamplingParams& p) { p.xtc_probability = 0.5f; }, 0, false, false},
      {"min_tokens masking", [](SamplingParams& p) { p.min_tokens = 3; }, 2, false, false},
      {"min_tokens reached", [](SamplingParams& p) { p.min_tokens = 3; }, 3, false, true},
      {"greedy, min_tokens masking",
       [](SamplingParams& p) {
         p.temperature = 0;
         p.min_tokens = 1;
       },
       0, false, false},
  };
  for (const Case& c : cases) {
    SamplingParams p;
    c.edit(p);
    EXPECT_EQ(IsPlainGreedy(p, c.num_output), c.greedy) << c.name;
    EXPECT_EQ(IsPlainDraw(p, c.num_output), c.draw) << c.name;
  }
}

// BuildLogitEdits + ApplyLogitEdit reproduce SampleRow's edits exactly: the edited row equals
// ApplyLogitBias, ApplyPenalties and the min_tokens masking bit for bit, and SampleRow's token for
// the raw row is the greedy choice / plain draw of the edited row (what a device runner takes).
TEST(SamplerTest, LogitEditsAreSampleRowsSteps) {
  constexpr int kVocab = 257;
  const Tokens eos = {3, 250, 3};  // a duplicate, as configs can list
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> uni(-6.0f, 6.0f);
  Sampler sampler(kVocab);
  int edited_rows = 0, logprob_rows = 0;
  for (int trial = 0; trial < 400; ++trial) {
    SamplingParams p;
    p.temperature = trial % 3 == 0 ? 0.0f : 0.7f;
    p.top_k = trial % 5 == 1 ? 20 : 0;
    p.top_p = trial % 7 == 2 ? 0.8f : 1.0f;
    p.seed = static_cast<uint64_t>(trial);
    if (trial % 2 == 0) p.logit_bias = {{5, 2.5f}, {3, -1.0f}, {256, 100.0f}, {17, -100.0f}};
    if (trial % 3 != 1) p.repetition_penalty = trial % 4 == 0 ? 1.3f : 0.8f;
    if (trial % 5 != 2) p.presence_penalty = 0.5f;
    if (trial % 4 != 3) p.frequency_penalty = trial % 2 == 0 ? -0.75f : 1.25f;
    if (trial % 6 == 0) {
      p.min_tokens = 4;
      p.stop_token_ids = {17, 250};
      p.ignore_eos = trial % 12 == 0;
    }
    Tokens prompt, output;
    for (int i = 0; i < 30; ++i) prompt.push_back(static_cast<TokenId>(rng() % 40));
    const int num_output = static_cast<int>(rng() % 8);
    for (int i = 0; i < num_output; ++i) output.push_back(static_cast<TokenId>(rng() % 60));
    std::vector<float> raw(kVocab);
    for (float& l : raw) l = uni(rng);
    raw[0] = 0.0f;
    raw[1] = -0.0f;
    raw[9] = -std::numeric_limits<float>::infinity();
    const SampleContext ctx{&p, prompt, output, static_cast<uint64_t>(trial), eos};

    std::vector<LogitEdit> edits;
    ASSERT_TRUE(BuildLogitEdits(ctx, kVocab, &edits)) << trial;
    for (size_t i = 1; i < edits.size(); ++i) ASSERT_LT(edits[i - 1].token, edits[i].token);
    std::vector<LogitEdit> kept;  // with the prompt's id set kept across steps: the same edits
    const std::vector<TokenId> prompt_ids = SortedUniqueIds(prompt);
    ASSERT_TRUE(BuildLogitEdits(ctx, kVocab, &kept, &prompt_ids)) << trial;
    ASSERT_EQ(kept.size(), edits.size()) << trial;
    ASSERT_TRUE(SameBytes(kept, edits)) << trial;
    std::vector<float> edited = raw;
    for (const LogitEdit& e : edits) edited[e.token] = ApplyLogitEdit(e, edited[e.token]);

    std::vector<float> want = raw;
    ApplyLogitBias(p, want);
    ApplyPenalties(p, prompt, output, want);
    if (num_output < p.min_tokens) {
      if (!p.ignore_eos) {
        for (TokenId id : eos) want[id] = -std::numeric_limits<float>::infinity();
      }
      for (TokenId id : p.stop_token_ids) want[id] = -std::numeric_limits<float>::infinity();
    }
    ASSERT_EQ(std::memcmp(edited.data(), want.data(), sizeof(float) * kVocab), 0) << trial;

    ASSERT_TRUE(IsEditableGreedy(p) || IsEditableDraw(p)) << trial;
    SamplingParams plain = p;  // the row's parameters once the edits are applied
    plain.logit_bias.clear();
    plain.repetition_penalty = 1.0f;
    plain.presence_penalty = plain.frequency_penalty = 0.0f;
    plain.min_tokens = 0;
    ASSERT_TRUE(IsPlainGreedy(plain, num_output) || IsPlainDraw(plain, num_output)) << trial;
    std::vector<float> a = raw, b = edited;
    auto from_raw = sampler.SampleRow(a, ctx);
    const SampleContext plain_ctx{&plain, prompt, output, static_cast<uint64_t>(trial), eos};
    auto from_edited = sampler.SampleRow(b, plain_ctx);
    ASSERT_TRUE(from_raw.ok() && from_edited.ok()) << trial;
    EXPECT_EQ(from_raw->token, from_edited->token) << trial;
    edited_rows += edits.empty() ? 0 : 1;

    // With logprobs, where LogprobsOnEditedRow allows them (no min_tokens masking at this step),
    // the edited row's logprobs (what Backend::LogprobRows takes) are SampleRow's, bit for bit.
    SamplingParams with_lp = p;
    with_lp.num_logprobs = trial % 4 == 0 ? 0 : trial % 4 == 1 ? 1 : trial % 4 == 2 ? 5 : 20;
    if (!LogprobsOnEditedRow(with_lp, num_output)) {
      EXPECT_LT(num_output, p.min_tokens) << trial;
      continue;
    }
    SamplingParams plain_lp = plain;
    plain_lp.num_logprobs = with_lp.num_logprobs;
    std::vector<float> c = raw, d = edited;
    const SampleContext lp_ctx{&with_lp, prompt, output, static_cast<uint64_t>(trial), eos};
    const SampleContext plain_lp_ctx{&plain_lp, prompt, output, static_cast<uint64_t>(trial), eos};
    auto lp_raw = sampler.SampleRow(c, lp_ctx);
    auto lp_edited = sampler.SampleRow(d, plain_lp_ctx);
    ASSERT_TRUE(lp_raw.ok() && lp_edited.ok()) << trial;
    EXPECT_EQ(lp_raw->token, lp_edited->token) << trial;
    EXPECT_EQ(lp_raw->logprob, lp_edited->logprob) << trial;
    ASSERT_EQ(lp_raw->top_logprobs.size(), lp_edited->top_logprobs.size()) << trial;
    for (size_t i = 0; i < lp_raw->top_logprobs.size(); ++i) {
      EXPECT_EQ(lp_raw->top_logprobs[i].token, lp_edited->top_logprobs[i].token) << trial;
      EXPECT_EQ(lp_raw->top_logprobs[i].logprob, lp_edited->top_logprobs[i].logprob) << trial;
    }
    ++logprob_rows;
  }
  EXPECT_GT(edited_rows, 300);
  EXPECT_GT(logprob_rows, 300);
}

// LogitEditCache, fed one request's steps (one new output token each, now and then none, and the
// min_tokens masking switching off on the way), gives exactly BuildLogitEdits' list every step.
TEST(SamplerTest, LogitEditCacheFollowsBuildLogitEdits) {
  constexpr int kVocab = 300;
  const Tokens eos = {7, 299};
  std::mt19937 rng(11);
  for (int trial = 0; trial < 60; ++trial) {
    SamplingParams p;
    if (trial % 3 == 0) p.logit_bias = {{4, 1.5f}, {9, -3.0f}};
    if (trial % 4 != 1) p.repetition_penalty = 1.25f;
    if (trial % 5 != 2) p.presence_penalty = 0.25f;
    if (trial % 2 == 0) p.frequency_penalty = 0.5f;
    if (trial % 6 == 3) {
      p.min_tokens = 5;
      p.stop_token_ids = {9, 12};
    }
    Tokens prompt;
    for (int i = 0; i < 40; ++i) prompt.push_back(static_cast<TokenId>(rng() % 80));
    Tokens output;
    LogitEditCache cache;
    for (int step = 0; step < 30; ++step) {
      if (rng() % 5 != 0) output.push_back(static_cast<TokenId>(rng() % 100));  // else: no token
      const SampleContext ctx{&p, prompt, output, 0, eos};
      std::vector<LogitEdit> want;
      ASSERT_TRUE(BuildLogitEdits(ctx, kVocab, &want));
      ASSERT_TRUE(cache.Build(ctx, kVocab));
      const std::vector<LogitEdit>& got = cache.edits();
      ASSERT_EQ(got.size(), want.size()) << trial << " step " << step;
      ASSERT_TRUE(SameBytes(got, want)) << trial << " step " << step;
    }
    // Built once, and once more where min_tokens masking switched off: the other steps updated.
    EXPECT_EQ(cache.rebuilds(), p.min_tokens > 0 ? 2 : 1) << trial;
  }
  // An out-of-vocabulary new token: refused, as BuildLogitEdits refuses it.
  SamplingParams p;
  p.frequency_penalty = 1.0f;
  LogitEditCache cache;
  Tokens output = {1};
  ASSERT_TRUE(cache.Build(SampleContext{&p, {}, output, 0, {}}, 10));
  output.push_back(10);
  EXPECT_FALSE(cache.Build(SampleContext{&p, {}, output, 0, {}}, 10));
}

TEST(SamplerTest, LogitEditsRefuseWhatTheHostMustDo) {
  SamplingParams p;
  const Tokens none;
  std::vector<LogitEdit> edits;
  p.logit_bias = {{4, 1.0f}, {4, 2.0f}};  // listed twice: the host adds both
  EXPECT_FALSE(BuildLogitEdits(SampleContext{&p, none, none, 0, none}, 10, &edits));
  p.logit_bias = {{10, 1.0f}};
  EXPECT_FALSE(BuildLogitEdits(SampleContext{&p, none, none, 0, none}, 10, &edits));
  p.logit_bias.clear();
  EXPECT_TRUE(BuildLogitEdits(SampleContext{&p, none, none, 0, none}, 10, &edits));
  EXPECT_TRUE(edits.empty());
  p.num_logprobs = 0;  // logprobs: only through LogprobsOnEditedRow
  EXPECT_FALSE(IsEditableGreedy(p) || IsEditableDraw(p));
  EXPECT_TRUE(LogprobsOnEditedRow(p, 0));
  p.min_tokens = 2;  // logprobs are taken before the masking: not while it applies
  EXPECT_FALSE(LogprobsOnEditedRow(p, 1));
  EXPECT_TRUE(LogprobsOnEditedRow(p, 2));
  p.min_tokens = 0;
  p.temperature = 0.7f;
  EXPECT_TRUE(LogprobsOnEditedRow(p, 0));
  p.xtc_probability = 0.5f;
  EXPECT_FALSE(LogprobsOnEditedRow(p, 0));
  p.num_logprobs = -1;
  EXPECT_FALSE(IsEditableDraw(p));
  EXPECT_FALSE(LogprobsOnEditedRow(p, 0));
}

// FNV-1a over the bytes of `v`.
template <typename T>
void HashInto(uint64_t& h, const T& v) {
  unsigned char bytes[sizeof(T)];
  std::memcpy(bytes, &v, sizeof(T));
  for (unsigned char b : bytes) h = (h ^ b) * 0x100000001B3ull;
}

// Every output of SampleRow (token, logprob bits, top logprobs, error message) for one setting
// over logits rows with ties, -inf entries, a wide range (exp underflows to 0) and vocabularies of
// 7, 1000 and 128256, four steps each, hashed. The values depend on libm's expf / exp / log
// (glibc here): another C library may need the hashes regenerated (the failure prints them).
uint64_t PinnedHash(const SamplingParams& params) {
  uint64_t h = 0xCBF29CE484222325ull;
  for (int vocab : {7, 1000, 128256}) {
    for (int variant = 0; variant < 3; ++variant) {
      // Roughly normal (a sum of four uniforms), sd 3 or 30; no libm, no <random>.
      const uint64_t seed = static_cast<uint64_t>(vocab * 3 + variant);
      const double scale = variant == 2 ? 30.0 : 3.0;
      std::vector<float> logits(static_cast<size_t>(vocab));
      for (size_t i = 0; i < logits.size(); ++i) {
        double sum = 0;
        for (uint64_t k = 0; k < 4; ++k) sum += CounterUniform(seed, i, k);
        logits[i] = static_cast<float>((sum - 2.0) * 1.7320508 * scale);
      }
      if (variant == 1) {  // ties and masked entries
        for (size_t i = 0; i < logits.size(); i += 3) logits[i] = std::round(logits[i]);
        for (size_t i = 1; i < logits.size(); i += 5) logits[i] = -INFINITY;
      }
      Sampler sampler(vocab);
      Tokens output;
      const Tokens prompt = {1, 2, 3, 2};
      const Tokens eos = {0};
      for (int step = 0; step < 4; ++step) {
        std::vector<float> row = logits;
        auto r = sampler.SampleRow(row, {&params, prompt, output, 77u + variant, eos});
        if (!r.ok()) {
          const std::string message = r.status().message();
          for (char c : message) HashInto(h, c);
          output.push_back(1);
          continue;
        }
        HashInto(h, r->token);
        HashInto(h, r->logprob);
        for (const TokenLogprob& t : r->top_logprobs) {
          HashInto(h, t.token);
          HashInto(h, t.logprob);
        }
        output.push_back(r->token);
      }
    }
  }
  return h;
}

// Pins SampleRow's exact outputs: a change to the sampler that is meant to be a pure speed-up
// must keep every hash. Produced by the sampler before the single-row speed-ups (h-samp's first
// commit); a deliberate change of behaviour updates them.
TEST(SamplerTest, OutputsArePinned) {
  struct Case {
    const char* name;
    SamplingParams params;
    uint64_t hash;
  };
  std::vector<Case> cases;
  auto add = [&](const char* name, auto edit, uint64_t hash) {
    SamplingParams p;
    p.num_logprobs = -1;
    edit(p);
    cases.push_back({name, p, hash});
  };
  add(
      "t=1", [](SamplingParams&) {}, 0x84f90dacf9ad33b0ull);
  add(
      "t=0.8", [](SamplingParams& p) { p.temperature = 0.8f; }, 0xba60e31576d41919ull);
  add(
      "t=0.01", [](SamplingParams& p) { p.temperature = 0.01f; }, 0xf9ad5300b0bc6f45ull);
  add(
      "t=5", [](SamplingParams& p) { p.temperature = 5.0f; }, 0xd4c6117517f703ddull);
  add(
      "top_p=0.9",
      [](SamplingParams& p) {
        p.temperature = 0.8f;
        p.top_p = 0.9f;
      },
      0x7c718a1e64a70c61ull);
  add(
      "top_p=0.999", [](SamplingParams& p) { p.top_p = 0.999f; }, 0x20ae5232ebbf74b0ull);
  add(
      "top_k=50,top_p=0.5",
      [](SamplingParams& p) {
        p.top_k = 50;
        p.top_p = 0.5f;
      },
      0x2e93ee33c1d07470ull);
  add(
      "top_k=5",
      [](SamplingParams& p) {
        p.temperature = 1.3f;
        p.top_k = 5;
      },
      0x3d83b1913d36d82bull);
  add(
      "min_p=0.05",
      [](SamplingParams& p) {
        p.temperature = 0.7f;
        p.min_p = 0.05f;
      },
      0x9c657c463255acc2ull);
  add(
      "xtc",
      [](SamplingParams& p) {
        p.xtc_probability = 1.0f;
        p.xtc_threshold = 0.05f;
      },
      0xc0062dcad527a495ull);
  add(
      "top_k=2000,min_p=1e-6,xtc",
      [](SamplingParams& p) {
        p.temperature = 5.0f;
        p.top_k = 2000;
        p.min_p = 1e-6f;
        p.xtc_probability = 1.0f;
        p.xtc_threshold = 0.001f;
      },
      0xc747cb96f5e77a9dull);
  add(
      "mixed+logprobs",
      [](SamplingParams& p) {
        p.temperature = 0.9f;
        p.top_p = 0.95f;
        p.min_p = 0.02f;
        p.num_logprobs = 5;
      },
      0x5388dab1ef616c19ull);
  add(
      "greedy+logprobs",
      [](SamplingParams& p) {
        p.temperature = 0;
        p.num_logprobs = 3;
      },
      0x241c7f1a439aad95ull);
  add(
      "greedy+min_tokens",
      [](SamplingParams& p) {
        p.temperature = 0;
        p.num_logprobs = 0;
        p.min_tokens = 2;
      },
      0x8b377fe6729cf5b1ull);
  add(
      "penalties+bias",
      [](SamplingParams& p) {
        p.temperature = 0.8f;
        p.repetition_penalty = 1.3f;
        p.presence_penalty = 0.5f;
        p.frequency_penalty = 0.3f;
        p.logit_bias = {{2, 5.0f}, {5, -100.0f}};
        p.min_tokens = 3;
        p.stop_token_ids = {3};
        p.num_logprobs = 2;
      },
      0xe3343f7b3cfb5e42ull);
  for (const Case& c : cases) {
    EXPECT_EQ(PinnedHash(c.params), c.hash) << c.name << ": 0x" << std::hex << PinnedHash(c.params);
  }
}

// Top-p over a nearly flat 128k distribution keeps most of the vocabulary: the head is grown over
// several rounds. Pinned against the sampler before the nth_element-based growth (one
// partial_sort per round), which must give exactly the same rows.
TEST(SamplerTest, TopPOverAFlatVocabularyIsPinned) {
  const int vocab = 128256;
  std::vector<float> logits(static_cast<size_t>(vocab));
  for (size_t i = 0; i < logits.size(); ++i) {
    logits[i] = static_cast<float>((CounterUniform(99, i, 0) - 0.5) * 0.2);
  }
  uint64_t h = 0xCBF29CE484222325ull;
  for (float top_p : {0.5f, 0.95f, 0.9999f}) {
    SamplingParams params;
    params.temperature = 0.8f;
    params.top_p = top_p;
    params.num_logprobs = 2;
    Sampler sampler(vocab);
    Tokens output;
    for (int step = 0; step < 3; ++step) {
      std::vector<float> row = logits;
      auto r = sampler.SampleRow(row, {&params, {}, output, 5u, {}});
      ASSERT_TRUE(r.ok()) << r.status().message();
      HashInto(h, r->token);
      HashInto(h, r->logprob);
      output.push_back(r->token);
    }
  }
  EXPECT_EQ(h, 0x05652c77e8e41e4cull);
}

}  // namespace
}  // namespace loom
