// The SSD scan alone (kernels/ssd_scan.h): forward, backward and forward+backward median times (CUDA
// events around each call, after warmup) at the Mamba2 shapes of issue 12 (headdim 64, dstate 128, 32 heads,
// 8 groups; seq 2048 batch 4 and seq 8192 batch 1). bench/mamba_ssd_reference.py times mamba_ssm's Triton
// mamba_chunk_scan_combined on the same shapes.
// Usage: build/bench/ssd_scan_bench [--iters N] [--warmup N] (--help: the flags). Prints a table; writes nothing.
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "bench_args.h"
#include "bench_device.h"
#include "cuda/check.h"
#include "cuda/stream.h"
#include "kernels/ssd_scan.h"

namespace {

using namespace sg;

using bench::device_alloc;
using bench::median;
using bench::random_bf16;
using bench::upload;

struct Timing {
  double fwd_ms, bwd_ms, both_ms;
};

Timing bench_shape(const kernels::SsdShape& s, int warmup, int iters) {
  const size_t nx = s.batch * s.seqlen * s.nheads * s.headdim, nbc = s.batch * s.seqlen * s.ngroups * s.dstate;
  const size_t ndt = s.batch * s.seqlen * s.nheads;
  bf16 *x = device_alloc<bf16>(nx), *y = device_alloc<bf16>(nx), *dy = device_alloc<bf16>(nx),
       *dx = device_alloc<bf16>(nx), *Bm = device_alloc<bf16>(nbc), *Cm = device_alloc<bf16>(nbc),
       *dB = device_alloc<bf16>(nbc), *dC = device_alloc<bf16>(nbc);
  float *dt = device_alloc<float>(ndt), *ddt = device_alloc<float>(ndt), *A = device_alloc<float>(s.nheads),
        *D = device_alloc<float>(s.nheads), *dA = device_alloc<float>(s.nheads), *dD = device_alloc<float>(s.nheads);
  const size_t ws_bytes = kernels::ssd_workspace_bytes(s);
  void* ws = device_alloc<unsigned char>(ws_bytes);
  upload(x, random_bf16(nx, 1, 1.0f));
  upload(dy, random_bf16(nx, 2, 1.0f));
  upload(Bm, random_bf16(nbc, 3, 0.5f));
  upload(Cm, random_bf16(nbc, 4, 0.5f));
  std::mt19937_64 gen(5);
  std::uniform_real_distribution<float> udt(0.001f, 0.1f), ua(1.0f, 16.0f);
  std::vector<float> hdt(ndt), hA(s.nheads), hD(s.nheads, 1.0f);
  for (auto& v : hdt) v = udt(gen);
  for (auto& v : hA) v = -ua(gen);
  upload(dt, hdt);
  upload(A, hA);
  upload(D, hD);

  kernels::SsdScanForwardParams fp;
  fp.y = y, fp.x = x, fp.dt = dt, fp.A = A, fp.Bm = Bm, fp.Cm = Cm, fp.D = D;
  fp.workspace = ws, fp.workspace_bytes = ws_bytes, fp.shape = s;
  kernels::SsdScanBackwardParams bp;
  bp.dx = dx, bp.ddt = ddt, bp.dA = dA, bp.dBm = dB, bp.dCm = dC, bp.dD = dD, bp.dy = dy, bp.x = x, bp.dt = dt;
  bp.A = A, bp.Bm = Bm, bp.Cm = Cm, bp.D = D, bp.workspace = ws, bp.workspace_bytes = ws_bytes, bp.shape = s;

  cuda::Stream stream;
  cuda::Event start(true), mid(true), stop(true);
  for (int i = 0; i < warmup; ++i) {
    kernels::ssd_scan_forward(stream, fp);
    kernels::ssd_scan_backward(stream, bp);
  }
  stream.synchronize();
  std::vector<double> fwd, bwd, both;
  for (int i = 0; i < iters; ++i) {
    start.record(stream);
    kernels::ssd_scan_forward(stream, fp);
    mid.record(stream);
    kernels::ssd_scan_backward(stream, bp);
    stop.record(stream);
    fwd.push_back(cuda::Event::elapsed_ms(start, mid));
    bwd.push_back(cuda::Event::elapsed_ms(mid, stop));
    both.push_back(cuda::Event::elapsed_ms(start, stop));
  }
  for (void* p : std::initializer_list<void*>{x, y, dy, dx, Bm, Cm, dB, dC, dt, ddt, A, D, dA, dD, ws})
    SG_CUDA_CHECK(cudaFree(p));
  return {median(fwd), median(bwd), median(both)};
}

}  // namespace

int main(int argc, char** argv) {
  const bench::ToolArgs args = bench::read_tool_args(
      argc, argv,
      {.program = "ssd_scan_bench",
       .about = "Times the SSD scan alone (kernels/ssd_scan.h): forward, backward and forward+backward, the median\n"
                "of CUDA-event timings per call after warmup, at the Mamba2 shapes of issue 12 (headdim 64, dstate\n"
                "128, 32 heads, 8 groups; seq 2048 batch 4 and seq 8192 batch 1). Prints a table; writes nothing.\n"
                "Needs a CUDA GPU.",
       .flags = {{.name = "--iters", .default_value = "50", .min = 1, .max = 100000, .help = "timed calls per shape"},
                 {.name = "--warmup", .default_value = "10", .min = 0, .max = 100000,
                  .help = "untimed calls per shape first"}}});
  const int iters = static_cast<int>(args.integer("--iters"));
  const int warmup = static_cast<int>(args.integer("--warmup"));
  try {
    const kernels::SsdShape shapes[] = {{4, 2048, 32, 64, 8, 128}, {1, 8192, 32, 64, 8, 128}};
    std::printf("SSD scan (stepgraph), chunk %d, median of %d after %d warmup\n", kernels::kSsdChunk, iters, warmup);
    std::printf("%-6s %-6s %-6s %-6s %-7s %-7s %10s %10s %12s\n", "batch", "seqlen", "nheads", "ngroups", "headdim",
                "dstate", "fwd_ms", "bwd_ms", "fwd+bwd_ms");
    for (const auto& s : shapes) {
      const Timing t = bench_shape(s, warmup, iters);
      std::printf("%-6lld %-6lld %-6lld %-7lld %-7lld %-6lld %10.3f %10.3f %12.3f\n", static_cast<long long>(s.batch),
                  static_cast<long long>(s.seqlen), static_cast<long long>(s.nheads),
                  static_cast<long long>(s.ngroups), static_cast<long long>(s.headdim),
                  static_cast<long long>(s.dstate), t.fwd_ms, t.bwd_ms, t.both_ms);
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ssd_scan_bench: %s\n", e.what());
    return 1;
  }
  return 0;
}
