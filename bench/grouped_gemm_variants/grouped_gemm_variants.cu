// grouped_gemm_variants (opt-in tuning target, -DSTEPGRAPH_GROUPED_GEMM_VARIANTS=ON): the MoE grouped
// GEMM's alternative kernel configurations (tile, cluster, cooperative/pingpong; one *_sm90a.cu each,
// see variant_registry.h) against the production configuration (kernels/grouped_gemm_cutlass.cuh,
// ProductionConfig<Op>) at grouped_gemm_bench's shapes and balanced routing, so ONE GPU run tells which
// configuration wins per op and shape.
// Per (model, layer, op, mode) row and configuration: the median time of the backend's launches (setup
// kernel, with overwrite mode's zero-fill blocks, + GEMM),
// CUDA events around each launch after warmup, inputs rotated over 3 copies as in grouped_gemm_bench; the
// speedup over production; and PASS/FAIL of the configuration's output against production's on the same
// inputs (outputs poisoned with NaN first; accumulate mode starts from the same dW): max |got - want| /
// max |want| < 1e-2 for bf16 outputs (the GPU tests' bf16 tolerance), < 1e-4 for fp32 dW (the same bf16
// products summed in another order), and every element finite.
// To switch production to a winner: change ProductionConfig<Op> in src/kernels/grouped_gemm_cutlass.cuh.
// Usage: grouped_gemm_variants [--iters N (>= 20)] [--warmup N] [--case small_moe|a3b_proxy|all]
// Exit status 1 when any configuration FAILs or is refused by CUTLASS.
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/strings.h"
#include "cuda/check.h"
#include "cuda/device.h"
#include "cuda/stream.h"
#include "grouped_gemm_bench_util.cuh"
#include "kernels/grouped_gemm_backend.h"
#include "variant_registry.h"

namespace sg::bench {

std::vector<GroupedGemmVariant>& grouped_gemm_variants() {
  static std::vector<GroupedGemmVariant> variants;
  return variants;
}

namespace {

using kernels::GroupedGemmDims;
using kernels::GroupedGemmOp;
using kernels::detail::GroupedGemmOperands;
using kernels::detail::GroupedGemmBackend;

constexpr double kBf16Tol = 1e-2, kFp32Tol = 1e-4;

struct Comparison {
  unsigned max_diff_bits, max_ref_bits, non_finite;  // fabs as uint bits: ordered like the floats
};

// max |got - want|, max |want| and a non-finite flag over n elements (a bench: atomics are fine here).
template <class T>
__global__ void compare_kernel(const T* got, const T* want, size_t n, Comparison* out) {
  unsigned diff = 0, ref = 0, bad = 0;
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) {
    const float g = float(got[i]), w = float(want[i]);
    if (!isfinite(g) || !isfinite(w)) bad = 1;
    diff = max(diff, __float_as_uint(fabsf(g - w)));
    ref = max(ref, __float_as_uint(fabsf(w)));
  }
  diff = __reduce_max_sync(0xffffffffu, diff);
  ref = __reduce_max_sync(0xffffffffu, ref);
  bad = __reduce_max_sync(0xffffffffu, bad);
  if (threadIdx.x % 32 == 0) {
    atomicMax(&out->max_diff_bits, diff);
    atomicMax(&out->max_ref_bits, ref);
    atomicMax(&out->non_finite, bad);
  }
}

// Relative max error of got against want (INFINITY when anything is not finite).
template <class T>
double relative_max_error(const Buffer<T>& got, const Buffer<T>& want) {
  Buffer<Comparison> result(1);
  SG_CUDA_CHECK(cudaMemset(result.p, 0, sizeof(Comparison)));
  compare_kernel<T><<<1024, 256>>>(got.p, want.p, got.n, result.p);
  SG_CUDA_CHECK_LAUNCH("compare_kernel");
  Comparison c;
  SG_CUDA_CHECK(cudaMemcpy(&c, result.p, sizeof(c), cudaMemcpyDeviceToHost));
  if (c.non_finite) return INFINITY;
  float diff, ref;
  std::memcpy(&diff, &c.max_diff_bits, 4);
  std::memcpy(&ref, &c.max_ref_bits, 4);
  return ref == 0.0f ? diff : diff / ref;
}

struct Config {
  std::string name;
  MakeGroupedGemmBackend make;
};

// backward_weight's production backend: the tile the plan picks for these dims (kernels/grouped_gemm_tiles.h).
std::unique_ptr<GroupedGemmBackend> make_production_backward_weight(const GroupedGemmDims& dims, int sm_count) {
  return kernels::choose_weight_grad_tile(dims, sm_count) == kernels::WeightGradTile::kNarrow
             ? kernels::detail::make_grouped_backward_weight_narrow_backend(dims, sm_count)
             : kernels::detail::make_grouped_backward_weight_backend(dims, sm_count);
}

// Production first, then the registered variants of op.
std::vector<Config> configs_of(GroupedGemmOp op) {
  MakeGroupedGemmBackend production = op == GroupedGemmOp::kForward ? kernels::detail::make_grouped_forward_backend
                                      : op == GroupedGemmOp::kBackwardInput
                                          ? kernels::detail::make_grouped_backward_input_backend
                                          : make_production_backward_weight;
  std::vector<Config> out{{"production", production}};
  for (const GroupedGemmVariant& v : grouped_gemm_variants()) {
    if (v.op == op) out.push_back({"variant", v.make});
  }
  return out;
}

struct Summary {
  std::string row, best;
  double speedup;
};

struct Harness {
  int warmup, iters, sm_count;
  int failures = 0;
  std::vector<Summary> summary;
  cuda::Stream stream;

  // Times and checks every configuration of one op (mode: accumulate for backward_weight) at one shape.
  // out[c]: the output of input copy c; reset: accumulate's common start (nullptr: poison instead).
  template <class T>
  void run_op(const std::string& row, GroupedGemmOp op, bool accumulate, const GroupedGemmDims& dims, double flop,
              const std::vector<Buffer<T>*>& out, const std::function<GroupedGemmOperands(int)>& operands,
              const Buffer<T>* reset) {
    std::printf("%s\n", row.c_str());
    Buffer<T> want(out[0]->n);
    double production_ms = 0.0, best_ms = 1e30;
    std::string best;
    for (const Config& config : configs_of(op)) {
      std::unique_ptr<GroupedGemmBackend> backend = config.make(dims, sm_count);
      std::string name = backend->kernel_name();
      const std::string prefix = "cutlass sm90a ptr-array grouped gemm, ";
      if (name.rfind(prefix, 0) == 0) name = name.substr(prefix.size());
      std::unique_ptr<Buffer<unsigned char>> ws;
      try {
        ws = std::make_unique<Buffer<unsigned char>>(backend->workspace_bytes());
        backend->initialize(ws->p);
      } catch (const Error& e) {
        std::printf("  %-10s %-56s REFUSED %s\n", config.name.c_str(), name.c_str(), e.what());
        ++failures;
        continue;
      }
      // Correctness on copy 0: poisoned output (or accumulate's common start), one launch.
      if (reset != nullptr) {
        SG_CUDA_CHECK(cudaMemcpy(out[0]->p, reset->p, reset->n * sizeof(T), cudaMemcpyDeviceToDevice));
      } else {
        poison(*out[0]);
      }
      SG_CUDA_CHECK(cudaDeviceSynchronize());
      GroupedGemmOperands o = operands(0);
      o.accumulate = accumulate;
      backend->run(stream, o);
      stream.synchronize();
      const bool is_production = config.name == "production";
      double error = 0.0;
      if (is_production) {
        SG_CUDA_CHECK(cudaMemcpy(want.p, out[0]->p, want.n * sizeof(T), cudaMemcpyDeviceToDevice));
        error = relative_max_error(want, want);  // only the finiteness check: production wrote everything
      } else {
        error = relative_max_error(*out[0], want);
      }
      const double tol = sizeof(T) == 2 ? kBf16Tol : kFp32Tol;
      const bool pass = error < tol;
      failures += !pass;
      const double ms = median_ms(stream, warmup, iters, [&](int i) {
        GroupedGemmOperands oi = operands(i % kInputCopies);
        oi.accumulate = accumulate;
        backend->run(stream, oi);
      });
      if (is_production) production_ms = ms;
      if (pass && ms < best_ms) best_ms = ms, best = name;
      std::printf("  %-10s %-56s %8.4f ms %6.1f TFLOP/s %5.2fx  %s (max rel diff %.1e)\n", config.name.c_str(),
                  name.c_str(), ms, flop / (ms * 1e-3) / 1e12, production_ms / ms, pass ? "PASS" : "FAIL", error);
    }
    summary.push_back({row, best, production_ms / best_ms});
  }

  void run_linear(const MoeShape& s, const char* layer, int64_t N, int64_t K) {
    ExpertLinearBuffers b(s, N, K);
    Buffer<float> dw_start(b.dw[0]->n);  // accumulate mode's common start
    fill(dw_start, 50, 0.01f);
    SG_CUDA_CHECK(cudaDeviceSynchronize());
    const GroupedGemmDims dims = b.dims();
    const int64_t T = b.T, M = b.M;
    const double flop = 2.0 * double(T) * double(N) * double(K);
    auto row = [&](const char* op) {
      return strprintf("%s %s %s  N=%lld K=%lld experts=%d rows/expert=%lld", s.name, layer, op,
                       static_cast<long long>(N), static_cast<long long>(K), s.experts, static_cast<long long>(M));
    };
    auto operands = [&](const void* a, const void* bm, void* d) {
      return GroupedGemmOperands{.counts = b.counts.p, .offsets = b.offsets.p, .a = a, .b = bm, .d = d};
    };
    // One y and dx for every input copy (as grouped_gemm_bench), one dw per copy.
    const std::vector<Buffer<bf16>*> y(kInputCopies, &b.y), dx(kInputCopies, &b.dx);
    std::vector<Buffer<float>*> dw;
    for (auto& d : b.dw) dw.push_back(d.get());
    run_op<bf16>(row("forward"), GroupedGemmOp::kForward, false, dims, flop, y,
                 [&](int c) { return operands(b.x[c]->p, b.w[c]->p, b.y.p); }, nullptr);
    run_op<bf16>(row("backward_input"), GroupedGemmOp::kBackwardInput, false, dims, flop, dx,
                 [&](int c) { return operands(b.dy[c]->p, b.w[c]->p, b.dx.p); }, nullptr);
    auto wgrad = [&](int c) { return operands(b.dy[c]->p, b.x[c]->p, b.dw[c]->p); };
    run_op<float>(row("backward_weight"), GroupedGemmOp::kBackwardWeight, true, dims, flop, dw, wgrad, &dw_start);
    run_op<float>(row("backward_weight_overwrite"), GroupedGemmOp::kBackwardWeight, false, dims, flop, dw, wgrad,
                  nullptr);
  }
};

int run(int argc, char** argv) {
  const GroupedBenchArgs args = parse_grouped_bench_args(argc, argv, "grouped_gemm_variants", {.iters = 30}, 20);
  const int warmup = args.warmup, iters = args.iters;
  cuda::require_device("grouped_gemm_variants");
  const cuda::DeviceProperties& props = cuda::device_properties();
  SG_CHECK(props.compute_capability() == 90,
           "grouped_gemm_variants: the kernels are built for sm_90a (H100/H200) only, not " + props.summary());
  std::printf("GPU: %s\n%zu variants; median of %d launches after %d warmup, inputs rotated over %d copies, "
              "balanced routing;\nspeedup = production ms / ms; PASS: output matches production's (bf16 max rel "
              "diff < %.0e, fp32 < %.0e)\n\n",
              props.summary().c_str(), grouped_gemm_variants().size(), iters, warmup, kInputCopies, kBf16Tol, kFp32Tol);
  Harness h{.warmup = warmup, .iters = iters, .sm_count = props.sm_count};
  for (const MoeShape& s : kMoeShapes) {
    if (!args.selects(s)) continue;
    h.run_linear(s, "fc1", 2 * s.ffn, s.hidden);
    h.run_linear(s, "fc2", s.hidden, s.ffn);
  }
  std::printf("\nbest passing configuration per row (speedup over production):\n");
  for (const Summary& r : h.summary) std::printf("  %-75s %5.2fx  %s\n", r.row.c_str(), r.speedup, r.best.c_str());
  std::printf("\n%s: %d configuration(s) failed or were refused\n", h.failures ? "FAIL" : "PASS", h.failures);
  return h.failures ? 1 : 0;
}

}  // namespace

}  // namespace sg::bench

int main(int argc, char** argv) {
  try {
    return sg::bench::run(argc, argv);
  } catch (const sg::Error& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
}
