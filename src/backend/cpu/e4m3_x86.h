// fp8 e4m3 codes in x86 registers, shared by the fp8 weight kernels (dot_kernels_x86.inc) and
// the fp8 KV rows of the paged attention (attention.cc).
#pragma once

#include <immintrin.h>

#include <cstdint>

namespace loom::cpu {

// Codes p[0, 8) as f32 values / 256, exactly: code c becomes the f16 with bits
// (c & 0x80) << 8 | (c & 0x7f) << 7, which is e4m3(c) / 256 (subnormals included: F16C converts
// them without microcode assists). Times d * 256 (exact), a value is e4m3(c) * d rounded once.
// Callable from any target that includes AVX2 and F16C.
__attribute__((target("avx2,fma,f16c"))) inline __m256 E4m3x8Over256(const uint8_t* p) {
  const __m128i c = _mm_cvtepu8_epi16(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p)));
  const __m128i h = _mm_or_si128(_mm_slli_epi16(_mm_and_si128(c, _mm_set1_epi16(0x80)), 8),
                                 _mm_slli_epi16(_mm_and_si128(c, _mm_set1_epi16(0x7f)), 7));
  return _mm256_cvtph_ps(h);
}

}  // namespace loom::cpu
