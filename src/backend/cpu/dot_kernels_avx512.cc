// AVX-512VL kernels: the AVX2 kernel templates (dot_kernels_x86.inc) compiled with AVX-512F/VL/BW
// enabled. The vectors stay 8-lane ymm, so the results are bit-identical to the AVX2 set; what
// changes is 32 ymm registers (EVEX ymm16-31), which keep the accumulators of more activation rows
// per call in registers, so each weight vector is decoded once for more rows. The quantized
// kernels also use AVX512-VNNI vpdpbusd (exact, like maddubs + madd here) when the CPU has it, and
// are the AVX2 ones otherwise.
#include <immintrin.h>

#include <optional>

#include "backend/cpu/dot_kernels.h"
#include "tensor/quant.h"

namespace loom::cpu {
namespace avx512 {

#define LOOM_TARGET __attribute__((target("avx2,fma,f16c,avx512f,avx512vl,avx512bw")))
#define LOOM_DOT_VNNI 0
#include "backend/cpu/dot_kernels_x86.inc"
#undef LOOM_TARGET
#undef LOOM_DOT_VNNI

}  // namespace avx512

namespace avx512vnni {

#define LOOM_TARGET __attribute__((target("avx2,fma,f16c,avx512f,avx512vl,avx512bw,avx512vnni")))
#define LOOM_DOT_VNNI 1
#include "backend/cpu/dot_kernels_x86.inc"
#undef LOOM_TARGET
#undef LOOM_DOT_VNNI

}  // namespace avx512vnni

namespace {

DotKernels MakeAvx512(bool vnni) {
  DotKernels k = avx512::X86Kernels("avx512", /*plain_act_rows=*/4, /*quant_act_rows=*/4);
  const DotKernels q =
      vnni ? avx512vnni::X86Kernels("avx512", 0, /*quant_act_rows=*/4) : *Avx2DotKernels();
  k.q8_0 = q.q8_0;
  k.q4_0 = q.q4_0;
  k.q4_K = q.q4_K;
  k.q6_K = q.q6_K;
  k.quantize_act = q.quantize_act;
  k.quant_act_rows = q.quant_act_rows;
  return k;
}

}  // namespace

const DotKernels* Avx512DotKernels() {
  static const std::optional<DotKernels> k =
      Avx2DotKernels() != nullptr && __builtin_cpu_supports("avx512f") &&
              __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512bw")
          ? std::optional<DotKernels>(MakeAvx512(__builtin_cpu_supports("avx512vnni")))
          : std::nullopt;
  return k ? &*k : nullptr;
}

}  // namespace loom::cpu
