// SwiGLU's backward in the down projection's input-gradient GEMM (kernels/swiglu_backward_gemm.h, CUTLASS)
// against the two kernels the MLP runs without it: cuBLASLt writes dh = dy W_down [T, F] (bf16), then
// kernels::swiglu_backward reads dh and gate_up and writes d_gate_up. Per shape (llama/small's and llama/1b's
// MLP, and an odd one): the median of each over 30 launches after 10 warmup (CUDA events), whether the rule
// picks the fused kernel there, and the fused output against the two-kernel one (both poisoned with NaN
// first): max |diff| / max |ref|, and the share of bitwise-equal elements (they can differ where the two
// GEMMs' fp32 sums round dh differently).
// Usage: build/bench/swiglu_backward_gemm_bench [--iters N]
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/strings.h"
#include "cuda/check.h"
#include "cuda/device.h"
#include "cuda/stream.h"
#include "grouped_gemm_bench_util.cuh"
#include "kernels/gemm.h"
#include "kernels/swiglu.h"
#include "kernels/swiglu_backward_gemm.h"

namespace {

using namespace sg;
using bench::Buffer;

struct Shape {
  const char* name;
  int64_t T, H, F;
};
constexpr Shape kShapes[] = {{"odd", 1000, 264, 520}, {"small", 8192, 768, 2048}, {"1b", 8192, 2048, 5632}};

int run(int argc, char** argv) {
  const int iters = bench::parse_iters_arg(
      argc, argv, "swiglu_backward_gemm_bench",
      "Times SwiGLU's backward fused into the down projection's input-gradient GEMM\n"
      "(kernels/swiglu_backward_gemm.h, CUTLASS) against the two kernels the MLP runs without it (cuBLASLt\n"
      "dh = dy W_down, then kernels::swiglu_backward) at llama/small's, llama/1b's and an odd MLP shape: the\n"
      "median of each (CUDA events, after 10 warmup launches), whether the rule picks the fused kernel, and how\n"
      "far the fused output is from the two-kernel one. Prints a table; writes nothing. Needs a CUDA GPU (sm_90).");
  cuda::require_device("swiglu_backward_gemm_bench");
  std::printf("GPU: %s\nfused: kernels::SwiGluBackwardGemm (CUTLASS, tile 128x128x64, cluster 2x1)\n"
              "two kernels: cuBLASLt dh = dy W_down (bf16), then kernels::swiglu_backward\n",
              cuda::device_properties().summary().c_str());
  std::printf("%-6s %6s %5s %5s %10s %10s %10s %10s %8s %6s %12s %8s %s\n", "shape", "T", "H", "F", "gemm ms",
              "swiglu ms", "two ms", "fused ms", "speedup", "rule", "max rel diff", "equal", "check");
  bool ok = true;
  kernels::Blas blas;
  for (const Shape& s : kShapes) {
    Buffer<bf16> dy(s.T * s.H), w(s.H * s.F), gate_up(s.T * 2 * s.F), d_act(s.T * s.F), want(s.T * 2 * s.F),
        got(s.T * 2 * s.F);
    bench::fill(dy, 1, 1.0f);
    bench::fill(w, 2, 0.05f);
    bench::fill(gate_up, 3, 3.0f);
    cuda::Stream stream;
    const kernels::LinearBackwardInput down_dx(blas, s.T, s.F, s.H);
    auto gemm = [&] { down_dx.run(stream, d_act.p, dy.p, w.p); };
    auto swiglu = [&] {
      kernels::swiglu_backward(stream, {.dgate_up = want.p, .dout = d_act.p, .gate_up = gate_up.p, .T = s.T, .F = s.F});
    };
    kernels::SwiGluBackwardGemm fused(s.T, s.H, s.F);
    auto fused_run = [&] {
      fused.run(stream, {.d_gate_up = got.p, .dy = dy.p, .w_down = w.p, .gate_up = gate_up.p});
    };
    bench::poison(want);
    bench::poison(got);
    SG_CUDA_CHECK(cudaDeviceSynchronize());
    gemm();
    swiglu();
    fused_run();
    stream.synchronize();
    const bench::Bf16Diff d = bench::compare_bf16(got, want);
    const double rel = d.relative();
    const bool pass = d.pass(1e-2);
    ok = ok && pass;
    const double gemm_ms = bench::median_ms(stream, 10, iters, [&](int) { gemm(); });
    const double swiglu_ms = bench::median_ms(stream, 10, iters, [&](int) { swiglu(); });
    const double two_ms = bench::median_ms(stream, 10, iters, [&](int) {
      gemm();
      swiglu();
    });
    const double fused_ms = bench::median_ms(stream, 10, iters, [&](int) { fused_run(); });
    const bool preferred = kernels::swiglu_backward_gemm_preferred(s.T, s.H, s.F);
    std::printf("%-6s %6lld %5lld %5lld %10.4f %10.4f %10.4f %10.4f %7.2fx %6s %12.2e %7.1f%% %s\n", s.name,
                (long long)s.T, (long long)s.H, (long long)s.F, gemm_ms, swiglu_ms, two_ms, fused_ms,
                two_ms / fused_ms, preferred ? "fused" : "two", rel, 100.0 * double(d.equal) / double(d.n),
                pass ? "PASS" : strprintf("FAIL (%zu non-finite)", d.non_finite).c_str());
  }
  return ok ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
}
