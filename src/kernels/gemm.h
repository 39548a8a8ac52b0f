#pragma once
// GEMMs through cuBLASLt, planned once and run many times (graph-safe).
//
// Plan time: a `Blas` context owns the cublasLt handle and ONE workspace (32 MiB by default). Each
// distinct GEMM (shape, dtypes, transposes, alpha/beta, epilogue, alignment) gets one `GemmPlan`:
// descriptors, matrix layouts and the algorithm from ONE heuristic query, cached in the Blas by its
// description, so asking again for the same GEMM returns the same plan without a new query.
// Step time: `run(stream, ...)` only calls cublasLtMatmul (no heuristic, no allocation, no sync), so it
// is capturable into a CUDA graph. alpha and beta are plan-time constants (host pointer mode: their
// values are captured by value, which is right because they never change between steps).
//
// Numerics: bf16 A/B, fp32 compute (CUBLAS_COMPUTE_32F) and fp32 scale; D (and C = D when beta != 0)
// bf16 or fp32. With the algorithm fixed at plan time cuBLASLt is bitwise deterministic run to run on
// the same GPU (all its split-K reduction schemes are ordered), which the GPU tests check.
//
// Concurrency: GEMMs sharing one Blas share its workspace, so they must run on ONE stream (the model's
// step stream). Use one Blas per stream otherwise.
//
// Row-major helpers (PyTorch convention, W [N, K] = [out, in]; activations [T, features]):
//   LinearForward        y[T,N]  = x[T,K] W^T              (bf16 out; optional bias epilogue)
//   LinearBackwardInput  dx[T,K] = dy[T,N] W  (+ dx)       (bf16 out; accumulate = beta 1)
//   LinearBackwardWeight dW[N,K] += dy^T x                 (main_grad fp32 or bf16, beta 1; or = for the first write)
// cuBLASLt is column-major: a row-major [R, C] matrix is the column-major [C, R] matrix with leading
// dimension C, i.e. its transpose. So row-major y = x W^T is the column-major y^T[N,T] = W x^T:
// A = W seen col-major is [K,N] (ld K) and op(A) = A^T = [N,K]; B = x seen col-major is [K,T] (ld K),
// op(B) = B; D = y seen col-major [N,T] (ld N): m=N, n=T, k=K. The other two are derived next to their
// constructors in gemm.cpp.
#include <cublasLt.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "cuda/bf16.h"
#include "cuda/library_workspaces.h"
#include "kernels/float_buffer.h"
#include "kernels/gemm_preferences.h"

namespace sg::kernels {

enum class GemmDtype { kBF16, kFP32 };

enum class GemmEpilogue {
  kNone,  // D = alpha op(A) op(B) + beta C
  kBias,  // D = alpha op(A) op(B) + beta C + bias broadcast over columns (bias has m elements,
          // dtype of D; for LinearForward: one per output feature N). Pointer given to run().
};

// A column-major GEMM: D[m, n] = alpha * op(A)[m, k] * op(B)[k, n] + beta * C[m, n], C = D in memory.
struct GemmDesc {
  bool transpose_a = false;  // op(A) = A^T: A is stored col-major [k, m] (ld >= k); else [m, k] (ld >= m)
  bool transpose_b = false;  // op(B) = B^T: B is stored col-major [n, k] (ld >= n); else [k, n] (ld >= k)
  int64_t m = 0, n = 0, k = 0;
  int64_t lda = 0, ldb = 0, ldd = 0;  // leading dimensions (elements), ldd >= m
  GemmDtype a_type = GemmDtype::kBF16;
  GemmDtype b_type = GemmDtype::kBF16;
  GemmDtype d_type = GemmDtype::kBF16;  // also the type of C
  float alpha = 1.0f;
  float beta = 0.0f;  // != 0: D is read as C (accumulate)
  GemmEpilogue epilogue = GemmEpilogue::kNone;
  // Every pointer given to run() must be aligned to this many bytes (checked in run()). 16 is what
  // Hopper kernels (TMA) need; a larger value can only narrow the algorithm choice.
  uint32_t min_alignment_bytes = 16;
  // Which of cuBLASLt's heuristic results to run. kPreferredAlgo (the step's): the configuration
  // kernels/gemm_preferences.h names for this shape where it names one, else the heuristic's first choice. A rank
  // >= 0 (0 = the first) serves the benches that compare cuBLASLt's candidates (bench/gemm_power_bench.cu). The
  // heuristic's order is fixed for a given cuBLASLt and GPU, so every choice is as deterministic as the first.
  static constexpr int kPreferredAlgo = -1;
  int heuristic_rank = kPreferredAlgo;
  // With heuristic_rank == kPreferredAlgo: run exactly this tile and cluster (bench/gemm_power_bench.cu --explore
  // times configurations the heuristic does not rank); the plan throws if cuBLASLt cannot run it. {0, 0} = none.
  GemmAlgoConfig requested_config{};

  auto key() const {
    return std::make_tuple(transpose_a, transpose_b, m, n, k, lda, ldb, ldd, static_cast<int>(a_type),
                           static_cast<int>(b_type), static_cast<int>(d_type), alpha, beta, static_cast<int>(epilogue),
                           min_alignment_bytes, heuristic_rank, requested_config.tile_id, requested_config.cluster_id);
  }
  bool has_requested_config() const { return requested_config.tile_id != 0 || requested_config.cluster_id != 0; }
  std::string describe() const;  // "m=.. n=.. k=.. opA=T opB=N A=bf16 B=bf16 D=fp32 beta=1 ..." for errors
};

class Blas;

// One planned GEMM. Built only through Blas::plan (which caches it); lives as long as the Blas.
class GemmPlan {
 public:
  ~GemmPlan();
  GemmPlan(const GemmPlan&) = delete;
  GemmPlan& operator=(const GemmPlan&) = delete;

  // D = alpha op(A) op(B) + beta D (+ bias). Only cublasLtMatmul is called; capturable.
  // Throws sg::Error if a pointer is null or misaligned (host-side pointer arithmetic only).
  void run(cudaStream_t stream, const void* a, const void* b, void* d, const void* bias = nullptr) const;
  // D = alpha op(A) op(B) (+ bias): the same call with beta 0, so D is not read (it may hold anything,
  // NaN included). For the first write of an accumulating GEMM: the algorithm is this plan's (the
  // heuristic query does not see beta), so the bits equal run() on a zeroed D.
  void run_overwriting(cudaStream_t stream, const void* a, const void* b, void* d, const void* bias = nullptr) const;

  const GemmDesc& desc() const { return desc_; }
  size_t algo_workspace_bytes() const { return algo_workspace_bytes_; }  // what the chosen algo uses
  // The chosen algorithm's configuration as cuBLASLt reports it ("algo 66 tile 24 stages 19 cluster 3 split-k 1
  // swizzle 0"; the numbers are cublasLt.h's enum values), for benches and logs.
  std::string algo_summary() const;
  GemmAlgoConfig algo_config() const;  // its tile and cluster shape
  // The tiles cuBLASLt's chosen algorithm can run with (CUBLASLT_ALGO_CAP_TILE_IDS), for the bench that tries them.
  std::vector<int64_t> tile_ids() const;

 private:
  friend class Blas;
  GemmPlan(const Blas& blas, const GemmDesc& desc);
  void destroy_descriptors();
  // `base` with its tile and cluster set to `config`, checked by cuBLASLt (cublasLtMatmulAlgoCheck) and within the
  // workspace: true and `result` filled, or false.
  bool configured(const cublasLtMatmulAlgo_t& base, const GemmAlgoConfig& config,
                  cublasLtMatmulHeuristicResult_t& result) const;
  // cublasLtMatmul with this plan's descriptors and algorithm; beta by value (host pointer mode).
  void launch(cudaStream_t stream, const void* a, const void* b, void* d, const void* bias, float beta) const;

  const Blas& blas_;
  GemmDesc desc_;
  cublasLtMatmulDesc_t op_ = nullptr;
  cublasLtMatrixLayout_t a_layout_ = nullptr, b_layout_ = nullptr, d_layout_ = nullptr;
  cublasLtMatmulAlgo_t algo_{};
  size_t algo_workspace_bytes_ = 0;
};

// The cuBLASLt context: handle + one workspace + the plan cache. Not copyable; create once per stream.
class Blas {
 public:
  static constexpr size_t kWorkspaceBytes = size_t{32} << 20;  // 32 MiB, what the model must plan

  // workspace == nullptr: allocates kWorkspaceBytes once here (cuda::device_allocate, so not inside a
  // step) and frees it in the destructor (tests, tools). Otherwise uses the caller's device memory (the
  // model puts it in its arena), which must hold workspace_bytes, be 256-byte aligned and outlive this Blas.
  explicit Blas(void* workspace = nullptr, size_t workspace_bytes = kWorkspaceBytes);
  ~Blas();
  Blas(const Blas&) = delete;
  Blas& operator=(const Blas&) = delete;

  // Plan time only: the cached plan for desc (one heuristic query the first time). The reference
  // stays valid for the lifetime of this Blas. Throws sg::Error naming the shape and dtypes when the
  // description is invalid or cuBLASLt has no algorithm for it.
  const GemmPlan& plan(const GemmDesc& desc);
  size_t num_plans() const { return plans_.size(); }

  cublasLtHandle_t handle() const { return handle_; }
  void* workspace() const { return workspace_; }
  size_t workspace_bytes() const { return workspace_bytes_; }

 private:
  cublasLtHandle_t handle_ = nullptr;
  void* workspace_ = nullptr;
  size_t workspace_bytes_ = 0;
  bool owns_workspace_ = false;
  cuda::LibraryWorkspace workspace_registration_;  // cuBLASLt's alone (graph/workspace_memsets.h)
  std::map<decltype(GemmDesc{}.key()), std::unique_ptr<GemmPlan>> plans_;
};

// ---- Row-major linear helpers (bf16 activations/weights; each holds a cached plan of its Blas) ----

// The GEMM each helper plans (gemm.cpp derives them), for benches that plan them with another heuristic_rank.
GemmDesc linear_forward_desc(int64_t T, int64_t K, int64_t N, bool with_bias = false);
GemmDesc linear_backward_input_desc(int64_t T, int64_t K, int64_t N, bool accumulate = false);
GemmDesc linear_backward_weight_desc(int64_t T, int64_t K, int64_t N, FloatDtype grad_dtype = FloatDtype::fp32);

// y[T, N] = x[T, K] W[N, K]^T (+ bias[N]), bf16 out, fp32 accumulate.
class LinearForward {
 public:
  LinearForward(Blas& blas, int64_t T, int64_t K, int64_t N, bool with_bias = false);
  void run(cudaStream_t stream, bf16* y, const bf16* x, const bf16* w, const bf16* bias = nullptr) const;

 private:
  const GemmPlan* plan_;
  bool with_bias_;
};

// dx[T, K] = dy[T, N] W[N, K] (accumulate: dx += ..., beta = 1, e.g. summing two branches' input
// gradients without a separate add), bf16 out, fp32 accumulate.
class LinearBackwardInput {
 public:
  LinearBackwardInput(Blas& blas, int64_t T, int64_t K, int64_t N, bool accumulate = false);
  void run(cudaStream_t stream, bf16* dx, const bf16* dy, const bf16* w) const;

 private:
  const GemmPlan* plan_;
};

// dW[N, K] += dy[T, N]^T x[T, K] into the main_grad (beta = 1), or with `overwrite` dW = dy^T x
// (the step's first write of this gradient, model/gradient_zeroing.h: dW is not read). Both bitwise
// equal on a zeroed dW: the same algorithm. The main_grad is fp32, or bf16 with ddp.grad_reduce_in_fp32=false:
// the sum is fp32 either way. Accumulating into bf16, cuBLASLt's epilogue either rounds the sum over the widened dW
// once or, by the algorithm its heuristic picks for the shape, rounds the product sum to bf16, adds it to the stored
// value and rounds again, as PyTorch's `grad += bf16 gradient` and Megatron's bf16 main_grad do (measured,
// tests/kernels/gemm_gpu_test.cu); an overwrite rounds it once.
class LinearBackwardWeight {
 public:
  LinearBackwardWeight(Blas& blas, int64_t T, int64_t K, int64_t N, FloatDtype grad_dtype = FloatDtype::fp32);
  // Throws sg::Error when dw's dtype is not the planned one.
  void run(cudaStream_t stream, FloatBuffer dw, const bf16* dy, const bf16* x, bool overwrite = false) const;

 private:
  const GemmPlan* plan_;
  FloatDtype grad_dtype_;
};

}  // namespace sg::kernels
