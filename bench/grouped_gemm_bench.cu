// The MoE expert grouped GEMMs (kernels/grouped_gemm.h, CUTLASS sm_90a) against ONE dense cuBLASLt GEMM
// of the same total size (kernels/gemm.h) at the issue's shapes, balanced routing (every expert gets
// rows / experts rows, counts and offsets in device memory as in the step):
//   small_moe  8 experts,   8192 tokens x top-2 = 16384 rows, hidden 768,  moe_ffn 768
//   a3b_proxy  128 experts, 4096 tokens x top-8 = 32768 rows, hidden 2048, moe_ffn 768
// For each expert linear (fc1: N = 2F, K = H; fc2: N = H, K = F) and op (forward, backward_input,
// backward_weight) it prints the median time (CUDA events around each launch, the launches queued back to
// back after warmup; inputs rotate through 3 copies so they are not all L2-resident) and TFLOP/s of both,
// and their ratio (target >= 0.75). The grouped time includes its one-block setup kernel.
// backward_weight: the grouped op reads and writes one fp32 [N, K] dW PER EXPERT (the main_grad), the
// dense one a single [N, K]: with few rows per expert (a3b_proxy) the grouped op is bound by that traffic.
// Usage: build/bench/grouped_gemm_bench [--iters N] [--warmup N] [--case small_moe|a3b_proxy|all]
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <initializer_list>
#include <memory>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/strings.h"
#include "cuda/check.h"
#include "cuda/device.h"
#include "cuda/stream.h"
#include "kernels/gemm.h"
#include "kernels/grouped_gemm.h"

namespace {

using namespace sg;

constexpr int kCopies = 3;  // input rotation depth

struct MoeShape {
  const char* name;
  int experts;
  int64_t rows;  // tokens x topk
  int64_t hidden, ffn;
};

// Device buffer owned by the bench (plain cudaMalloc; the bench is not a training step).
template <class T>
struct Buffer {
  explicit Buffer(size_t n) : n(n) { SG_CUDA_CHECK(cudaMalloc(&p, std::max<size_t>(n, 1) * sizeof(T))); }
  ~Buffer() { cudaFree(p); }
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

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0.0 : v[v.size() / 2];
}

// Median device time of launch(i) (i = iteration, for rotating inputs): all launches queued back to back,
// an event pair around each, read after one final synchronisation.
double median_ms(cuda::Stream& stream, int warmup, int iters, const std::function<void(int)>& launch) {
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

struct Row {
  std::string model, layer, op;
  int64_t n, k;
  double grouped_ms, dense_ms, flop;
};

// Times the three ops of one expert linear (N out, K in) grouped and dense.
void bench_linear(const MoeShape& s, const char* layer, int64_t N, int64_t K, int warmup, int iters,
                  std::vector<Row>& rows) {
  const int64_t T = s.rows, E = s.experts;
  cuda::Stream stream;
  std::vector<std::unique_ptr<Buffer<bf16>>> x, dy, w;
  std::vector<std::unique_ptr<Buffer<float>>> dw;
  for (int c = 0; c < kCopies; ++c) {
    x.push_back(std::make_unique<Buffer<bf16>>(T * K));
    dy.push_back(std::make_unique<Buffer<bf16>>(T * N));
    w.push_back(std::make_unique<Buffer<bf16>>(E * N * K));
    dw.push_back(std::make_unique<Buffer<float>>(E * N * K));
    fill(*x[c], 10 + c, 1.0f);
    fill(*dy[c], 20 + c, 1.0f);
    fill(*w[c], 30 + c, 0.05f);
    fill(*dw[c], 40 + c, 0.01f);
  }
  Buffer<bf16> y(T * N), dx(T * K);
  Buffer<int32_t> counts(E), offsets(E);
  std::vector<int32_t> host_counts(E, static_cast<int32_t>(T / E)), host_offsets(E);
  for (int64_t e = 0; e < E; ++e) host_offsets[e] = static_cast<int32_t>(e * (T / E));
  SG_CUDA_CHECK(cudaMemcpy(counts.p, host_counts.data(), E * sizeof(int32_t), cudaMemcpyHostToDevice));
  SG_CUDA_CHECK(cudaMemcpy(offsets.p, host_offsets.data(), E * sizeof(int32_t), cudaMemcpyHostToDevice));
  SG_CUDA_CHECK(cudaDeviceSynchronize());

  const kernels::GroupedGemmDims dims{.num_groups = s.experts, .max_total_rows = T, .N = N, .K = K};
  kernels::GroupedLinearForward g_fwd(dims);
  kernels::GroupedLinearBackwardInput g_dgrad(dims);
  kernels::GroupedLinearBackwardWeight g_wgrad(dims);
  Buffer<unsigned char> ws(g_fwd.workspace_bytes() + g_dgrad.workspace_bytes() + g_wgrad.workspace_bytes() + 1024);
  size_t at = 0;
  for (kernels::GroupedGemmPlan* plan : std::initializer_list<kernels::GroupedGemmPlan*>{&g_fwd, &g_dgrad, &g_wgrad}) {
    plan->bind(ws.p + at, plan->workspace_bytes());
    plan->initialize();
    at += (plan->workspace_bytes() + 255) / 256 * 256;
  }

  kernels::Blas blas;
  kernels::LinearForward d_fwd(blas, T, K, N);
  kernels::LinearBackwardInput d_dgrad(blas, T, K, N);
  kernels::LinearBackwardWeight d_wgrad(blas, T, K, N);

  auto c = [](int i) { return i % kCopies; };
  struct OpLaunches {
    const char* op;
    std::function<void(int)> grouped, dense;
  };
  const OpLaunches ops[] = {
      {"forward",
       [&](int i) {
         g_fwd.run(stream, {.y = y.p, .x = x[c(i)]->p, .w = w[c(i)]->p, .counts = counts.p, .offsets = offsets.p});
       },
       [&](int i) { d_fwd.run(stream, y.p, x[c(i)]->p, w[c(i)]->p); }},
      {"backward_input",
       [&](int i) {
         g_dgrad.run(stream,
                     {.dx = dx.p, .dy = dy[c(i)]->p, .w = w[c(i)]->p, .counts = counts.p, .offsets = offsets.p});
       },
       [&](int i) { d_dgrad.run(stream, dx.p, dy[c(i)]->p, w[c(i)]->p); }},
      {"backward_weight",
       [&](int i) {
         g_wgrad.run(stream,
                     {.dw = dw[c(i)]->p, .dy = dy[c(i)]->p, .x = x[c(i)]->p, .counts = counts.p, .offsets = offsets.p});
       },
       [&](int i) { d_wgrad.run(stream, dw[c(i)]->p, dy[c(i)]->p, x[c(i)]->p); }},
  };
  const double flop = 2.0 * double(T) * double(N) * double(K);
  for (const OpLaunches& o : ops) {
    const double grouped_ms = median_ms(stream, warmup, iters, o.grouped);
    const double dense_ms = median_ms(stream, warmup, iters, o.dense);
    rows.push_back({s.name, layer, o.op, N, K, grouped_ms, dense_ms, flop});
  }
}

int run(int argc, char** argv) {
  int warmup = 10, iters = 50;
  std::string which = "all";
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--iters" && i + 1 < argc) {
      iters = std::atoi(argv[++i]);
    } else if (a == "--warmup" && i + 1 < argc) {
      warmup = std::atoi(argv[++i]);
    } else if (a == "--case" && i + 1 < argc) {
      which = argv[++i];
    } else {
      throw Error("grouped_gemm_bench: unknown argument '" + a +
                  "'. Usage: grouped_gemm_bench [--iters N] [--warmup N] [--case small_moe|a3b_proxy|all]");
    }
  }
  SG_CHECK(iters >= 1 && warmup >= 0, "grouped_gemm_bench: --iters must be >= 1 and --warmup >= 0");
  cuda::require_device("grouped_gemm_bench");
  const MoeShape shapes[] = {{"small_moe", 8, 8192 * 2, 768, 768}, {"a3b_proxy", 128, 4096 * 8, 2048, 768}};
  std::printf("GPU: %s\n", cuda::device_properties().summary().c_str());
  std::vector<Row> rows;
  for (const MoeShape& s : shapes) {
    if (which != "all" && which != s.name) continue;
    bench_linear(s, "fc1", 2 * s.ffn, s.hidden, warmup, iters, rows);
    bench_linear(s, "fc2", s.hidden, s.ffn, warmup, iters, rows);
  }
  SG_CHECK(!rows.empty(), "grouped_gemm_bench: --case must be small_moe, a3b_proxy or all, not '" + which + "'");
  const kernels::GroupedGemmDims probe{.num_groups = 1, .max_total_rows = 8, .N = 8, .K = 8};
  std::printf("grouped (+ a one-block setup kernel each):\n  forward          %s\n  backward_input   %s\n"
              "  backward_weight  %s\ndense: cuBLASLt, one GEMM over all rows with one [N, K] weight\n",
              kernels::GroupedLinearForward(probe).kernel_name().c_str(),
              kernels::GroupedLinearBackwardInput(probe).kernel_name().c_str(),
              kernels::GroupedLinearBackwardWeight(probe).kernel_name().c_str());
  std::printf("median of %d launches after %d warmup, inputs rotated over %d copies, balanced routing\n\n", iters,
              warmup, kCopies);
  std::printf("%-10s %-5s %-16s %6s %6s %12s %9s %12s %9s %7s\n", "model", "layer", "op", "N", "K", "grouped ms",
              "TFLOP/s", "dense ms", "TFLOP/s", "ratio");
  int pass = 0;
  for (const Row& r : rows) {
    const double g_tflops = r.flop / (r.grouped_ms * 1e-3) / 1e12, d_tflops = r.flop / (r.dense_ms * 1e-3) / 1e12;
    const double ratio = g_tflops / d_tflops;
    pass += ratio >= 0.75;
    std::printf("%-10s %-5s %-16s %6lld %6lld %12.4f %9.1f %12.4f %9.1f %7.2f%s\n", r.model.c_str(), r.layer.c_str(),
                r.op.c_str(), static_cast<long long>(r.n), static_cast<long long>(r.k), r.grouped_ms, g_tflops,
                r.dense_ms, d_tflops, ratio, ratio >= 0.75 ? "" : "  < 0.75");
  }
  std::printf("\ntarget grouped/dense >= 0.75: %d of %zu rows\n", pass, rows.size());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const sg::Error& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
}
