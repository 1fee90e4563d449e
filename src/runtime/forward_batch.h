// Builds the flat device inputs of one forward step (token ids, positions, CSR page tables, slot
// mapping, sampled rows) from per-sequence slices. Used by the ModelRunner and by tests.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "backend/backend.h"
#include "base/status.h"
#include "model/model.h"
#include "sched/step_plan.h"

namespace loom {

// One sequence's share of a step.
struct SeqSlice {
  std::span<const int32_t> tokens;  // tokens computed this step
  int32_t start_pos = 0;            // position of tokens[0] (== tokens already in the cache)
  std::span<const int32_t>
      block_table;         // the sequence's blocks, covering start_pos + tokens.size()
  int32_t num_logits = 1;  // wants the logits rows of its last num_logits tokens
  // Wants the final hidden states of tokens [hidden_begin, hidden_end) (embeddings).
  int32_t hidden_begin = 0;
  int32_t hidden_end = 0;
};

// The plan's sequences as slices (views into `plan`, valid while it lives). Errors (Internal):
// the plan's block size is not `block_size`, or a block id is outside [0, num_blocks). Shared by
// every runner so they validate and flatten a plan the same way.
StatusOr<std::vector<SeqSlice>> PlanSlices(const StepPlan& plan, int num_blocks, int block_size);

// Host-side arrays of a step (kept for inspection in tests).
struct HostForwardBatch {
  std::vector<int32_t> token_ids, positions, query_start, kv_len, page_indptr, page_indices,
      slot_mapping, sample_rows, hidden_rows;
  int max_query_len = 0, max_kv_len = 0;
};

// Fills the host arrays. CHECKs that every block table covers its tokens.
//
//   seq s, token j:  position p = start_pos + j
//                    slot       = block_table[p / block_size] * block_size + p % block_size
//   pages of s:      block_table[0 .. ceil(kv_len / block_size))
//   sample_rows:     the flat rows of s's last num_logits tokens, seq by seq (ascending)
//   hidden_rows:     the flat rows of s's tokens [hidden_begin, hidden_end), seq by seq
HostForwardBatch BuildHostForwardBatch(std::span<const SeqSlice> seqs, int block_size);

// Uploads a host batch as a ForwardInput for `backend`.
ForwardInput UploadForwardBatch(const HostForwardBatch& batch, int block_size, Backend* backend);

}  // namespace loom
