// cuda_bench: decode and prefill throughput of a Llama-3.1-8B-shaped model with random bf16
// weights built directly in device memory, against the H200's memory roofline.
//
//   cuda_bench [context_tokens=512] [timed_steps=20]
//   cuda_bench gemv      (the batch-1 GEMV table only)
//   cuda_bench qgemv     (GEMVs over GGUF quantized weights: quant_gemv.cuh, n = 1, 4, 8, and
//                         the dequantize + cuBLASLt path at n = 64)
//
// Prints: the measured device-to-device copy bandwidth; per-shape batch-1 GEMM bandwidth;
// decode steps of batch 1, 8 and 64 (each sequence has `context_tokens` random tokens in the
// cache) timed end to end (host batch building + upload + forward + sync) and on the GPU alone
// (events); a 1000-token prefill. Roofline: bytes that must be read per decode step (every weight
// except the embedding table, which is only gathered, plus the KV cache) over 4.32 TB/s.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <numeric>
#include <string>
#include <vector>

#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/cuda_stream.h"
#include "backend/cuda/quant_layout.h"
#include "bench_model.h"
#include "runtime/forward_batch.h"

namespace loom {
namespace {

constexpr double kPeakBytesPerSec = 4.32e12;  // the H200 figure (288 tok/s for 8B)
constexpr int kBlock = 16;

double MeasureCopyBandwidth(CudaBackend& be) {
  const int64_t bytes = int64_t{2} << 30;
  Tensor a = be.Alloc(DType::kI32, Shape{bytes / 4}), b = be.Alloc(DType::kI32, Shape{bytes / 4});
  cuda::CudaEvent start, stop;
  for (int i = 0; i < 2; ++i) {
    CUDA_CHECK(cudaMemcpyAsync(b.data(), a.data(), bytes, cudaMemcpyDeviceToDevice, be.stream()));
  }
  start.Record(be.stream());
  const int reps = 10;
  for (int i = 0; i < reps; ++i) {
    CUDA_CHECK(cudaMemcpyAsync(b.data(), a.data(), bytes, cudaMemcpyDeviceToDevice, be.stream()));
  }
  stop.Record(be.stream());
  stop.Synchronize();
  return 2.0 * bytes * reps / (stop.MillisSince(start) * 1e-3);
}

void GemvBench(CudaBackend& be) {
  struct Shape2 {
    const char* name;
    int64_t m, k;
  };
  std::printf("\nbatch-1 GEMM (bf16; back to back, 8 weight copies so L2 does not hold them):\n");
  for (Shape2 s :
       {Shape2{"8B q/o 4096x4096", 4096, 4096}, Shape2{"8B qkv 6144x4096", 6144, 4096},
        Shape2{"8B gate_up 28672x4096", 28672, 4096}, Shape2{"8B down 4096x14336", 4096, 14336},
        Shape2{"8B lm_head 128256x4096", 128256, 4096}, Shape2{"1B o 2048x2048", 2048, 2048},
        Shape2{"1B qkv 3072x2048", 3072, 2048}, Shape2{"1B gate_up 16384x2048", 16384, 2048},
        Shape2{"1B down 2048x8192", 2048, 8192}}) {
    const int copies = 8;
    std::vector<Tensor> ws;
    for (int i = 0; i < copies; ++i) {
      ws.push_back(be.Alloc(DType::kBF16, Shape{s.m, s.k}));
      be.FillUniform(ws.back(), 90 + i, -0.01f, 0.02f);
    }
    Tensor x = be.Alloc(DType::kBF16, Shape{1, s.k});
    be.FillUniform(x, 1, -1.f, 2.f);
    Tensor out = be.Alloc(DType::kBF16, Shape{1, s.m});
    std::printf("  %-24s", s.name);
    for (int variant : {0, 1, 2}) {  // cuBLASLt, small-batch kernel, streamed GEMV
      be.set_small_batch_gemm_rows(variant == 0 ? 0 : 8);
      be.set_stream_gemv(variant == 2);
      for (int i = 0; i < copies; ++i) be.MatMul(x, ws[static_cast<size_t>(i)], Tensor(), out);
      cuda::CudaEvent start, stop;
      start.Record(be.stream());
      const int reps = 40;
      for (int i = 0; i < reps; ++i) {
        be.MatMul(x, ws[static_cast<size_t>(i % copies)], Tensor(), out);
      }
      stop.Record(be.stream());
      stop.Synchronize();
      const double us = stop.MillisSince(start) * 1e3 / reps;
      static const char* const kNames[] = {"cuBLASLt", "small-batch", "streamed"};
      std::printf("  %s %7.1f us %5.0f GB/s", kNames[variant], us, s.m * s.k * 2 / (us * 1e3));
    }
    std::printf("\n");
  }
  be.set_small_batch_gemm_rows(1);
  be.set_stream_gemv(true);
}

// Random codes in valid blocks (f16 scales set to small finite values, so no value is NaN);
// speed does not depend on values.
Tensor RandomQuantWeight(CudaBackend& be, DType dt, int64_t m, int64_t k, uint64_t seed) {
  Tensor h = HostTensor(dt, Shape{m, k});
  auto* p = static_cast<uint8_t*>(h.data());
  uint64_t x = seed * 0x9E3779B97F4A7C15ull + 1;
  for (size_t i = 0; i + 8 <= h.nbytes(); i += 8) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    std::memcpy(p + i, &x, 8);
  }
  const DTypeInfo& info = GetDTypeInfo(dt);
  const uint16_t small = F32ToF16(1e-4f);
  for (size_t b = 0; b < h.nbytes() / info.block_bytes; ++b) {
    uint8_t* blk = p + b * info.block_bytes;
    if (dt == DType::kQ6_K) {
      std::memcpy(blk + 208, &small, 2);
    } else {
      std::memcpy(blk, &small, 2);
      if (dt == DType::kQ4_K || dt == DType::kQ5_K) std::memcpy(blk + 2, &small, 2);
    }
  }
  return be.Upload(h);
}

void QuantGemvBench(CudaBackend& be) {
  struct Shape2 {
    const char* name;
    int64_t m, k;
  };
  std::printf("\nquantized GEMV (back to back, 4 weight copies; GB/s of the quantized bytes):\n");
  for (DType dt : {DType::kQ4_K, DType::kQ5_K, DType::kQ6_K, DType::kQ8_0}) {
    for (Shape2 s :
         {Shape2{"8B q/o 4096x4096", 4096, 4096}, Shape2{"8B k/v 1024x4096", 1024, 4096},
          Shape2{"8B gate_up 28672x4096", 28672, 4096}, Shape2{"8B down 4096x14336", 4096, 14336},
          Shape2{"8B lm_head 128256x4096", 128256, 4096}}) {
      const int copies = 4;
      std::vector<Tensor> ws;
      for (int i = 0; i < copies; ++i) ws.push_back(RandomQuantWeight(be, dt, s.m, s.k, i + 1));
      const double bytes = static_cast<double>(ws[0].nbytes());
      std::printf("  %-5s %-24s", std::string(DTypeName(dt)).c_str(), s.name);
      for (int64_t n : {1, 4, 8, 64}) {
        CudaTuning t = be.tuning();
        t.quant_gemv_rows = 8;
        be.set_tuning(t);
        Tensor x = be.Alloc(DType::kBF16, Shape{n, s.k});
        be.FillUniform(x, 1, -1.f, 2.f);
        Tensor out = be.Alloc(DType::kBF16, Shape{n, s.m});
        for (int i = 0; i < copies; ++i) be.MatMul(x, ws[static_cast<size_t>(i)], Tensor(), out);
        cuda::CudaEvent start, stop;
        start.Record(be.stream());
        const int reps = n == 64 ? 8 : 40;
        for (int i = 0; i < reps; ++i) {
          be.MatMul(x, ws[static_cast<size_t>(i % copies)], Tensor(), out);
        }
        stop.Record(be.stream());
        stop.Synchronize();
        const double us = stop.MillisSince(start) * 1e3 / reps;
        std::printf("  n=%lld %7.1f us %5.0f GB/s", static_cast<long long>(n), us,
                    bytes / (us * 1e3));
      }
      std::printf("\n");
    }
  }
}

}  // namespace
}  // namespace loom

int main(int argc, char** argv) {
  using namespace loom;
  const bool gemv_only = argc > 1 && std::string(argv[1]) == "gemv";
  const bool qgemv_only = argc > 1 && std::string(argv[1]) == "qgemv";
  const int context = argc > 1 && !gemv_only && !qgemv_only ? std::atoi(argv[1]) : 512;
  const int steps = argc > 2 ? std::atoi(argv[2]) : 20;
  const int warmup = 3;
  if (CudaBackend::DeviceCount() == 0) {
    std::fprintf(stderr, "cuda_bench: no CUDA device\n");
    return 1;
  }
  auto be_or = CudaBackend::Create();
  CHECK_OK(be_or.status());
  CudaBackend& be = **be_or;
  std::printf("device: %s\n", be.name().c_str());
  const double copy_bw = MeasureCopyBandwidth(be);
  std::printf("device-to-device copy: %.2f TB/s (read + write)\n", copy_bw / 1e12);
  if (qgemv_only) {
    QuantGemvBench(be);
    return 0;
  }
  GemvBench(be);
  if (gemv_only) return 0;

  const ModelConfig cfg = Llama31_8BConfig();
  auto t0 = std::chrono::steady_clock::now();
  std::unique_ptr<Model> model = MakeBenchModel(&be);
  be.Synchronize();
  const double build_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const Weights& w = model->weights();
  const double weight_bytes = static_cast<double>(w.total_bytes);
  const double read_bytes = weight_bytes - static_cast<double>(w.embed.nbytes());
  std::printf(
      "\nLlama-3.1-8B shapes, random bf16 weights: %.2f GB (built in %.2f s); %.2f GB "
      "read per decode step (all but the embedding)\n",
      weight_bytes / 1e9, build_s, read_bytes / 1e9);

  const int max_batch = 64;
  const int tokens_per_seq = context + warmup + steps + 1;
  const int pages_per_seq = (tokens_per_seq + kBlock - 1) / kBlock;
  const int num_blocks = std::max(max_batch * pages_per_seq, 1000 / kBlock + 2);
  std::vector<KvLayer> kv = model->AllocateKv(num_blocks, kBlock, DType::kBF16);
  for (size_t i = 0; i < kv.size(); ++i) {
    be.FillUniform(kv[i].k, 1000 + i, -1.f, 2.f);
    be.FillUniform(kv[i].v, 2000 + i, -1.f, 2.f);
  }
  const double kv_token_bytes = static_cast<double>(model->KvBytesPerToken(DType::kBF16));
  std::printf("KV cache: %d blocks of %d tokens, %.1f GB\n", num_blocks, kBlock,
              num_blocks * kBlock * kv_token_bytes / 1e9);

  std::printf("\ndecode (context %d tokens per sequence, %d timed steps):\n", context, steps);
  std::printf("  %5s %-11s %9s %9s %9s %11s %8s %9s\n", "batch", "gemm", "ms/step", "gpu ms",
              "tok/s", "roofline", "of roof", "of copyBW");
  struct Config {
    int batch, small_rows;
  };
  for (Config conf : {Config{1, 8}, Config{1, 0}, Config{8, 8}, Config{8, 0}, Config{64, 8}}) {
    const int batch = conf.batch;
    be.set_small_batch_gemm_rows(conf.small_rows);
    std::vector<std::vector<int32_t>> tables(static_cast<size_t>(batch));
    for (int s = 0; s < batch; ++s) {
      for (int p = 0; p < pages_per_seq; ++p)
        tables[static_cast<size_t>(s)].push_back(s * pages_per_seq + p);
    }
    std::vector<std::vector<int32_t>> tok(static_cast<size_t>(batch), std::vector<int32_t>(1));
    double wall_ms = 0, gpu_ms = 0;
    for (int step = 0; step < warmup + steps; ++step) {
      std::vector<SeqSlice> seqs;
      for (int s = 0; s < batch; ++s) {
        tok[static_cast<size_t>(s)][0] = (step * 7919 + s * 104729) % cfg.vocab_size;
        seqs.push_back(SeqSlice{tok[static_cast<size_t>(s)], context + step,
                                tables[static_cast<size_t>(s)], true});
      }
      cuda::CudaEvent start, stop;
      const auto w0 = std::chrono::steady_clock::now();
      HostForwardBatch hb = BuildHostForwardBatch(seqs, kBlock);
      ForwardInput in = UploadForwardBatch(hb, kBlock, &be);
      Tensor logits = be.Alloc(DType::kF32, Shape{batch, cfg.vocab_size});
      start.Record(be.stream());
      CHECK_OK(model->Forward(in, kv, logits));
      stop.Record(be.stream());
      be.Synchronize();
      const double wms =
          std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - w0).count();
      if (step >= warmup) {
        wall_ms += wms;
        gpu_ms += stop.MillisSince(start);
      }
    }
    wall_ms /= steps;
    gpu_ms /= steps;
    const double bytes = read_bytes + batch * (context + warmup + steps / 2.0) * kv_token_bytes;
    const double roof_ms = bytes / kPeakBytesPerSec * 1e3;
    std::printf("  %5d %-11s %9.3f %9.3f %9.1f %8.3f ms %7.1f%% %8.1f%%\n", batch,
                conf.small_rows >= batch ? "small-batch" : "cuBLASLt", wall_ms, gpu_ms,
                batch * 1e3 / wall_ms, roof_ms, 100 * roof_ms / wall_ms,
                100 * bytes / copy_bw * 1e3 / wall_ms);
  }
  be.set_small_batch_gemm_rows(1);

  // Prefill: one 1000-token prompt, logits of the last token only.
  {
    const int n = 1000;
    std::vector<int32_t> prompt(n);
    for (int i = 0; i < n; ++i) prompt[static_cast<size_t>(i)] = (i * 31) % cfg.vocab_size;
    std::vector<int32_t> table;
    for (int p = 0; p < (n + kBlock - 1) / kBlock; ++p) table.push_back(p);
    double best = 1e30;
    for (int rep = 0; rep < 4; ++rep) {
      std::vector<SeqSlice> seqs = {SeqSlice{prompt, 0, table, true}};
      const auto w0 = std::chrono::steady_clock::now();
      HostForwardBatch hb = BuildHostForwardBatch(seqs, kBlock);
      ForwardInput in = UploadForwardBatch(hb, kBlock, &be);
      Tensor logits = be.Alloc(DType::kF32, Shape{1, cfg.vocab_size});
      CHECK_OK(model->Forward(in, kv, logits));
      be.Synchronize();
      const double ms =
          std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - w0).count();
      if (rep > 0) best = std::min(best, ms);
    }
    // 2 flop per weight per token in the layers (attention scores and lm_head not counted).
    const double flops = 2.0 * ((read_bytes - w.lm_head.nbytes()) / 2) * n;
    std::printf("\nprefill %d tokens: %.2f ms, %.0f tok/s, %.0f TFLOP/s in the linear layers\n", n,
                best, n * 1e3 / best, flops / (best * 1e-3) / 1e12);
  }
  return 0;
}
