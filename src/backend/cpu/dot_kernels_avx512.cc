// AVX-512 kernel set: the quantized-weight kernels of dot_kernels_x86.inc compiled with
// AVX-512F/VL/BW + VNNI. The vectors stay 8-lane ymm and the int8 block dots go through vpdpbusd,
// whose int32 lanes equal maddubs + madd's here, so the results are bit-identical to the AVX2 set.
// What AVX-512 buys: one vpdpbusd per block pair instead of sign + maddubs + madd, and 32 ymm
// registers, which a 4 x 4 tile with its per-row VNNI offsets needs (24 and more live vectors).
//
// The plain-dtype (f32/f16/bf16) kernels of this set are the AVX2 ones. The same templates
// compiled for AVX-512VL (32 registers, 4-8 activation rows per call) were measured and dropped
// (dev VM, Zen 4, 134M F16, 1 thread, 4 alternations): at concurrency 8 the step is bound by the
// FMAs themselves (one ymm FMA per 8 weights per row, fixed by the numerics), 252-270 vs 256 tok/s;
// at concurrency 1 they were 2-7% slower (75-81 vs 82-86), for reasons not found. The same
// holds for the VNNI kernels with one activation row: faster than AVX2's in an isolated GEMV
// loop (2048 x 768 Q8_0: 46 vs 63 us), but 134M Q8_0 decode at concurrency 1 was ~5% slower
// with them (170-177 vs 178-185 tok/s), so MatMul's one-row calls take the AVX2 kernels
// (DotKernels::one_row).
#include <immintrin.h>

#include <optional>

#include "backend/cpu/dot_kernels.h"
#include "tensor/quant.h"

namespace loom::cpu {
namespace avx512vnni {

#define LOOM_TARGET __attribute__((target("avx2,fma,f16c,avx512f,avx512vl,avx512bw,avx512vnni")))
#define LOOM_DOT_VNNI 1
#include "backend/cpu/dot_kernels_x86.inc"
#undef LOOM_TARGET
#undef LOOM_DOT_VNNI

}  // namespace avx512vnni

const DotKernels* Avx512DotKernels() {
  static const std::optional<DotKernels> k =
      Avx2DotKernels() != nullptr && __builtin_cpu_supports("avx512f") &&
              __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512bw") &&
              __builtin_cpu_supports("avx512vnni")
          ? std::optional<DotKernels>([] {
              DotKernels s = *Avx2DotKernels();
              s.isa = "avx512";
              avx512vnni::SetQuantKernels(&s);
              s.quant_act_rows = 4;  // measured: 3, 4 and 8 equal within noise at concurrency 8
              s.one_row = Avx2DotKernels();
              return s;
            }())
          : std::nullopt;
  return k ? &*k : nullptr;
}

}  // namespace loom::cpu
