// swiglu_backward_gemm_variants (opt-in, -DSTEPGRAPH_SWIGLU_BACKWARD_GEMM_VARIANTS=ON): other CUTLASS
// configurations of kernels/swiglu_backward_gemm.h (one *_sm90a.cu each) against production and against the two
// kernels it replaces (cuBLASLt, then kernels::swiglu_backward), at llama/small's and llama/1b's MLP shapes. Per
// configuration: the median of 30 launches after 10 warmup (CUDA events), the speedup over the two kernels, and
// PASS/FAIL of its output against theirs (poisoned with NaN first; max |diff| / max |ref| < 1e-2, every element
// finite).
// Usage: swiglu_backward_gemm_variants [--iters N]
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/error.h"
#include "core/strings.h"
#include "cuda/check.h"
#include "cuda/device.h"
#include "cuda/stream.h"
#include "grouped_gemm_bench_util.cuh"
#include "kernels/gemm.h"
#include "kernels/swiglu.h"
#include "variant_registry.h"

namespace {

using namespace sg;
using bench::Buffer;

struct Shape {
  const char* name;
  int64_t T, H, F;
};
constexpr Shape kShapes[] = {{"small", 8192, 768, 2048}, {"1b", 8192, 2048, 5632}};

using Launch = std::function<void()>;

// Times `unfused` (writing `want`) and each configuration (writing `got`); true when every output passes.
bool compare_configs(const char* op, cuda::Stream& stream, int iters, const Launch& unfused,
                     const std::vector<std::pair<std::string, Launch>>& configs, Buffer<bf16>& got,
                     Buffer<bf16>& want) {
  bench::poison(want);
  SG_CUDA_CHECK(cudaDeviceSynchronize());  // the poison is on the legacy stream, `stream` is non-blocking
  unfused();
  stream.synchronize();
  const double unfused_ms = bench::median_ms(stream, 10, iters, [&](int) { unfused(); });
  std::printf("  %s: two kernels %.4f ms\n", op, unfused_ms);
  bool ok = true;
  for (const auto& [name, launch] : configs) {
    bench::poison(got);
    SG_CUDA_CHECK(cudaDeviceSynchronize());
    launch();
    stream.synchronize();
    const bench::Bf16Diff d = bench::compare_bf16(got, want);
    const double rel = d.relative();
    const bool pass = d.pass(1e-2);
    ok = ok && pass;
    const double ms = bench::median_ms(stream, 10, iters, [&](int) { launch(); });
    std::printf("    %-80s %9.4f ms %6.2fx  %s (max rel diff %.1e)\n", name.c_str(), ms, unfused_ms / ms,
                pass ? "PASS" : "FAIL", rel);
  }
  return ok;
}

int run(int argc, char** argv) {
  const int iters = bench::parse_iters_arg(argc, argv, "swiglu_backward_gemm_variants");
  cuda::require_device("swiglu_backward_gemm_variants");
  const int sms = cuda::device_properties().sm_count;
  std::printf("GPU: %s\n%zu variants; speedup = the two kernels' ms / ms\n",
              cuda::device_properties().summary().c_str(), bench::swiglu_gemm_variants().size());
  bool ok = true;
  kernels::Blas blas;
  cuda::Stream stream;
  for (const Shape& s : kShapes) {
    std::printf("\n%s T=%lld H=%lld F=%lld\n", s.name, (long long)s.T, (long long)s.H, (long long)s.F);
    {
      Buffer<bf16> dy(s.T * s.H), w(s.H * s.F), gate_up(s.T * 2 * s.F), d_act(s.T * s.F), want(s.T * 2 * s.F),
          got(s.T * 2 * s.F);
      bench::fill(dy, 1, 1.0f);
      bench::fill(w, 2, 0.05f);
      bench::fill(gate_up, 3, 3.0f);
      const kernels::LinearBackwardInput down_dx(blas, s.T, s.F, s.H);
      const kernels::SwiGluBackwardGemmParams p{.d_gate_up = got.p, .dy = dy.p, .w_down = w.p, .gate_up = gate_up.p};
      auto production = std::make_shared<kernels::SwiGluBackwardGemm>(s.T, s.H, s.F);
      std::vector<std::pair<std::string, Launch>> configs = {
          {"production (cooperative 128x128x64, cluster 2x1, CUTLASS's epilogue subtile)",
           [&, production] { production->run(stream, p); }}};
      for (const auto& v : bench::swiglu_gemm_variants()) {
        auto launch = v.make(s.T, s.H, s.F, sms);
        configs.push_back({v.name, [&, launch] { launch(stream, p); }});
      }
      const Launch unfused = [&] {
        down_dx.run(stream, d_act.p, dy.p, w.p);
        kernels::swiglu_backward(stream,
                                 {.dgate_up = want.p, .dout = d_act.p, .gate_up = gate_up.p, .T = s.T, .F = s.F});
      };
      ok = compare_configs("d_gate_up", stream, iters, unfused, configs, got, want) && ok;
    }
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
