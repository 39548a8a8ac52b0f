#pragma once
// Bench-only: ONE cuBLASLt matmul over `count` independent GEMMs of the same shape at fixed strides
// (CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT / STRIDED_BATCH_OFFSET), the fair baseline of a grouped GEMM with
// balanced routing: the same per-expert problems, one launch, the output written per problem exactly as
// the grouped op writes it. Each problem is a kernels::GemmDesc (column-major, as kernels/gemm.h); the
// context (handle, workspace) is the Blas's. Kept here rather than in kernels/gemm.h because nothing in
// the training step runs a strided batch, and gemm.h is included by most of the model (a change there
// recompiles it).
#include <cublasLt.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <string>

#include "core/error.h"
#include "core/strings.h"
#include "kernels/cublaslt_check.h"
#include "kernels/gemm.h"

namespace sg::bench {

struct StridedBatch {
  int count = 1;
  int64_t stride_a = 0, stride_b = 0, stride_d = 0;  // elements from one problem's matrix to the next
};

class StridedBatchedGemm {
 public:
  StridedBatchedGemm(kernels::Blas& blas, const kernels::GemmDesc& one, const StridedBatch& batch)
      : blas_(blas), one_(one), batch_(batch) {
    validate();
    // The caller may catch a failure and go on (the bench prints n/a), and a constructor that throws runs
    // no destructor: release what was created before rethrowing.
    try {
      create();
    } catch (...) {
      destroy();
      throw;
    }
  }
  ~StridedBatchedGemm() { destroy(); }
  StridedBatchedGemm(const StridedBatchedGemm&) = delete;
  StridedBatchedGemm& operator=(const StridedBatchedGemm&) = delete;

  // D_i = alpha op(A_i) op(B_i) + beta D_i for i < count, A_i = a + i * stride_a (and so on).
  void run(cudaStream_t stream, const void* a, const void* b, void* d) const {
    SG_CUBLASLT_CHECK(cublasLtMatmul(blas_.handle(), op_, &one_.alpha, a, a_, b, b_, &one_.beta, d, d_, d, d_, &algo_,
                                     blas_.workspace(), blas_.workspace_bytes(), stream));
  }

  std::string describe() const {
    return strprintf("%d x (%s) strides A=%lld B=%lld D=%lld", batch_.count, one_.describe().c_str(),
                     static_cast<long long>(batch_.stride_a), static_cast<long long>(batch_.stride_b),
                     static_cast<long long>(batch_.stride_d));
  }

 private:
  // The descriptors and the algorithm; throws sg::Error naming the failed call, or that there is no algorithm.
  void create() {
    const kernels::GemmDesc& one = one_;
    const cudaDataType_t ab = one.a_type == kernels::GemmDtype::kBF16 ? CUDA_R_16BF : CUDA_R_32F;
    const cudaDataType_t d = one.d_type == kernels::GemmDtype::kBF16 ? CUDA_R_16BF : CUDA_R_32F;
    SG_CUBLASLT_CHECK(cublasLtMatmulDescCreate(&op_, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    const cublasOperation_t ta = one.transpose_a ? CUBLAS_OP_T : CUBLAS_OP_N;
    const cublasOperation_t tb = one.transpose_b ? CUBLAS_OP_T : CUBLAS_OP_N;
    SG_CUBLASLT_CHECK(cublasLtMatmulDescSetAttribute(op_, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof(ta)));
    SG_CUBLASLT_CHECK(cublasLtMatmulDescSetAttribute(op_, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof(tb)));
    create_layout(a_, ab, one.transpose_a ? one.k : one.m, one.transpose_a ? one.m : one.k, one.lda, batch_.stride_a);
    create_layout(b_, ab, one.transpose_b ? one.n : one.k, one.transpose_b ? one.k : one.n, one.ldb, batch_.stride_b);
    create_layout(d_, d, one.m, one.n, one.ldd, batch_.stride_d);

    Preference pref;
    SG_CUBLASLT_CHECK(cublasLtMatmulPreferenceCreate(&pref.p));
    const uint64_t ws = blas_.workspace_bytes();
    SG_CUBLASLT_CHECK(
        cublasLtMatmulPreferenceSetAttribute(pref.p, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof(ws)));
    cublasLtMatmulHeuristicResult_t result{};
    int found = 0;
    const cublasStatus_t status =
        cublasLtMatmulAlgoGetHeuristic(blas_.handle(), op_, a_, b_, d_, d_, pref.p, 1, &result, &found);
    if (status != CUBLAS_STATUS_SUCCESS || found == 0) {
      throw Error("cuBLASLt has no algorithm for the strided batch " + describe() +
                  (status != CUBLAS_STATUS_SUCCESS
                       ? std::string(": cublasLtMatmulAlgoGetHeuristic failed: ") + cublasLtGetStatusString(status)
                       : std::string()));
    }
    algo_ = result.algo;
  }

  // The heuristic's preference, destroyed however create() ends.
  struct Preference {
    cublasLtMatmulPreference_t p = nullptr;
    Preference() = default;
    Preference(const Preference&) = delete;
    Preference& operator=(const Preference&) = delete;
    ~Preference() {
      if (p) SG_CUBLASLT_CHECK_NOEXCEPT(cublasLtMatmulPreferenceDestroy(p));
    }
  };

  // The problems' outputs must not overlap (each D_i is ldd x n); inputs may be shared (stride 0).
  void validate() const {
    SG_CHECK(batch_.count >= 1 && batch_.stride_a >= 0 && batch_.stride_b >= 0 &&
                 batch_.stride_d >= one_.ldd * one_.n && one_.epilogue == kernels::GemmEpilogue::kNone,
             "strided batched GEMM " + describe() +
                 ": count must be >= 1, strides >= 0, stride_d >= ldd * n (outputs must not overlap), no epilogue");
  }

  void destroy() noexcept {
    if (d_) SG_CUBLASLT_CHECK_NOEXCEPT(cublasLtMatrixLayoutDestroy(d_));
    if (b_) SG_CUBLASLT_CHECK_NOEXCEPT(cublasLtMatrixLayoutDestroy(b_));
    if (a_) SG_CUBLASLT_CHECK_NOEXCEPT(cublasLtMatrixLayoutDestroy(a_));
    if (op_) SG_CUBLASLT_CHECK_NOEXCEPT(cublasLtMatmulDescDestroy(op_));
    d_ = b_ = a_ = nullptr;
    op_ = nullptr;
  }

  // Into the member `l` itself, so destroy() releases it also when setting an attribute fails.
  void create_layout(cublasLtMatrixLayout_t& l, cudaDataType_t type, int64_t rows, int64_t cols, int64_t ld,
                     int64_t stride) const {
    SG_CUBLASLT_CHECK(cublasLtMatrixLayoutCreate(&l, type, rows, cols, ld));
    const int32_t count = batch_.count;
    SG_CUBLASLT_CHECK(cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count, sizeof(count)));
    SG_CUBLASLT_CHECK(
        cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride, sizeof(stride)));
  }

  kernels::Blas& blas_;
  kernels::GemmDesc one_;
  StridedBatch batch_;
  cublasLtMatmulDesc_t op_ = nullptr;
  cublasLtMatrixLayout_t a_ = nullptr, b_ = nullptr, d_ = nullptr;
  cublasLtMatmulAlgo_t algo_{};
};

}  // namespace sg::bench
