#include "kernels/gemm.h"

#include <cstdint>
#include <optional>
#include <vector>

#include "core/error.h"
#include "core/log.h"
#include "core/strings.h"
#include "cuda/arena.h"
#include "cuda/check.h"
#include "cuda/device.h"
#include "kernels/cublaslt_check.h"

namespace sg::kernels {
namespace {

const char* dtype_name(GemmDtype t) { return t == GemmDtype::kBF16 ? "bf16" : "fp32"; }

cudaDataType_t cuda_dtype(GemmDtype t) { return t == GemmDtype::kBF16 ? CUDA_R_16BF : CUDA_R_32F; }

bool aligned(const void* p, uint32_t alignment) {
  return reinterpret_cast<uintptr_t>(p) % alignment == 0;
}

template <class T>
void set_desc_attr(cublasLtMatmulDesc_t desc, cublasLtMatmulDescAttributes_t attr, const T& value) {
  SG_CUBLASLT_CHECK(cublasLtMatmulDescSetAttribute(desc, attr, &value, sizeof(value)));
}

template <class T>
void set_pref_attr(cublasLtMatmulPreference_t pref, cublasLtMatmulPreferenceAttributes_t attr, const T& value) {
  SG_CUBLASLT_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, attr, &value, sizeof(value)));
}

void validate(const GemmDesc& d) {
  const std::string what = "GEMM plan (" + d.describe() + "): ";
  SG_CHECK(d.m > 0 && d.n > 0 && d.k > 0, what + "m, n and k must be positive");
  const int64_t a_rows = d.transpose_a ? d.k : d.m;
  const int64_t b_rows = d.transpose_b ? d.n : d.k;
  SG_CHECK(d.lda >= a_rows, what + strprintf("lda %lld < %lld rows of A", (long long)d.lda, (long long)a_rows));
  SG_CHECK(d.ldb >= b_rows, what + strprintf("ldb %lld < %lld rows of B", (long long)d.ldb, (long long)b_rows));
  SG_CHECK(d.ldd >= d.m, what + strprintf("ldd %lld < m %lld", (long long)d.ldd, (long long)d.m));
  SG_CHECK(d.a_type == d.b_type, what + "A and B must have the same dtype");
  SG_CHECK(!(d.a_type == GemmDtype::kFP32 && d.d_type == GemmDtype::kBF16),
           what + "fp32 A/B with a bf16 D is not a supported cuBLASLt combination");
  SG_CHECK(d.min_alignment_bytes >= 1 && (d.min_alignment_bytes & (d.min_alignment_bytes - 1)) == 0 &&
               d.min_alignment_bytes <= 256,
           what + "min_alignment_bytes must be a power of two <= 256");
  SG_CHECK(d.heuristic_rank >= GemmDesc::kPreferredAlgo && d.heuristic_rank < 64,
           what + "heuristic_rank must be kPreferredAlgo (-1) or a rank in [0, 64)");
  SG_CHECK(!d.has_requested_config() || d.heuristic_rank == GemmDesc::kPreferredAlgo,
           what + "a requested configuration and a heuristic rank exclude each other; set one of them");
}

// The byte size cuBLASLt keeps a configuration field in (2, 4 or 8; 0 where it does not report the field). Reads
// and writes of the field must use exactly that size.
size_t attribute_size(const cublasLtMatmulAlgo_t& algo, cublasLtMatmulAlgoConfigAttributes_t attr) {
  size_t size = 0;
  if (cublasLtMatmulAlgoConfigGetAttribute(&algo, attr, nullptr, 0, &size) != CUBLAS_STATUS_SUCCESS) return 0;
  return size == 2 || size == 4 || size == 8 ? size : 0;
}

// One field of a cuBLASLt algorithm's configuration, -1 where cuBLASLt does not report it.
int64_t algo_attribute(const cublasLtMatmulAlgo_t& algo, cublasLtMatmulAlgoConfigAttributes_t attr) {
  const auto read = [&]<class Field>(Field value) -> int64_t {
    size_t written = 0;
    return cublasLtMatmulAlgoConfigGetAttribute(&algo, attr, &value, sizeof(Field), &written) == CUBLAS_STATUS_SUCCESS
               ? static_cast<int64_t>(value)
               : -1;
  };
  switch (attribute_size(algo, attr)) {
    case 2: return read(uint16_t{});
    case 4: return read(uint32_t{});
    case 8: return read(uint64_t{});
    default: return -1;
  }
}

// Sets one field of a cuBLASLt algorithm's configuration; false where cuBLASLt refuses it or has no such field.
bool set_algo_attribute(cublasLtMatmulAlgo_t& algo, cublasLtMatmulAlgoConfigAttributes_t attr, int64_t value) {
  const auto write = [&]<class Field>(Field field) {
    return cublasLtMatmulAlgoConfigSetAttribute(&algo, attr, &field, sizeof(Field)) == CUBLAS_STATUS_SUCCESS;
  };
  switch (attribute_size(algo, attr)) {
    case 2: return write(static_cast<uint16_t>(value));
    case 4: return write(static_cast<uint32_t>(value));
    case 8: return write(static_cast<uint64_t>(value));
    default: return false;
  }
}

bool has_config(const cublasLtMatmulAlgo_t& algo, const GemmAlgoConfig& config) {
  return algo_attribute(algo, CUBLASLT_ALGO_CONFIG_TILE_ID) == config.tile_id &&
         algo_attribute(algo, CUBLASLT_ALGO_CONFIG_CLUSTER_SHAPE_ID) == config.cluster_id;
}

}  // namespace

std::string GemmDesc::describe() const {
  return strprintf("m=%lld n=%lld k=%lld opA=%s opB=%s lda=%lld ldb=%lld ldd=%lld A=%s B=%s D=%s alpha=%g beta=%g "
                   "epilogue=%s align=%u algo=%s",
                   (long long)m, (long long)n, (long long)k, transpose_a ? "T" : "N", transpose_b ? "T" : "N",
                   (long long)lda, (long long)ldb, (long long)ldd, dtype_name(a_type), dtype_name(b_type),
                   dtype_name(d_type), alpha, beta, epilogue == GemmEpilogue::kBias ? "bias" : "none",
                   min_alignment_bytes,
                   has_requested_config()
                       ? strprintf("tile %lld cluster %lld", (long long)requested_config.tile_id,
                                   (long long)requested_config.cluster_id).c_str()
                   : heuristic_rank == kPreferredAlgo ? "preferred"
                                                      : strprintf("rank %d", heuristic_rank).c_str());
}

// ---------------------------------------------------------------------------------------------------
// GemmPlan

GemmPlan::GemmPlan(const Blas& blas, const GemmDesc& desc) : blas_(blas), desc_(desc) {
  validate(desc_);
  // A throw half-way means ~GemmPlan never runs: the guard releases what was created so far.
  struct Guard {
    GemmPlan* plan;
    ~Guard() {
      if (plan) plan->destroy_descriptors();
    }
  } guard{this};

  SG_CUBLASLT_CHECK(cublasLtMatmulDescCreate(&op_, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  const cublasOperation_t op_a = desc_.transpose_a ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasOperation_t op_b = desc_.transpose_b ? CUBLAS_OP_T : CUBLAS_OP_N;
  set_desc_attr(op_, CUBLASLT_MATMUL_DESC_TRANSA, op_a);
  set_desc_attr(op_, CUBLASLT_MATMUL_DESC_TRANSB, op_b);
  // alpha/beta are host scalars (plan-time constants): the default host pointer mode.
  const cublasLtPointerMode_t pointer_mode = CUBLASLT_POINTER_MODE_HOST;
  set_desc_attr(op_, CUBLASLT_MATMUL_DESC_POINTER_MODE, pointer_mode);
  if (desc_.epilogue == GemmEpilogue::kBias) {
    set_desc_attr(op_, CUBLASLT_MATMUL_DESC_EPILOGUE, CUBLASLT_EPILOGUE_BIAS);
    const cudaDataType_t bias_type = cuda_dtype(desc_.d_type);
    set_desc_attr(op_, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, bias_type);
  } else {
    set_desc_attr(op_, CUBLASLT_MATMUL_DESC_EPILOGUE, CUBLASLT_EPILOGUE_DEFAULT);
  }

  const uint64_t a_rows = desc_.transpose_a ? desc_.k : desc_.m, a_cols = desc_.transpose_a ? desc_.m : desc_.k;
  const uint64_t b_rows = desc_.transpose_b ? desc_.n : desc_.k, b_cols = desc_.transpose_b ? desc_.k : desc_.n;
  SG_CUBLASLT_CHECK(cublasLtMatrixLayoutCreate(&a_layout_, cuda_dtype(desc_.a_type), a_rows, a_cols, desc_.lda));
  SG_CUBLASLT_CHECK(cublasLtMatrixLayoutCreate(&b_layout_, cuda_dtype(desc_.b_type), b_rows, b_cols, desc_.ldb));
  SG_CUBLASLT_CHECK(cublasLtMatrixLayoutCreate(&d_layout_, cuda_dtype(desc_.d_type), desc_.m, desc_.n, desc_.ldd));

  // The one heuristic query of this GEMM's life.
  cublasLtMatmulPreference_t pref = nullptr;
  SG_CUBLASLT_CHECK(cublasLtMatmulPreferenceCreate(&pref));
  // The step's GEMMs (kPreferredAlgo) and requested configurations look among the first kPreferenceCandidates
  // results for the configuration they want (and else build it: configured()).
  std::optional<GemmAlgoConfig> preferred;
  if (desc_.has_requested_config()) {
    preferred = desc_.requested_config;
  } else if (desc_.heuristic_rank == GemmDesc::kPreferredAlgo && cuda::device_count() > 0) {
    preferred = preferred_gemm_config(desc_, cuda::device_properties().compute_capability());
  }
  const int wanted = desc_.heuristic_rank >= 0 ? desc_.heuristic_rank + 1 : preferred ? kPreferenceCandidates : 1;
  std::vector<cublasLtMatmulHeuristicResult_t> results(static_cast<size_t>(wanted));
  int count = 0;
  cublasStatus_t status = CUBLAS_STATUS_SUCCESS;
  try {
    const uint64_t max_ws = blas_.workspace_bytes();
    set_pref_attr(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, max_ws);
    const uint32_t align = desc_.min_alignment_bytes;
    set_pref_attr(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, align);
    set_pref_attr(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, align);
    set_pref_attr(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, align);
    set_pref_attr(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, align);
    status = cublasLtMatmulAlgoGetHeuristic(blas_.handle(), op_, a_layout_, b_layout_, d_layout_, d_layout_, pref,
                                            wanted, results.data(), &count);
  } catch (...) {
    SG_CUBLASLT_CHECK_NOEXCEPT(cublasLtMatmulPreferenceDestroy(pref));  // the error in flight stays the one reported
    throw;
  }
  SG_CUBLASLT_CHECK(cublasLtMatmulPreferenceDestroy(pref));
  if (status == CUBLAS_STATUS_NOT_SUPPORTED || (status == CUBLAS_STATUS_SUCCESS && count == 0)) {
    throw Error("cuBLASLt has no algorithm for the GEMM " + desc_.describe() +
                " (fp32 compute) within a " + human_bytes(blas_.workspace_bytes()) +
                " workspace. Check the dtypes, leading dimensions (multiples of 8 elements help) and alignment.");
  }
  SG_CUBLASLT_CHECK(status);
  if (count <= desc_.heuristic_rank) {
    throw Error(strprintf("cuBLASLt offers only %d algorithm(s) for the GEMM %s, so heuristic_rank %d (0-based) has "
                          "none; use a rank below %d",
                          count, desc_.describe().c_str(), desc_.heuristic_rank, count));
  }
  size_t chosen = desc_.heuristic_rank >= 0 ? static_cast<size_t>(desc_.heuristic_rank) : 0;
  algo_ = results[chosen].algo;
  algo_workspace_bytes_ = results[chosen].workspaceSize;
  if (preferred) {
    // Among the heuristic's candidates first; else the first choice with the tile and cluster set to the wanted
    // ones, where cuBLASLt accepts that (cublasLtMatmulAlgoCheck) within the workspace. Both are fixed functions of
    // the shape for a given cuBLASLt and GPU, so the choice is the same in every process and graph mode.
    size_t i = 0;
    while (i < static_cast<size_t>(count) && !has_config(results[i].algo, *preferred)) ++i;
    cublasLtMatmulHeuristicResult_t built{};
    if (i < static_cast<size_t>(count)) {
      algo_ = results[i].algo;
      algo_workspace_bytes_ = results[i].workspaceSize;
    } else if (configured(results[0].algo, *preferred, built)) {
      algo_ = built.algo;
      algo_workspace_bytes_ = built.workspaceSize;
    } else if (desc_.has_requested_config()) {
      throw Error(strprintf("cuBLASLt cannot run the GEMM %s with tile %lld and cluster %lld (cublasLt.h's enum "
                            "values; cublasLtMatmulAlgoCheck refused it or it needs more than the %s workspace)",
                            desc_.describe().c_str(), (long long)preferred->tile_id, (long long)preferred->cluster_id,
                            human_bytes(blas_.workspace_bytes()).c_str()));
    } else {
      log::debug(strprintf("GEMM %s: cuBLASLt cannot run the preferred configuration (tile %lld, cluster %lld); "
                           "running its first choice",
                           desc_.describe().c_str(), (long long)preferred->tile_id, (long long)preferred->cluster_id));
    }
  }
  guard.plan = nullptr;
}

bool GemmPlan::configured(const cublasLtMatmulAlgo_t& base, const GemmAlgoConfig& config,
                          cublasLtMatmulHeuristicResult_t& result) const {
  result = {};
  result.algo = base;
  if (!set_algo_attribute(result.algo, CUBLASLT_ALGO_CONFIG_TILE_ID, config.tile_id) ||
      !set_algo_attribute(result.algo, CUBLASLT_ALGO_CONFIG_CLUSTER_SHAPE_ID, config.cluster_id)) {
    return false;
  }
  cublasLtMatmulHeuristicResult_t checked{};
  if (cublasLtMatmulAlgoCheck(blas_.handle(), op_, a_layout_, b_layout_, d_layout_, d_layout_, &result.algo,
                              &checked) != CUBLAS_STATUS_SUCCESS) {
    return false;
  }
  result.workspaceSize = checked.workspaceSize;
  return checked.workspaceSize <= blas_.workspace_bytes() && has_config(result.algo, config);
}

std::vector<int64_t> GemmPlan::tile_ids() const {
  size_t bytes = 0;
  SG_CUBLASLT_CHECK(cublasLtMatmulAlgoCapGetAttribute(&algo_, CUBLASLT_ALGO_CAP_TILE_IDS, nullptr, 0, &bytes));
  std::vector<uint32_t> ids(bytes / sizeof(uint32_t));
  if (!ids.empty()) {
    SG_CUBLASLT_CHECK(cublasLtMatmulAlgoCapGetAttribute(&algo_, CUBLASLT_ALGO_CAP_TILE_IDS, ids.data(),
                                                        ids.size() * sizeof(uint32_t), &bytes));
  }
  return {ids.begin(), ids.end()};
}

GemmPlan::~GemmPlan() { destroy_descriptors(); }

GemmAlgoConfig GemmPlan::algo_config() const {
  return {.tile_id = algo_attribute(algo_, CUBLASLT_ALGO_CONFIG_TILE_ID),
          .cluster_id = algo_attribute(algo_, CUBLASLT_ALGO_CONFIG_CLUSTER_SHAPE_ID)};
}

std::string GemmPlan::algo_summary() const {
  return strprintf("algo %lld tile %lld stages %lld cluster %lld split-k %lld swizzle %lld",
                   (long long)algo_attribute(algo_, CUBLASLT_ALGO_CONFIG_ID),
                   (long long)algo_attribute(algo_, CUBLASLT_ALGO_CONFIG_TILE_ID),
                   (long long)algo_attribute(algo_, CUBLASLT_ALGO_CONFIG_STAGES_ID),
                   (long long)algo_attribute(algo_, CUBLASLT_ALGO_CONFIG_CLUSTER_SHAPE_ID),
                   (long long)algo_attribute(algo_, CUBLASLT_ALGO_CONFIG_SPLITK_NUM),
                   (long long)algo_attribute(algo_, CUBLASLT_ALGO_CONFIG_CTA_SWIZZLING));
}

void GemmPlan::destroy_descriptors() {
  // Destroy calls only fail on invalid handles; this runs in destructors and must not throw: failures are logged.
  if (d_layout_) SG_CUBLASLT_CHECK_NOEXCEPT(cublasLtMatrixLayoutDestroy(d_layout_));
  if (b_layout_) SG_CUBLASLT_CHECK_NOEXCEPT(cublasLtMatrixLayoutDestroy(b_layout_));
  if (a_layout_) SG_CUBLASLT_CHECK_NOEXCEPT(cublasLtMatrixLayoutDestroy(a_layout_));
  if (op_) SG_CUBLASLT_CHECK_NOEXCEPT(cublasLtMatmulDescDestroy(op_));
  d_layout_ = b_layout_ = a_layout_ = nullptr;
  op_ = nullptr;
}

void GemmPlan::run(cudaStream_t stream, const void* a, const void* b, void* d, const void* bias) const {
  launch(stream, a, b, d, bias, desc_.beta);
}

void GemmPlan::run_overwriting(cudaStream_t stream, const void* a, const void* b, void* d, const void* bias) const {
  launch(stream, a, b, d, bias, 0.0f);
}

void GemmPlan::launch(cudaStream_t stream, const void* a, const void* b, void* d, const void* bias, float beta) const {
  const uint32_t align = desc_.min_alignment_bytes;
  if (a == nullptr || b == nullptr || d == nullptr || !aligned(a, align) || !aligned(b, align) || !aligned(d, align)) {
    throw Error(strprintf("GEMM run (%s): pointers A=%p B=%p D=%p must be non-null and %u-byte aligned",
                          desc_.describe().c_str(), a, b, d, align));
  }
  if (desc_.epilogue == GemmEpilogue::kBias) {
    if (bias == nullptr || !aligned(bias, align)) {
      throw Error(strprintf("GEMM run (%s): bias pointer %p must be non-null and %u-byte aligned",
                            desc_.describe().c_str(), bias, align));
    }
    set_desc_attr(op_, CUBLASLT_MATMUL_DESC_BIAS_POINTER, bias);
  } else if (bias != nullptr) {
    throw Error("GEMM run (" + desc_.describe() + "): a bias was given but the plan has no bias epilogue");
  }
  SG_CUBLASLT_CHECK(cublasLtMatmul(blas_.handle(), op_, &desc_.alpha, a, a_layout_, b, b_layout_, &beta, d,
                                   d_layout_, d, d_layout_, &algo_, blas_.workspace(), blas_.workspace_bytes(),
                                   stream));
}

// ---------------------------------------------------------------------------------------------------
// Blas

Blas::Blas(void* workspace, size_t workspace_bytes) : workspace_(workspace), workspace_bytes_(workspace_bytes) {
  SG_CHECK(workspace_bytes_ > 0, "Blas: workspace_bytes must be positive");
  if (workspace_ == nullptr) {
    workspace_ = cuda::device_allocate(workspace_bytes_, "cuBLASLt workspace (Blas-owned)");
    owns_workspace_ = true;
  } else if (!aligned(workspace_, 256)) {
    throw Error(strprintf("Blas: the cuBLASLt workspace %p must be 256-byte aligned", workspace_));
  }
  const cublasStatus_t status = cublasLtCreate(&handle_);
  if (status != CUBLAS_STATUS_SUCCESS) {
    if (owns_workspace_) cuda::device_free_noexcept(workspace_, "cuBLASLt workspace (Blas-owned)");
    throw_cublaslt_error(status, "cublasLtCreate(&handle_)", __FILE__, __LINE__);
  }
  workspace_registration_ = cuda::LibraryWorkspace(workspace_, workspace_bytes_);
}

Blas::~Blas() {
  plans_.clear();  // descriptors before the handle
  if (handle_) SG_CUBLASLT_CHECK_NOEXCEPT(cublasLtDestroy(handle_));
  if (owns_workspace_) cuda::device_free_noexcept(workspace_, "cuBLASLt workspace (Blas-owned)");
}

const GemmPlan& Blas::plan(const GemmDesc& desc) {
  const auto key = desc.key();
  auto it = plans_.find(key);
  if (it == plans_.end()) {
    std::unique_ptr<GemmPlan> plan(new GemmPlan(*this, desc));
    it = plans_.emplace(key, std::move(plan)).first;
  }
  return *it->second;
}

// ---------------------------------------------------------------------------------------------------
// Row-major linear helpers. A row-major [R, C] matrix (leading dimension C) is, to cuBLASLt, the
// column-major [C, R] matrix with ld C: its transpose. Each product is rewritten on the transposes.

// y[T,N] = x[T,K] W^T  <=>  y^T[N,T] = W[N,K] x^T[K,T].
// A = W: col-major [K,N] ld K, op(A) = A^T = [N,K]. B = x: col-major [K,T] ld K, op(B) = B.
// D = y: col-major [N,T] ld N. m = N, n = T, k = K.
GemmDesc linear_forward_desc(int64_t T, int64_t K, int64_t N, bool with_bias) {
  GemmDesc d;
  d.transpose_a = true;
  d.transpose_b = false;
  d.m = N, d.n = T, d.k = K;
  d.lda = K, d.ldb = K, d.ldd = N;
  d.d_type = GemmDtype::kBF16;
  d.epilogue = with_bias ? GemmEpilogue::kBias : GemmEpilogue::kNone;
  return d;
}

LinearForward::LinearForward(Blas& blas, int64_t T, int64_t K, int64_t N, bool with_bias)
    : plan_(&blas.plan(linear_forward_desc(T, K, N, with_bias))), with_bias_(with_bias) {}

void LinearForward::run(cudaStream_t stream, bf16* y, const bf16* x, const bf16* w, const bf16* bias) const {
  plan_->run(stream, w, x, y, bias);  // throws if bias is given without the bias epilogue, or missing with it
}

// dx[T,K] = dy[T,N] W[N,K]  <=>  dx^T[K,T] = W^T[K,N] dy^T[N,T].
// A = W: col-major [K,N] ld K = W^T, op(A) = A. B = dy: col-major [N,T] ld N = dy^T, op(B) = B.
// D = dx: col-major [K,T] ld K. m = K, n = T, k = N.
GemmDesc linear_backward_input_desc(int64_t T, int64_t K, int64_t N, bool accumulate) {
  GemmDesc d;
  d.transpose_a = false;
  d.transpose_b = false;
  d.m = K, d.n = T, d.k = N;
  d.lda = K, d.ldb = N, d.ldd = K;
  d.d_type = GemmDtype::kBF16;
  d.beta = accumulate ? 1.0f : 0.0f;
  return d;
}

LinearBackwardInput::LinearBackwardInput(Blas& blas, int64_t T, int64_t K, int64_t N, bool accumulate)
    : plan_(&blas.plan(linear_backward_input_desc(T, K, N, accumulate))) {}

void LinearBackwardInput::run(cudaStream_t stream, bf16* dx, const bf16* dy, const bf16* w) const {
  plan_->run(stream, w, dy, dx);
}

// dW[N,K] += dy^T[N,T] x[T,K]  <=>  dW^T[K,N] += x^T[K,T] dy[T,N].
// A = x: col-major [K,T] ld K = x^T, op(A) = A. B = dy: col-major [N,T] ld N = dy^T, op(B) = B^T = dy.
// D = dW (fp32): col-major [K,N] ld K. m = K, n = N, k = T. beta = 1 (accumulate into main_grad).
GemmDesc linear_backward_weight_desc(int64_t T, int64_t K, int64_t N, FloatDtype grad_dtype) {
  GemmDesc d;
  d.transpose_a = false;
  d.transpose_b = true;
  d.m = K, d.n = N, d.k = T;
  d.lda = K, d.ldb = N, d.ldd = K;
  d.d_type = grad_dtype == FloatDtype::bf16 ? GemmDtype::kBF16 : GemmDtype::kFP32;
  d.beta = 1.0f;
  return d;
}

LinearBackwardWeight::LinearBackwardWeight(Blas& blas, int64_t T, int64_t K, int64_t N, FloatDtype grad_dtype)
    : plan_(&blas.plan(linear_backward_weight_desc(T, K, N, grad_dtype))), grad_dtype_(grad_dtype) {}

void LinearBackwardWeight::run(cudaStream_t stream, FloatBuffer dw, const bf16* dy, const bf16* x,
                               bool overwrite) const {
  SG_CHECK(dw.dtype == grad_dtype_, strprintf("LinearBackwardWeight: planned for %s gradients, given a %s buffer",
                                              float_dtype_name(grad_dtype_), float_dtype_name(dw.dtype)));
  if (overwrite) {
    plan_->run_overwriting(stream, x, dy, dw.data);
  } else {
    plan_->run(stream, x, dy, dw.data);
  }
}

}  // namespace sg::kernels
