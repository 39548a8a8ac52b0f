#include "model/attention_dropout_seeds.h"

#include "core/error.h"
#include "cuda/check.h"
#include "model/dropout_sites.h"

namespace sg::model {

namespace {

__global__ void attention_dropout_seeds_kernel(const rng::RngState* state, int64_t* seeds, int64_t* offsets,
                                               int num_layers) {
  const int l = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  if (l >= num_layers) return;
  const rng::RngState s = *state;
  seeds[l] = attention_dropout_seed(s.seed, dropout_site(l, DropoutKind::attention_probs));
  offsets[l] = attention_dropout_offset(s.offset);
}

}  // namespace

void write_attention_dropout_seeds(cudaStream_t stream, const AttentionDropoutSeedsParams& p) {
  SG_CHECK(p.state != nullptr && p.seeds != nullptr && p.offsets != nullptr && p.num_layers > 0,
           "write_attention_dropout_seeds: null pointer or no layers");
  constexpr int kThreads = 128;
  const int blocks = (p.num_layers + kThreads - 1) / kThreads;
  attention_dropout_seeds_kernel<<<blocks, kThreads, 0, stream>>>(p.state, p.seeds, p.offsets, p.num_layers);
  SG_CUDA_CHECK_LAUNCH("attention_dropout_seeds_kernel");
}

}  // namespace sg::model
