// Quantized KV-cache rows (`--kv-quant`): one row is one token's keys (or values) of one kv head,
// head_dim elements, cut into groups of g along head_dim (g = 64, 32 or 16: the largest dividing
// head_dim), each group with its own scale, so a row is quantized on its own when its token is
// stored and never requantized.
//
//   fp8   [codes e4m3fn x head_dim][d bf16 x groups]              x = e4m3(c) * d, d = amax / 448
//   int8  [codes int8 x head_dim][d bf16 x groups]                x = q * d,  q in [-127, 127],
//                                                                 d = amax / 127 (symmetric)
//   int4  [codes u4 x head_dim][(d bf16, m bf16) x groups]        x = fma(q, d, m), q in [0, 15],
//                                                                 d = (max - min) / 15, m = min
//         In a group of g, byte j < g / 2 holds element j (low nibble) and j + g / 2 (high).
//
// The rotated ("turbo") schemes first turn the row by a fixed orthogonal matrix R = H S / sqrt(n)
// (S: fixed random signs, H: the Walsh-Hadamard transform; head_dim a power of two), which
// spreads an outlier over every dimension, so each rotated value is close to Gaussian with the
// row's RMS, then quantize the rotated values:
//
//   turbo8  [codes int8 x head_dim][d bf16 x groups]              as int8, of R x
//   turbo4  [codes u4 x head_dim][s bf16 x groups]                x' = L16[q] * s, s = group RMS
//   turbo3  [codes 3-bit x head_dim][s bf16 x groups]             x' = L8[q] * s
//         L16 / L8: the Lloyd-Max levels of a unit Gaussian (the MSE-optimal 16 / 8-level
//         quantizer). Codes pack in order: 8 elements in 4 bytes (turbo4) or 3 bytes (turbo3),
//         element i of the 8 at bits 4i / 3i of their little-endian word.
// A rotated row is read back in the rotated domain: attention turns q by R (q.k = Rq . Rk) when
// the keys are rotated, and its output by R^T when the values are (sum p R v = R sum p v).
//
// At head_dim 128 a row is 132 / 132 / 72 bytes against bf16's 256: 1.94x / 1.94x / 3.56x the
// tokens per byte. The scales are bf16 (f32's range: a group of tiny values keeps its precision).
// DequantizeKvRow is the reference every attention kernel's reading of a row must equal bit for
// bit.
//
// In a pool, a row's codes and scales are apart (KvQuantBlock): a block holds its rows' codes
// first, token-major like a plain pool's rows, then their scales, head-major:
//
//   block b: [tok 0: h0 codes | h1 codes ...] ... [tok bs-1: ...]
//            [h0: tok 0 scales | tok 1 scales ... tok bs-1] [h1: ...] ...
//
// so every row's codes start 16-byte aligned (a GPU's vector loads) and one head's scales of
// consecutive tokens are adjacent (one sector for a tile of keys).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "base/status.h"
#include "tensor/dtype.h"

namespace loom {

enum class KvQuant : uint8_t { kNone, kFp8, kInt8, kInt4, kRot8, kRot4, kRot3 };

// "off", "fp8", "int8", "int4", "turbo8", "turbo4", "turbo3".
std::string_view KvQuantName(KvQuant q);
// One scheme: off | fp8 | 8 | int8 | 4 | int4 | turbo8 | turbo4 | turbo3.
StatusOr<KvQuant> ParseKvQuant(std::string_view s);
// The keys' and values' schemes of one `--kv-quant` value: a scheme for both, or
// turbo[:k<8|4>v<8|4|3>] (plain `turbo`: k8v3, rotated int8 keys and 3-bit values).
struct KvQuantPair {
  KvQuant k = KvQuant::kNone, v = KvQuant::kNone;
};
StatusOr<KvQuantPair> ParseKvQuantPair(std::string_view s);
// Whether q rotates its rows (the turbo schemes).
inline bool KvQuantRotated(KvQuant q) {
  return q == KvQuant::kRot8 || q == KvQuant::kRot4 || q == KvQuant::kRot3;
}
// Whether head_dim suits q (a quantization group; a power of two for the rotated schemes).
bool KvQuantFits(KvQuant q, int head_dim);

// In place: x = R x (RotateKvRow) and x = R^T x (UnrotateKvRow), R the turbo schemes' rotation
// of head_dim (a power of two) values.
void RotateKvRow(float* x, int head_dim);
void UnrotateKvRow(float* x, int head_dim);
// The Lloyd-Max levels of turbo4 (16) and turbo3 (8), ascending.
const float* KvQuantLevels(KvQuant q);

// The group length along head_dim: 64, 32 or 16 (the largest dividing head_dim), 0 if none does.
int KvQuantGroup(int head_dim);
// Bytes of one quantized row of head_dim elements (head_dim must have a group: CHECKed): its
// codes, then its groups' scales.
size_t KvQuantRowBytes(KvQuant q, int head_dim);
size_t KvQuantCodeBytes(KvQuant q, int head_dim);   // head_dim x bits / 8
size_t KvQuantScaleBytes(KvQuant q, int head_dim);  // groups x 2 (4 for int4's d and m)

// x[0, head_dim) -> one row of `q`: its codes at `codes`, its scales at `scales`.
void QuantizeKvRow(KvQuant q, const float* x, int head_dim, uint8_t* codes, uint8_t* scales);
// One row of `q` -> f32 values: the reference of every kernel's reading (a rotated scheme's
// values stay rotated).
void DequantizeKvRow(KvQuant q, const uint8_t* codes, const uint8_t* scales, int head_dim,
                     float* out);
// The same on one contiguous row [codes][scales] (KvQuantRowBytes bytes).
void QuantizeKvRow(KvQuant q, const float* x, int head_dim, uint8_t* row);
void DequantizeKvRow(KvQuant q, const uint8_t* row, int head_dim, float* out);

// Where the rows of one block of a quantized pool are (byte offsets from the block's start; see
// the layout above). A pool is [num_blocks, block_size, num_kv_heads, KvQuantRowBytes] u8, so a
// block's bytes are the same count as block_size x num_kv_heads contiguous rows.
struct KvQuantBlock {
  size_t code_bytes = 0, scale_bytes = 0;
  int block_size = 0, num_kv_heads = 0;

  KvQuantBlock() = default;
  KvQuantBlock(KvQuant q, int head_dim, int block_size, int num_kv_heads)
      : code_bytes(KvQuantCodeBytes(q, head_dim)),
        scale_bytes(KvQuantScaleBytes(q, head_dim)),
        block_size(block_size),
        num_kv_heads(num_kv_heads) {}

  size_t BlockBytes() const {
    return static_cast<size_t>(block_size) * num_kv_heads * (code_bytes + scale_bytes);
  }
  // Row (token t of the block, kv head h).
  size_t Codes(int t, int h) const {
    return (static_cast<size_t>(t) * num_kv_heads + h) * code_bytes;
  }
  size_t Scales(int t, int h) const {
    return static_cast<size_t>(block_size) * num_kv_heads * code_bytes +
           (static_cast<size_t>(h) * block_size + t) * scale_bytes;
  }
};

// How the KV cache stores its rows: keys and values each either unquantized in `dtype` (f32, f16
// or bf16) or quantized rows of their KvQuant.
struct KvFormat {
  DType dtype = DType::kF32;
  KvQuant k = KvQuant::kNone;
  KvQuant v = KvQuant::kNone;

  KvFormat() = default;
  // A plain cache of `dtype` rows (implicit: every DType argument of the KV API reads as one).
  KvFormat(DType dtype, KvQuant k = KvQuant::kNone, KvQuant v = KvQuant::kNone)  // NOLINT
      : dtype(dtype), k(k), v(v) {}

  bool quantized() const { return k != KvQuant::kNone || v != KvQuant::kNone; }
  // The cache's name where it identifies the stored bytes (block hashes' root, the SSD tier's
  // header, the ready card, /stats): "f32", "bf16", "fp8", "int8", "int4" (keys and values
  // alike), "turbo:k<b>v<b>" (both rotated), else "k:<k>,v:<v>" (e.g. "k:int8,v:int4",
  // "k:int8,v:bf16").
  std::string Name() const;
  // Bytes of one token's row of one kv head: keys + values.
  size_t RowPairBytes(int head_dim) const;
};

}  // namespace loom
