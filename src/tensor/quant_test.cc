#include "tensor/quant.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>
#include <string>
#include <vector>

namespace loom {
namespace {

std::vector<uint8_t> FromHex(const std::string& hex) {
  std::vector<uint8_t> out(hex.size() / 2);
  for (size_t i = 0; i < out.size(); ++i) {
    out[i] = static_cast<uint8_t>(std::stoi(hex.substr(2 * i, 2), nullptr, 16));
  }
  return out;
}

std::vector<float> FloatsFromHex(const std::string& hex) {
  std::vector<uint8_t> bytes = FromHex(hex);
  std::vector<float> out(bytes.size() / 4);
  std::memcpy(out.data(), bytes.data(), bytes.size());
  return out;
}

DType ParseDType(const std::string& s) {
  for (DType t : {DType::kF32, DType::kF16, DType::kBF16, DType::kQ8_0, DType::kQ4_0, DType::kQ4_K,
                  DType::kQ6_K, DType::kQ5_K}) {
    if (DTypeName(t) == s) return t;
  }
  ADD_FAILURE() << "unknown dtype " << s;
  return DType::kF32;
}

nlohmann::json LoadGolden() {
  std::ifstream in(std::string(LOOM_SOURCE_DIR) + "/src/tensor/testdata/quant_golden.json");
  EXPECT_TRUE(in.good());
  std::stringstream ss;
  ss << in.rdbuf();
  return nlohmann::json::parse(ss.str());
}

uint32_t Bits(float f) {
  uint32_t b;
  std::memcpy(&b, &f, 4);
  return b;
}

// gguf-py computes every dequantized value with the same f32 operations in the same order as
// llama.cpp's C reference (and ours), so the comparison is bit-exact.
TEST(QuantTest, DequantizeMatchesGgufPyBitExactly) {
  nlohmann::json golden = LoadGolden();
  std::map<std::string, int> num_cases;
  for (const auto& c : golden["cases"]) {
    if (c["op"] != "dequantize") continue;
    ++num_cases[c["dtype"]];
    const DType dtype = ParseDType(c["dtype"]);
    const int64_t n = c["n"];
    std::vector<uint8_t> input = FromHex(c["input"]);
    std::vector<float> expected = FloatsFromHex(c["output_f32"]);
    ASSERT_EQ(input.size(), RowBytes(dtype, n)) << c["dtype"];
    ASSERT_EQ(expected.size(), static_cast<size_t>(n));
    std::vector<float> got(static_cast<size_t>(n), -1.0f);
    DequantizeRow(dtype, input.data(), got.data(), n);
    int mismatches = 0;
    for (int64_t i = 0; i < n; ++i) {
      if (Bits(got[i]) != Bits(expected[i]) && ++mismatches < 5) {
        ADD_FAILURE() << c["dtype"] << " element " << i << ": got " << got[i] << " want "
                      << expected[i];
      }
    }
    EXPECT_EQ(mismatches, 0) << c["dtype"];
  }
  const std::map<std::string, int> want = {{"q8_0", 1}, {"q4_0", 1}, {"q4_K", 1}, {"q5_K", 1},
                                           {"q6_K", 1}, {"f16", 1},  {"bf16", 1}};
  EXPECT_EQ(num_cases, want);
}

// Every quantize case's golden bytes come from llama.cpp's reference quantizers: gguf-py for q8_0
// and q4_0 (which the C reference matches), ggml-quants.c's quantize_row_*_ref for q4_K, q5_K and
// q6_K (the case's "oracle").
TEST(QuantTest, QuantizeMatchesLlamaCppByteExactly) {
  nlohmann::json golden = LoadGolden();
  std::map<std::string, int> num_cases;
  for (const auto& c : golden["cases"]) {
    if (c["op"] != "quantize") continue;
    ++num_cases[c["dtype"]];
    const DType dtype = ParseDType(c["dtype"]);
    const int64_t n = c["n"];
    std::vector<float> input = FloatsFromHex(c["input_f32"]);
    std::vector<uint8_t> expected = FromHex(c["output"]);
    ASSERT_EQ(input.size(), static_cast<size_t>(n)) << c["dtype"];
    ASSERT_EQ(expected.size(), RowBytes(dtype, n)) << c["dtype"];
    std::vector<uint8_t> got(expected.size(), 0xAA);
    QuantizeRow(dtype, input.data(), got.data(), n);
    const size_t block_bytes = static_cast<size_t>(GetDTypeInfo(dtype).block_bytes);
    int bad_blocks = 0;
    for (size_t b = 0; b < got.size() / block_bytes; ++b) {
      for (size_t i = b * block_bytes; i < (b + 1) * block_bytes; ++i) {
        if (got[i] == expected[i]) continue;
        if (++bad_blocks <= 4) {
          ADD_FAILURE() << c["dtype"] << " (oracle " << c["oracle"] << ") block " << b
                        << " first differs at byte " << i - b * block_bytes << ": got "
                        << int{got[i]} << " want " << int{expected[i]};
        }
        break;
      }
    }
    EXPECT_EQ(bad_blocks, 0) << c["dtype"];
  }
  const std::map<std::string, int> want = {
      {"q8_0", 1}, {"q4_0", 1}, {"q4_K", 1}, {"q5_K", 1}, {"q6_K", 1}};
  EXPECT_EQ(num_cases, want);
}

// Round trips of Gaussian rows with per-block magnitudes spread over decades. The bytes are pinned
// by the goldens above; this is a sanity check of the reconstruction error on other data. Bounds:
// a 4-bit fit of a block's range has RMS error ~range/15/sqrt(12) ~ 0.1 sigma plus 6-bit scale
// rounding; 6 bits ~0.025 sigma.
TEST(QuantTest, KQuantRoundTripErrorIsSmall) {
  std::mt19937 rng(7);
  std::normal_distribution<float> normal;
  for (auto [dtype, max_rel_rms] : {std::pair{DType::kQ4_K, 0.15}, std::pair{DType::kQ5_K, 0.075},
                                    std::pair{DType::kQ6_K, 0.04}, std::pair{DType::kQ8_0, 0.01},
                                    std::pair{DType::kQ4_0, 0.15}}) {
    const int64_t n = 256 * 8;
    std::vector<float> x(n), y(n);
    for (int64_t b = 0; b < n / 256; ++b) {
      const float mag = std::pow(10.0f, static_cast<float>(b % 5) - 2.0f);
      for (int64_t i = 0; i < 256; ++i) x[b * 256 + i] = normal(rng) * mag + (b == 3 ? mag : 0);
    }
    std::vector<uint8_t> q(RowBytes(dtype, n));
    QuantizeRow(dtype, x.data(), q.data(), n);
    DequantizeRow(dtype, q.data(), y.data(), n);
    for (int64_t b = 0; b < n / 256; ++b) {
      double err = 0, ref = 0;
      for (int64_t i = b * 256; i < (b + 1) * 256; ++i) {
        err += (x[i] - y[i]) * static_cast<double>(x[i] - y[i]);
        ref += x[i] * static_cast<double>(x[i]);
      }
      EXPECT_LT(std::sqrt(err / ref), max_rel_rms) << DTypeName(dtype) << " block " << b;
    }
  }
}

TEST(QuantTest, ZeroRowRoundTripsToZero) {
  for (DType dtype : {DType::kQ8_0, DType::kQ4_0, DType::kQ4_K, DType::kQ5_K, DType::kQ6_K}) {
    std::vector<float> x(256, 0.0f), y(256, 1.0f);
    std::vector<uint8_t> q(RowBytes(dtype, 256));
    QuantizeRow(dtype, x.data(), q.data(), 256);
    DequantizeRow(dtype, q.data(), y.data(), 256);
    for (float v : y) EXPECT_EQ(v, 0.0f) << DTypeName(dtype);
  }
}

TEST(QuantTest, PlainTypesRoundTrip) {
  std::vector<float> x = {1.0f, -2.5f, 3.14159f, 65504.0f, 1e-8f, 0.0f};
  std::vector<float> y(x.size());
  std::vector<uint16_t> h(x.size());
  QuantizeRow(DType::kF16, x.data(), h.data(), 6);
  DequantizeRow(DType::kF16, h.data(), y.data(), 6);
  for (size_t i = 0; i < x.size(); ++i) EXPECT_EQ(y[i], F16ToF32(F32ToF16(x[i])));
  QuantizeRow(DType::kBF16, x.data(), h.data(), 6);
  DequantizeRow(DType::kBF16, h.data(), y.data(), 6);
  for (size_t i = 0; i < x.size(); ++i) EXPECT_EQ(y[i], Bf16ToF32(F32ToBf16(x[i])));
}

// fp8 blocks: d = amax / 448, so the largest element of each block of 128 decodes to itself (code
// 448, up to d's rounding), every element to the nearest code of x / d (F32ToF8E4M3), and the
// bytes are [d f32][128 codes].
TEST(QuantTest, Fp8BlocksRoundTrip) {
  std::mt19937 rng(3);
  std::normal_distribution<float> dist(0.f, 0.02f);
  std::vector<float> x(512);
  for (float& v : x) v = dist(rng);
  x[200] = 0.5f;  // a block with an outlier
  std::vector<uint8_t> q(RowBytes(DType::kFP8, 512));
  ASSERT_EQ(q.size(), 4u * 132u);
  QuantizeRow(DType::kFP8, x.data(), q.data(), 512);
  std::vector<float> y(512);
  DequantizeRow(DType::kFP8, q.data(), y.data(), 512);
  for (int b = 0; b < 4; ++b) {
    float amax = 0.f;
    for (int j = 0; j < 128; ++j) amax = std::max(amax, std::fabs(x[128 * b + j]));
    const auto* block = reinterpret_cast<const BlockFP8*>(q.data()) + b;
    EXPECT_EQ(block->d, amax / 448.f);
    for (int j = 0; j < 128; ++j) {
      const float v = x[128 * b + j];
      EXPECT_EQ(block->qs[j], F32ToF8E4M3(v / block->d)) << b << " " << j;
      EXPECT_EQ(y[128 * b + j], F8E4M3ToF32(block->qs[j]) * block->d);
      if (std::fabs(v) == amax) {
        EXPECT_NEAR(y[128 * b + j], v, amax * 0x1p-22f);
      }
      // e4m3 keeps 3 mantissa bits: relative error <= 2^-4 above the subnormal range
      if (std::fabs(v) / block->d >= 0x1p-6f) {
        EXPECT_LE(std::fabs(y[128 * b + j] - v), std::fabs(v) / 16);
      }
    }
  }
  std::vector<float> zero(128, 0.f);
  QuantizeRow(DType::kFP8, zero.data(), q.data(), 128);
  DequantizeRow(DType::kFP8, q.data(), y.data(), 128);
  for (int j = 0; j < 128; ++j) EXPECT_EQ(y[j], 0.f);
}

}  // namespace
}  // namespace loom
