// Where a row's drafts come from: the engine asks its DraftProposer, on the engine thread, for up
// to k tokens to follow a decoding row's tokens, and verifies them in the row's next step (so a
// proposer only affects speed, never the output). NgramProposer is --draft-kind ngram;
// ReplayProposer is benchmark-only: it drafts a recorded continuation with a chosen fraction of
// its tokens corrupted, so that the engine can be measured at any acceptance rate on random
// weights (which accept nothing a real proposer offers).
#pragma once

#include <cstdint>
#include <span>
#include <unordered_map>
#include <vector>

#include "base/ids.h"
#include "spec/ngram_proposer.h"

namespace loom {

class DraftProposer {
 public:
  virtual ~DraftProposer() = default;
  // Up to max_draft tokens to follow `tokens`, a request's prompt (its first num_prompt) and
  // output so far. Empty: no draft this step.
  virtual std::vector<TokenId> Propose(std::span<const TokenId> tokens, int num_prompt,
                                       int max_draft) = 0;
};

class NgramProposer : public DraftProposer {
 public:
  explicit NgramProposer(NgramConfig config) : config_(config) {}
  std::vector<TokenId> Propose(std::span<const TokenId> tokens, int num_prompt,
                               int max_draft) override {
    return ProposeNgram(tokens, config_, max_draft);
  }

 private:
  NgramConfig config_;
};

class ReplayProposer : public DraftProposer {
 public:
  // Each draft token is the recorded one with probability `accept` and otherwise another id
  // (decided by a hash of the prompt, the position and `seed`, so runs repeat): against the run
  // that was recorded, draft j of a round is accepted with probability accept^j.
  ReplayProposer(double accept, int vocab_size, uint64_t seed = 0)
      : accept_(accept), vocab_size_(vocab_size), seed_(seed) {}
  // The continuation the target produced after `prompt`.
  void Record(std::span<const TokenId> prompt, std::vector<TokenId> continuation);
  // Nothing for a prompt never recorded, or an output that left the recorded continuation.
  std::vector<TokenId> Propose(std::span<const TokenId> tokens, int num_prompt,
                               int max_draft) override;

 private:
  static uint64_t Hash(std::span<const TokenId> tokens);
  double accept_;
  int vocab_size_;
  uint64_t seed_;
  std::unordered_map<uint64_t, std::vector<TokenId>> recorded_;  // by the prompt's hash
};

}  // namespace loom
