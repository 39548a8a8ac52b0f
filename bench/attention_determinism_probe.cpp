// Probe (not built by CMake, not part of the step): what determinism costs in cuDNN's SDPA backward. At the
// bench recipes' attention shapes (causal, bf16, stepgraph's fused-QKV layout), the cuDNN heuristic's first plan
// of the forward, of the deterministic backward (what kernels/attention.cpp runs) and of the non-deterministic
// one (dQ accumulated by atomics; never used by stepgraph: it breaks bitwise equality across runs and graph
// modes), each timed alone (median of 40 launches after 5 warmup, CUDA events), and whether the output after the
// timed launches is bitwise the first launch's. Tells how much a deterministic attention backward of our own
// could gain at most, were it as fast as cuDNN's non-deterministic one.
// Build on the CPU machine (cudnn-frontend headers from scripts/setup.sh's .deps), run on the GPU machine:
//   nvcc -std=c++17 -O2 -I.deps/pip/include bench/attention_determinism_probe.cpp -lcudnn -lnvrtc -ldl \
//     -o attention_determinism_probe
//   ./attention_determinism_probe        (--help: what it prints; it takes no flags)
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <cudnn.h>
#include <cudnn_frontend.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <unordered_map>
#include <vector>

#include "bench_args.h"

namespace fe = cudnn_frontend;

namespace {

void check_cuda(cudaError_t e, const char* what) {
  if (e != cudaSuccess) {
    std::fprintf(stderr, "error: %s: %s\n", what, cudaGetErrorString(e));
    std::exit(1);
  }
}

void check_cudnn(cudnnStatus_t s, const char* what) {
  if (s != CUDNN_STATUS_SUCCESS) {
    std::fprintf(stderr, "error: %s: %s\n", what, cudnnGetErrorString(s));
    std::exit(1);
  }
}

// Cleanup (destructors, the end of a case): a failure is printed and the probe goes on, as
// SG_CUDA_CHECK_NOEXCEPT does in src/ (the probe links no stepgraph library).
void log_cuda(cudaError_t e, const char* what) noexcept {
  if (e != cudaSuccess) std::fprintf(stderr, "error: %s: %s\n", what, cudaGetErrorString(e));
}
void log_cudnn(cudnnStatus_t s, const char* what) noexcept {
  if (s != CUDNN_STATUS_SUCCESS) std::fprintf(stderr, "error: %s: %s\n", what, cudnnGetErrorString(s));
}

// Runs `release` when the scope ends, so a case that ends early (a failed execute) leaks nothing.
template <class F>
struct AtExit {
  F release;
  ~AtExit() { release(); }
};
template <class F>
AtExit(F) -> AtExit<F>;

// A frontend call that failed ends this case with a message; true when it succeeded.
bool ok(fe::error_t e, const std::string& what) {
  if (e.is_bad()) std::printf("  %s: %s\n", what.c_str(), e.get_message().c_str());
  return !e.is_bad();
}

enum Uid : int64_t { kQ = 1, kK, kV, kO, kStats, kDO, kDQ, kDK, kDV };
enum class Pass { forward, backward_deterministic, backward_nondeterministic };
const char* name_of(Pass p) {
  return p == Pass::forward                  ? "forward"
         : p == Pass::backward_deterministic ? "backward, deterministic"
                                             : "backward, non-deterministic";
}

struct Shape {
  const char* name;
  int64_t batch, seq, heads, kv_heads, head_dim;
  int64_t tokens() const { return batch * seq; }
  int64_t qkv_width() const { return (heads + 2 * kv_heads) * head_dim; }
  int64_t out_width() const { return heads * head_dim; }
};
// llama/small, llama/1b, moe/a3b_proxy.
const Shape kShapes[] = {{"small", 8, 1024, 12, 12, 64}, {"1b", 4, 2048, 16, 16, 128}, {"a3b", 1, 4096, 32, 4, 128}};

// [B, heads, S, d] over rows of `width` elements (stepgraph's layout, kernels/attention.h).
std::vector<int64_t> rows_stride(const Shape& s, int64_t width) {
  return {s.seq * width, s.head_dim, width, 1};
}

struct Buffers {
  __nv_bfloat16 *qkv = nullptr, *dqkv = nullptr, *o = nullptr, *dout = nullptr;
  float* stats = nullptr;
  explicit Buffers(const Shape& s) {
    const int64_t T = s.tokens();
    check_cuda(cudaMalloc(&qkv, T * s.qkv_width() * 2), "cudaMalloc");
    check_cuda(cudaMalloc(&dqkv, T * s.qkv_width() * 2), "cudaMalloc");
    check_cuda(cudaMalloc(&o, T * s.out_width() * 2), "cudaMalloc");
    check_cuda(cudaMalloc(&dout, T * s.out_width() * 2), "cudaMalloc");
    check_cuda(cudaMalloc(&stats, s.batch * s.heads * s.seq * 4), "cudaMalloc");
    fill(qkv, T * s.qkv_width(), 1);
    fill(dout, T * s.out_width(), 2);
  }
  ~Buffers() {
    for (void* p : {static_cast<void*>(qkv), static_cast<void*>(dqkv), static_cast<void*>(o),
                    static_cast<void*>(dout), static_cast<void*>(stats)}) {
      log_cuda(cudaFree(p), "cudaFree");
    }
  }
  Buffers(const Buffers&) = delete;
  Buffers& operator=(const Buffers&) = delete;
  static void fill(__nv_bfloat16* p, int64_t n, unsigned seed) {
    std::vector<__nv_bfloat16> h(n);
    for (auto& v : h) {
      seed = seed * 1664525u + 1013904223u;
      v = __float2bfloat16(((seed >> 8) & 0xffff) / 65536.0f - 0.5f);
    }
    check_cuda(cudaMemcpy(p, h.data(), n * 2, cudaMemcpyHostToDevice), "cudaMemcpy");
  }
};

void run_case(cudnnHandle_t handle, cudaStream_t stream, const Shape& s, Buffers& b, Pass pass) {
  fe::graph::Graph g;
  g.set_io_data_type(fe::DataType_t::BFLOAT16)
      .set_intermediate_data_type(fe::DataType_t::FLOAT)
      .set_compute_data_type(fe::DataType_t::FLOAT);
  auto tensor = [&](const char* name, int64_t uid, std::vector<int64_t> dim, std::vector<int64_t> stride,
                    fe::DataType_t type = fe::DataType_t::BFLOAT16) {
    return g.tensor(
        fe::graph::Tensor_attributes().set_name(name).set_uid(uid).set_dim(dim).set_stride(stride).set_data_type(type));
  };
  const int64_t W = s.qkv_width(), OW = s.out_width();
  const std::vector<int64_t> q_dim = {s.batch, s.heads, s.seq, s.head_dim};
  const std::vector<int64_t> kv_dim = {s.batch, s.kv_heads, s.seq, s.head_dim};
  const std::vector<int64_t> stats_dim = {s.batch, s.heads, s.seq, 1}, stats_stride = {s.heads * s.seq, s.seq, 1, 1};
  auto q = tensor("Q", kQ, q_dim, rows_stride(s, W));
  auto k = tensor("K", kK, kv_dim, rows_stride(s, W));
  auto v = tensor("V", kV, kv_dim, rows_stride(s, W));
  const float scale = 1.0f / std::sqrt(float(s.head_dim));
  if (pass == Pass::forward) {
    auto options = fe::graph::SDPA_attributes()
                       .set_name("forward")
                       .set_generate_stats(true)
                       .set_attn_scale(scale)
                       .set_diagonal_alignment(fe::DiagonalAlignment_t::TOP_LEFT)
                       .set_diagonal_band_right_bound(0)
                       .set_implementation(fe::AttentionImplementation_t::COMPOSITE);
    auto [o, stats] = g.sdpa(q, k, v, options);
    o->set_output(true).set_uid(kO).set_dim(q_dim).set_stride(rows_stride(s, OW));
    stats->set_output(true)
        .set_uid(kStats)
        .set_data_type(fe::DataType_t::FLOAT)
        .set_dim(stats_dim)
        .set_stride(stats_stride);
  } else {
    auto o = tensor("O", kO, q_dim, rows_stride(s, OW));
    auto dout = tensor("dO", kDO, q_dim, rows_stride(s, OW));
    auto stats = tensor("Stats", kStats, stats_dim, stats_stride, fe::DataType_t::FLOAT);
    auto options = fe::graph::SDPA_backward_attributes()
                       .set_name("backward")
                       .set_attn_scale(scale)
                       .set_diagonal_alignment(fe::DiagonalAlignment_t::TOP_LEFT)
                       .set_diagonal_band_right_bound(0)
                       .set_deterministic_algorithm(pass == Pass::backward_deterministic);
    auto [dq, dk, dv] = g.sdpa_backward(q, k, v, o, dout, stats, options);
    dq->set_output(true).set_uid(kDQ).set_dim(q_dim).set_stride(rows_stride(s, W));
    dk->set_output(true).set_uid(kDK).set_dim(kv_dim).set_stride(rows_stride(s, W));
    dv->set_output(true).set_uid(kDV).set_dim(kv_dim).set_stride(rows_stride(s, W));
  }
  if (!ok(g.validate(), "validate") || !ok(g.build_operation_graph(handle), "build_operation_graph") ||
      !ok(g.create_execution_plans({fe::HeurMode_t::A}), "create_execution_plans") ||
      !ok(g.check_support(), "check_support") ||
      !ok(g.build_plans(fe::BuildPlanPolicy_t::HEURISTICS_CHOICE), "build_plans")) {
    return;
  }
  int64_t workspace_bytes = 0;
  if (!ok(g.get_workspace_size(workspace_bytes), "get_workspace_size")) return;
  void* workspace = nullptr;
  if (workspace_bytes > 0) check_cuda(cudaMalloc(&workspace, workspace_bytes), "cudaMalloc workspace");
  cudaEvent_t start = nullptr, stop = nullptr;
  check_cuda(cudaEventCreate(&start), "cudaEventCreate");
  check_cuda(cudaEventCreate(&stop), "cudaEventCreate");
  const AtExit release{[&] {
    log_cuda(cudaEventDestroy(start), "cudaEventDestroy");
    log_cuda(cudaEventDestroy(stop), "cudaEventDestroy");
    if (workspace) log_cuda(cudaFree(workspace), "cudaFree workspace");
  }};
  const int64_t hd = s.heads * s.head_dim, kvd = s.kv_heads * s.head_dim;
  std::unordered_map<int64_t, void*> pack = {
      {kQ, b.qkv}, {kK, b.qkv + hd}, {kV, b.qkv + hd + kvd}, {kO, b.o}, {kStats, b.stats}};
  if (pass != Pass::forward) {
    pack.insert({{kDO, b.dout}, {kDQ, b.dqkv}, {kDK, b.dqkv + hd}, {kDV, b.dqkv + hd + kvd}});
  }
  __nv_bfloat16* out = pass == Pass::forward ? b.o : b.dqkv;
  const size_t out_bytes = size_t(s.tokens()) * (pass == Pass::forward ? s.out_width() : s.qkv_width()) * 2;
  std::vector<char> first(out_bytes), last(out_bytes);
  if (!ok(g.execute(handle, pack, workspace), "execute")) return;
  check_cuda(cudaMemcpy(first.data(), out, out_bytes, cudaMemcpyDeviceToHost), "cudaMemcpy");
  std::vector<float> ms;
  for (int i = 0; i < 45; ++i) {
    check_cuda(cudaEventRecord(start, stream), "cudaEventRecord");
    if (!ok(g.execute(handle, pack, workspace), "execute")) return;
    check_cuda(cudaEventRecord(stop, stream), "cudaEventRecord");
    check_cuda(cudaEventSynchronize(stop), "cudaEventSynchronize");
    float t = 0;
    check_cuda(cudaEventElapsedTime(&t, start, stop), "cudaEventElapsedTime");
    if (i >= 5) ms.push_back(t);
  }
  std::sort(ms.begin(), ms.end());
  check_cuda(cudaMemcpy(last.data(), out, out_bytes, cudaMemcpyDeviceToHost), "cudaMemcpy");
  std::string plan;
  if (!ok(g.get_plan_name_at_index(0, plan), "get_plan_name_at_index")) plan = "?";
  std::printf("%-6s %-28s %-14s workspace %8.1f MiB  median %.4f ms  repeatable %s\n", s.name, name_of(pass),
              plan.c_str(), workspace_bytes / 1048576.0, ms[ms.size() / 2],
              std::memcmp(first.data(), last.data(), out_bytes) == 0 ? "yes" : "no");
}

}  // namespace

int main(int argc, char** argv) {
  sg::bench::read_tool_args(
      argc, argv,
      {"attention_determinism_probe",
       "Times cuDNN's SDPA forward, deterministic backward (what kernels/attention.cpp runs) and non-deterministic\n"
       "backward at the bench recipes' attention shapes (causal, bf16, fused-QKV layout): the heuristic's first\n"
       "plan of each, median of 40 launches after 5 warmup (CUDA events), and whether the output after the timed\n"
       "launches is bitwise the first launch's. Takes no flags; prints a table. Needs a CUDA GPU and cuDNN.",
       {}});
  cudnnHandle_t handle = nullptr;
  if (const cudnnStatus_t s = cudnnCreate(&handle); s != CUDNN_STATUS_SUCCESS) {
    std::fprintf(stderr, "error: cudnnCreate failed: %s (no GPU, or no cuDNN runtime)\n", cudnnGetErrorString(s));
    return 1;
  }
  cudaStream_t stream = nullptr;
  check_cuda(cudaStreamCreate(&stream), "cudaStreamCreate");
  check_cudnn(cudnnSetStream(handle, stream), "cudnnSetStream");
  std::printf("cuDNN %zu\n", cudnnGetVersion());
  for (const Shape& s : kShapes) {
    Buffers buffers(s);
    for (Pass p : {Pass::forward, Pass::backward_deterministic, Pass::backward_nondeterministic}) {
      run_case(handle, stream, s, buffers, p);
    }
  }
  log_cudnn(cudnnDestroy(handle), "cudnnDestroy");
  log_cuda(cudaStreamDestroy(stream), "cudaStreamDestroy");
  return 0;
}
