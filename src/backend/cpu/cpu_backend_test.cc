// The non-matmul, non-attention ops of CpuBackend vs double-precision references.
#include "backend/cpu/cpu_backend.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>

#include "backend/cpu/cpu_test_util.h"

namespace loom {
namespace {

using cpu_test::MakeI32;
using cpu_test::MakeTensor;
using cpu_test::RandomFloats;
using cpu_test::ToFloats;

// f32 elementwise math with libm exp/tanh/cos: a few ulps of O(1) values.
constexpr double kElemTol = 1e-5;

TEST(CpuBackendTest, NameAllocAndCopies) {
  CpuBackend backend(2);
  EXPECT_EQ(backend.name(), std::string("cpu (") + backend.isa() + ", 2 threads)");
  EXPECT_EQ(backend.act_dtype(), DType::kF32);
  Tensor t = backend.Alloc(DType::kF16, Shape{3, 5});
  for (int64_t i = 0; i < t.numel(); ++i) EXPECT_EQ(t.data_as<uint16_t>()[i], 0);
  std::vector<uint16_t> src(15);
  for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<uint16_t>(i * 7);
  backend.CopyFromHost(src.data(), t);
  std::vector<uint16_t> back(15);
  backend.CopyToHost(t, back.data());
  EXPECT_EQ(back, src);
  EXPECT_EQ(backend.Upload(t).data(), t.data());  // zero-copy
}

// UploadWeight copies weights into one arena (64-byte aligned, bytes intact, each tensor its own
// range, kept alive by its tensors alone), or hands them back as they are with
// weights_in_huge_pages = false. Whether the kernel backs the arena with huge pages depends on
// the machine's THP mode; when THP is off the weights stay where they are.
TEST(CpuBackendTest, UploadWeightCopiesIntoAnArenaOrKeepsTheMapping) {
  std::mt19937 rng(5);
  std::vector<Tensor> weights;
  for (int64_t rows : {3, 64, 1000}) {
    weights.push_back(MakeTensor(DType::kF16, Shape{rows, 37}, RandomFloats(rng, rows * 37)));
  }
  std::vector<Tensor> copies;
  {
    CpuBackend backend(CpuBackendOptions{.num_threads = 1});
    for (const Tensor& w : weights) copies.push_back(backend.UploadWeight(w));
  }  // the backend is gone; the copies keep their arena
  const bool copied = CpuBackend::TransparentHugePagesAvailable();
  for (size_t i = 0; i < weights.size(); ++i) {
    const Tensor& w = weights[i];
    const Tensor& c = copies[i];
    ASSERT_EQ(c.shape(), w.shape());
    ASSERT_EQ(c.dtype(), w.dtype());
    EXPECT_EQ(std::memcmp(c.data(), w.data(), w.nbytes()), 0);
    EXPECT_EQ(c.data() != w.data(), copied);
    if (copied) {
      EXPECT_EQ(reinterpret_cast<uintptr_t>(c.data()) % 64, 0u);
      if (i > 0) {  // consecutive ranges of one arena, no overlap
        const char* prev = static_cast<const char*>(copies[i - 1].data());
        EXPECT_GE(static_cast<const char*>(c.data()), prev + copies[i - 1].nbytes());
      }
    }
  }
  CpuBackend in_place(CpuBackendOptions{.num_threads = 1, .weights_in_huge_pages = false});
  EXPECT_EQ(in_place.UploadWeight(weights[2]).data(), weights[2].data());
}

TEST(CpuBackendTest, EmbedEveryDtype) {
  CpuBackend backend(1);
  std::mt19937 rng(1);
  for (DType dt : {DType::kF32, DType::kF16, DType::kBF16, DType::kQ8_0, DType::kQ4_0, DType::kQ4_K,
                   DType::kQ5_K, DType::kQ6_K}) {
    const int64_t vocab = 11, d = 256;
    Tensor table = MakeTensor(dt, Shape{vocab, d}, RandomFloats(rng, vocab * d));
    std::vector<float> tv = ToFloats(table);
    Tensor out = HostTensor(DType::kF32, Shape{4, d});
    backend.Embed(table, MakeI32({3, 0, 10, 3}), 2.5f, out);
    const int ids[] = {3, 0, 10, 3};
    for (int i = 0; i < 4; ++i) {
      for (int64_t j = 0; j < d; ++j) {
        ASSERT_EQ(out.data_as<float>()[i * d + j], tv[static_cast<size_t>(ids[i] * d + j)] * 2.5f)
            << DTypeName(dt);
      }
    }
  }
}

TEST(CpuBackendTest, RmsNormWithOffsetInPlace) {
  CpuBackend backend(2);
  std::mt19937 rng(2);
  for (int64_t n : {1, 3, 17, 97}) {
    const int64_t d = 67;
    std::vector<float> xv = RandomFloats(rng, n * d, 3.0f), wv = RandomFloats(rng, d);
    Tensor x = MakeTensor(DType::kF32, Shape{n, d}, xv);
    for (float offset : {0.0f, 1.0f}) {
      Tensor out = HostTensor(DType::kF32, Shape{n, d});
      backend.RmsNorm(x, MakeTensor(DType::kF32, Shape{d}, wv), 1e-6f, offset, out);
      for (int64_t i = 0; i < n; ++i) {
        double ss = 0;
        for (int64_t j = 0; j < d; ++j) ss += double{xv[i * d + j]} * xv[i * d + j];
        const double inv = 1.0 / std::sqrt(ss / d + 1e-6);
        for (int64_t j = 0; j < d; ++j) {
          const double ref = xv[i * d + j] * inv * (wv[j] + offset);
          EXPECT_NEAR(out.data_as<float>()[i * d + j], ref, kElemTol * (1 + std::fabs(ref)));
        }
      }
    }
    backend.RmsNorm(x, MakeTensor(DType::kF32, Shape{d}, wv), 1e-6f, 0.0f, x);  // aliasing
    double ss = 0;
    for (int64_t j = 0; j < d; ++j) ss += double{xv[j]} * xv[j];
    EXPECT_NEAR(x.data_as<float>()[0], xv[0] / std::sqrt(ss / d + 1e-6) * wv[0], 1e-5);
  }
}

TEST(CpuBackendTest, AddScaleSoftCapActivations) {
  CpuBackend backend(2);
  std::mt19937 rng(3);
  const int64_t n = 17, f = 97;
  std::vector<float> a = RandomFloats(rng, n * f, 3), b = RandomFloats(rng, n * f, 3);
  Tensor ta = MakeTensor(DType::kF32, Shape{n, f}, a), tb = MakeTensor(DType::kF32, Shape{n, f}, b);
  Tensor out = HostTensor(DType::kF32, Shape{n, f});
  backend.Add(ta, tb, out);
  for (int64_t i = 0; i < n * f; ++i) EXPECT_EQ(out.data_as<float>()[i], a[i] + b[i]);
  backend.SiluMul(ta, tb, out);
  for (int64_t i = 0; i < n * f; ++i) {
    const double ref = a[i] / (1 + std::exp(-double{a[i]})) * b[i];
    EXPECT_NEAR(out.data_as<float>()[i], ref, kElemTol * (1 + std::fabs(ref)));
  }
  backend.GeluTanhMul(ta, tb, out);
  for (int64_t i = 0; i < n * f; ++i) {
    const double g = a[i];
    const double ref =
        0.5 * g * (1 + std::tanh(std::sqrt(2 / M_PI) * (g + 0.044715 * g * g * g))) * b[i];
    EXPECT_NEAR(out.data_as<float>()[i], ref, kElemTol * (1 + std::fabs(ref)));
  }
  backend.SoftCap(ta, 2.0f);
  for (int64_t i = 0; i < n * f; ++i) {
    EXPECT_NEAR(ta.data_as<float>()[i], 2 * std::tanh(a[i] / 2.0), kElemTol);
  }
  backend.Scale(tb, -0.5f);
  for (int64_t i = 0; i < n * f; ++i) EXPECT_EQ(tb.data_as<float>()[i], b[i] * -0.5f);
}

TEST(CpuBackendTest, RopeHalfAndInterleavedPartialRotary) {
  CpuBackend backend(2);
  std::mt19937 rng(4);
  const int heads = 3, head_dim = 64;
  for (bool interleaved : {false, true}) {
    for (int rotary_dim : {64, 32}) {
      const int64_t n = 5;
      std::vector<float> xv = RandomFloats(rng, n * heads * head_dim);
      Tensor x = MakeTensor(DType::kF32, Shape{n, heads * head_dim}, xv);
      std::vector<float> inv(static_cast<size_t>(rotary_dim / 2));
      for (int i = 0; i < rotary_dim / 2; ++i) {
        inv[static_cast<size_t>(i)] = std::pow(10000.0f, -2.0f * i / rotary_dim);
      }
      RopeTable rope{MakeTensor(DType::kF32, Shape{rotary_dim / 2}, inv), rotary_dim, 1.25f,
                     interleaved};
      const std::vector<int32_t> pos = {0, 1, 7, 300, 4095};
      backend.Rope(x, MakeI32(pos), rope, heads, head_dim);
      for (int64_t t = 0; t < n; ++t) {
        for (int h = 0; h < heads; ++h) {
          const float* in = xv.data() + (t * heads + h) * head_dim;
          const float* got = x.data_as<float>() + (t * heads + h) * head_dim;
          std::vector<double> ref(in, in + head_dim);
          for (int i = 0; i < rotary_dim / 2; ++i) {
            const int a = interleaved ? 2 * i : i, b = interleaved ? 2 * i + 1 : i + rotary_dim / 2;
            // Angle in f32 as the model computes it (HF), the rest in double.
            const double th = static_cast<float>(pos[static_cast<size_t>(t)]) * inv[i];
            const double c = std::cos(th) * 1.25, s = std::sin(th) * 1.25;
            ref[a] = in[a] * c - in[b] * s;
            ref[b] = in[b] * c + in[a] * s;
          }
          for (int d = 0; d < head_dim; ++d) {
            // cos/sin of angles up to ~4096 rad in f32: ~1e-6 relative; values O(1).
            EXPECT_NEAR(got[d], ref[static_cast<size_t>(d)], 2e-5)
                << "interleaved " << interleaved << " rot " << rotary_dim << " t " << t;
          }
        }
      }
    }
  }
}

TEST(CpuBackendTest, StoreKvGatherRowsCopyColumns) {
  CpuBackend backend(1);
  std::mt19937 rng(5);
  KvLayer layer{backend.Alloc(DType::kF16, Shape{4, 3, 2, 8}),
                backend.Alloc(DType::kF16, Shape{4, 3, 2, 8})};
  std::vector<float> kv = RandomFloats(rng, 3 * 16), vv = RandomFloats(rng, 3 * 16);
  AttentionMeta meta;
  meta.slot_mapping = MakeI32({7, -1, 11});  // block 2 row 1; padding; block 3 row 2
  backend.StoreKv(MakeTensor(DType::kF32, Shape{3, 16}, kv),
                  MakeTensor(DType::kF32, Shape{3, 16}, vv), meta, layer);
  std::vector<float> kpool = ToFloats(layer.k), vpool = ToFloats(layer.v);
  for (int j = 0; j < 16; ++j) {
    EXPECT_EQ(kpool[7 * 16 + j], F16ToF32(F32ToF16(kv[j])));
    EXPECT_EQ(vpool[11 * 16 + j], F16ToF32(F32ToF16(vv[32 + j])));
  }
  int nonzero = 0;
  for (float v : kpool) nonzero += v != 0.0f;
  EXPECT_EQ(nonzero, 32);  // the padding token wrote nothing

  std::vector<float> xv = RandomFloats(rng, 5 * 6);
  Tensor x = MakeTensor(DType::kF32, Shape{5, 6}, xv);
  Tensor g = HostTensor(DType::kF32, Shape{2, 6});
  backend.GatherRows(x, MakeI32({4, 1}), g);
  for (int j = 0; j < 6; ++j) {
    EXPECT_EQ(g.data_as<float>()[j], xv[24 + j]);
    EXPECT_EQ(g.data_as<float>()[6 + j], xv[6 + j]);
  }
  Tensor dst = backend.Alloc(DType::kF32, Shape{5, 4});
  backend.CopyColumns(x, 3, dst, 1, 3);
  for (int i = 0; i < 5; ++i) {
    EXPECT_EQ(dst.data_as<float>()[i * 4], 0.0f);
    for (int c = 0; c < 3; ++c) EXPECT_EQ(dst.data_as<float>()[i * 4 + 1 + c], xv[i * 6 + 3 + c]);
  }
}

}  // namespace
}  // namespace loom
