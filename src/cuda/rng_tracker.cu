// The device-side RNG advance: the only way a generator's offset moves during training, so eager
// steps and replayed graphs stay in lockstep.
#include "cuda/check.h"
#include "cuda/rng_tracker.h"

namespace sg::cuda {

namespace {

__global__ void rng_advance_kernel(RngState* states, size_t count, uint64_t by) {
  const size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < count) states[i].offset += by;
}

}  // namespace

void launch_rng_advance(RngState* states, size_t count, uint64_t by, cudaStream_t stream) {
  if (count == 0) return;
  constexpr unsigned kThreads = 32;  // a handful of generators: one warp covers them
  const unsigned blocks = static_cast<unsigned>((count + kThreads - 1) / kThreads);
  rng_advance_kernel<<<blocks, kThreads, 0, stream>>>(states, count, by);
  SG_CUDA_CHECK_LAUNCH("rng_advance_kernel");
}

}  // namespace sg::cuda
