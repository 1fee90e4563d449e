#include "backend/cuda/quant_layout.h"

#include <cstring>
#include <vector>

#include "base/check.h"
#include "tensor/quant.h"

namespace loom::cuda {
namespace {

// The 4-bit code of element i (0..31) of a group's 16 nib bytes, and its setter.
uint8_t GetNib(const uint8_t* nib, int i) {
  return i < 16 ? static_cast<uint8_t>(nib[i] & 0xF) : static_cast<uint8_t>(nib[i - 16] >> 4);
}
void SetNib(uint8_t* nib, int i, int v) {
  if (i < 16) {
    nib[i] = static_cast<uint8_t>((nib[i] & 0xF0) | v);
  } else {
    nib[i - 16] = static_cast<uint8_t>((nib[i - 16] & 0x0F) | (v << 4));
  }
}

// The top two bits of element i's 6-bit code in a group's 8 hi bytes, and its setter.
int HiByte(int i) { return 4 * (i / 16) + i % 4; }  // word h = quad / 4 at byte 4h + b
int HiShift(int i) { return 2 * ((i / 4) % 4); }
int GetHi(const uint8_t* hi, int i) { return (hi[HiByte(i)] >> HiShift(i)) & 3; }
void SetHi(uint8_t* hi, int i, int v) {
  uint8_t& b = hi[HiByte(i)];
  b = static_cast<uint8_t>((b & ~(3 << HiShift(i))) | (v << HiShift(i)));
}

// A q4_K (or q5_K) super-block's 128 qs bytes -> its 8 groups' nib planes (128 bytes): groups 2p
// (low nibbles) and 2p + 1 (high) of qs[32p .. 32p + 32).
void NibblesFromQ4KOrder(const uint8_t* qs, uint8_t* nib) {
  for (int p = 0; p < 4; ++p) {
    const uint8_t* q = qs + 32 * p;
    for (int i = 0; i < 16; ++i) {
      nib[32 * p + i] = static_cast<uint8_t>((q[i] & 0xF) | (q[16 + i] << 4));
      nib[32 * p + 16 + i] = static_cast<uint8_t>((q[i] >> 4) | (q[16 + i] & 0xF0));
    }
  }
}

// Element e (0..255) of a q4_K block: pairs of sub-blocks share qs[32j .. 32j + 32).
uint8_t& Q4KByte(BlockQ4_K& b, int e) { return b.qs[32 * (e / 64) + e % 32]; }
void SetQ4KCode(BlockQ4_K& b, int e, int v) {
  uint8_t& q = Q4KByte(b, e);
  q = (e % 64) < 32 ? static_cast<uint8_t>((q & 0xF0) | v)
                    : static_cast<uint8_t>((q & 0x0F) | (v << 4));
}

// The 5th bit of element i (0..31) in a group's hb word (byte i % 4, bit i / 4), and of element
// e (0..255) of a q5_K block (bit e / 32 of qh[e % 32]).
int HbBit(int i) { return 8 * (i % 4) + i / 4; }
// Sets element e of a q5_K block: q4_K's nibble (sub-blocks 2p, 2p + 1 share qs[32p .. 32p + 32)),
// the 5th bit in bit e / 32 of qh[e % 32].
void SetQ5KCode(BlockQ5_K& b, int e, int v) {
  const int j = e / 32, l = e % 32;
  uint8_t& q = b.qs[32 * (j / 2) + l];
  q = static_cast<uint8_t>((q & ~(0xF << (4 * (j % 2)))) | ((v & 0xF) << (4 * (j % 2))));
  b.qh[l] = static_cast<uint8_t>((b.qh[l] & ~(1 << j)) | ((v >> 4) << j));
}

// Element e (0..255) of a q6_K block (tensor/quant.cc's DequantizeQ6_K order).
struct Q6KPos {
  int ql, ql_shift, qh, qh_shift;
};
Q6KPos Q6KAt(int e) {
  const int n = e / 128, t = (e % 128) / 32, l = e % 32;
  return {64 * n + l + (t & 1) * 32, t < 2 ? 0 : 4, 32 * n + l, 2 * t};
}
int Q6KCode(const BlockQ6_K& b, int e) {
  const Q6KPos p = Q6KAt(e);
  return ((b.ql[p.ql] >> p.ql_shift) & 0xF) | (((b.qh[p.qh] >> p.qh_shift) & 3) << 4);
}
void SetQ6KCode(BlockQ6_K& b, int e, int v) {
  const Q6KPos p = Q6KAt(e);
  b.ql[p.ql] =
      static_cast<uint8_t>((b.ql[p.ql] & ~(0xF << p.ql_shift)) | ((v & 0xF) << p.ql_shift));
  b.qh[p.qh] = static_cast<uint8_t>((b.qh[p.qh] & ~(3 << p.qh_shift)) | ((v >> 4) << p.qh_shift));
}

// One row, either way: blocks (GGUF order) <-> planes (device order).
void ConvertRow(DType dtype, uint8_t* blocks, uint8_t* planes, int64_t k, bool to_planes) {
  const int64_t g = k / 32, s = k / 256;
  auto copy = [to_planes](void* block_field, void* plane_field, size_t n) {
    if (to_planes) {
      std::memcpy(plane_field, block_field, n);
    } else {
      std::memcpy(block_field, plane_field, n);
    }
  };
  switch (dtype) {
    case DType::kQ8_0: {
      auto* b = reinterpret_cast<BlockQ8_0*>(blocks);
      uint8_t* d = planes + k;
      for (int64_t j = 0; j < g; ++j) {
        copy(b[j].qs, planes + 32 * j, 32);
        copy(&b[j].d, d + 2 * j, 2);
      }
      return;
    }
    case DType::kQ4_0: {
      auto* b = reinterpret_cast<BlockQ4_0*>(blocks);
      uint8_t* d = planes + k / 2;
      for (int64_t j = 0; j < g; ++j) {
        copy(b[j].qs, planes + 16 * j, 16);
        copy(&b[j].d, d + 2 * j, 2);
      }
      return;
    }
    case DType::kQ4_K: {
      auto* b = reinterpret_cast<BlockQ4_K*>(blocks);
      uint8_t* meta = planes + k / 2;
      for (int64_t j = 0; j < s; ++j) {
        uint8_t* nib = planes + 128 * j;
        if (to_planes) {  // byte-wise (a model's load goes through here)
          NibblesFromQ4KOrder(b[j].qs, nib);
        } else {
          for (int e = 0; e < 256; ++e) SetQ4KCode(b[j], e, GetNib(nib + 16 * (e / 32), e % 32));
        }
        copy(&b[j].d, meta + 16 * j, 2);
        copy(&b[j].dmin, meta + 16 * j + 2, 2);
        copy(b[j].scales, meta + 16 * j + 4, 12);
      }
      return;
    }
    case DType::kQ5_K: {
      auto* b = reinterpret_cast<BlockQ5_K*>(blocks);
      auto* hb = reinterpret_cast<uint32_t*>(planes + k / 2);
      uint8_t* meta = planes + k / 2 + k / 8;
      for (int64_t j = 0; j < s; ++j) {
        if (to_planes) {  // q4_K's nibbles byte-wise, then each group's 5th bits
          NibblesFromQ4KOrder(b[j].qs, planes + 128 * j);
          for (int sb = 0; sb < 8; ++sb) {
            uint32_t w = 0;
            for (int i = 0; i < 32; ++i)
              w |= static_cast<uint32_t>((b[j].qh[i] >> sb) & 1) << HbBit(i);
            hb[8 * j + sb] = w;
          }
        } else {
          for (int e = 0; e < 256; ++e) {
            const uint8_t* nib_g = planes + 128 * j + 16 * (e / 32);
            const uint32_t w = hb[8 * j + e / 32];
            SetQ5KCode(b[j], e, GetNib(nib_g, e % 32) | (((w >> HbBit(e % 32)) & 1) << 4));
          }
        }
        copy(&b[j].d, meta + 16 * j, 2);
        copy(&b[j].dmin, meta + 16 * j + 2, 2);
        copy(b[j].scales, meta + 16 * j + 4, 12);
      }
      return;
    }
    case DType::kQ6_K: {
      auto* b = reinterpret_cast<BlockQ6_K*>(blocks);
      uint8_t* hi = planes + k / 2;
      uint8_t* scales = hi + k / 4;
      uint8_t* d = scales + k / 16;
      for (int64_t j = 0; j < s; ++j) {
        for (int e = 0; e < 256; ++e) {
          uint8_t* nib_g = planes + 128 * j + 16 * (e / 32);
          uint8_t* hi_g = hi + 64 * j + 8 * (e / 32);
          if (to_planes) {
            const int v = Q6KCode(b[j], e);
            SetNib(nib_g, e % 32, v & 0xF);
            SetHi(hi_g, e % 32, v >> 4);
          } else {
            SetQ6KCode(b[j], e, GetNib(nib_g, e % 32) | (GetHi(hi_g, e % 32) << 4));
          }
        }
        copy(b[j].scales, scales + 16 * j, 16);
        copy(&b[j].d, d + 2 * j, 2);
      }
      return;
    }
    case DType::kFP8: {
      auto* b = reinterpret_cast<BlockFP8*>(blocks);
      uint8_t* d = planes + k;
      for (int64_t j = 0; j < k / kQKFP8; ++j) {
        copy(b[j].qs, planes + kQKFP8 * j, kQKFP8);
        copy(&b[j].d, d + 4 * j, 4);
      }
      return;
    }
    default:
      CHECK(false) << "quant_layout: " << DTypeName(dtype) << " is not kept quantized on CUDA";
  }
}

void ConvertRows(DType dtype, const void* src, void* dst, int64_t rows, int64_t k, bool to_planes) {
  CHECK(KeepsQuantized(dtype) && k % QuantRowMultiple(dtype) == 0)
      << "quant_layout: " << DTypeName(dtype) << " rows of " << k;
  const size_t rb = RowBytes(dtype, k);
  std::memset(dst, 0, rb * static_cast<size_t>(rows));
  // The block side is written in place when unpacking: work on a copy of each source row.
  std::vector<uint8_t> row(rb);
  for (int64_t r = 0; r < rows; ++r) {
    std::memcpy(row.data(), static_cast<const uint8_t*>(src) + r * rb, rb);
    uint8_t* out = static_cast<uint8_t*>(dst) + r * rb;
    if (to_planes) {
      ConvertRow(dtype, row.data(), out, k, true);
    } else {
      ConvertRow(dtype, out, row.data(), k, false);
    }
  }
}

}  // namespace

bool KeepsQuantized(DType dtype) {
  return dtype == DType::kQ8_0 || dtype == DType::kQ4_0 || dtype == DType::kQ4_K ||
         dtype == DType::kQ5_K || dtype == DType::kQ6_K || dtype == DType::kFP8;
}

int QuantRowMultiple(DType dtype) { return GetDTypeInfo(dtype).block_elems; }

void RepackRows(DType dtype, const void* src, void* dst, int64_t rows, int64_t k) {
  ConvertRows(dtype, src, dst, rows, k, true);
}

void UnpackRows(DType dtype, const void* src, void* dst, int64_t rows, int64_t k) {
  ConvertRows(dtype, src, dst, rows, k, false);
}

}  // namespace loom::cuda
