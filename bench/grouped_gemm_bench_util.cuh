#pragma once
// Shared by the GEMM benches (grouped_gemm_bench.cu, grouped_gemm_variants/, swiglu_backward_gemm_bench.cu,
// swiglu_backward_gemm_variants/): the MoE shapes of issue 11, bench-owned device buffers, a deterministic fill,
// poison, an output comparison, the median of event-timed launches, and the per-launch time of graph replays.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "bench_args.h"
#include "bench_device.h"
#include "core/error.h"
#include "cuda/bf16.h"
#include "cuda/check.h"
#include "cuda/stream.h"
#include "graph/capture.h"
#include "graph/graph_exec.h"
#include "kernels/grouped_gemm.h"

namespace sg::bench {

struct MoeShape {
  const char* name;
  int experts;
  int64_t rows;  // tokens x topk
  int64_t hidden, ffn;
};

// The issue's MoE shapes (balanced routing: rows / experts rows per expert).
inline constexpr MoeShape kMoeShapes[] = {{"small_moe", 8, 8192 * 2, 768, 768},
                                          {"a3b_proxy", 128, 4096 * 8, 2048, 768}};

// A dense recipe's linear as a one-expert problem (grouped_gemm_bench --case dense, not part of "all"): the
// grouped kernel over one group is a plain CUTLASS GEMM, so these rows compare CUTLASS with cuBLASLt at the
// dense step's shapes (8192 tokens), the question before moving a dense GEMM's epilogue fusions onto CUTLASS.
struct DenseProbe {
  MoeShape shape;  // one expert, 8192 rows
  const char* layer;
  int64_t n_out, k_in;
};
inline constexpr DenseProbe kDenseProbes[] = {
    {{"small", 1, 8192, 768, 2048}, "qkv", 3 * 768, 768},  {{"small", 1, 8192, 768, 2048}, "o", 768, 768},
    {{"small", 1, 8192, 768, 2048}, "fc1", 2 * 2048, 768}, {{"small", 1, 8192, 768, 2048}, "fc2", 768, 2048},
    {{"1b", 1, 8192, 2048, 5632}, "qkv", 3 * 2048, 2048},  {{"1b", 1, 8192, 2048, 5632}, "o", 2048, 2048},
    {{"1b", 1, 8192, 2048, 5632}, "fc1", 2 * 5632, 2048},  {{"1b", 1, 8192, 2048, 5632}, "fc2", 2048, 5632}};

// Device buffer owned by the bench (plain cudaMalloc; a bench is not a training step).
template <class T>
struct Buffer {
  explicit Buffer(size_t n) : n(n) { SG_CUDA_CHECK(cudaMalloc(&p, std::max<size_t>(n, 1) * sizeof(T))); }
  ~Buffer() { SG_CUDA_CHECK_NOEXCEPT(cudaFree(p)); }
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  T* p = nullptr;
  size_t n;
};

// Deterministic pseudo-random fill in [-scale, scale] (values only matter for realistic power draw).
template <class T>
__global__ void fill_kernel(T* out, size_t n, uint32_t seed, float scale) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) {
    uint32_t h = static_cast<uint32_t>(i) * 2654435761u ^ seed;
    h ^= h >> 15;
    h *= 2246822519u;
    h ^= h >> 13;
    const float u = (h & 0xFFFFFF) / float(0xFFFFFF) - 0.5f;
    out[i] = T(2.0f * scale * u);
  }
}

template <class T>
void fill(Buffer<T>& b, uint32_t seed, float scale) {
  fill_kernel<T><<<1024, 256>>>(b.p, b.n, seed, scale);
  SG_CUDA_CHECK_LAUNCH("fill_kernel");
}

// All bits set: NaN in bf16 and fp32, so an element a kernel fails to write shows. On the legacy stream:
// synchronize the device before launching on another stream.
template <class T>
void poison(Buffer<T>& b) {
  SG_CUDA_CHECK(cudaMemset(b.p, 0xFF, b.n * sizeof(T)));
}

inline constexpr int kInputCopies = 3;  // input rotation depth: not all of them L2-resident

// The operands of one expert linear (N out, K in) at shape s with balanced routing (M = rows / experts
// rows per expert): kInputCopies filled copies of x [T, K], dy [T, N], w [E, N, K] and dw [E, N, K] fp32,
// one y [T, N] and dx [T, K], the experts' counts and offsets in device memory.
struct ExpertLinearBuffers {
  ExpertLinearBuffers(const MoeShape& s, int64_t n_out, int64_t k_in)
      : T(s.rows), E(s.experts), M(s.rows / s.experts), N(n_out), K(k_in), y(T * N), dx(T * K), counts(E),
        offsets(E) {
    SG_CHECK(T % E == 0, std::string(s.name) + ": balanced routing needs rows divisible by experts");
    for (int c = 0; c < kInputCopies; ++c) {
      x.push_back(std::make_unique<Buffer<bf16>>(T * K));
      dy.push_back(std::make_unique<Buffer<bf16>>(T * N));
      w.push_back(std::make_unique<Buffer<bf16>>(E * N * K));
      dw.push_back(std::make_unique<Buffer<float>>(E * N * K));
      fill(*x[c], 10 + c, 1.0f);
      fill(*dy[c], 20 + c, 1.0f);
      fill(*w[c], 30 + c, 0.05f);
      fill(*dw[c], 40 + c, 0.01f);
    }
    std::vector<int32_t> host_counts(E, static_cast<int32_t>(M)), host_offsets(E);
    for (int64_t e = 0; e < E; ++e) host_offsets[e] = static_cast<int32_t>(e * M);
    SG_CUDA_CHECK(cudaMemcpy(counts.p, host_counts.data(), E * sizeof(int32_t), cudaMemcpyHostToDevice));
    SG_CUDA_CHECK(cudaMemcpy(offsets.p, host_offsets.data(), E * sizeof(int32_t), cudaMemcpyHostToDevice));
    SG_CUDA_CHECK(cudaDeviceSynchronize());
  }
  kernels::GroupedGemmDims dims() const {
    return {.num_groups = static_cast<int>(E), .max_total_rows = T, .N = N, .K = K};
  }

  int64_t T, E, M, N, K;  // rows, experts, rows per expert, out and in features
  std::vector<std::unique_ptr<Buffer<bf16>>> x, dy, w;
  std::vector<std::unique_ptr<Buffer<float>>> dw;
  Buffer<bf16> y, dx;
  Buffer<int32_t> counts, offsets;
};

// Median device time of launch(i) (i = iteration, for rotating inputs): all launches queued back to back,
// an event pair around each, read after one final synchronisation.
inline double median_ms(cuda::Stream& stream, int warmup, int iters, const std::function<void(int)>& launch) {
  for (int i = 0; i < warmup; ++i) launch(i);
  stream.synchronize();
  std::vector<std::unique_ptr<cuda::Event>> start, stop;
  for (int i = 0; i < iters; ++i) {
    start.push_back(std::make_unique<cuda::Event>(true));
    stop.push_back(std::make_unique<cuda::Event>(true));
    start.back()->record(stream);
    launch(i);
    stop.back()->record(stream);
  }
  stream.synchronize();
  std::vector<double> ms;
  for (int i = 0; i < iters; ++i) ms.push_back(cuda::Event::elapsed_ms(*start[i], *stop[i]));
  return median(ms);
}

// Per-launch device time of each candidate as the training step pays it, where every launch runs inside a
// CUDA graph: `launches` calls of a candidate (launch(i), inputs rotating by i as in median_ms) captured into
// one graph per candidate; after `warmup` rounds the graphs are replayed in turns (c0, c1, ..., c0, c1, ...)
// `reps` times, so that every candidate runs under the same clock and power state (the H200 moves both
// within one run), each replay timed by an event pair. Returns per candidate the median over the reps of
// replay time / launches.
inline std::vector<double> graph_replay_ms(cuda::Stream& stream, int launches, int warmup, int reps,
                                          const std::vector<std::function<void(int)>>& candidates) {
  std::vector<std::unique_ptr<graph::GraphExec>> execs;
  for (size_t c = 0; c < candidates.size(); ++c) {
    const std::string name = "bench candidate " + std::to_string(c);
    const graph::CapturedGraph captured = graph::capture_graph(stream, name, [&](cudaStream_t) {
      for (int i = 0; i < launches; ++i) candidates[c](i);
    });
    execs.push_back(std::make_unique<graph::GraphExec>(name));
    execs.back()->install(captured.graph, stream, captured.capture_ms);
  }
  for (int w = 0; w < warmup; ++w) {
    for (auto& exec : execs) exec->launch(stream);
  }
  stream.synchronize();
  std::vector<std::unique_ptr<cuda::Event>> start, stop;  // [rep * candidates + c]
  for (int r = 0; r < reps; ++r) {
    for (auto& exec : execs) {
      start.push_back(std::make_unique<cuda::Event>(true));
      stop.push_back(std::make_unique<cuda::Event>(true));
      start.back()->record(stream);
      exec->launch(stream);
      stop.back()->record(stream);
    }
  }
  stream.synchronize();
  std::vector<double> per_launch;
  for (size_t c = 0; c < execs.size(); ++c) {
    std::vector<double> ms;
    for (int r = 0; r < reps; ++r) {
      const size_t at = size_t(r) * execs.size() + c;
      ms.push_back(cuda::Event::elapsed_ms(*start[at], *stop[at]) / launches);
    }
    per_launch.push_back(median(ms));
  }
  return per_launch;
}

// A bf16 output against a reference, on the host: non-finite elements are counted, not compared.
struct Bf16Diff {
  double max_abs_diff = 0, max_abs_ref = 0;
  size_t equal = 0, non_finite = 0, n = 0;
  double relative() const { return max_abs_ref > 0 ? max_abs_diff / max_abs_ref : max_abs_diff; }
  bool pass(double tolerance) const { return non_finite == 0 && relative() < tolerance; }
};
inline Bf16Diff compare_bf16(const Buffer<bf16>& got, const Buffer<bf16>& want) {
  std::vector<bf16> g(got.n), w(want.n);
  SG_CUDA_CHECK(cudaMemcpy(g.data(), got.p, got.n * sizeof(bf16), cudaMemcpyDeviceToHost));
  SG_CUDA_CHECK(cudaMemcpy(w.data(), want.p, want.n * sizeof(bf16), cudaMemcpyDeviceToHost));
  Bf16Diff d;
  d.n = g.size();
  for (size_t i = 0; i < g.size(); ++i) {
    const float a = float(g[i]), b = float(w[i]);
    if (!std::isfinite(a) || !std::isfinite(b)) {
      ++d.non_finite;
      continue;
    }
    d.equal += a == b;
    d.max_abs_diff = std::max(d.max_abs_diff, double(std::fabs(a - b)));
    d.max_abs_ref = std::max(d.max_abs_ref, double(std::fabs(b)));
  }
  return d;
}

// What a bench's --help says it measures when its caller gives no text.
inline constexpr const char* kSeeSourceComment =
    "What it measures and prints: the comment at the top of its source in bench/.";

// [--iters N] (default 30, at least 10): the arguments of the benches that take only that. --help and usage
// errors exit here (bench_args.h), before any CUDA call.
inline int parse_iters_arg(int argc, char** argv, const std::string& program,
                           const std::string& about = kSeeSourceComment) {
  const ToolArgs args = read_tool_args(
      argc, argv,
      {.program = program,
       .about = about,
       .flags = {{.name = "--iters", .default_value = "30", .min = 10, .max = 100000,
                  .help = "timed launches per candidate"}}});
  return static_cast<int>(args.integer("--iters"));
}

// How a bench times its candidates (where it offers the choice).
enum class Timing {
  kGraph,   // graph_replay_ms: in graphs as the step runs them, candidates in turns
  kEvents,  // median_ms: stream launches, an event pair around each, one candidate after the other
};

struct GroupedBenchArgs {
  int warmup = 10, iters = 50;
  std::string which = "all";  // a kMoeShapes name, "all" or (where allowed) "dense": kDenseProbes
  Timing timing = Timing::kGraph;  // --timing (where allowed)
  bool selects(const MoeShape& s) const { return which == "all" || which == s.name; }
  bool dense() const { return which == "dense"; }
};

// [--iters N] [--warmup N] [--case small_moe|a3b_proxy|all(|dense)] [--timing graph|events (where allowed)];
// iters >= min_iters. --help and usage errors exit here (bench_args.h), before any CUDA call.
inline GroupedBenchArgs parse_grouped_bench_args(int argc, char** argv, const std::string& program,
                                                 GroupedBenchArgs args, int min_iters, bool allow_dense = false,
                                                 bool allow_timing = false,
                                                 const std::string& about = kSeeSourceComment) {
  std::vector<std::string> cases;
  for (const MoeShape& s : kMoeShapes) cases.emplace_back(s.name);
  cases.emplace_back("all");
  if (allow_dense) cases.emplace_back("dense");
  std::vector<ToolFlag> flags = {
      {.name = "--iters", .default_value = std::to_string(args.iters), .min = static_cast<double>(min_iters),
       .max = 100000, .help = "timed launches (or graph replays) per candidate"},
      {.name = "--warmup", .default_value = std::to_string(args.warmup), .min = 0, .max = 100000,
       .help = "untimed ones first"},
      {.name = "--case", .value = ToolValue::text, .default_value = args.which, .choices = cases, .value_name = "C",
       .help = "the shapes"}};
  if (allow_timing) {
    flags.push_back({.name = "--timing", .value = ToolValue::text,
                     .default_value = args.timing == Timing::kGraph ? "graph" : "events",
                     .choices = {"graph", "events"},
                     .value_name = "T",
                     .help = "graph (replays of captured launches, as the step runs them) or events (an event pair "
                             "around each stream launch)"});
  }
  const ToolArgs parsed = read_tool_args(argc, argv, {.program = program, .about = about, .flags = flags});
  args.iters = static_cast<int>(parsed.integer("--iters"));
  args.warmup = static_cast<int>(parsed.integer("--warmup"));
  args.which = parsed.text("--case");
  if (allow_timing) args.timing = parsed.text("--timing") == "graph" ? Timing::kGraph : Timing::kEvents;
  return args;
}

}  // namespace sg::bench
