// The launchers of kernels/decode_attention.h: the kernels and their launch sequences are in
// decode_attention.cuh (shared with the CPU emulator of the tests).
#include "kernels/cuda_launch.cuh"
#include "kernels/decode_attention.cuh"

namespace sg::kernels {

void kv_cache_append(cudaStream_t stream, const KvCacheAppendParams& p) {
  decode_attention::run_append(detail::CudaLaunch{stream}, p);
}

void decode_attention_forward(cudaStream_t stream, const DecodeAttentionParams& p) {
  decode_attention::run_attention(detail::CudaLaunch{stream}, p);
}

}  // namespace sg::kernels
