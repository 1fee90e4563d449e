// CudaBackend vs the CPU backend (the reference), op by op, on awkward sizes. Every GPU output
// is poisoned with NaNs first, so an unwritten element fails the comparison. Skips without a GPU.
#include "backend/cuda/cuda_backend.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <random>

#include "backend/cuda/cuda_test_util.h"
#include "backend/cuda/device_allocator.h"
#include "tensor/quant.h"

namespace loom {
namespace {

using cuda_test::CpuValues;
using cuda_test::GpuValues;
using cuda_test::HostF32;
using cuda_test::HostI32;
using cuda_test::kTolReRounded;
using cuda_test::kTolRounded;
using cuda_test::NormalizedError;
using cuda_test::Poison;
using cuda_test::RandBf16;

class CudaBackendTest : public cuda_test::GpuTest {};

TEST(CudaBackendNoGpuTest, DeviceCountNeverFails) {
  const int n = CudaBackend::DeviceCount();
  EXPECT_GE(n, 0);
  auto be = CudaBackend::Create(CudaBackendOptions{n});  // one past the last device
  ASSERT_FALSE(be.ok());
  EXPECT_EQ(be.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(be.status().message().find("CUDA device " + std::to_string(n) + " not available"),
            std::string::npos)
      << be.status().ToString();
  EXPECT_EQ(CudaBackend::CheckGpu(n).message(), be.status().message());
}

TEST_F(CudaBackendTest, AllocUploadAndCopies) {
  EXPECT_EQ(gpu_->act_dtype(), DType::kBF16);
  EXPECT_NE(gpu_->name().find("cuda ("), std::string::npos) << gpu_->name();
  Tensor z = gpu_->Alloc(DType::kF32, Shape{3, 5});
  EXPECT_EQ(z.device(), Device::kCuda);
  for (float v : GpuValues(*gpu_, z)) EXPECT_EQ(v, 0.f);

  std::mt19937 rng(1);
  // 2-D f32 -> bf16 (round to nearest even, like F32ToBf16).
  std::normal_distribution<float> dist;
  std::vector<float> raw(7 * 9);
  for (float& x : raw) x = dist(rng);
  Tensor up = gpu_->Upload(HostF32(Shape{7, 9}, raw));
  ASSERT_EQ(up.dtype(), DType::kBF16);
  ASSERT_EQ(up.shape(), (Shape{7, 9}));
  std::vector<float> back = GpuValues(*gpu_, up);
  for (size_t i = 0; i < raw.size(); ++i) EXPECT_EQ(back[i], Bf16ToF32(F32ToBf16(raw[i])));
  // 1-D stays f32 bit for bit (norms, biases, inv_freq).
  Tensor vec = gpu_->Upload(HostF32(Shape{9}, std::vector<float>(raw.begin(), raw.begin() + 9)));
  ASSERT_EQ(vec.dtype(), DType::kF32);
  back = GpuValues(*gpu_, vec);
  for (size_t i = 0; i < 9; ++i) EXPECT_EQ(back[i], raw[i]);
  // i32 as is.
  Tensor ids = gpu_->Upload(HostI32({5, -1, 7}));
  std::vector<int32_t> ib(3);
  gpu_->CopyToHost(ids, ib.data());
  EXPECT_EQ(ib, (std::vector<int32_t>{5, -1, 7}));
  // Quantized weights: cuda_quant_test.cc.
  // CopyFromHost / CopyToHost round trip of raw bytes.
  std::vector<uint16_t> src(15), dst(15);
  for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<uint16_t>(i * 977);
  Tensor t = gpu_->Alloc(DType::kBF16, Shape{3, 5});
  gpu_->CopyFromHost(src.data(), t);
  gpu_->CopyToHost(t, dst.data());
  EXPECT_EQ(dst, src);
}

// CopyKvBlocks (one launch over a page-locked bounce) against the default part-by-part copies of
// the Backend interface, both ways, on a pool of three layers; more blocks than fit one bounce.
TEST_F(CudaBackendTest, CopyKvBlocksMatchesPartByPartCopies) {
  const int64_t num_blocks = 700, bs = 16, heads = 4, dim = 256;  // 192 KiB a block: 341 a launch
  std::vector<KvLayer> kv(3);
  std::mt19937 rng(7);
  for (KvLayer& l : kv) {
    for (Tensor* t : {&l.k, &l.v}) {
      *t = gpu_->Alloc(DType::kBF16, Shape{num_blocks, bs, heads, dim});
      std::vector<uint16_t> bits(static_cast<size_t>(t->numel()));
      for (uint16_t& b : bits) b = static_cast<uint16_t>(rng());
      gpu_->CopyFromHost(bits.data(), *t);
    }
  }
  std::vector<int32_t> blocks;
  for (int i = 0; i < 600; ++i) blocks.push_back((i * 37 + 11) % num_blocks);
  const size_t block_bytes = 3 * 2 * bs * heads * dim * 2;
  std::vector<uint8_t> fast(blocks.size() * block_bytes), slow(fast.size());
  // Each block's host pointer: block i at bytes + i * block_bytes.
  const auto at_ = [&](uint8_t* bytes) {
    std::vector<uint8_t*> p(blocks.size());
    for (size_t i = 0; i < p.size(); ++i) p[i] = bytes + i * block_bytes;
    return p;
  };
  gpu_->CopyKvBlocks(kv, blocks, at_(fast.data()), /*to_host=*/true);
  gpu_->Backend::CopyKvBlocks(kv, blocks, at_(slow.data()), /*to_host=*/true);
  ASSERT_EQ(fast, slow);

  // Back into other blocks (the first 600 ids, in reverse): read them again part by part.
  std::vector<int32_t> targets(blocks.size());
  for (size_t i = 0; i < targets.size(); ++i) targets[i] = static_cast<int32_t>(599 - i);
  gpu_->CopyKvBlocks(kv, targets, at_(fast.data()), /*to_host=*/false);
  std::vector<uint8_t> again(fast.size());
  gpu_->Backend::CopyKvBlocks(kv, targets, at_(again.data()), /*to_host=*/true);
  EXPECT_EQ(again, fast);

  // From and to page-locked memory (AllocHostStaging): the kernel reads and writes it directly,
  // no bounce; an offset into the allocation works as well as its start.
  std::shared_ptr<Buffer> pinned = gpu_->AllocHostStaging(fast.size() + block_bytes);
  uint8_t* at = static_cast<uint8_t*>(pinned->data()) + block_bytes;
  gpu_->CopyKvBlocks(kv, blocks, at_(at), /*to_host=*/true);
  gpu_->Backend::CopyKvBlocks(kv, blocks, at_(slow.data()), /*to_host=*/true);
  ASSERT_EQ(std::vector<uint8_t>(at, at + fast.size()), slow);
  std::reverse(at, at + fast.size());  // other bytes, back into the target blocks
  gpu_->CopyKvBlocks(kv, targets, at_(at), /*to_host=*/false);
  gpu_->Backend::CopyKvBlocks(kv, targets, at_(again.data()), /*to_host=*/true);
  EXPECT_EQ(again, std::vector<uint8_t>(at, at + fast.size()));

  // Blocks scattered over page-locked and plain memory in one call, in and out.
  std::vector<uint8_t*> mixed = at_(at);
  for (size_t i = 0; i < mixed.size(); i += 3) mixed[i] = fast.data() + i * block_bytes;
  gpu_->CopyKvBlocks(kv, blocks, mixed, /*to_host=*/true);
  gpu_->Backend::CopyKvBlocks(kv, blocks, at_(slow.data()), /*to_host=*/true);
  for (size_t i = 0; i < mixed.size(); ++i) {
    ASSERT_EQ(std::memcmp(mixed[i], slow.data() + i * block_bytes, block_bytes), 0) << i;
  }
  for (size_t i = 0; i < mixed.size(); ++i) std::reverse(mixed[i], mixed[i] + block_bytes);
  gpu_->CopyKvBlocks(kv, targets, mixed, /*to_host=*/false);
  gpu_->Backend::CopyKvBlocks(kv, targets, at_(again.data()), /*to_host=*/true);
  for (size_t i = 0; i < mixed.size(); ++i) {
    ASSERT_EQ(std::memcmp(mixed[i], again.data() + i * block_bytes, block_bytes), 0) << i;
  }
}

// kv_upload_engine: copies up from page-locked memory go through the staging ring (the copy
// engine, then a scatter kernel), chunk by chunk (682 slots of 192 KiB a chunk), sharing the ring
// with copies out in flight; the pools end as the in-place kernel leaves them.
TEST_F(CudaBackendTest, UploadThroughTheStagingRingMatchesTheKernelInPlace) {
  CudaBackendOptions o;
  o.tuning.kv_upload_engine = true;
  StatusOr<std::unique_ptr<CudaBackend>> made = CudaBackend::Create(o);
  ASSERT_TRUE(made.ok()) << made.status().ToString();
  CudaBackend& up = **made;
  const int64_t num_blocks = 1500, bs = 16, heads = 4, dim = 256;
  std::vector<KvLayer> kv(3);
  for (KvLayer& l : kv) {
    for (Tensor* t : {&l.k, &l.v}) *t = up.Alloc(DType::kBF16, Shape{num_blocks, bs, heads, dim});
  }
  const size_t block_bytes = 3 * 2 * bs * heads * dim * 2;
  const size_t n = 1400;
  std::shared_ptr<Buffer> pinned = up.AllocHostStaging(n * block_bytes);
  auto* base = static_cast<uint8_t*>(pinned->data());
  std::mt19937 rng(11);
  for (size_t i = 0; i < n * block_bytes; ++i) base[i] = static_cast<uint8_t>(rng());
  // Runs of consecutive host blocks broken every 7th block (its bytes come from further on).
  std::vector<uint8_t*> hosts(n);
  for (size_t i = 0; i < n; ++i) hosts[i] = base + (i % 7 == 6 ? n - 1 - i : i) * block_bytes;
  std::vector<int32_t> targets(n);
  for (size_t i = 0; i < n; ++i) targets[i] = static_cast<int32_t>((i * 13 + 5) % num_blocks);
  // A copy out of other blocks in flight in the same ring.
  std::vector<int32_t> others = {1499, 1498, 1497};
  std::vector<uint8_t> out_want(others.size() * block_bytes);
  std::vector<uint8_t*> out_want_at(others.size());
  for (size_t i = 0; i < others.size(); ++i) out_want_at[i] = out_want.data() + i * block_bytes;
  up.Backend::CopyKvBlocks(kv, others, out_want_at, /*to_host=*/true);
  std::shared_ptr<Buffer> out = up.AllocHostStaging(others.size() * block_bytes);
  std::vector<uint8_t*> out_at(others.size());
  for (size_t i = 0; i < others.size(); ++i) {
    out_at[i] = static_cast<uint8_t*>(out->data()) + i * block_bytes;
  }
  const uint64_t ticket = up.StartKvCopyToHost(kv, others, out_at);
  for (int round = 0; round < 2; ++round) {  // twice: the second wraps the ring
    up.CopyKvBlocks(kv, targets, hosts, /*to_host=*/false);
    std::vector<uint8_t> got(block_bytes);
    for (size_t i = 0; i < n; i += 97) {
      uint8_t* at = got.data();
      up.Backend::CopyKvBlocks(kv, std::span<const int32_t>(&targets[i], 1),
                               std::span<uint8_t* const>(&at, 1), /*to_host=*/true);
      ASSERT_EQ(std::memcmp(got.data(), hosts[i], block_bytes), 0) << "round " << round << " " << i;
    }
    std::reverse(base, base + n * block_bytes);
  }
  up.WaitKvCopy(ticket);
  EXPECT_EQ(std::memcmp(out->data(), out_want.data(), out_want.size()), 0);
}

// StartKvCopyToHost: the bytes are the blocks as of the call even when the pools are overwritten
// right after it (in stream order), across three calls in flight at once that wrap the device
// staging ring (1,365 slots of 192 KiB), and match CopyKvBlocks; plain host memory is copied at
// once (ticket 0).
TEST_F(CudaBackendTest, StartKvCopyToHostSeesTheBlocksAsOfTheCall) {
  const int64_t num_blocks = 700, bs = 16, heads = 4, dim = 256;
  std::vector<KvLayer> kv(3);
  std::mt19937 rng(11);
  const auto randomize = [&] {
    for (KvLayer& l : kv) {
      for (Tensor* t : {&l.k, &l.v}) {
        std::vector<uint16_t> bits(static_cast<size_t>(t->numel()));
        for (uint16_t& b : bits) b = static_cast<uint16_t>(rng());
        gpu_->CopyFromHost(bits.data(), *t);
      }
    }
  };
  for (KvLayer& l : kv) {
    for (Tensor* t : {&l.k, &l.v})
      *t = gpu_->Alloc(DType::kBF16, Shape{num_blocks, bs, heads, dim});
  }
  const size_t block_bytes = 3 * 2 * bs * heads * dim * 2;
  std::vector<int32_t> blocks;
  for (int i = 0; i < 600; ++i) blocks.push_back((i * 37 + 11) % num_blocks);
  std::shared_ptr<Buffer> pinned = gpu_->AllocHostStaging(3 * blocks.size() * block_bytes);
  std::vector<std::vector<uint8_t>> want(3, std::vector<uint8_t>(blocks.size() * block_bytes));
  std::vector<uint64_t> tickets;
  for (int call = 0; call < 3; ++call) {
    randomize();
    std::vector<uint8_t*> want_at(blocks.size()), at(blocks.size());
    for (size_t i = 0; i < blocks.size(); ++i) {
      want_at[i] = want[call].data() + i * block_bytes;
      // Host blocks in reverse order: no two consecutive in memory.
      at[i] = static_cast<uint8_t*>(pinned->data()) +
              (static_cast<size_t>(call) * blocks.size() + blocks.size() - 1 - i) * block_bytes;
    }
    gpu_->CopyKvBlocks(kv, blocks, want_at, /*to_host=*/true);
    tickets.push_back(gpu_->StartKvCopyToHost(kv, blocks, at));
    EXPECT_GT(tickets.back(), 0u);
  }
  randomize();  // after the last call, before any wait
  // Polled, not waited for: done means landed, for every earlier ticket too.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (!gpu_->KvCopyDone(tickets.back()) && std::chrono::steady_clock::now() < deadline) {
  }
  ASSERT_TRUE(gpu_->KvCopyDone(tickets.back()));
  for (uint64_t t : tickets) EXPECT_TRUE(gpu_->KvCopyDone(t));
  EXPECT_TRUE(gpu_->KvCopyDone(0));
  for (int call = 0; call < 3; ++call) {
    for (size_t i = 0; i < blocks.size(); ++i) {
      const uint8_t* got =
          static_cast<uint8_t*>(pinned->data()) +
          (static_cast<size_t>(call) * blocks.size() + blocks.size() - 1 - i) * block_bytes;
      ASSERT_EQ(std::memcmp(got, want[call].data() + i * block_bytes, block_bytes), 0)
          << "call " << call << " block " << i;
    }
  }
  std::vector<uint8_t> plain(blocks.size() * block_bytes), slow(plain.size());
  std::vector<uint8_t*> plain_at(blocks.size()), slow_at(blocks.size());
  for (size_t i = 0; i < blocks.size(); ++i) {
    plain_at[i] = plain.data() + i * block_bytes;
    slow_at[i] = slow.data() + i * block_bytes;
  }
  EXPECT_EQ(gpu_->StartKvCopyToHost(kv, blocks, plain_at), 0u);
  gpu_->Backend::CopyKvBlocks(kv, blocks, slow_at, /*to_host=*/true);
  EXPECT_EQ(plain, slow);
  gpu_->WaitKvCopy(tickets.back());  // landed already: returns at once
}

TEST_F(CudaBackendTest, AllocatorReusesFreedBlocks) {
  cuda::DeviceAllocator& a = gpu_->allocator();
  void* first;
  {
    Tensor t = gpu_->Alloc(DType::kBF16, Shape{1000, 17});
    first = t.data();
  }
  const size_t reserved = a.bytes_reserved();
  Tensor t = gpu_->Alloc(DType::kBF16, Shape{1000, 17});
  EXPECT_EQ(t.data(), first);
  EXPECT_EQ(a.bytes_reserved(), reserved);
  for (float v : GpuValues(*gpu_, t)) ASSERT_EQ(v, 0.f);  // reused blocks are zeroed too
}

// CUDA graph capture runs inside the private pool: its blocks are reused within the pool and never
// handed to an allocation outside it (a replayed graph would clobber that tensor).
TEST_F(CudaBackendTest, AllocatorPrivatePoolIsolatesCaptureBlocks) {
  cuda::DeviceAllocator& a = gpu_->allocator();
  const Shape shape{777, 33};
  void* pooled;
  a.BeginPrivatePool();
  {
    Tensor t = gpu_->Alloc(DType::kBF16, shape);
    pooled = t.data();
  }
  {
    Tensor again = gpu_->Alloc(DType::kBF16, shape);  // freed pool block: reused in the pool
    EXPECT_EQ(again.data(), pooled);
  }
  a.EndPrivatePool();
  const size_t pool = a.pool_bytes();
  EXPECT_GE(pool, cuda::DeviceAllocator::RoundSize(777 * 33 * 2));
  std::vector<Tensor> outside;
  for (int i = 0; i < 4; ++i) {
    outside.push_back(gpu_->Alloc(DType::kBF16, shape));
    EXPECT_NE(outside.back().data(), pooled) << i;
  }
  a.EmptyCache();  // drops the general cache only
  a.BeginPrivatePool();
  Tensor in_pool = gpu_->Alloc(DType::kBF16, shape);
  a.EndPrivatePool();
  EXPECT_EQ(in_pool.data(), pooled);
  EXPECT_EQ(a.pool_bytes(), pool);
}

TEST_F(CudaBackendTest, Embed) {
  std::mt19937 rng(2);
  for (int64_t n : {1, 3, 17, 97}) {
    const int64_t vocab = 1000, d = 72;
    std::vector<float> tv = RandBf16(rng, vocab * d);
    std::vector<int32_t> ids(static_cast<size_t>(n));
    for (auto& id : ids) id = static_cast<int32_t>(rng() % vocab);
    Tensor cpu_out = cpu_.Alloc(DType::kF32, Shape{n, d});
    cpu_.Embed(HostF32(Shape{vocab, d}, tv), HostI32(ids), 2.5f, cpu_out);
    Tensor out = gpu_->Alloc(DType::kBF16, Shape{n, d});
    Poison(*gpu_, out);
    gpu_->Embed(gpu_->Upload(HostF32(Shape{vocab, d}, tv)), gpu_->Upload(HostI32(ids)), 2.5f, out);
    EXPECT_LT(NormalizedError(GpuValues(*gpu_, out), CpuValues(cpu_out)), kTolRounded) << n;
  }
}

TEST_F(CudaBackendTest, MatMulShapesBiasAndOutputDtypes) {
  std::mt19937 rng(3);
  struct Case {
    int64_t m, k;
  };
  for (int64_t n : {1, 3, 8, 17, 97, 1000}) {
    // (The last three pick 2, 4 and 1 warps per column in the n = 1 small-batch kernel; on
    // Hopper n = 1 also runs the streamed GEMV, whose last case has a partial slice.)
    for (Case c : {Case{64, 256}, Case{1000, 136}, Case{7, 4096}, Case{4000, 64}, Case{2048, 72},
                   Case{9000, 24}, Case{33, 2056}}) {
      for (bool bias : {false, true}) {
        for (DType out_t : {DType::kBF16, DType::kF32}) {
          std::vector<float> xv = RandBf16(rng, n * c.k), wv = RandBf16(rng, c.m * c.k, 0.05f);
          std::vector<float> bv = RandBf16(rng, c.m);
          Tensor cpu_out = cpu_.Alloc(DType::kF32, Shape{n, c.m});
          cpu_.MatMul(HostF32(Shape{n, c.k}, xv), HostF32(Shape{c.m, c.k}, wv),
                      bias ? HostF32(Shape{c.m}, bv) : Tensor(), cpu_out);
          // Small batches run through every kernel: the streamed GEMV (n = 1), the small-batch
          // one and cuBLASLt.
          for (int variant : {0, 1, 2}) {
            const int small_rows = variant == 2 ? 0 : 8;
            if ((variant == 2 && n > 8) || (variant == 1 && n != 1)) continue;
            gpu_->set_small_batch_gemm_rows(small_rows);
            gpu_->set_stream_gemv(variant == 0);
            Tensor out = gpu_->Alloc(out_t, Shape{n, c.m});
            Poison(*gpu_, out);
            gpu_->MatMul(gpu_->Upload(HostF32(Shape{n, c.k}, xv)),
                         gpu_->Upload(HostF32(Shape{c.m, c.k}, wv)),
                         bias ? gpu_->Upload(HostF32(Shape{c.m}, bv)) : Tensor(), out);
            // f32 out: only summation order differs from the CPU.
            const double tol = out_t == DType::kF32 ? 1e-5 : kTolRounded;
            EXPECT_LT(NormalizedError(GpuValues(*gpu_, out), CpuValues(cpu_out)), tol)
                << "n " << n << " m " << c.m << " k " << c.k << " bias " << bias << " out "
                << DTypeName(out_t) << " variant " << variant;
          }
          gpu_->set_small_batch_gemm_rows(1);
          gpu_->set_stream_gemv(true);
        }
      }
    }
  }
}

// Logits-sized f32 GEMVs at n = 1 take their row groups from a work queue on Hopper
// (stream_gemv.cuh): every row is written, with or without the norm prologue and with partial
// slices and groups, and again on later launches, including two queued launches back to back on
// the stream (the second may start while the first still runs) — the queue must be back at
// zero each time. Bit-identical across launches: a row's arithmetic does not depend on the block.
TEST_F(CudaBackendTest, StreamGemvWorkQueueWritesEveryRowOnEveryLaunch) {
  std::mt19937 rng(11);
  // The queue's threshold (16 groups of 8 rows a block), plus a partial group.
  const int64_t m = int64_t{16} * 8 * gpu_->num_sms() + 13;
  for (int64_t k : {2048, 4104}) {
    std::vector<float> xv = RandBf16(rng, k), wv = RandBf16(rng, m * k, 0.05f);
    std::vector<float> nv = RandBf16(rng, k, 0.5f);
    for (float& v : nv) v += 1.f;
    const Backend::NormSpec norm{gpu_->Upload(HostF32(Shape{k}, nv)), 1e-5f, 0.f};
    const Backend::NormSpec cpu_norm{HostF32(Shape{k}, nv), 1e-5f, 0.f};
    Tensor cpu_plain = cpu_.Alloc(DType::kF32, Shape{1, m});
    Tensor cpu_normed = cpu_.Alloc(DType::kF32, Shape{1, m});
    cpu_.MatMul(HostF32(Shape{1, k}, xv), HostF32(Shape{m, k}, wv), Tensor(), cpu_plain);
    cpu_.RmsNormMatMul(HostF32(Shape{1, k}, xv), cpu_norm, HostF32(Shape{m, k}, wv), Tensor(),
                       cpu_normed);
    const Tensor x = gpu_->Upload(HostF32(Shape{1, k}, xv));
    const Tensor w = gpu_->Upload(HostF32(Shape{m, k}, wv));
    std::vector<float> first_plain, first_normed;
    for (int launch = 0; launch < 3; ++launch) {
      Tensor plain = gpu_->Alloc(DType::kF32, Shape{1, m});
      Tensor normed = gpu_->Alloc(DType::kF32, Shape{1, m});
      Poison(*gpu_, plain);
      Poison(*gpu_, normed);
      gpu_->MatMul(x, w, Tensor(), plain);  // back to back: no synchronization between them
      gpu_->RmsNormMatMul(x, norm, w, Tensor(), normed);
      const std::vector<float> p = GpuValues(*gpu_, plain), q = GpuValues(*gpu_, normed);
      EXPECT_LT(NormalizedError(p, CpuValues(cpu_plain)), 1e-5)
          << "k " << k << " launch " << launch;
      // The normalized x is rounded to bf16 on the GPU (RmsNormMatMulMatchesNormThenMatMul).
      EXPECT_LT(NormalizedError(q, CpuValues(cpu_normed)), kTolReRounded)
          << "k " << k << " launch " << launch;
      if (launch == 0) {
        first_plain = p;
        first_normed = q;
      } else {
        EXPECT_EQ(std::memcmp(p.data(), first_plain.data(), p.size() * 4), 0) << "k " << k;
        EXPECT_EQ(std::memcmp(q.data(), first_normed.data(), q.size() * 4), 0) << "k " << k;
      }
    }
  }
}

// f32 / f16 weights (converted to bf16 on upload) and GGUF quantized ones (kept quantized; n = 17
// takes the dequantized chunks through cuBLASLt) against the CPU backend's kernels.
TEST_F(CudaBackendTest, MatMulConvertedAndQuantizedWeights) {
  std::mt19937 rng(4);
  std::normal_distribution<float> dist(0.f, 0.05f);
  const int64_t n = 17, m = 96, k = 512;
  std::vector<float> xv = RandBf16(rng, n * k);
  for (DType wt : {DType::kF32, DType::kF16, DType::kQ8_0, DType::kQ4_0, DType::kQ4_K, DType::kQ5_K,
                   DType::kQ6_K}) {
    std::vector<float> wv(m * k);
    for (float& x : wv) x = dist(rng);
    Tensor w = HostTensor(wt, Shape{m, k});
    for (int64_t r = 0; r < m; ++r) {
      QuantizeRow(wt, wv.data() + r * k, static_cast<char*>(w.data()) + r * w.row_bytes(), k);
    }
    Tensor cpu_out = cpu_.Alloc(DType::kF32, Shape{n, m});
    cpu_.MatMul(HostF32(Shape{n, k}, xv), w, Tensor(), cpu_out);
    Tensor out = gpu_->Alloc(DType::kF32, Shape{n, m});
    Poison(*gpu_, out);
    gpu_->MatMul(gpu_->Upload(HostF32(Shape{n, k}, xv)), gpu_->Upload(w), Tensor(), out);
    EXPECT_LT(NormalizedError(GpuValues(*gpu_, out), CpuValues(cpu_out)), kTolReRounded)
        << DTypeName(wt);
  }
}

TEST_F(CudaBackendTest, RmsNormOffsetsWeightsAndAliasing) {
  std::mt19937 rng(5);
  for (int64_t n : {1, 3, 17, 97}) {
    for (int64_t d : {67, 128, 4096}) {
      for (float offset : {0.f, 1.f}) {
        for (bool in_place : {false, true}) {
          std::vector<float> xv = RandBf16(rng, n * d, 3.f), wv = RandBf16(rng, d);
          Tensor cpu_out = cpu_.Alloc(DType::kF32, Shape{n, d});
          cpu_.RmsNorm(HostF32(Shape{n, d}, xv), HostF32(Shape{d}, wv), 1e-6f, offset, cpu_out);
          Tensor x = gpu_->Upload(HostF32(Shape{n, d}, xv));
          Tensor out = in_place ? x : gpu_->Alloc(DType::kBF16, Shape{n, d});
          if (!in_place) Poison(*gpu_, out);
          gpu_->RmsNorm(x, gpu_->Upload(HostF32(Shape{d}, wv)), 1e-6f, offset, out);
          EXPECT_LT(NormalizedError(GpuValues(*gpu_, out), CpuValues(cpu_out)), kTolRounded)
              << n << "x" << d << " offset " << offset << " in_place " << in_place;
        }
      }
    }
  }
}

TEST_F(CudaBackendTest, ElementwiseOpsBf16AndF32) {
  std::mt19937 rng(6);
  for (int64_t n : {1, 17, 1000}) {
    const int64_t f = 97;
    std::vector<float> av = RandBf16(rng, n * f, 2.f), bv = RandBf16(rng, n * f, 2.f);
    Tensor ca = HostF32(Shape{n, f}, av), cb = HostF32(Shape{n, f}, bv);
    for (DType dt : {DType::kBF16, DType::kF32}) {
      auto gpu_in = [&](const std::vector<float>& v) {
        if (dt == DType::kBF16) return gpu_->Upload(HostF32(Shape{n, f}, v));
        Tensor t = gpu_->Alloc(dt, Shape{n, f});
        gpu_->CopyFromHost(v.data(), t);
        return t;
      };
      const double tol = dt == DType::kF32 ? 1e-5 : kTolRounded;
      // Add, aliasing out = a.
      Tensor c_out = cpu_.Alloc(DType::kF32, Shape{n, f});
      cpu_.Add(ca, cb, c_out);
      Tensor ga = gpu_in(av);
      gpu_->Add(ga, gpu_in(bv), ga);
      EXPECT_LT(NormalizedError(GpuValues(*gpu_, ga), CpuValues(c_out)), tol) << "Add";
      // SiluMul / GeluTanhMul, aliasing out = gate.
      for (bool gelu : {false, true}) {
        Tensor co = cpu_.Alloc(DType::kF32, Shape{n, f});
        Tensor gg = gpu_in(av);
        if (gelu) {
          cpu_.GeluTanhMul(ca, cb, co);
          gpu_->GeluTanhMul(gg, gpu_in(bv), gg);
        } else {
          cpu_.SiluMul(ca, cb, co);
          gpu_->SiluMul(gg, gpu_in(bv), gg);
        }
        EXPECT_LT(NormalizedError(GpuValues(*gpu_, gg), CpuValues(co)), tol) << "gelu " << gelu;
      }
      // Scale and SoftCap in place.
      Tensor cx = HostF32(Shape{n, f}, av);
      cpu_.Scale(cx, 3.f);
      cpu_.SoftCap(cx, 5.f);
      Tensor gx = gpu_in(av);
      gpu_->Scale(gx, 3.f);
      gpu_->SoftCap(gx, 5.f);
      EXPECT_LT(NormalizedError(GpuValues(*gpu_, gx), CpuValues(cx)), tol) << "Scale+SoftCap";
    }
  }
}

TEST_F(CudaBackendTest, RopeVariants) {
  std::mt19937 rng(7);
  struct Case {
    int heads, head_dim, rotary_dim;
    bool interleaved;
    float factor;
  };
  for (Case c : {Case{3, 64, 64, false, 1.f}, Case{8, 128, 128, true, 1.f},
                 Case{2, 256, 64, false, 1.2f}, Case{5, 96, 48, true, 1.f}}) {
    for (int64_t n : {1, 17, 97}) {
      const int64_t w = int64_t{c.heads} * c.head_dim;
      std::vector<float> xv = RandBf16(rng, n * w);
      std::vector<int32_t> pos(static_cast<size_t>(n));
      for (auto& p : pos) p = static_cast<int32_t>(rng() % 130000);
      std::vector<float> inv(static_cast<size_t>(c.rotary_dim / 2));
      for (size_t j = 0; j < inv.size(); ++j) {
        inv[j] = std::pow(500000.f, -2.f * static_cast<float>(j) / c.rotary_dim);
      }
      RopeTable ct{HostF32(Shape{c.rotary_dim / 2}, inv), c.rotary_dim, c.factor, c.interleaved};
      Tensor cx = HostF32(Shape{n, w}, xv);
      cpu_.Rope(cx, HostI32(pos), ct, c.heads, c.head_dim);
      RopeTable gt{gpu_->Upload(HostF32(Shape{c.rotary_dim / 2}, inv)), c.rotary_dim, c.factor,
                   c.interleaved};
      Tensor gx = gpu_->Upload(HostF32(Shape{n, w}, xv));
      gpu_->Rope(gx, gpu_->Upload(HostI32(pos)), gt, c.heads, c.head_dim);
      EXPECT_LT(NormalizedError(GpuValues(*gpu_, gx), CpuValues(cx)), kTolRounded)
          << "heads " << c.heads << " d " << c.head_dim << " rot " << c.rotary_dim << " n " << n;
    }
  }
}

TEST_F(CudaBackendTest, GatherRowsAndCopyColumnsAreExact) {
  std::mt19937 rng(8);
  for (DType dt : {DType::kBF16, DType::kF32}) {
    const int64_t n = 97, a = 40, b = 13;
    std::vector<float> xv = RandBf16(rng, n * a);
    Tensor x = gpu_->Alloc(dt, Shape{n, a});
    if (dt == DType::kF32) {
      gpu_->CopyFromHost(xv.data(), x);
    } else {
      x = gpu_->Upload(HostF32(Shape{n, a}, xv));
    }
    std::vector<int32_t> rows = {96, 0, 5, 5, 50};
    Tensor g = gpu_->Alloc(dt, Shape{5, a});
    Poison(*gpu_, g);
    gpu_->GatherRows(x, gpu_->Upload(HostI32(rows)), g);
    std::vector<float> gv = GpuValues(*gpu_, g);
    for (size_t i = 0; i < rows.size(); ++i) {
      for (int64_t j = 0; j < a; ++j) {
        ASSERT_EQ(gv[i * a + j], xv[rows[i] * a + j]) << DTypeName(dt);
      }
    }
    Tensor d = gpu_->Alloc(dt, Shape{n, b});
    Poison(*gpu_, d);
    gpu_->CopyColumns(x, 27, d, 0, 13);
    std::vector<float> dv = GpuValues(*gpu_, d);
    for (int64_t i = 0; i < n; ++i) {
      for (int64_t j = 0; j < b; ++j) ASSERT_EQ(dv[i * b + j], xv[i * a + 27 + j]);
    }
  }
}

}  // namespace
}  // namespace loom
