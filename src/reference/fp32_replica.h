#pragma once
// CPU twin of kernels/fp32_replica.h: every rank's copy of the fp32 master weights the forward reads (Mamba's
// dt_bias, A_log, D; MoE's expert bias) when the distributed optimizer leaves each rank only its shard of the
// master weights. Element i of the replica is flat element flat_offsets[i] (-1: a gap, always zero).
#include <cstdint>

namespace sg::ref {

// replica[i] = the shard's value of flat element flat_offsets[i] where this rank owns it
// ([owned_begin, owned_begin + owned_size)), else 0: summed over the ranks (as integers, exactly) every
// element is its owner's value.
void fp32_replica_from_shard(float* replica, const float* shard, const int64_t* flat_offsets, int64_t n,
                             int64_t owned_begin, int64_t owned_size);
// The owned elements of the replica written back into the shard (the rest of the shard untouched).
void fp32_replica_to_shard(float* shard, const float* replica, const int64_t* flat_offsets, int64_t n,
                           int64_t owned_begin, int64_t owned_size);

}  // namespace sg::ref
