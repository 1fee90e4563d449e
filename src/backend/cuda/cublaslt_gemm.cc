#include "backend/cuda/cublaslt_gemm.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/device_allocator.h"

namespace loom::cuda {
namespace {

constexpr size_t kWorkspaceBytes = size_t{32} << 20;  // cuBLAS' recommendation for Hopper

std::string AlgoString(const cublasLtMatmulAlgo_t& algo) {
  int id = -1, tile = -1, splitk = -1, stages = -1, reduction = -1, swizzle = -1;
  size_t w = 0;
  cublasLtMatmulAlgoConfigGetAttribute(&algo, CUBLASLT_ALGO_CONFIG_ID, &id, sizeof id, &w);
  cublasLtMatmulAlgoConfigGetAttribute(&algo, CUBLASLT_ALGO_CONFIG_TILE_ID, &tile, sizeof tile, &w);
  cublasLtMatmulAlgoConfigGetAttribute(&algo, CUBLASLT_ALGO_CONFIG_SPLITK_NUM, &splitk,
                                       sizeof splitk, &w);
  cublasLtMatmulAlgoConfigGetAttribute(&algo, CUBLASLT_ALGO_CONFIG_STAGES_ID, &stages,
                                       sizeof stages, &w);
  cublasLtMatmulAlgoConfigGetAttribute(&algo, CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME, &reduction,
                                       sizeof reduction, &w);
  cublasLtMatmulAlgoConfigGetAttribute(&algo, CUBLASLT_ALGO_CONFIG_CTA_SWIZZLING, &swizzle,
                                       sizeof swizzle, &w);
  return "id " + std::to_string(id) + " tile " + std::to_string(tile) + " splitk " +
         std::to_string(splitk) + " stages " + std::to_string(stages) + " red " +
         std::to_string(reduction) + " swz " + std::to_string(swizzle);
}

}  // namespace

struct CublasLtGemm::Plan {
  cublasLtMatmulDesc_t op = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
  cublasLtMatmulAlgo_t algo{};
  ~Plan() {
    if (a) cublasLtMatrixLayoutDestroy(a);
    if (b) cublasLtMatrixLayoutDestroy(b);
    if (c) cublasLtMatrixLayoutDestroy(c);
    if (op) cublasLtMatmulDescDestroy(op);
  }
};

CublasLtGemm::CublasLtGemm(DeviceAllocator& allocator, cudaStream_t stream, int tune,
                           bool print_plans)
    : allocator_(allocator), stream_(stream), tune_(tune), print_plans_(print_plans) {
  CHECK_GE(tune, 1) << "CublasLtGemm: tune " << tune;
  CUBLAS_CHECK(cublasLtCreate(&handle_));
  workspace_ = Tensor(DType::kI32, Shape{static_cast<int64_t>(kWorkspaceBytes / 4)},
                      allocator.NewBuffer(kWorkspaceBytes));
}

CublasLtGemm::~CublasLtGemm() {
  plans_.clear();
  if (handle_ != nullptr) cublasLtDestroy(handle_);
}

CublasLtGemm::Plan& CublasLtGemm::GetPlan(int64_t n, int64_t m, int64_t k, DType out_dtype,
                                          bool accumulate, int64_t ldc, const void* x,
                                          const void* w, void* out) {
  const Key key{n, m, k, static_cast<int>(out_dtype), accumulate, ldc};
  auto it = plans_.find(key);
  if (it != plans_.end()) return *it->second;

  auto plan = std::make_unique<Plan>();
  const cudaDataType_t out_t = out_dtype == DType::kF32 ? CUDA_R_32F : CUDA_R_16BF;
  CUBLAS_CHECK(cublasLtMatmulDescCreate(&plan->op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  const cublasOperation_t ta = CUBLAS_OP_T, tb = CUBLAS_OP_N;
  CUBLAS_CHECK(
      cublasLtMatmulDescSetAttribute(plan->op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta));
  CUBLAS_CHECK(
      cublasLtMatmulDescSetAttribute(plan->op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb));
  // A = W stored col-major as k x m (ld k); B = X stored col-major as k x n; C = m x n (ld ldc).
  CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&plan->a, CUDA_R_16BF, static_cast<uint64_t>(k),
                                          static_cast<uint64_t>(m), k));
  CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&plan->b, CUDA_R_16BF, static_cast<uint64_t>(k),
                                          static_cast<uint64_t>(n), k));
  CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&plan->c, out_t, static_cast<uint64_t>(m),
                                          static_cast<uint64_t>(n), ldc));

  cublasLtMatmulPreference_t pref = nullptr;
  CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&pref));
  const size_t ws = kWorkspaceBytes;
  CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                                    &ws, sizeof ws));
  // tune_ > 1: time cuBLASLt's first tune_ heuristic candidates on the real operands (not while
  // the stream captures a graph, and not when accumulating: the trial runs would add into `out`
  // repeatedly) and keep the fastest.
  cudaStreamCaptureStatus capturing = cudaStreamCaptureStatusNone;
  CUDA_CHECK(cudaStreamIsCapturing(stream_, &capturing));
  const int tune = capturing == cudaStreamCaptureStatusNone && !accumulate ? tune_ : 1;
  std::vector<cublasLtMatmulHeuristicResult_t> results(static_cast<size_t>(std::max(tune, 1)));
  int found = 0;
  CUBLAS_CHECK(cublasLtMatmulAlgoGetHeuristic(handle_, plan->op, plan->a, plan->b, plan->c, plan->c,
                                              pref, static_cast<int>(results.size()),
                                              results.data(), &found));
  cublasLtMatmulPreferenceDestroy(pref);
  CHECK(found > 0) << "cuBLASLt has no bf16 algorithm for out[" << n << ", " << m << "] = x[" << n
                   << ", " << k << "] @ w^T";
  int best = 0;
  std::vector<float> us(static_cast<size_t>(found), 0.f);
  if (found > 1) {
    cudaEvent_t e0, e1;
    CUDA_CHECK(cudaEventCreate(&e0));
    CUDA_CHECK(cudaEventCreate(&e1));
    const float alpha = 1.f, beta = 0.f;
    constexpr int kReps = 10;
    constexpr size_t kFlushBytes = size_t{128} << 20;
    const std::shared_ptr<Buffer> flush_buf = allocator_.NewBuffer(kFlushBytes);
    void* flush = flush_buf->data();
    for (int i = 0; i < found; ++i) {
      auto run = [&] {
        return cublasLtMatmul(handle_, plan->op, &alpha, w, plan->a, x, plan->b, &beta, out,
                              plan->c, out, plan->c, &results[i].algo, workspace_.data(),
                              kWorkspaceBytes, stream_);
      };
      if (run() != CUBLAS_STATUS_SUCCESS) {
        us[i] = 1e30f;
        continue;
      }
      float total = 0.f;
      for (int r = 0; r < kReps; ++r) {  // L2 flushed before each: weights come from HBM
        CUDA_CHECK(cudaMemsetAsync(flush, r, kFlushBytes, stream_));
        CUDA_CHECK(cudaEventRecord(e0, stream_));
        CUBLAS_CHECK(run());
        CUDA_CHECK(cudaEventRecord(e1, stream_));
        CUDA_CHECK(cudaEventSynchronize(e1));
        float ms = 0.f;
        CUDA_CHECK(cudaEventElapsedTime(&ms, e0, e1));
        total += ms;
      }
      us[i] = 1e3f * total / kReps;
      if (us[i] < us[best]) best = i;
    }
    CUDA_CHECK(cudaStreamSynchronize(stream_));  // before flush_buf returns to the cache
    cudaEventDestroy(e0);
    cudaEventDestroy(e1);
  }
  if (print_plans_) {
    for (int i = 0; i < found; ++i) {
      std::fprintf(stderr, "cublaslt n=%lld m=%lld k=%lld cand %d: %s%s %.2f us%s\n",
                   static_cast<long long>(n), static_cast<long long>(m), static_cast<long long>(k),
                   i, AlgoString(results[i].algo).c_str(), i == 0 ? " (heuristic)" : "", us[i],
                   i == best ? " <- chosen" : "");
    }
  }
  plan->algo = results[best].algo;
  Plan& ref = *plan;
  plans_.emplace(key, std::move(plan));
  return ref;
}

void CublasLtGemm::Run(const void* x, const void* w, void* out, DType out_dtype, int64_t n,
                       int64_t m, int64_t k, bool accumulate, int64_t ldc) {
  CHECK(out_dtype == DType::kF32 || out_dtype == DType::kBF16) << DTypeName(out_dtype);
  CHECK(ldc == 0 || ldc >= m) << "cuBLASLt: ldc " << ldc << " < m " << m;
  if (n == 0 || m == 0) return;
  Plan& p = GetPlan(n, m, k, out_dtype, accumulate, ldc == 0 ? m : ldc, x, w, out);
  const float alpha = 1.f, beta = accumulate ? 1.f : 0.f;
  CUBLAS_CHECK(cublasLtMatmul(handle_, p.op, &alpha, w, p.a, x, p.b, &beta, out, p.c, out, p.c,
                              &p.algo, workspace_.data(), kWorkspaceBytes, stream_));
}

}  // namespace loom::cuda
