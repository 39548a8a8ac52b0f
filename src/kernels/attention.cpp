#include "kernels/attention.h"

#include <cudnn.h>

#include <cmath>
#include <cstdio>
#include <sstream>
#include <unordered_map>

#include "core/error.h"
#include "core/strings.h"
#include "cuda/check.h"
#include "kernels/shape_limits.h"

// cudnn-frontend is header-only and heavy: it is included in this file only.
#include <cudnn_frontend.h>

namespace sg::kernels {
namespace fe = cudnn_frontend;

namespace {

// Tensor uids of the variant packs (fixed, so execute() binds by uid).
enum Uid : int64_t {
  kQ = 1,
  kK,
  kV,
  kO,
  kStats,
  kDO,
  kDQ,
  kDK,
  kDV,
  kSeed,
  kOffset,
};

cudnnHandle_t as_handle(void* h) { return static_cast<cudnnHandle_t>(h); }

std::string fe_error_text(fe::error_t& err) {
  std::ostringstream os;
  os << err.get_code();
  return os.str() + ": " + err.get_message();
}

// Plan time: a cudnn-frontend step that failed becomes an sg::Error saying what was being built.
void check_fe(fe::error_t err, const AttentionShape& shape, const char* graph, const char* step) {
  if (err.is_bad()) {
    throw Error(strprintf("cuDNN attention %s graph (%s): %s failed: %s (cuDNN runtime %zu)", graph,
                          shape.describe().c_str(), step, fe_error_text(err).c_str(),
                          CudnnContext::runtime_version()));
  }
}

void check_cudnn(cudnnStatus_t status, const char* call) {
  if (status != CUDNN_STATUS_SUCCESS) {
    throw Error(std::string(call) + " failed: " + cudnnGetErrorString(status));
  }
}

// On the noexcept path (the destructor): check_cudnn's failure, logged to stderr instead of thrown.
void log_cudnn_error(cudnnStatus_t status, const char* call, const char* file, int line) noexcept {
  if (status == CUDNN_STATUS_SUCCESS) return;
  std::fprintf(stderr, "error: %s failed: %s [%s:%d]\n", call, cudnnGetErrorString(status), file, line);
}

// Our own support checks, before cuDNN's, so the common failures read in our terms.
void check_supported(const AttentionShape& s) {
  const std::string what = "attention plan (" + s.describe() + "): ";
  SG_CHECK(s.batch > 0 && s.seq_len > 0 && s.heads > 0 && s.kv_heads > 0 && s.head_dim > 0,
           what + "all dimensions must be positive");
  SG_CHECK(s.heads % s.kv_heads == 0,
           what + "heads must be a multiple of kv_heads (num_attention_heads % num_query_groups == 0)");
  // head_dim (16-byte vectors, d <= 256 on sm_90) and seq_len >= 2: kernels/shape_limits.h, which
  // `stepgraph validate` checks too.
  const std::string head_dim_problem = attention_head_dim_problem(s.head_dim);
  SG_CHECK(head_dim_problem.empty(), what + head_dim_problem);
  const std::string seq_len_problem = attention_seq_len_problem(s.seq_len);
  SG_CHECK(seq_len_problem.empty(), what + seq_len_problem);
  SG_CHECK(s.dropout_p >= 0.0f && s.dropout_p < 1.0f, what + "dropout_p must be in [0, 1)");
  const size_t version = CudnnContext::runtime_version();
  SG_CHECK(version >= 90000, what + strprintf("needs the cuDNN 9 runtime, found %zu", version));
  // 9.10.0/9.10.1 have known bugs in the bf16 attention backward (cudnn-frontend refuses them too).
  SG_CHECK(version != 91000 && version != 91001,
           what + "cuDNN 9.10.0/9.10.1 have a broken attention backward; use another cuDNN 9 release");
  int device = 0, major = 0;
  SG_CUDA_CHECK(cudaGetDevice(&device));
  SG_CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
  SG_CHECK(major >= 8, what + strprintf("cuDNN fused attention needs sm_80 or newer, this GPU is sm_%d", major * 10));
}

void set_graph_types(fe::graph::Graph& g) {
  g.set_io_data_type(fe::DataType_t::BFLOAT16)
      .set_intermediate_data_type(fe::DataType_t::FLOAT)
      .set_compute_data_type(fe::DataType_t::FLOAT);
}

// Q/K/V (and dQ/dK/dV) inside the fused [T, qkv_width] row-major buffer: dims [B, heads, S, d],
// strides [S*qkv_width, d, qkv_width, 1]; K and V start at column heads*d and (heads+kv_heads)*d.
std::vector<int64_t> qkv_stride(const AttentionShape& s) {
  return {s.seq_len * s.qkv_width(), s.head_dim, s.qkv_width(), 1};
}
// O and dO [T, heads*d] row-major: [B, heads, S, d] with strides [S*heads*d, d, heads*d, 1].
std::vector<int64_t> out_stride(const AttentionShape& s) {
  return {s.seq_len * s.out_width(), s.head_dim, s.out_width(), 1};
}
std::vector<int64_t> q_dim(const AttentionShape& s) { return {s.batch, s.heads, s.seq_len, s.head_dim}; }
std::vector<int64_t> kv_dim(const AttentionShape& s) { return {s.batch, s.kv_heads, s.seq_len, s.head_dim}; }
// lse [B, heads, S] fp32, packed BHSD with a unit last dim (what cuDNN < 9.26 requires of Stats).
std::vector<int64_t> stats_dim(const AttentionShape& s) { return {s.batch, s.heads, s.seq_len, 1}; }
std::vector<int64_t> stats_stride(const AttentionShape& s) { return {s.heads * s.seq_len, s.seq_len, 1, 1}; }

std::shared_ptr<fe::graph::Tensor_attributes> input(fe::graph::Graph& g, const char* name, Uid uid,
                                                    std::vector<int64_t> dim, std::vector<int64_t> stride,
                                                    fe::DataType_t type = fe::DataType_t::BFLOAT16) {
  return g.tensor(fe::graph::Tensor_attributes()
                      .set_name(name)
                      .set_uid(uid)
                      .set_dim(std::move(dim))
                      .set_stride(std::move(stride))
                      .set_data_type(type));
}

// Seed and offset of cuDNN's Philox dropout: int64 scalars in DEVICE memory (not pass-by-value), so a
// captured graph reads their current values on every replay.
std::shared_ptr<fe::graph::Tensor_attributes> rng_scalar(fe::graph::Graph& g, const char* name, Uid uid) {
  return input(g, name, uid, {1, 1, 1, 1}, {1, 1, 1, 1}, fe::DataType_t::INT64);
}

// validate -> operation graph -> one heuristics query -> support check -> plans, then the workspace.
int64_t build(fe::graph::Graph& g, cudnnHandle_t handle, const AttentionShape& shape, const char* name) {
  check_fe(g.validate(), shape, name, "validate (cuDNN's support surface for this shape and these options)");
  check_fe(g.build_operation_graph(handle), shape, name, "build_operation_graph");
  check_fe(g.create_execution_plans({fe::HeurMode_t::A, fe::HeurMode_t::FALLBACK}), shape, name,
           "create_execution_plans (heuristics query)");
  check_fe(g.check_support(), shape, name, "check_support (no engine of this cuDNN runtime supports the graph)");
  check_fe(g.build_plans(fe::BuildPlanPolicy_t::HEURISTICS_CHOICE), shape, name, "build_plans");
  int64_t workspace = 0;
  check_fe(g.get_workspace_size(workspace), shape, name, "get_workspace_size");
  SG_CHECK(workspace >= 0, "cuDNN reported a negative workspace size");
  return workspace;
}

void check_device_ptr(const void* p, const char* name, const AttentionShape& shape, const char* graph) {
  // cuDNN's attention kernels load with 16-byte vectors / TMA.
  if (p == nullptr || reinterpret_cast<uintptr_t>(p) % 16 != 0) {
    throw Error(strprintf("attention %s (%s): %s = %p must be non-null and 16-byte aligned", graph,
                          shape.describe().c_str(), name, p));
  }
}

}  // namespace

// ---------------------------------------------------------------------------------------------------

CudnnContext::CudnnContext() {
  cudnnHandle_t h = nullptr;
  check_cudnn(cudnnCreate(&h), "cudnnCreate");
  handle_ = h;
}

CudnnContext::~CudnnContext() {
  if (handle_) log_cudnn_error(cudnnDestroy(as_handle(handle_)), "cudnnDestroy", __FILE__, __LINE__);
}

size_t CudnnContext::runtime_version() { return cudnnGetVersion(); }

std::string AttentionShape::describe() const {
  return strprintf("B=%lld S=%lld heads=%lld kv_heads=%lld head_dim=%lld dropout_p=%g", (long long)batch,
                   (long long)seq_len, (long long)heads, (long long)kv_heads, (long long)head_dim, dropout_p);
}

struct AttentionPlan::Graphs {
  fe::graph::Graph forward;
  fe::graph::Graph backward;
  int64_t forward_workspace = 0;
  int64_t backward_workspace = 0;
};

AttentionPlan::AttentionPlan(CudnnContext& cudnn, const AttentionShape& shape)
    : cudnn_(cudnn), shape_(shape), graphs_(std::make_unique<Graphs>()) {
  check_supported(shape_);
  const cudnnHandle_t handle = as_handle(cudnn_.handle());
  const float scale = 1.0f / std::sqrt(static_cast<float>(shape_.head_dim));
  const bool dropout = shape_.dropout_p > 0.0f;

  try {
    // ---- forward: O, Stats = SDPA(Q, K, V), causal, GQA by K/V head count ----
    {
      fe::graph::Graph& g = graphs_->forward;
      set_graph_types(g);
      auto q = input(g, "Q", kQ, q_dim(shape_), qkv_stride(shape_));
      auto k = input(g, "K", kK, kv_dim(shape_), qkv_stride(shape_));
      auto v = input(g, "V", kV, kv_dim(shape_), qkv_stride(shape_));
      auto options = fe::graph::SDPA_attributes()
                         .set_name("sdpa_forward")
                         .set_generate_stats(true)
                         .set_attn_scale(scale)
                         // Causal, top-left aligned: query i sees keys j <= i + 0.
                         .set_diagonal_alignment(fe::DiagonalAlignment_t::TOP_LEFT)
                         .set_diagonal_band_right_bound(0)
                         // The composite (classic flash attention) node: the only one cuDNN 9.14 has
                         // for causal masks with dropout; pinned so every runtime runs the same engine family.
                         .set_implementation(fe::AttentionImplementation_t::COMPOSITE);
      if (dropout) options.set_dropout(shape_.dropout_p, rng_scalar(g, "seed", kSeed), rng_scalar(g, "offset", kOffset));
      auto [o, stats] = g.sdpa(q, k, v, options);
      o->set_output(true).set_uid(kO).set_dim(q_dim(shape_)).set_stride(out_stride(shape_));
      SG_CHECK(stats != nullptr, "cudnn-frontend returned no Stats tensor although generate_stats is set");
      stats->set_output(true)
          .set_uid(kStats)
          .set_data_type(fe::DataType_t::FLOAT)
          .set_dim(stats_dim(shape_))
          .set_stride(stats_stride(shape_));
      graphs_->forward_workspace = build(g, handle, shape_, "forward");
    }
    // ---- backward: dQ, dK, dV = SDPA_backward(Q, K, V, O, dO, Stats), deterministic ----
    {
      fe::graph::Graph& g = graphs_->backward;
      set_graph_types(g);
      auto q = input(g, "Q", kQ, q_dim(shape_), qkv_stride(shape_));
      auto k = input(g, "K", kK, kv_dim(shape_), qkv_stride(shape_));
      auto v = input(g, "V", kV, kv_dim(shape_), qkv_stride(shape_));
      auto o = input(g, "O", kO, q_dim(shape_), out_stride(shape_));
      auto dout = input(g, "dO", kDO, q_dim(shape_), out_stride(shape_));
      auto stats = input(g, "Stats", kStats, stats_dim(shape_), stats_stride(shape_), fe::DataType_t::FLOAT);
      auto options = fe::graph::SDPA_backward_attributes()
                         .set_name("sdpa_backward")
                         .set_attn_scale(scale)
                         .set_diagonal_alignment(fe::DiagonalAlignment_t::TOP_LEFT)
                         .set_diagonal_band_right_bound(0)
                         // Bitwise reproducible dQ (no atomics with varying order). On sm_90 with
                         // cuDNN < 9.25 this stores dP in the workspace: B*heads*S64*S64*2 bytes.
                         .set_deterministic_algorithm(true);
      if (dropout) options.set_dropout(shape_.dropout_p, rng_scalar(g, "seed", kSeed), rng_scalar(g, "offset", kOffset));
      auto [dq, dk, dv] = g.sdpa_backward(q, k, v, o, dout, stats, options);
      dq->set_output(true).set_uid(kDQ).set_dim(q_dim(shape_)).set_stride(qkv_stride(shape_));
      dk->set_output(true).set_uid(kDK).set_dim(kv_dim(shape_)).set_stride(qkv_stride(shape_));
      dv->set_output(true).set_uid(kDV).set_dim(kv_dim(shape_)).set_stride(qkv_stride(shape_));
      graphs_->backward_workspace = build(g, handle, shape_, "backward");
    }
  } catch (const Error&) {
    throw;
  } catch (const std::exception& e) {
    // cudnn-frontend throws std::runtime_error from a few graph-construction paths.
    throw Error("cuDNN attention plan (" + shape_.describe() + "): cudnn-frontend threw: " + e.what());
  }
}

AttentionPlan::~AttentionPlan() = default;

size_t AttentionPlan::forward_workspace_bytes() const { return static_cast<size_t>(graphs_->forward_workspace); }
size_t AttentionPlan::backward_workspace_bytes() const { return static_cast<size_t>(graphs_->backward_workspace); }
size_t AttentionPlan::workspace_bytes() const {
  return std::max(forward_workspace_bytes(), backward_workspace_bytes());
}

void AttentionPlan::forward(cudaStream_t stream, const AttentionForwardParams& p) const {
  const bool dropout = shape_.dropout_p > 0.0f;
  check_device_ptr(p.out, "out", shape_, "forward");
  check_device_ptr(p.lse, "lse", shape_, "forward");
  check_device_ptr(p.qkv, "qkv", shape_, "forward");
  if (dropout) {
    SG_CHECK(p.dropout_seed && p.dropout_offset, "attention forward (" + shape_.describe() +
                                                     "): dropout_p > 0 needs the device seed and offset pointers");
  }
  if (graphs_->forward_workspace > 0) check_device_ptr(p.workspace, "workspace", shape_, "forward");

  const int64_t d = shape_.head_dim;
  bf16* qkv = const_cast<bf16*>(p.qkv);  // cuDNN's variant pack is void*; Q/K/V are only read
  std::unordered_map<int64_t, void*> pack = {
      {kQ, qkv},
      {kK, qkv + shape_.heads * d},
      {kV, qkv + (shape_.heads + shape_.kv_heads) * d},
      {kO, p.out},
      {kStats, p.lse},
  };
  if (dropout) {
    pack[kSeed] = const_cast<int64_t*>(p.dropout_seed);
    pack[kOffset] = const_cast<int64_t*>(p.dropout_offset);
  }
  const cudnnHandle_t handle = as_handle(cudnn_.handle());
  check_cudnn(cudnnSetStream(handle, stream), "cudnnSetStream (attention forward)");
  fe::error_t err = graphs_->forward.execute(handle, pack, p.workspace);
  if (err.is_bad()) {
    throw Error("cuDNN attention forward (" + shape_.describe() + ") execute failed: " + fe_error_text(err));
  }
}

void AttentionPlan::backward(cudaStream_t stream, const AttentionBackwardParams& p) const {
  const bool dropout = shape_.dropout_p > 0.0f;
  check_device_ptr(p.dqkv, "dqkv", shape_, "backward");
  check_device_ptr(p.dout, "dout", shape_, "backward");
  check_device_ptr(p.qkv, "qkv", shape_, "backward");
  check_device_ptr(p.out, "out", shape_, "backward");
  check_device_ptr(p.lse, "lse", shape_, "backward");
  if (dropout) {
    SG_CHECK(p.dropout_seed && p.dropout_offset, "attention backward (" + shape_.describe() +
                                                     "): dropout_p > 0 needs the device seed and offset pointers");
  }
  if (graphs_->backward_workspace > 0) check_device_ptr(p.workspace, "workspace", shape_, "backward");

  const int64_t d = shape_.head_dim;
  bf16* qkv = const_cast<bf16*>(p.qkv);
  std::unordered_map<int64_t, void*> pack = {
      {kQ, qkv},
      {kK, qkv + shape_.heads * d},
      {kV, qkv + (shape_.heads + shape_.kv_heads) * d},
      {kO, const_cast<bf16*>(p.out)},
      {kDO, const_cast<bf16*>(p.dout)},
      {kStats, const_cast<float*>(p.lse)},
      {kDQ, p.dqkv},
      {kDK, p.dqkv + shape_.heads * d},
      {kDV, p.dqkv + (shape_.heads + shape_.kv_heads) * d},
  };
  if (dropout) {
    pack[kSeed] = const_cast<int64_t*>(p.dropout_seed);
    pack[kOffset] = const_cast<int64_t*>(p.dropout_offset);
  }
  const cudnnHandle_t handle = as_handle(cudnn_.handle());
  check_cudnn(cudnnSetStream(handle, stream), "cudnnSetStream (attention backward)");
  fe::error_t err = graphs_->backward.execute(handle, pack, p.workspace);
  if (err.is_bad()) {
    throw Error("cuDNN attention backward (" + shape_.describe() + ") execute failed: " + fe_error_text(err));
  }
}

}  // namespace sg::kernels

// ---------------------------------------------------------------------------------------------------
// NVRTC forwarders.
// cudnn-frontend's headers carry an NVRTC-compiled RMSNorm+SiLU engine (used only with
// HeurMode_t::OPENSOURCE, which we never request), so including them references seven NVRTC symbols.
// The project does not link libnvrtc (cmake/Dependencies.cmake); rather than make every binary need
// it, these forward to libnvrtc loaded on first use, and report NVRTC_ERROR_INTERNAL_ERROR if it is
// absent. If the build ever links CUDA::nvrtc, delete this block (a weak definition in an object file
// would still be preferred over the shared library's). cuDNN itself loads its own NVRTC with
// dlopen/dlsym on its handle, which these symbols cannot intercept.
#include <dlfcn.h>
#include <nvrtc.h>

namespace {
void* nvrtc_symbol(const char* name) {
  static void* const library = [] {
    for (const char* so : {"libnvrtc.so.13", "libnvrtc.so"}) {
      if (void* h = dlopen(so, RTLD_NOW | RTLD_LOCAL)) return h;
    }
    return static_cast<void*>(nullptr);
  }();
  return library ? dlsym(library, name) : nullptr;
}
}  // namespace

#define SG_NVRTC_FORWARD(fn_name, params, args)                                  \
  extern "C" __attribute__((weak)) nvrtcResult fn_name params {                  \
    using Fn = nvrtcResult(*) params;                                            \
    static Fn const fn = reinterpret_cast<Fn>(nvrtc_symbol(#fn_name));           \
    return fn ? fn args : NVRTC_ERROR_INTERNAL_ERROR;                            \
  }

SG_NVRTC_FORWARD(nvrtcCreateProgram,
                 (nvrtcProgram * prog, const char* src, const char* name, int numHeaders,
                  const char* const* headers, const char* const* includeNames),
                 (prog, src, name, numHeaders, headers, includeNames))
SG_NVRTC_FORWARD(nvrtcDestroyProgram, (nvrtcProgram * prog), (prog))
SG_NVRTC_FORWARD(nvrtcCompileProgram, (nvrtcProgram prog, int numOptions, const char* const* options),
                 (prog, numOptions, options))
SG_NVRTC_FORWARD(nvrtcGetCUBINSize, (nvrtcProgram prog, size_t * cubinSizeRet), (prog, cubinSizeRet))
SG_NVRTC_FORWARD(nvrtcGetCUBIN, (nvrtcProgram prog, char* cubin), (prog, cubin))
SG_NVRTC_FORWARD(nvrtcGetProgramLogSize, (nvrtcProgram prog, size_t * logSizeRet), (prog, logSizeRet))
SG_NVRTC_FORWARD(nvrtcGetProgramLog, (nvrtcProgram prog, char* log), (prog, log))
#undef SG_NVRTC_FORWARD
