#include "runtime/decoder_runner.h"

#include <algorithm>

#include "runtime/forward_batch.h"

namespace loom {

DecoderRunner::DecoderRunner(std::unique_ptr<Model> model, int num_blocks, int block_size,
                             KvFormat kv_format)
    : model_(std::move(model)), num_blocks_(num_blocks), block_size_(block_size) {
  CHECK_GT(num_blocks, 0);
  CHECK_GT(block_size, 0);
  kv_ = model_->AllocateKv(num_blocks, block_size, kv_format);
}

StatusOr<StepLogits> DecoderRunner::Execute(const StepPlan& plan) {
  ASSIGN_OR_RETURN(std::vector<SeqSlice> slices, PlanSlices(plan, num_blocks_, block_size_));
  accelerated_ = false;
  Backend* be = model_->backend();
  StepLogits out;
  out.backend = be;
  const bool eager = sink_ != nullptr || plan.num_hidden > 0;
  if (accelerator_ != nullptr && eager) accelerator_->DropLookahead();
  if (accelerator_ != nullptr && !eager) {
    ASSIGN_OR_RETURN(accelerated_, accelerator_->TryForward(plan, &out.logits));
    if (accelerated_) {  // row i of the logits = plan.seqs[i]
      for (size_t i = 0; i < slices.size(); ++i) {
        if (slices[i].num_logits > 0) out.rows.push_back(static_cast<int32_t>(i));
      }
      return out;
    }
  }
  HostForwardBatch hb = BuildHostForwardBatch(slices, block_size_);
  if (hb.token_ids.empty()) return out;
  ForwardInput in = UploadForwardBatch(hb, block_size_, be);
  const int64_t num_rows = static_cast<int64_t>(hb.sample_rows.size());
  out.logits = be->AllocScratch(DType::kF32, Shape{std::max<int64_t>(num_rows, 1), vocab_size()});
  if (in.num_hidden_rows > 0) {
    out.hidden = be->AllocScratch(be->act_dtype(), Shape{in.num_hidden_rows, hidden_size()});
  }
  RETURN_IF_ERROR(model_->Forward(in, kv_, out.logits, sink_, out.hidden));
  out.rows.resize(static_cast<size_t>(num_rows));
  for (int32_t k = 0; k < static_cast<int32_t>(num_rows); ++k) out.rows[k] = k;
  return out;
}

KvBlockLayout DecoderRunner::kv_block_layout() const {
  KvBlockLayout l;
  if (kv_.empty()) return l;
  l.num_layers = static_cast<int>(kv_.size());
  l.num_kv_heads = static_cast<int>(kv_[0].k.dim(2));
  l.head_dim = model_->config().head_dim;  // a quantized pool's last dim is its row bytes
  for (const KvLayer& layer : kv_) {
    l.block_bytes += static_cast<int64_t>(layer.k.nbytes() / static_cast<size_t>(num_blocks_) +
                                          layer.v.nbytes() / static_cast<size_t>(num_blocks_));
  }
  return l;
}

Status DecoderRunner::ReadKvBlocks(std::span<const BlockId> blocks,
                                   std::span<uint8_t* const> hosts) {
  return CopyKvBlocks(blocks, hosts, /*to_host=*/true);
}

Status DecoderRunner::WriteKvBlocks(std::span<const BlockId> blocks,
                                    std::span<const uint8_t* const> hosts) {
  // The copy only reads them (Backend::CopyKvBlocks' to_host == false).
  return CopyKvBlocks(
      blocks, std::span<uint8_t* const>(const_cast<uint8_t* const*>(hosts.data()), hosts.size()),
      /*to_host=*/false);
}

std::shared_ptr<uint8_t> DecoderRunner::AllocKvStaging(size_t bytes) {
  std::shared_ptr<Buffer> buffer = model_->backend()->AllocHostStaging(bytes);
  return std::shared_ptr<uint8_t>(buffer, static_cast<uint8_t*>(buffer->data()));
}

Status DecoderRunner::CheckKvCopy(std::span<const BlockId> blocks,
                                  std::span<uint8_t* const> hosts) const {
  if (hosts.size() != blocks.size()) {
    return InvalidArgumentError("KV block copy: " + std::to_string(hosts.size()) +
                                " host blocks for " + std::to_string(blocks.size()) + " blocks");
  }
  for (BlockId b : blocks) {
    if (b < 0 || b >= num_blocks_) {
      return InternalError("KV block copy: block " + std::to_string(b) + " out of [0, " +
                           std::to_string(num_blocks_) + ")");
    }
  }
  return OkStatus();
}

Status DecoderRunner::CopyKvBlocks(std::span<const BlockId> blocks, std::span<uint8_t* const> hosts,
                                   bool to_host) {
  RETURN_IF_ERROR(CheckKvCopy(blocks, hosts));
  model_->backend()->CopyKvBlocks(kv_, blocks, hosts, to_host);
  return OkStatus();
}

StatusOr<uint64_t> DecoderRunner::StartKvBlockReads(std::span<const BlockId> blocks,
                                                    std::span<uint8_t* const> hosts) {
  RETURN_IF_ERROR(CheckKvCopy(blocks, hosts));
  return model_->backend()->StartKvCopyToHost(kv_, blocks, hosts);
}

void DecoderRunner::WaitKvBlockReads(uint64_t ticket) { model_->backend()->WaitKvCopy(ticket); }

bool DecoderRunner::KvBlockReadsDone(uint64_t ticket) {
  return model_->backend()->KvCopyDone(ticket);
}

bool DecoderRunner::GreedyIds(const StepPlan& plan, std::span<int32_t> ids) {
  return accelerated_ && accelerator_->ArgmaxAndLookahead(plan, ids);
}

}  // namespace loom
