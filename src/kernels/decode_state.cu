#include "core/error.h"
#include "cuda/check.h"
#include "kernels/decode_state.h"

namespace sg::kernels {
namespace {

constexpr int kThreads = 256;

__global__ void __launch_bounds__(kThreads) decode_advance_kernel(DecodeAdvanceParams p) {
  const int64_t s = *p.step;
  __syncthreads();  // every thread has read the step before thread 0 moves it
  for (int64_t b = threadIdx.x; b < p.B; b += blockDim.x) {
    if (s >= 0 && s < p.history_stride) p.history[b * p.history_stride + s] = p.tokens[b];
    p.positions[b] += 1;
  }
  if (threadIdx.x == 0) *p.step = s + 1;
}

}  // namespace

void decode_advance(cudaStream_t stream, const DecodeAdvanceParams& p) {
  SG_CHECK(p.history != nullptr && p.tokens != nullptr && p.positions != nullptr && p.step != nullptr,
           "decode_advance: null pointer in params");
  SG_CHECK(p.B >= 0 && p.history_stride > 0, "decode_advance: B must be >= 0 and history_stride > 0");
  decode_advance_kernel<<<1, kThreads, 0, stream>>>(p);
  SG_CUDA_CHECK_LAUNCH("decode_advance_kernel");
}

}  // namespace sg::kernels
