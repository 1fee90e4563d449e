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

enum class KvQuant : uint8_t { kNone, kFp8, kInt8, kInt4 };

// "off", "fp8", "int8", "int4".
std::string_view KvQuantName(KvQuant q);
// Accepts off | fp8 | 8 | int8 | 4 | int4.
StatusOr<KvQuant> ParseKvQuant(std::string_view s);

// The group length along head_dim: 64, 32 or 16 (the largest dividing head_dim), 0 if none does.
int KvQuantGroup(int head_dim);
// Bytes of one quantized row of head_dim elements (head_dim must have a group: CHECKed): its
// codes, then its groups' scales.
size_t KvQuantRowBytes(KvQuant q, int head_dim);
size_t KvQuantCodeBytes(KvQuant q, int head_dim);   // head_dim, or head_dim / 2 for int4
size_t KvQuantScaleBytes(KvQuant q, int head_dim);  // groups x 2 (fp8, int8) or 4 (int4)

// x[0, head_dim) -> one row of `q`: its codes at `codes`, its scales at `scales`.
void QuantizeKvRow(KvQuant q, const float* x, int head_dim, uint8_t* codes, uint8_t* scales);
// One row of `q` -> f32 values: the reference of every kernel's reading.
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
  // alike), else "k:<k>,v:<v>" (e.g. "k:int8,v:int4", "k:int8,v:bf16").
  std::string Name() const;
  // Bytes of one token's row of one kv head: keys + values.
  size_t RowPairBytes(int head_dim) const;
};

}  // namespace loom
