#include "runtime/forward_batch.h"

#include <algorithm>
#include <string>

namespace loom {
namespace {

Tensor UploadI32(const std::vector<int32_t>& v, Backend* backend) {
  // Empty index arrays still get one element so every backend sees a valid buffer.
  Tensor host = HostTensor(DType::kI32, Shape{static_cast<int64_t>(std::max<size_t>(v.size(), 1))});
  host.data_as<int32_t>()[0] = 0;
  std::copy(v.begin(), v.end(), host.data_as<int32_t>());
  Tensor t = backend->Upload(host);
  return v.empty() ? t : t.Slice(0, static_cast<int64_t>(v.size()));
}

}  // namespace

StatusOr<std::vector<SeqSlice>> PlanSlices(const StepPlan& plan, int num_blocks, int block_size) {
  if (plan.block_size != block_size) {
    return InternalError("plan block size " + std::to_string(plan.block_size) +
                         " != runner block size " + std::to_string(block_size));
  }
  std::vector<SeqSlice> slices;
  slices.reserve(plan.seqs.size());
  for (const ScheduledSeq& s : plan.seqs) {
    for (BlockId b : s.block_table) {
      if (b < 0 || b >= num_blocks) return InternalError("block id out of range in plan");
    }
    if (s.num_logits < 0 || static_cast<size_t>(s.num_logits) > s.tokens.size()) {
      return InternalError("a plan seq asks for " + std::to_string(s.num_logits) +
                           " logits rows of " + std::to_string(s.tokens.size()) + " tokens");
    }
    if (s.hidden_begin < 0 || s.hidden_begin > s.hidden_end ||
        static_cast<size_t>(s.hidden_end) > s.tokens.size()) {
      return InternalError("a plan seq asks for hidden rows [" + std::to_string(s.hidden_begin) +
                           ", " + std::to_string(s.hidden_end) + ") of " +
                           std::to_string(s.tokens.size()) + " tokens");
    }
    slices.push_back(
        SeqSlice{s.tokens, s.start_pos, s.block_table, s.num_logits, s.hidden_begin, s.hidden_end});
  }
  return slices;
}

HostForwardBatch BuildHostForwardBatch(std::span<const SeqSlice> seqs, int block_size) {
  CHECK_GT(block_size, 0);
  HostForwardBatch b;
  b.query_start.push_back(0);
  b.page_indptr.push_back(0);
  for (const SeqSlice& s : seqs) {
    const int32_t n = static_cast<int32_t>(s.tokens.size());
    const int32_t kv_len = s.start_pos + n;
    const int32_t num_pages = (kv_len + block_size - 1) / block_size;
    CHECK_GE(static_cast<int32_t>(s.block_table.size()), num_pages)
        << "block table of " << s.block_table.size() << " blocks cannot hold " << kv_len
        << " tokens";
    for (int32_t j = 0; j < n; ++j) {
      const int32_t p = s.start_pos + j;
      b.token_ids.push_back(s.tokens[static_cast<size_t>(j)]);
      b.positions.push_back(p);
      b.slot_mapping.push_back(s.block_table[static_cast<size_t>(p / block_size)] * block_size +
                               p % block_size);
    }
    b.query_start.push_back(b.query_start.back() + n);
    b.kv_len.push_back(kv_len);
    b.page_indices.insert(b.page_indices.end(), s.block_table.begin(),
                          s.block_table.begin() + num_pages);
    b.page_indptr.push_back(static_cast<int32_t>(b.page_indices.size()));
    CHECK(s.num_logits >= 0 && s.num_logits <= n) << s.num_logits << " logits rows of " << n;
    const int32_t first_row = b.query_start[b.query_start.size() - 2];  // this seq's token 0
    for (int32_t j = n - s.num_logits; j < n; ++j) b.sample_rows.push_back(first_row + j);
    CHECK(0 <= s.hidden_begin && s.hidden_begin <= s.hidden_end && s.hidden_end <= n)
        << "hidden rows [" << s.hidden_begin << ", " << s.hidden_end << ") of " << n;
    for (int32_t j = s.hidden_begin; j < s.hidden_end; ++j) b.hidden_rows.push_back(first_row + j);
    b.max_query_len = std::max(b.max_query_len, n);
    b.max_kv_len = std::max(b.max_kv_len, kv_len);
  }
  return b;
}

ForwardInput UploadForwardBatch(const HostForwardBatch& b, int block_size, Backend* backend) {
  ForwardInput in;
  in.token_ids = UploadI32(b.token_ids, backend);
  in.positions = UploadI32(b.positions, backend);
  in.sample_rows = UploadI32(b.sample_rows, backend);
  in.num_sample_rows = static_cast<int>(b.sample_rows.size());
  // Sample rows are increasing: as many as there are tokens means every row, in order.
  in.sample_rows_all = b.sample_rows.size() == b.token_ids.size();
  in.hidden_rows = UploadI32(b.hidden_rows, backend);
  in.num_hidden_rows = static_cast<int>(b.hidden_rows.size());
  AttentionMeta& m = in.meta;
  m.num_seqs = static_cast<int>(b.kv_len.size());
  m.num_tokens = static_cast<int>(b.token_ids.size());
  m.max_query_len = b.max_query_len;
  m.max_kv_len = b.max_kv_len;
  m.block_size = block_size;
  m.query_start = UploadI32(b.query_start, backend);
  m.kv_len = UploadI32(b.kv_len, backend);
  m.page_indptr = UploadI32(b.page_indptr, backend);
  m.page_indices = UploadI32(b.page_indices, backend);
  m.slot_mapping = UploadI32(b.slot_mapping, backend);
  return in;
}

}  // namespace loom
