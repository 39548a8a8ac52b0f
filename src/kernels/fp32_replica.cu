#include "kernels/fp32_replica.h"

#include <algorithm>

#include "core/error.h"
#include "core/strings.h"
#include "cuda/check.h"
#include "kernels/common.cuh"

namespace sg::kernels {
namespace {

constexpr int kThreads = 256;
constexpr int64_t kMaxBlocks = 1 << 12;  // grid-stride beyond this

__device__ __forceinline__ int64_t owned_index(int64_t flat, int64_t owned_begin, int64_t owned_size) {
  const int64_t local = flat - owned_begin;
  return flat >= 0 && local >= 0 && local < owned_size ? local : -1;
}

template <bool kToShard>
__global__ void __launch_bounds__(kThreads) fp32_replica_kernel(Fp32ReplicaParams p) {
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < p.n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t local = owned_index(p.flat_offsets[i], p.owned_begin, p.owned_size);
    if constexpr (kToShard) {
      if (local >= 0) p.shard[local] = p.replica[i];
    } else {
      p.replica[i] = local >= 0 ? p.shard[local] : 0.0f;
    }
  }
}

template <bool kToShard>
void launch(cudaStream_t stream, const char* op, const Fp32ReplicaParams& p) {
  SG_CHECK(p.n >= 0 && p.owned_begin >= 0 && p.owned_size >= 0,
           strprintf("%s: n = %lld, owned [%lld, +%lld) must not be negative", op, static_cast<long long>(p.n),
                     static_cast<long long>(p.owned_begin), static_cast<long long>(p.owned_size)));
  if (p.n == 0) return;
  SG_CHECK(p.replica && p.flat_offsets && (p.shard || p.owned_size == 0), strprintf("%s: null pointer in params", op));
  const auto blocks = static_cast<unsigned>(std::clamp<int64_t>(detail::ceil_div(p.n, kThreads), 1, kMaxBlocks));
  fp32_replica_kernel<kToShard><<<blocks, kThreads, 0, stream>>>(p);
  SG_CUDA_CHECK_LAUNCH("fp32_replica_kernel");
}

}  // namespace

void fp32_replica_from_shard(cudaStream_t stream, const Fp32ReplicaParams& p) {
  launch<false>(stream, "fp32_replica_from_shard", p);
}

void fp32_replica_to_shard(cudaStream_t stream, const Fp32ReplicaParams& p) {
  launch<true>(stream, "fp32_replica_to_shard", p);
}

}  // namespace sg::kernels
