#include "backend/cuda/cublaslt_gemm.h"

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/device_allocator.h"

namespace loom::cuda {
namespace {

constexpr size_t kWorkspaceBytes = size_t{32} << 20;  // cuBLAS' recommendation for Hopper

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

CublasLtGemm::CublasLtGemm(DeviceAllocator& allocator, cudaStream_t stream) : stream_(stream) {
  CUBLAS_CHECK(cublasLtCreate(&handle_));
  workspace_ = Tensor(DType::kI32, Shape{static_cast<int64_t>(kWorkspaceBytes / 4)},
                      allocator.NewBuffer(kWorkspaceBytes));
}

CublasLtGemm::~CublasLtGemm() {
  plans_.clear();
  if (handle_ != nullptr) cublasLtDestroy(handle_);
}

CublasLtGemm::Plan& CublasLtGemm::GetPlan(int64_t n, int64_t m, int64_t k, DType out_dtype) {
  const Key key{n, m, k, static_cast<int>(out_dtype)};
  auto it = plans_.find(key);
  if (it != plans_.end()) return *it->second;

  auto plan = std::make_unique<Plan>();
  const cudaDataType_t out_t = out_dtype == DType::kF32 ? CUDA_R_32F : CUDA_R_16BF;
  CUBLAS_CHECK(cublasLtMatmulDescCreate(&plan->op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  const cublasOperation_t ta = CUBLAS_OP_T, tb = CUBLAS_OP_N;
  CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(plan->op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta));
  CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(plan->op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb));
  // A = W stored col-major as k x m (ld k); B = X stored col-major as k x n; C = m x n (ld m).
  CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&plan->a, CUDA_R_16BF, static_cast<uint64_t>(k),
                                          static_cast<uint64_t>(m), k));
  CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&plan->b, CUDA_R_16BF, static_cast<uint64_t>(k),
                                          static_cast<uint64_t>(n), k));
  CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&plan->c, out_t, static_cast<uint64_t>(m),
                                          static_cast<uint64_t>(n), m));

  cublasLtMatmulPreference_t pref = nullptr;
  CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&pref));
  const size_t ws = kWorkspaceBytes;
  CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(
      pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws));
  cublasLtMatmulHeuristicResult_t result{};
  int found = 0;
  CUBLAS_CHECK(cublasLtMatmulAlgoGetHeuristic(handle_, plan->op, plan->a, plan->b, plan->c,
                                              plan->c, pref, 1, &result, &found));
  cublasLtMatmulPreferenceDestroy(pref);
  CHECK(found > 0) << "cuBLASLt has no bf16 algorithm for out[" << n << ", " << m << "] = x[" << n
                   << ", " << k << "] @ w^T";
  plan->algo = result.algo;
  Plan& ref = *plan;
  plans_.emplace(key, std::move(plan));
  return ref;
}

void CublasLtGemm::Run(const void* x, const void* w, void* out, DType out_dtype, int64_t n,
                       int64_t m, int64_t k) {
  CHECK(out_dtype == DType::kF32 || out_dtype == DType::kBF16) << DTypeName(out_dtype);
  if (n == 0 || m == 0) return;
  Plan& p = GetPlan(n, m, k, out_dtype);
  const float alpha = 1.f, beta = 0.f;
  CUBLAS_CHECK(cublasLtMatmul(handle_, p.op, &alpha, w, p.a, x, p.b, &beta, out, p.c, out, p.c,
                              &p.algo, workspace_.data(), kWorkspaceBytes, stream_));
}

}  // namespace loom::cuda
