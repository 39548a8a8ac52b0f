#include "reference/fp32_replica.h"

namespace sg::ref {

void fp32_replica_from_shard(float* replica, const float* shard, const int64_t* flat_offsets, int64_t n,
                             int64_t owned_begin, int64_t owned_size) {
  for (int64_t i = 0; i < n; ++i) {
    const int64_t local = flat_offsets[i] - owned_begin;
    replica[i] = flat_offsets[i] >= 0 && local >= 0 && local < owned_size ? shard[local] : 0.0f;
  }
}

void fp32_replica_to_shard(float* shard, const float* replica, const int64_t* flat_offsets, int64_t n,
                           int64_t owned_begin, int64_t owned_size) {
  for (int64_t i = 0; i < n; ++i) {
    const int64_t local = flat_offsets[i] - owned_begin;
    if (flat_offsets[i] >= 0 && local >= 0 && local < owned_size) shard[local] = replica[i];
  }
}

}  // namespace sg::ref
