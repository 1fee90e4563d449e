// OpProfiler: opt-in per-op GPU timing of the CUDA backend (CudaBackendOptions::profile, the
// CLI's --cuda-profile).
//
// Each backend op records a cudaEvent pair around its launches (only while the stream is not
// capturing a graph: run eager, e.g. `--no-cuda-graphs`, or the timings cover only the graph
// runner's warm-up steps). Events are resolved at the next Synchronize (or after 8192 pending
// pairs) and summed per label; labels name the op and its shape ("matmul n=64 m=4096 k=4096"),
// so prefill and decode steps land in different rows. The table (total ms, calls, us per call,
// GB/s over the bytes the caller declares) goes to stderr when the backend is destroyed.
// Off: one branch per op.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace loom::cuda {

class OpProfiler {
 public:
  // enabled = false: every Scope is a no-op and nothing is printed.
  OpProfiler(cudaStream_t stream, bool enabled);
  ~OpProfiler();  // prints the table when enabled
  OpProfiler(const OpProfiler&) = delete;
  OpProfiler& operator=(const OpProfiler&) = delete;

  bool enabled() const { return enabled_; }

  class Scope {
   public:
    Scope(OpProfiler* p, std::string label, double bytes);
    ~Scope();
    Scope(const Scope&) = delete;
    Scope& operator=(const Scope&) = delete;

   private:
    OpProfiler* p_ = nullptr;  // null: not recording
    std::string label_;
    double bytes_ = 0;
    cudaEvent_t start_ = nullptr;
  };

  // Resolves every pending pair (blocks until they completed).
  void Flush();
  void Print() const;

 private:
  struct Pending {
    std::string label;
    double bytes;
    cudaEvent_t start, end;
  };
  struct Stat {
    int64_t calls = 0;
    double ms = 0, bytes = 0;
  };
  cudaEvent_t Get();
  bool Recording() const;

  cudaStream_t stream_;
  bool enabled_ = false;
  std::vector<cudaEvent_t> free_;
  std::vector<Pending> pending_;
  std::map<std::string, Stat> stats_;
};

}  // namespace loom::cuda
