#include "kernels/embedding.h"

#include <bit>
#include <cub/device/device_radix_sort.cuh>

#include "core/error.h"
#include "core/strings.h"
#include "cuda/check.h"
#include "kernels/common.cuh"

namespace sg::kernels {
namespace {

using detail::kBf16PerVec;

constexpr int kMaxRowThreads = 256;
constexpr int kPrepareThreads = 256;
constexpr size_t kScratchAlign = 256;

size_t align_up(size_t n) { return (n + kScratchAlign - 1) / kScratchAlign * kScratchAlign; }

// Radix-sort key width: keys are tokens in [0, V) plus the sentinel V for out-of-range tokens.
int sort_end_bit(int64_t vocab_size) { return std::max(1, static_cast<int>(std::bit_width(static_cast<uint64_t>(vocab_size)))); }

// Scratch layout: four [T] int32 arrays (keys in, rows in, keys out, rows out), then CUB's storage.
struct ScratchLayout {
  uint32_t* keys_in;
  int32_t* rows_in;
  uint32_t* keys_out;
  int32_t* rows_out;
  void* cub_storage;
  size_t cub_bytes;  // what is left for CUB
};
size_t arrays_bytes(int64_t T) { return 4 * align_up(static_cast<size_t>(T) * sizeof(int32_t)); }

ScratchLayout carve(void* scratch, size_t scratch_bytes, int64_t T) {
  auto* base = static_cast<char*>(scratch);
  const size_t array = align_up(static_cast<size_t>(T) * sizeof(int32_t));
  return ScratchLayout{reinterpret_cast<uint32_t*>(base), reinterpret_cast<int32_t*>(base + array),
                       reinterpret_cast<uint32_t*>(base + 2 * array), reinterpret_cast<int32_t*>(base + 3 * array),
                       base + 4 * array, scratch_bytes - 4 * array};
}

template <int VEC>
__global__ void __launch_bounds__(kMaxRowThreads) embedding_forward_kernel(EmbeddingForwardParams p) {
  const int64_t row = blockIdx.x;
  const int32_t token = p.tokens[row];
  const bool valid = token >= 0 && token < p.vocab_size;
  const bf16* src = p.table + (valid ? static_cast<int64_t>(token) : 0) * p.H;
  bf16* dst = p.out + row * p.H;
  const int64_t stride = static_cast<int64_t>(blockDim.x) * VEC;
  for (int64_t c = static_cast<int64_t>(threadIdx.x) * VEC; c < p.H; c += stride) {
    if constexpr (VEC == kBf16PerVec) {
      uint4 v;
      if (valid) {
        v = *reinterpret_cast<const uint4*>(src + c);
      } else {
        v = make_uint4(0x7FC07FC0u, 0x7FC07FC0u, 0x7FC07FC0u, 0x7FC07FC0u);  // bf16 NaN pairs
      }
      *reinterpret_cast<uint4*>(dst + c) = v;
    } else {
      dst[c] = valid ? src[c] : __float2bfloat16_rn(__int_as_float(0x7FC00000));
    }
  }
}

// keys_in[i] = tokens[i] (out-of-range tokens -> the sentinel vocab_size, sorted last and skipped);
// rows_in[i] = i.
__global__ void embedding_sort_prepare_kernel(uint32_t* keys_in, int32_t* rows_in, const int32_t* tokens,
                                              int64_t T, int64_t vocab_size) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= T) return;
  const int32_t token = tokens[i];
  keys_in[i] = (token >= 0 && token < vocab_size) ? static_cast<uint32_t>(token) : static_cast<uint32_t>(vocab_size);
  rows_in[i] = static_cast<int32_t>(i);
}

// Block (i, y): if sorted position i starts a run of equal tokens, sums the run's dout rows (increasing
// t) over the columns of chunk y of this thread and adds the sum into dtable[token] once.
template <int VEC, class GradT>
__global__ void __launch_bounds__(kMaxRowThreads)
    embedding_backward_runs_kernel(GradT* dtable, const bf16* dout, const uint32_t* sorted_tokens,
                                   const int32_t* sorted_rows, int64_t T, int64_t H, int64_t vocab_size) {
  const int64_t i = blockIdx.x;
  const uint32_t token = sorted_tokens[i];
  if (token >= vocab_size) return;                      // sentinel: out-of-range tokens
  if (i > 0 && sorted_tokens[i - 1] == token) return;  // not the first of its run
  const int64_t c = (static_cast<int64_t>(blockIdx.y) * blockDim.x + threadIdx.x) * VEC;
  if (c >= H) return;
  float acc[VEC];
#pragma unroll
  for (int k = 0; k < VEC; ++k) acc[k] = 0.0f;
  for (int64_t j = i; j < T && sorted_tokens[j] == token; ++j) {
    float g[VEC];
    detail::load_bf16<VEC>(dout + static_cast<int64_t>(sorted_rows[j]) * H + c, g);
#pragma unroll
    for (int k = 0; k < VEC; ++k) acc[k] += g[k];
  }
  GradT* dst = dtable + static_cast<int64_t>(token) * H + c;
  float cur[VEC];
  detail::load_floats<VEC>(dst, cur);
#pragma unroll
  for (int k = 0; k < VEC; ++k) cur[k] += acc[k];
  detail::store_floats<VEC>(dst, cur);
}

void check_shape(const char* op, int64_t T, int64_t H, int64_t V) {
  SG_CHECK(T >= 0 && T <= INT32_MAX, strprintf("%s: T = %lld out of range [0, 2^31)", op, static_cast<long long>(T)));
  SG_CHECK(H > 0, strprintf("%s: H = %lld must be positive", op, static_cast<long long>(H)));
  SG_CHECK(V > 0 && V < INT32_MAX,
           strprintf("%s: vocab_size = %lld out of range (0, 2^31 - 1)", op, static_cast<long long>(V)));
}

}  // namespace

size_t embedding_backward_scratch_bytes(int64_t T, int64_t vocab_size) {
  check_shape("embedding_backward_scratch_bytes", T, 1, vocab_size);
  size_t cub_bytes = 0;
  SG_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(nullptr, cub_bytes, static_cast<const uint32_t*>(nullptr),
                                                static_cast<uint32_t*>(nullptr), static_cast<const int32_t*>(nullptr),
                                                static_cast<int32_t*>(nullptr), static_cast<int>(T), 0,
                                                sort_end_bit(vocab_size)));
  return arrays_bytes(T) + align_up(cub_bytes);
}

void embedding_forward(cudaStream_t stream, const EmbeddingForwardParams& p) {
  check_shape("embedding_forward", p.T, p.H, p.vocab_size);
  SG_CHECK(p.out && p.tokens && p.table, "embedding_forward: null pointer in params");
  if (p.T == 0) return;
  const bool vec = p.H % kBf16PerVec == 0 && detail::is_aligned(p.out, 16) && detail::is_aligned(p.table, 16);
  const int threads = detail::row_block_threads(p.H, vec ? kBf16PerVec : 1, kMaxRowThreads);
  if (vec) {
    embedding_forward_kernel<kBf16PerVec><<<static_cast<unsigned>(p.T), threads, 0, stream>>>(p);
  } else {
    embedding_forward_kernel<1><<<static_cast<unsigned>(p.T), threads, 0, stream>>>(p);
  }
  SG_CUDA_CHECK_LAUNCH("embedding_forward_kernel");
}

void embedding_backward(cudaStream_t stream, const EmbeddingBackwardParams& p) {
  check_shape("embedding_backward", p.T, p.H, p.vocab_size);
  SG_CHECK(p.dtable.data && p.dout && p.tokens, "embedding_backward: null pointer in params");
  if (p.T == 0) return;
  SG_CHECK(p.scratch != nullptr && detail::is_aligned(p.scratch, kScratchAlign) && p.scratch_bytes > arrays_bytes(p.T),
           strprintf("embedding_backward: scratch (%zu bytes at %p) must be 256-byte aligned and hold "
                     "embedding_backward_scratch_bytes(T=%lld, vocab_size=%lld) bytes",
                     p.scratch_bytes, p.scratch, static_cast<long long>(p.T), static_cast<long long>(p.vocab_size)));
  const ScratchLayout s = carve(p.scratch, p.scratch_bytes, p.T);

  const auto prepare_blocks = static_cast<unsigned>(detail::ceil_div(p.T, kPrepareThreads));
  embedding_sort_prepare_kernel<<<prepare_blocks, kPrepareThreads, 0, stream>>>(s.keys_in, s.rows_in, p.tokens, p.T,
                                                                                 p.vocab_size);
  SG_CUDA_CHECK_LAUNCH("embedding_sort_prepare_kernel");

  size_t cub_bytes = s.cub_bytes;
  const cudaError_t sort_err =
      cub::DeviceRadixSort::SortPairs(s.cub_storage, cub_bytes, s.keys_in, s.keys_out, s.rows_in, s.rows_out,
                                      static_cast<int>(p.T), 0, sort_end_bit(p.vocab_size), stream);
  if (sort_err != cudaSuccess) {
    throw Error(strprintf("embedding_backward: CUB radix sort failed: %s (%s). If it is cudaErrorInvalidValue the "
                          "scratch (%zu bytes) is smaller than embedding_backward_scratch_bytes(T=%lld, "
                          "vocab_size=%lld); plan it with that function",
                          cudaGetErrorName(sort_err), cudaGetErrorString(sort_err), p.scratch_bytes,
                          static_cast<long long>(p.T), static_cast<long long>(p.vocab_size)));
  }

  const bool vec = p.H % kBf16PerVec == 0 && detail::is_aligned(p.dout, 16) && detail::is_aligned(p.dtable.data, 16);
  const int vec_width = vec ? kBf16PerVec : 1;
  const int threads = detail::row_block_threads(p.H, vec_width, kMaxRowThreads);
  const dim3 grid(static_cast<unsigned>(p.T),
                  static_cast<unsigned>(detail::ceil_div(detail::ceil_div(p.H, vec_width), threads)));
  SG_CHECK(grid.y <= 65535, strprintf("embedding_backward: H = %lld too large", static_cast<long long>(p.H)));
  const auto launch = [&](auto* dtable) {
    if (vec) {
      embedding_backward_runs_kernel<kBf16PerVec><<<grid, threads, 0, stream>>>(dtable, p.dout, s.keys_out, s.rows_out,
                                                                                p.T, p.H, p.vocab_size);
    } else {
      embedding_backward_runs_kernel<1><<<grid, threads, 0, stream>>>(dtable, p.dout, s.keys_out, s.rows_out, p.T, p.H,
                                                                      p.vocab_size);
    }
  };
  if (p.dtable.is_bf16()) {
    launch(static_cast<bf16*>(p.dtable.data));
  } else {
    launch(static_cast<float*>(p.dtable.data));
  }
  SG_CUDA_CHECK_LAUNCH("embedding_backward_runs_kernel");
}

}  // namespace sg::kernels
