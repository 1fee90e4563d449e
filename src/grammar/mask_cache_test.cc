#include "grammar/mask_cache.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "grammar/grammar_compose.h"
#include "grammar/grammar_state.h"
#include "grammar/grammar_test_util.h"
#include "grammar/json_schema.h"
#include "grammar/token_mask.h"

namespace loom {
namespace {

using grammar_test::MustCompile;

MaskCache::Mask MakeMask(uint32_t fill) {
  return std::make_shared<const std::vector<uint32_t>>(3, fill);
}

TEST(MaskCacheTest, FindsWhatWasInsertedByGrammarAndSignature) {
  const auto a = MustCompile(JsonAnyValueGrammar());
  const auto b = MustCompile(JsonAnyValueGrammar());
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  MaskCache cache(4);
  EXPECT_EQ(cache.Find(a, {1, 2}), nullptr);
  const MaskCache::Mask m = MakeMask(7);
  EXPECT_EQ(cache.Insert(a, {1, 2}, m), m);
  EXPECT_EQ(cache.Find(a, {1, 2}), m);        // the same storage, not a copy
  EXPECT_EQ(cache.Find(a, {1, 3}), nullptr);  // another state
  EXPECT_EQ(cache.Find(b, {1, 2}), nullptr);  // another grammar, even an equal one
  // A second insert of the same key keeps the first mask (concurrent computations of a state).
  EXPECT_EQ(cache.Insert(a, {1, 2}, MakeMask(7)), m);
  EXPECT_EQ(cache.size(), 1u);
  EXPECT_EQ(cache.hits(), 1u);
  EXPECT_EQ(cache.misses(), 3u);
}

TEST(MaskCacheTest, EvictsTheLeastRecentlyUsedAndKeepsItsGrammarAlive) {
  auto g = MustCompile(JsonAnyValueGrammar());
  ASSERT_NE(g, nullptr);
  const std::weak_ptr<const CompiledGrammar> weak = g;
  MaskCache cache(2);
  cache.Insert(g, {1}, MakeMask(1));
  cache.Insert(g, {2}, MakeMask(2));
  ASSERT_NE(cache.Find(g, {1}), nullptr);  // {1} is now the most recently used
  cache.Insert(g, {3}, MakeMask(3));       // evicts {2}
  EXPECT_EQ(cache.size(), 2u);
  EXPECT_NE(cache.Find(g, {1}), nullptr);
  EXPECT_EQ(cache.Find(g, {2}), nullptr);
  EXPECT_NE(cache.Find(g, {3}), nullptr);
  // The entries hold the grammar: its address cannot be reused by another one while cached.
  const auto* address = g.get();
  g.reset();
  EXPECT_FALSE(weak.expired());
  EXPECT_EQ((*cache.Find(weak.lock(), {3}))[0], 3u);
  EXPECT_EQ(weak.lock().get(), address);
}

TEST(MaskCacheTest, CapacityZeroKeepsNothing) {
  const auto g = MustCompile(JsonAnyValueGrammar());
  ASSERT_NE(g, nullptr);
  MaskCache cache(0);
  const MaskCache::Mask m = MakeMask(5);
  EXPECT_EQ(cache.Insert(g, {1}, m), m);
  EXPECT_EQ(cache.Find(g, {1}), nullptr);
  EXPECT_EQ(cache.size(), 0u);
}

// Bytes, a few words, a special token and an EOS.
TokenVocabulary SmallVocabulary() {
  std::vector<std::string> tokens;
  for (int b = 0; b < 256; ++b) tokens.push_back(std::string(1, static_cast<char>(b)));
  for (const char* t : {"<call>", "{\"", "\":", "\"}", "hello", " world", "ab", "<ca", "ll>{"}) {
    tokens.push_back(t);
  }
  tokens.push_back("<|special|>");
  tokens.push_back("</s>");
  const TokenId n = static_cast<TokenId>(tokens.size());
  return TokenVocabulary(std::move(tokens), {n - 2}, {n - 1});
}

TokenId Id(const TokenVocabulary& vocab, const std::string& bytes) {
  for (TokenId id = 0; id < vocab.size(); ++id) {
    if (vocab.token_bytes(id) == bytes) return id;
  }
  ADD_FAILURE() << "no token " << bytes;
  return -1;
}

// Requests under one lazy grammar (tool_choice auto: free text until "<call>", then a JSON
// object) share their masks: the second request in a state the first met gets the first one's
// storage; every shared mask equals the reference walk of that request's own matcher; after the
// requests part ways (one opens a call) their masks differ and are right for each.
TEST(GrammarStateTest, RequestsInOneStateShareOneMask) {
  const TokenVocabulary vocab = SmallVocabulary();
  const auto g = MustCompile(Triggered(JsonAnyValueGrammar(), "<call>", /*repeat=*/false));
  ASSERT_NE(g, nullptr);
  MaskCache shared(16);
  GrammarState a(g, &vocab, GrammarState::kDefaultMaskCacheEntries,
                 GrammarState::kDefaultMaxDfaStates, &shared);
  GrammarState b(g, &vocab, GrammarState::kDefaultMaskCacheEntries,
                 GrammarState::kDefaultMaxDfaStates, &shared);
  std::vector<uint32_t> want(vocab.mask_words());
  const auto expect_reference = [&](const GrammarState& s, std::span<const uint32_t> got) {
    vocab.FillMask(s.matcher(), want.data());
    EXPECT_EQ(std::vector<uint32_t>(got.begin(), got.end()), want);
  };
  const std::span<const uint32_t> a0 = a.Mask();
  expect_reference(a, a0);
  const std::span<const uint32_t> b0 = b.Mask();
  EXPECT_EQ(b0.data(), a0.data());  // b found a's mask
  EXPECT_EQ(b.shared_mask_hits(), 1u);
  // Free text: every word returns to the same state, and both keep sharing.
  for (const char* t : {"hello", " world", "ab"}) {
    ASSERT_TRUE(a.AcceptToken(Id(vocab, t)));
    ASSERT_TRUE(b.AcceptToken(Id(vocab, t)));
    const std::span<const uint32_t> am = a.Mask();
    const std::span<const uint32_t> bm = b.Mask();
    EXPECT_EQ(am.data(), bm.data()) << t;
    expect_reference(a, am);
  }
  // Once a opens a call, the two are in different states with different masks.
  ASSERT_TRUE(a.AcceptToken(Id(vocab, "<call>")));
  const std::span<const uint32_t> in_call = a.Mask();
  expect_reference(a, in_call);
  const std::span<const uint32_t> free_text = b.Mask();
  EXPECT_NE(in_call.data(), free_text.data());
  expect_reference(b, free_text);
  EXPECT_NE(std::vector<uint32_t>(in_call.begin(), in_call.end()),
            std::vector<uint32_t>(free_text.begin(), free_text.end()));
  EXPECT_FALSE(a.AcceptToken(Id(vocab, "hello")));  // the call must be JSON
  EXPECT_TRUE(a.AcceptToken(Id(vocab, "{\"")));
}

// Many threads filling masks of many requests under one grammar through one cache: each mask is
// its own matcher's reference mask (no request is handed another state's mask).
TEST(GrammarStateTest, SharedMasksAreExactUnderConcurrency) {
  const TokenVocabulary vocab = SmallVocabulary();
  const auto g = MustCompile(Triggered(JsonAnyValueGrammar(), "<call>", /*repeat=*/true));
  ASSERT_NE(g, nullptr);
  MaskCache shared(8);  // small: entries are evicted while other threads use them
  const std::vector<std::vector<std::string>> walks = {
      {"hello", "<call>", "{\"", "ab", "\":", "1", "}", " world"},
      {"<ca", "ll>{", "\"", "a", "\":", "[", "]", "}", "ab"},
      {"ab", "<", "c", "a", "l", "l", ">", "[", "1", ",", "2", "]"},
      {" world", "hello", "\"", "\\", "<call>", "\"", "x", "\""},
  };
  std::vector<std::thread> threads;
  std::vector<int> failures(8, 0);
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      std::vector<uint32_t> want(vocab.mask_words());
      for (int round = 0; round < 20; ++round) {
        GrammarState s(g, &vocab, GrammarState::kDefaultMaskCacheEntries,
                       GrammarState::kDefaultMaxDfaStates, &shared);
        for (const std::string& tok : walks[(t + round) % walks.size()]) {
          const std::span<const uint32_t> got = s.Mask();
          vocab.FillMask(s.matcher(), want.data());
          if (!std::equal(got.begin(), got.end(), want.begin())) ++failures[t];
          if (!s.AcceptToken(Id(vocab, tok))) ++failures[t];
        }
      }
    });
  }
  for (std::thread& th : threads) th.join();
  for (int t = 0; t < 8; ++t) EXPECT_EQ(failures[t], 0) << "thread " << t;
  EXPECT_GT(shared.hits(), 0u);
}

}  // namespace
}  // namespace loom
