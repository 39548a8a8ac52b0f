#include "model/attention_dropout_seeds.h"

#include "core/error.h"
#include "cuda/check.h"
#include "model/dropout_sites.h"

namespace sg::model {

namespace {

__global__ void attention_dropout_seeds_kernel(const rng::RngState* state, const uint32_t* sites, int64_t* seeds,
                                               int64_t* offsets, int count) {
  const int i = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  if (i >= count) return;
  const rng::RngState s = *state;
  seeds[i] = attention_dropout_seed(s.seed, sites[i], s.offset);
  offsets[i] = attention_dropout_offset(s.offset);
}

}  // namespace

void write_attention_dropout_seeds(cudaStream_t stream, const AttentionDropoutSeedsParams& p) {
  SG_CHECK(p.state != nullptr && p.sites != nullptr && p.seeds != nullptr && p.offsets != nullptr && p.count > 0,
           "write_attention_dropout_seeds: null pointer or no slots");
  constexpr int kThreads = 128;
  const int blocks = (p.count + kThreads - 1) / kThreads;
  attention_dropout_seeds_kernel<<<blocks, kThreads, 0, stream>>>(p.state, p.sites, p.seeds, p.offsets, p.count);
  SG_CUDA_CHECK_LAUNCH("attention_dropout_seeds_kernel");
}

}  // namespace sg::model
