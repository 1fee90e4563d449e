// A kernel timeline without nsys (the GPU machine has none, and ncu serializes kernels): with
// -DLOOM_KTRACE (CMake option LOOM_CUDA_KTRACE, off by default) the instrumented kernels record,
// for each block, the global timer at its start, after its PdlWait and at its end, into a
// device ring that KTraceDump writes to the CLI's --ktrace-file (CudaBackendOptions::ktrace_file)
// when the backend is destroyed; tools/cuda/ktrace.py turns
// it into a per-kernel critical path. Without the option every macro compiles to nothing.
//
// Use in a kernel (thread 0 records; its end is the block's end for kernels whose thread 0
// finishes last or close to it):
//   KTRACE_BEGIN();  ...  PdlWait(); KTRACE_WAITED();  ...  KTRACE_MARK(0..3);  ...
//   KTRACE_END(tag, m, k);
// Phases of a loop, in SM clock cycles: KTRACE_LAP_START() once, then KTRACE_LAP(i) (i < 3) adds
// the cycles since the previous lap point to phase i.
// and once per .cu file, LOOM_KTRACE_TU(file) (KTraceInit binds every file's ring pointer).
#pragma once

#include <cstdint>

namespace loom::cuda {

constexpr int kKTraceMarks = 4;  // intermediate points a kernel may record

struct KTraceRecord {
  uint64_t t0;      // global timer (ns) at the block's start
  uint32_t waited;  // ns from t0 to after PdlWait (0: not recorded)
  uint32_t end;     // ns from t0 to the end
  uint16_t tag, smid;
  uint32_t block, grid;
  uint32_t m, k;                 // the launch's shape, as the kernel reports it
  uint32_t marks[kKTraceMarks];  // ns from t0 to KTRACE_MARK(i) (0: not reached)
  uint32_t cycles[3];            // thread 0's clock cycles in KTRACE_LAP phase i
};
static_assert(sizeof(KTraceRecord) == 64);

constexpr uint32_t kKTraceCapacity = 1u << 20;  // records (a power of two; the ring keeps the last)

// The ring: a 64-bit counter, then kKTraceCapacity records (allocated on first use).
void* KTraceDeviceRing();
// Binds every instrumented file's ring pointer (call once, outside stream capture).
void KTraceInit();
// Writes the counter and the ring to the file `path` (synchronizes the device first); no-op when
// the ring was never allocated (a build without LOOM_KTRACE, or no instrumented launch).
void KTraceDump(const char* path);
// Whether this build records the timeline (-DLOOM_CUDA_KTRACE=ON).
bool KTraceBuilt();

#if defined(LOOM_KTRACE) && defined(__CUDACC__)

namespace ktrace_detail {
__device__ __forceinline__ uint64_t GlobalTimer() {
  uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}
__device__ __forceinline__ uint32_t SmId() {
  uint32_t s;
  asm volatile("mov.u32 %0, %%smid;" : "=r"(s));
  return s;
}

#define LOOM_KTRACE_TU(name)                                    \
  namespace {                                                   \
  __device__ void* ktrace_ring_ = nullptr;                      \
  }                                                             \
  void KTraceBind_##name() {                                    \
    void* p = KTraceDeviceRing();                               \
    CUDA_CHECK(cudaMemcpyToSymbol(ktrace_ring_, &p, sizeof p)); \
  }

// The marks live in shared memory (thread 0 alone touches them), so device functions called by
// the kernel can record them too.
__device__ __forceinline__ uint64_t* KTraceMarkSlots() {
  __shared__ uint64_t marks[kKTraceMarks];
  return marks;
}
}  // namespace ktrace_detail

#define KTRACE_BEGIN()                                                                           \
  const uint64_t ktrace_t0_ = threadIdx.x == 0 ? ::loom::cuda::ktrace_detail::GlobalTimer() : 0; \
  if (threadIdx.x == 0) {                                                                        \
    for (int j_ = 0; j_ < ::loom::cuda::kKTraceMarks; ++j_)                                      \
      ::loom::cuda::ktrace_detail::KTraceMarkSlots()[j_] = 0;                                    \
  }                                                                                              \
  [[maybe_unused]] uint32_t ktrace_waited_ = 0;                                                  \
  [[maybe_unused]] uint32_t ktrace_cycles_[3] = {0, 0, 0};                                       \
  [[maybe_unused]] long long ktrace_lap_ = 0

#define KTRACE_LAP_START()                         \
  do {                                             \
    if (threadIdx.x == 0) ktrace_lap_ = clock64(); \
  } while (0)

#define KTRACE_LAP(i_)                                                 \
  do {                                                                 \
    if (threadIdx.x == 0) {                                            \
      const long long now_ = clock64();                                \
      ktrace_cycles_[i_] += static_cast<uint32_t>(now_ - ktrace_lap_); \
      ktrace_lap_ = now_;                                              \
    }                                                                  \
  } while (0)

#define KTRACE_WAITED()                                                                   \
  do {                                                                                    \
    if (threadIdx.x == 0)                                                                 \
      ktrace_waited_ =                                                                    \
          static_cast<uint32_t>(::loom::cuda::ktrace_detail::GlobalTimer() - ktrace_t0_); \
  } while (0)

#define KTRACE_MARK(i_)                                    \
  do {                                                     \
    if (threadIdx.x == 0)                                  \
      ::loom::cuda::ktrace_detail::KTraceMarkSlots()[i_] = \
          ::loom::cuda::ktrace_detail::GlobalTimer();      \
  } while (0)

#define KTRACE_END(tag_, m_, k_)                                                                   \
  do {                                                                                             \
    if (threadIdx.x == 0 && ktrace_ring_ != nullptr) {                                             \
      auto* count_ = static_cast<unsigned long long*>(ktrace_ring_);                               \
      auto* rec_ = reinterpret_cast<::loom::cuda::KTraceRecord*>(count_ + 1);                      \
      /* The slot's atomic round trip (~0.5 us) before the end time: it then counts in the         \
         block's run, not in the handoff to the next launch. */                                    \
      const unsigned long long i_ = atomicAdd(count_, 1ull) & (::loom::cuda::kKTraceCapacity - 1); \
      const uint64_t t_ = ::loom::cuda::ktrace_detail::GlobalTimer();                              \
      ::loom::cuda::KTraceRecord r_;                                                               \
      r_.t0 = ktrace_t0_;                                                                          \
      r_.waited = ktrace_waited_;                                                                  \
      r_.end = static_cast<uint32_t>(t_ - ktrace_t0_);                                             \
      r_.tag = static_cast<uint16_t>(tag_);                                                        \
      r_.smid = static_cast<uint16_t>(::loom::cuda::ktrace_detail::SmId());                        \
      r_.block = blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z);                   \
      r_.grid = gridDim.x * gridDim.y * gridDim.z;                                                 \
      r_.m = static_cast<uint32_t>(m_);                                                            \
      r_.k = static_cast<uint32_t>(k_);                                                            \
      for (int j_ = 0; j_ < ::loom::cuda::kKTraceMarks; ++j_) {                                    \
        const uint64_t m_at_ = ::loom::cuda::ktrace_detail::KTraceMarkSlots()[j_];                 \
        r_.marks[j_] = m_at_ == 0 ? 0u : static_cast<uint32_t>(m_at_ - ktrace_t0_);                \
      }                                                                                            \
      for (int j_ = 0; j_ < 3; ++j_) r_.cycles[j_] = ktrace_cycles_[j_];                           \
      rec_[i_] = r_;                                                                               \
    }                                                                                              \
  } while (0)

#else
#define LOOM_KTRACE_TU(name)
#define KTRACE_BEGIN() static_cast<void>(0)
#define KTRACE_WAITED() static_cast<void>(0)
#define KTRACE_MARK(i_) static_cast<void>(0)
#define KTRACE_LAP_START() static_cast<void>(0)
#define KTRACE_LAP(i_) static_cast<void>(0)
#define KTRACE_END(tag_, m_, k_) static_cast<void>(0)
#endif

// Tags (tools/cuda/ktrace.py names them).
enum KTraceTag : uint16_t {
  kKTraceStreamGemv = 1,
  kKTraceDecodeAttention = 2,
  kKTraceArgmaxChunk = 3,
  kKTraceArgmaxCombine = 4,
  kKTraceAdvanceInputs = 5,
  kKTraceEmbed = 6,
};

}  // namespace loom::cuda
