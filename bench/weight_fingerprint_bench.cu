// What validation.test_mode costs on the device: the weight-fingerprint kernel (kernels/weight_fingerprint.h) over a
// shipped recipe's whole weights, as the step enqueues it after every step (model/weight_fingerprints.h): the bf16
// compute weights and, without the distributed optimizer, the fp32 main weights. Median of CUDA-event timings after
// warmup, with the bytes read per second. Divide by the recipe's step time (stepgraph bench) for the share of a step.
// Usage: build/bench/weight_fingerprint_bench [--iters N] [--warmup N] (--help: the flags). Prints a table.
#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "bench_args.h"
#include "bench_device.h"
#include "config/config.h"
#include "config/model_config.h"
#include "cuda/check.h"
#include "cuda/stream.h"
#include "kernels/weight_fingerprint.h"
#include "model/layer_registry.h"
#include "model/weight_fingerprints.h"

namespace {

using namespace sg;

struct Timing {
  double bf16_ms, fp32_ms;
};

// The fingerprints of `bf16_elements` bf16 and `fp32_elements` fp32 values (zeros: the kernel's time does not
// depend on the bits), timed one call each per iteration.
Timing time_fingerprints(const model::WeightFingerprintLayout& f, int warmup, int iters) {
  bf16* weights = bench::device_alloc<bf16>(static_cast<size_t>(f.bf16_elements));
  float* main_weights = bench::device_alloc<float>(static_cast<size_t>(std::max<int64_t>(f.fp32_elements, 1)));
  uint64_t* out = bench::device_alloc<uint64_t>(static_cast<size_t>(f.count()));
  SG_CUDA_CHECK(cudaMemset(weights, 0, static_cast<size_t>(f.bf16_elements) * sizeof(bf16)));
  SG_CUDA_CHECK(cudaMemset(main_weights, 0, static_cast<size_t>(std::max<int64_t>(f.fp32_elements, 1)) * 4));
  const kernels::WeightFingerprintParams bf16_params{.data = weights,
                                                     .element_bytes = 2,
                                                     .count = f.bf16_elements,
                                                     .chunk_elements = f.chunk_elements,
                                                     .fingerprints = out};
  const kernels::WeightFingerprintParams fp32_params{.data = main_weights,
                                                     .element_bytes = 4,
                                                     .count = f.fp32_elements,
                                                     .chunk_elements = f.chunk_elements,
                                                     .fingerprints = out + f.bf16_chunks()};
  cuda::Stream stream;
  cuda::Event start(true), mid(true), stop(true);
  for (int i = 0; i < warmup; ++i) {
    kernels::weight_fingerprints(stream, bf16_params);
    kernels::weight_fingerprints(stream, fp32_params);
  }
  stream.synchronize();
  std::vector<double> bf16_ms, fp32_ms;
  for (int i = 0; i < iters; ++i) {
    start.record(stream);
    kernels::weight_fingerprints(stream, bf16_params);
    mid.record(stream);
    kernels::weight_fingerprints(stream, fp32_params);
    stop.record(stream);
    bf16_ms.push_back(cuda::Event::elapsed_ms(start, mid));
    fp32_ms.push_back(cuda::Event::elapsed_ms(mid, stop));
  }
  for (void* p : {static_cast<void*>(weights), static_cast<void*>(main_weights), static_cast<void*>(out)})
    SG_CUDA_CHECK(cudaFree(p));
  return {bench::median(bf16_ms), bench::median(fp32_ms)};
}

}  // namespace

int main(int argc, char** argv) {
  const bench::ToolArgs args = bench::read_tool_args(
      argc, argv,
      {.program = "weight_fingerprint_bench",
       .about = "Times validation.test_mode's weight fingerprints (kernels/weight_fingerprint.h) over the whole\n"
                "weights of the shipped llama/tiny, llama/small, llama/1b and moe/a3b_proxy recipes at one rank:\n"
                "the bf16 compute weights and the fp32 main weights, the median of CUDA-event timings after\n"
                "warmup, and the bytes read per second. Prints a table; writes nothing. Needs a CUDA GPU.",
       .flags = {{.name = "--iters", .default_value = "20", .min = 1, .max = 100000, .help = "timed calls per recipe"},
                 {.name = "--warmup",
                  .default_value = "3",
                  .min = 0,
                  .max = 100000,
                  .help = "untimed calls per recipe first"}}});
  const int iters = static_cast<int>(args.integer("--iters"));
  const int warmup = static_cast<int>(args.integer("--warmup"));
  try {
    std::printf("weight fingerprints (validation.test_mode), chunks of %lld elements, median of %d after %d warmup\n",
                static_cast<long long>(ref::kFingerprintChunkElements), iters, warmup);
    std::printf("%-16s %14s %10s %10s %10s %10s\n", "recipe", "parameters", "bf16_ms", "fp32_ms", "total_ms", "GB/s");
    for (const char* recipe : {"llama/tiny", "llama/small", "llama/1b", "moe/a3b_proxy"}) {
      const model::ModelLayout layout = model::model_layout(config::model_spec(config::load_config(recipe)));
      const model::WeightFingerprintLayout f = model::weight_fingerprint_layout(layout, layout.total(), false);
      const Timing t = time_fingerprints(f, warmup, iters);
      const double bytes = 2.0 * static_cast<double>(f.bf16_elements) + 4.0 * static_cast<double>(f.fp32_elements);
      const double total_ms = t.bf16_ms + t.fp32_ms;
      std::printf("%-16s %14lld %10.3f %10.3f %10.3f %10.0f\n", recipe, static_cast<long long>(layout.num_parameters()),
                  t.bf16_ms, t.fp32_ms, total_ms, bytes / (total_ms * 1e-3) / 1e9);
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "weight_fingerprint_bench: %s\n", e.what());
    return 1;
  }
  return 0;
}
