// AVX-512 kernel set: the kernels of dot_kernels_x86.inc compiled with AVX-512F/VL/BW + VNNI. The
// vectors stay 8-lane ymm and the int8 block dots go through vpdpbusd, whose int32 lanes equal
// maddubs + madd's here, so the results are bit-identical to the AVX2 set. What AVX-512 buys: one
// vpdpbusd per block pair instead of sign + maddubs + madd, and 32 ymm registers, which a 4 x 4
// tile with its per-row VNNI offsets needs (24 and more live vectors).
//
// The plain-dtype (f32/f16/bf16) kernels are the same templates compiled for AVX-512VL, called
// with 4 activation rows (a batch of 8 as 4 + 4: 16 accumulators, 4 weight vectors, which only
// 32 registers hold; AVX2's 16 allow 3 rows, 3 + 3 + 2). Measured on the dev VM (Zen 4, 134M
// F16, 2 threads, concurrency 8, alternated, after the spread next-tile prefetch): 518-578 vs
// 490-553 tok/s (+4-5%); 8 rows in one call (32 accumulators, spilled) 441-445. An earlier
// measurement, before that prefetch, saw no gain: the step was then waiting on memory.
// One-row calls (concurrency 1) take the AVX2 kernels (DotKernels::one_row): the same templates
// compiled for AVX-512 were 2-7% slower there, for reasons not found, and so were the VNNI
// kernels with one activation row: faster than AVX2's in an isolated GEMV loop (2048 x 768
// Q8_0: 46 vs 63 us), but 134M Q8_0 decode at concurrency 1 was ~5% slower with them (170-177
// vs 178-185 tok/s).
#include <immintrin.h>

#include <optional>
#include <type_traits>

#include "backend/cpu/dot_kernels.h"
#include "backend/cpu/e4m3_x86.h"
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
              avx512vnni::SetPlainKernels(&s);
              avx512vnni::SetQuantKernels(&s);
              s.plain_act_rows = 4;
              s.quant_act_rows = 4;  // measured: 3, 4 and 8 equal within noise at concurrency 8
              s.one_row = Avx2DotKernels();
              s.bf16_bf16act = Bf16ActDotKernel();
              s.bf16_act_rows = 6;  // its largest instance (24 accumulators of 32 registers)
              s.round_bf16 = Bf16RoundRowsKernel();
              return s;
            }())
          : std::nullopt;
  return k ? &*k : nullptr;
}

}  // namespace loom::cpu
