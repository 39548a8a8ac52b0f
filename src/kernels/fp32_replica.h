#pragma once
// Every rank's copy of the fp32 master weights the forward reads (model/param_builder.h fp32_vector: Mamba's
// dt_bias, A_log, D; MoE's expert bias) when the distributed optimizer leaves each rank only its shard of
// the master weights. After AdamW each rank fills the replica with the elements it owns and zeros elsewhere,
// and an integer all-reduce of the bits makes every element its owner's value exactly
// (dist/gradient_reducer.h gather_weights); before AdamW the owned elements go back into the shard, so an
// update step_end made in the replica (the expert bias) reaches the master weights. Element i of the
// replica is flat element flat_offsets[i] (-1: a gap between blocks, kept zero). CPU twin:
// reference/fp32_replica.h. Both are one elementwise pass over the replica (a few values per layer).
#include <cuda_runtime.h>

#include <cstdint>

namespace sg::kernels {

struct Fp32ReplicaParams {
  float* replica = nullptr;               // [n]
  float* shard = nullptr;                 // this rank's master weights: flat [owned_begin, owned_begin + owned_size)
  const int64_t* flat_offsets = nullptr;  // [n] device
  int64_t n = 0;
  int64_t owned_begin = 0, owned_size = 0;
};
// replica[i] = owned ? shard value : 0 (every element written).
void fp32_replica_from_shard(cudaStream_t stream, const Fp32ReplicaParams& p);
// shard value = replica[i] where owned (nothing else written).
void fp32_replica_to_shard(cudaStream_t stream, const Fp32ReplicaParams& p);

}  // namespace sg::kernels
