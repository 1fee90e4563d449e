#include "backend/cuda/op_profiler.h"

#include <algorithm>
#include <cstdio>
#include <utility>

#include "backend/cuda/cuda_check.h"

namespace loom::cuda {

OpProfiler::OpProfiler(cudaStream_t stream, bool enabled) : stream_(stream), enabled_(enabled) {}

OpProfiler::~OpProfiler() {
  if (!enabled_) return;
  (void)cudaStreamSynchronize(stream_);
  Flush();
  Print();
  for (cudaEvent_t e : free_) (void)cudaEventDestroy(e);
}

cudaEvent_t OpProfiler::Get() {
  if (!free_.empty()) {
    cudaEvent_t e = free_.back();
    free_.pop_back();
    return e;
  }
  cudaEvent_t e = nullptr;
  CUDA_CHECK(cudaEventCreate(&e));
  return e;
}

bool OpProfiler::Recording() const {
  if (!enabled_) return false;
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  CUDA_CHECK(cudaStreamIsCapturing(stream_, &status));
  return status == cudaStreamCaptureStatusNone;
}

OpProfiler::Scope::Scope(OpProfiler* p, std::string label, double bytes) {
  if (p == nullptr || !p->Recording()) return;
  p_ = p;
  label_ = std::move(label);
  bytes_ = bytes;
  start_ = p->Get();
  CUDA_CHECK(cudaEventRecord(start_, p->stream_));
}

OpProfiler::Scope::~Scope() {
  if (p_ == nullptr) return;
  cudaEvent_t end = p_->Get();
  CUDA_CHECK(cudaEventRecord(end, p_->stream_));
  p_->pending_.push_back(Pending{std::move(label_), bytes_, start_, end});
  if (p_->pending_.size() >= 8192) p_->Flush();
}

void OpProfiler::Flush() {
  for (Pending& q : pending_) {
    CUDA_CHECK(cudaEventSynchronize(q.end));
    float ms = 0.f;
    CUDA_CHECK(cudaEventElapsedTime(&ms, q.start, q.end));
    Stat& s = stats_[q.label];
    ++s.calls;
    s.ms += ms;
    s.bytes += q.bytes;
    free_.push_back(q.start);
    free_.push_back(q.end);
  }
  pending_.clear();
}

void OpProfiler::Print() const {
  std::vector<std::pair<std::string, Stat>> rows(stats_.begin(), stats_.end());
  std::sort(rows.begin(), rows.end(),
            [](const auto& a, const auto& b) { return a.second.ms > b.second.ms; });
  double total = 0;
  for (const auto& r : rows) total += r.second.ms;
  std::fprintf(stderr, "\n== LOOM_CUDA_PROFILE: GPU time per op (events around each op, eager)\n");
  std::fprintf(stderr, "%-60s %10s %8s %10s %9s %6s\n", "op", "total ms", "calls", "us/call",
               "GB/s", "%");
  for (const auto& [label, s] : rows) {
    const double gbs = s.bytes > 0 && s.ms > 0 ? s.bytes / (s.ms * 1e-3) / 1e9 : 0.0;
    std::fprintf(stderr, "%-60s %10.3f %8lld %10.2f %9.0f %6.2f\n", label.c_str(), s.ms,
                 static_cast<long long>(s.calls), 1e3 * s.ms / static_cast<double>(s.calls), gbs,
                 total > 0 ? 100.0 * s.ms / total : 0.0);
  }
  std::fprintf(stderr, "%-60s %10.3f\n", "sum", total);
}

}  // namespace loom::cuda
