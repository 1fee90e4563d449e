// AVX2 + FMA + F16C kernels (runtime-dispatched; the kernel templates are dot_kernels_x86.inc,
// dot_kernels.h has the shared numerics).
#include <immintrin.h>

#include <type_traits>

#include "backend/cpu/dot_kernels.h"
#include "backend/cpu/e4m3_x86.h"
#include "tensor/quant.h"

namespace loom::cpu {
namespace avx2 {

#define LOOM_TARGET __attribute__((target("avx2,fma,f16c")))
#define LOOM_DOT_VNNI 0
#include "backend/cpu/dot_kernels_x86.inc"
#undef LOOM_TARGET
#undef LOOM_DOT_VNNI

}  // namespace avx2

const DotKernels* Avx2DotKernels() {
  static const bool supported = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
                                __builtin_cpu_supports("f16c");
  // 16 ymm registers: 4 weight rows x 3 activation rows are 12 accumulators (measured with
  // cpu_backend_bench --batched; quantized kernels 4).
  static const DotKernels k = [] {
    DotKernels s{};
    s.isa = "avx2";
    s.plain_act_rows = 3;
    s.quant_act_rows = 4;
    avx2::SetPlainKernels(&s);
    avx2::SetQuantKernels(&s);
    return s;
  }();
  return supported ? &k : nullptr;
}

}  // namespace loom::cpu
