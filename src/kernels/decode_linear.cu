// The launcher of kernels/decode_linear.h: the kernel and its launch sequence are in decode_linear.cuh (shared
// with the CPU emulator of the tests).
#include "kernels/cuda_launch.cuh"
#include "kernels/decode_linear.cuh"

namespace sg::kernels {

int64_t decode_linear_out_width(DecodeLinearEpilogue epilogue, int64_t N) {
  return decode_linear::out_width(epilogue, N);
}

bool decode_linear_takes(int64_t T, int64_t K, int64_t N, DecodeLinearEpilogue epilogue) {
  return T >= 1 && T <= kDecodeLinearMaxRows && K > 0 && K % detail::kBf16PerVec == 0 && N > 0 &&
         (epilogue != DecodeLinearEpilogue::kSwiglu || N % 2 == 0);
}

void decode_linear_forward(cudaStream_t stream, const DecodeLinearParams& p) {
  decode_linear::run(detail::CudaLaunch{stream}, p);
}

RopeParams decode_qkv_rope_params(bf16* qkv, const DecodeQkvEpilogue& e) {
  const ref::DecodeAttentionShape& s = e.shape;
  // q and k heads are contiguous in a QKV row: one rotation at each row's position covers both.
  return {.x = qkv,
          .T = s.T,
          .S = 1,
          .num_heads = s.heads + s.kv_heads,
          .head_dim = s.head_dim,
          .rotary_dim = e.rotary_dim,
          .row_stride = s.qkv_width(),
          .base = e.base,
          .scaling = e.scaling,
          .positions = e.positions};
}

KvCacheAppendParams decode_qkv_append_params(const bf16* qkv, const DecodeQkvEpilogue& e) {
  return {.k_cache = e.k_cache, .v_cache = e.v_cache, .qkv = qkv, .positions = e.positions, .shape = e.shape};
}

}  // namespace sg::kernels
