#include "engine/engine_config.h"

#include <string>

namespace loom {

Status EngineConfig::Validate() const {
  if (num_draft_tokens < 0 || num_draft_tokens > 64) {
    return InvalidArgumentError("--num-draft-tokens must be in [0, 64], got " +
                                std::to_string(num_draft_tokens));
  }
  if (!(draft_token_cost < 0 || draft_token_cost <= 1e6)) {  // NaN too
    return InvalidArgumentError("--draft-token-cost must be auto or a number in [0, 1e6]");
  }
  if (ngram.ngram_min < 1 || ngram.ngram_max < ngram.ngram_min) {
    return InvalidArgumentError("--ngram-min (" + std::to_string(ngram.ngram_min) +
                                ") must be >= 1 and <= --ngram-max (" +
                                std::to_string(ngram.ngram_max) + ")");
  }
  if (num_blocks < 1) {
    return InvalidArgumentError("the KV pool needs at least 1 block, got " +
                                std::to_string(num_blocks) + " (raise --kv-cache-gb)");
  }
  if (block_size < 1 || block_size > 1024) {
    return InvalidArgumentError("--block-size must be in [1, 1024], got " +
                                std::to_string(block_size));
  }
  if (max_batched_tokens < 1) {
    return InvalidArgumentError("--max-batched-tokens must be >= 1, got " +
                                std::to_string(max_batched_tokens));
  }
  if (max_num_seqs < 1) {
    return InvalidArgumentError("--batch must be >= 1, got " + std::to_string(max_num_seqs));
  }
  if (num_grammar_threads < 0 || num_grammar_threads > 64) {
    return InvalidArgumentError("num_grammar_threads must be in [0, 64], got " +
                                std::to_string(num_grammar_threads));
  }
  if (num_sampling_threads < 1 || num_sampling_threads > 256) {
    return InvalidArgumentError("num_sampling_threads must be in [1, 256], got " +
                                std::to_string(num_sampling_threads) + " (see --threads)");
  }
  if (max_model_len < 0) {
    return InvalidArgumentError("max_model_len must be >= 0 (0 = the model's), got " +
                                std::to_string(max_model_len));
  }
  if (kv_budget_bytes < 0) return InvalidArgumentError("--kv-budget must be >= 0");
  if (host_cache_bytes < 0) return InvalidArgumentError("--host-cache must be >= 0");
  if (host_cache_bytes > 0 && !enable_prefix_cache) {
    return InvalidArgumentError("--host-cache needs the prefix cache (drop --prompt-cache-gb 0)");
  }
  if (!ssd_cache_dir.empty()) {
    if (!enable_prefix_cache) {
      return InvalidArgumentError("--ssd-cache needs the prefix cache (drop --prompt-cache-gb 0)");
    }
    if (ssd_cache_max_bytes <= 0) return InvalidArgumentError("--ssd-cache-max must be > 0");
    if (ssd_spill_queue_bytes <= 0 || ssd_readers < 1 || ssd_readers > 64 || ssd_flush_ms < 0 ||
        ssd_demote_idle_ms < 0) {
      return InvalidArgumentError(
          "ssd cache: bad spill queue, reader count, flush time or idle demotion time");
    }
  }
  if (memory_budget_bytes < 0) return InvalidArgumentError("--memory-budget must be >= 0");
  if (bytes_per_token_kv < 0 || model_bytes < 0) {
    return InvalidArgumentError("bytes_per_token_kv and model_bytes must be >= 0");
  }
  if ((kv_budget_bytes > 0 || memory_budget_bytes > 0) && bytes_per_token_kv == 0) {
    return InvalidArgumentError(
        "--kv-budget / --memory-budget need the model's KV bytes per token (bytes_per_token_kv)");
  }
  for (TokenId id : eos_token_ids) {
    if (id < 0) return InvalidArgumentError("eos token id " + std::to_string(id) + " is < 0");
  }
  return OkStatus();
}

}  // namespace loom
