// CudaBackend::ArgmaxRows (argmax.cuh) vs the host sampler's greedy rule, exactly: awkward vocab
// sizes (1, 3, 1000, 1001, 128256, 262144: scalar and 16-byte paths, one and many chunks per
// row), f32 and bf16, 1..256 rows, ties (lowest id wins, also across chunk boundaries), -inf
// rows, +inf entries and NaNs; the fused argmax + input advance of the batch-1 graph's tail.
// Skips without a GPU.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "backend/cuda/argmax.cuh"
#include "backend/cuda/cuda_test_util.h"

namespace loom {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();

// The host sampler (sample/sampler.cc): a NaN anywhere fails the row; else the first strict
// maximum above -inf.
int32_t HostArgmax(const float* row, int64_t vocab) {
  for (int64_t j = 0; j < vocab; ++j) {
    if (std::isnan(row[j])) return Backend::kArgmaxNaN;
  }
  float best = -kInf;
  int32_t chosen = Backend::kArgmaxNone;
  for (int64_t j = 0; j < vocab; ++j) {
    if (row[j] > best) {
      best = row[j];
      chosen = static_cast<int32_t>(j);
    }
  }
  return chosen;
}

// Row r gets pattern r % 9: random values (many ties after bf16 rounding), ties planted at ids
// that straddle chunk boundaries, all -inf, a NaN, a lone finite value among -inf, +inf twice,
// the maximum at the first or the last id, all equal.
std::vector<float> MakeRows(int64_t rows, int64_t vocab, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<float> x(static_cast<size_t>(rows * vocab));
  for (float& v : x) v = static_cast<float>(rng() >> 8) * 0x1.0p-20f - 8.f;  // [-8, 8)
  for (int64_t r = 0; r < rows; ++r) {
    float* row = x.data() + r * vocab;
    const int64_t last = vocab - 1;
    switch (r % 9) {
      case 0:
        break;
      case 1:  // ties at ids on both sides of likely chunk boundaries: the lowest wins
        for (int64_t j : {last, vocab / 2, int64_t{4095}, int64_t{4096}, int64_t{8191}}) {
          if (j >= 1 && j < vocab) row[j] = 9.f;
        }
        break;
      case 2:
        std::fill(row, row + vocab, -kInf);
        break;
      case 3:
        row[last] = std::numeric_limits<float>::quiet_NaN();
        break;
      case 4:
        std::fill(row, row + vocab, -kInf);
        row[last] = -1e30f;
        break;
      case 5:
        row[last] = kInf;
        row[last / 3] = kInf;
        break;
      case 6:
        row[last] = 20.f;
        break;
      case 7:
        row[0] = 20.f;
        break;
      case 8:
        std::fill(row, row + vocab, 0.5f);
        break;
    }
  }
  return x;
}

class CudaArgmaxTest : public cuda_test::GpuTest {
 protected:
  // `x` on the device as `dtype`; bf16 rounds x in place, so the reference sees what the kernel
  // does.
  Tensor Upload(std::vector<float>& x, Shape shape, DType dtype) {
    Tensor dev = gpu_->Alloc(dtype, shape);
    if (dtype == DType::kF32) {
      gpu_->CopyFromHost(x.data(), dev);
      return dev;
    }
    std::vector<uint16_t> raw(x.size());
    for (size_t i = 0; i < x.size(); ++i) {
      raw[i] = F32ToBf16(x[i]);
      x[i] = Bf16ToF32(raw[i]);
    }
    gpu_->CopyFromHost(raw.data(), dev);
    return dev;
  }

  // Uploads `x` as `dtype` (bf16: rounded; the reference sees the rounded values), runs
  // ArgmaxRows on rows [row0, row0 + rows) and compares every row with HostArgmax.
  void Check(int64_t rows, int64_t vocab, DType dtype, int64_t row0 = 0) {
    SCOPED_TRACE(testing::Message()
                 << rows << " x " << vocab << " " << DTypeName(dtype) << " from row " << row0);
    const int64_t total = row0 + rows;
    std::vector<float> x = MakeRows(total, vocab, static_cast<uint32_t>(rows * 7919 + vocab));
    Tensor dev = Upload(x, Shape{total, vocab}, dtype);
    Tensor out = gpu_->Alloc(DType::kI32, Shape{rows});
    cuda_test::Poison(*gpu_, out);
    gpu_->ArgmaxRows(dev.Slice(row0, rows), out);
    std::vector<int32_t> got(static_cast<size_t>(rows));
    gpu_->CopyToHost(out, got.data());
    for (int64_t r = 0; r < rows; ++r) {
      ASSERT_EQ(got[r], HostArgmax(x.data() + (row0 + r) * vocab, vocab)) << "row " << r;
    }
  }
};

TEST_F(CudaArgmaxTest, MatchesTheHostSamplerExactly) {
  ASSERT_TRUE(gpu_->has_argmax_rows());
  const std::vector<std::pair<int64_t, int64_t>> sizes = {
      {1, 1},      {256, 1},     {5, 3},        {9, 1000},   {3, 1001},  {1, 128256},
      {8, 128256}, {64, 128256}, {256, 128256}, {1, 262144}, {9, 262144}};
  for (DType dt : {DType::kF32, DType::kBF16}) {
    for (auto [rows, vocab] : sizes) Check(rows, vocab, dt);
  }
  // Rows that start off a 16-byte boundary (odd vocab, sliced from row 1): the scalar path.
  Check(4, 1001, DType::kF32, /*row0=*/1);
  Check(4, 1001, DType::kBF16, /*row0=*/1);
}

// LaunchArgmaxAdvance (the batch-1 graph's fused tail) against the host rule and the advance it
// replaces: every row pattern above, one and many chunks, f32 and bf16; the ticket must come back
// to 0, so each case runs on the same scratch as the one before. Position 20 in pages {7, 3} of
// 16 tokens advances to slot 3 * 16 + 5 (ids to the even host slot); position 31 to a block
// boundary (slot -1; the odd host slot).
TEST_F(CudaArgmaxTest, ArgmaxAdvanceMatchesArgmaxThenAdvance) {
  constexpr int kBlock = 16, kStride = 4;
  const int sms = gpu_->num_sms();
  const size_t winners = cuda::ArgmaxScratchBytes(1, 262144, sms);
  Tensor scratch = gpu_->Alloc(DType::kI32, Shape{static_cast<int64_t>(winners / 4 + 2)});
  std::vector<int32_t> zeros(static_cast<size_t>(scratch.numel()), 0);
  gpu_->CopyFromHost(zeros.data(), scratch);
  // tokens, positions, kv_len, page_indptr[2], pages[2], slots, host ids [2 * kStride]
  Tensor block = gpu_->Alloc(DType::kI32, Shape{9 + 2 * kStride});
  Tensor out = gpu_->Alloc(DType::kI32, Shape{1});
  int case_no = 0;
  for (int64_t vocab : {int64_t{1}, int64_t{1000}, int64_t{128256}, int64_t{262144}}) {
    for (DType dtype : {DType::kF32, DType::kBF16}) {
      for (int pattern = 0; pattern < 9; ++pattern, ++case_no) {
        SCOPED_TRACE(testing::Message()
                     << vocab << " " << DTypeName(dtype) << " pattern " << pattern);
        std::vector<float> rows = MakeRows(pattern + 1, vocab, static_cast<uint32_t>(vocab));
        std::vector<float> x(rows.begin() + pattern * vocab, rows.begin() + (pattern + 1) * vocab);
        Tensor dev = Upload(x, Shape{1, vocab}, dtype);
        const int32_t pos = case_no % 2 == 0 ? 20 : 31;
        std::vector<int32_t> in = {-5, pos, pos + 1, 0, 2, 7, 3, -9};
        in.resize(static_cast<size_t>(block.numel()), -7);
        gpu_->CopyFromHost(in.data(), block);
        int32_t* b = block.data_as<int32_t>();
        const cuda::DecodeInputs di{b, b + 1, b + 2, b + 3, b + 5, b + 7};
        auto* sc = scratch.data_as<int32_t>();
        cuda::LaunchArgmaxAdvance(
            dev.data(), dtype, vocab, sms, sc, reinterpret_cast<unsigned*>(sc + winners / 4),
            out.data_as<int32_t>(), di, kBlock, b + 8, kStride, gpu_->stream(), /*pdl=*/true);
        std::vector<int32_t> got(static_cast<size_t>(block.numel()));
        gpu_->CopyToHost(block, got.data());
        int32_t id = 0;
        gpu_->CopyToHost(out, &id);
        const int32_t want = HostArgmax(x.data(), vocab);
        ASSERT_EQ(id, want);
        EXPECT_EQ(got[0], want);
        EXPECT_EQ(got[1], pos + 1);
        EXPECT_EQ(got[2], pos + 2);
        EXPECT_EQ(got[7], pos == 20 ? 3 * kBlock + 5 : -1);
        EXPECT_EQ(got[8 + (pos & 1) * kStride], want);
        EXPECT_EQ(got[8 + (1 - (pos & 1)) * kStride], -7) << "the other parity's slot";
        std::vector<int32_t> sc_now(zeros.size());
        gpu_->CopyToHost(scratch, sc_now.data());
        ASSERT_EQ(sc_now[winners / 4], 0) << "ticket not reset";
      }
    }
  }
}

TEST_F(CudaArgmaxTest, CpuBackendLeavesItToTheHost) { EXPECT_FALSE(cpu_.has_argmax_rows()); }

}  // namespace
}  // namespace loom
