#include <algorithm>
#include <cub/block/block_reduce.cuh>

#include "core/error.h"
#include "core/strings.h"
#include "cuda/check.h"
#include "kernels/weight_fingerprint.h"

namespace sg::kernels {
namespace {

constexpr int kThreads = 256;
constexpr int kMaxBlocks = 4096;  // chunks beyond: the blocks stride over them

template <class Bits>
__global__ void __launch_bounds__(kThreads)
    weight_fingerprints_kernel(const Bits* __restrict__ data, int64_t count, int64_t chunk, int64_t chunks,
                               uint64_t* __restrict__ out) {
  using BlockReduce = cub::BlockReduce<unsigned long long, kThreads>;
  __shared__ typename BlockReduce::TempStorage storage;
  for (int64_t c = blockIdx.x; c < chunks; c += gridDim.x) {
    const int64_t begin = c * chunk, end = begin + chunk < count ? begin + chunk : count;
    unsigned long long local = 0;
    for (int64_t i = begin + threadIdx.x; i < end; i += kThreads) {
      local += ref::fingerprint_mix(data[i], static_cast<uint64_t>(i));
    }
    const unsigned long long sum = BlockReduce(storage).Sum(local);  // integer: any order gives these bits
    if (threadIdx.x == 0) out[c] = sum;
    __syncthreads();  // the storage is reused by the next chunk
  }
}

}  // namespace

void weight_fingerprints(cudaStream_t stream, const WeightFingerprintParams& p) {
  SG_CHECK(p.element_bytes == 2 || p.element_bytes == 4,
           strprintf("weight_fingerprints: %d-byte elements (2 or 4)", p.element_bytes));
  SG_CHECK(p.count >= 0 && p.chunk_elements > 0, "weight_fingerprints: a negative count or an empty chunk");
  SG_CHECK((p.data != nullptr || p.count == 0) && p.fingerprints != nullptr,
           "weight_fingerprints: data and fingerprints must be device pointers");
  const int64_t chunks = ref::fingerprint_chunks(p.count, p.chunk_elements);
  if (chunks == 0) return;
  const int blocks = static_cast<int>(std::min<int64_t>(chunks, kMaxBlocks));
  if (p.element_bytes == 2) {
    weight_fingerprints_kernel<<<blocks, kThreads, 0, stream>>>(static_cast<const uint16_t*>(p.data), p.count,
                                                                p.chunk_elements, chunks, p.fingerprints);
  } else {
    weight_fingerprints_kernel<<<blocks, kThreads, 0, stream>>>(static_cast<const uint32_t*>(p.data), p.count,
                                                                p.chunk_elements, chunks, p.fingerprints);
  }
  SG_CUDA_CHECK_LAUNCH("weight_fingerprints_kernel");
}

}  // namespace sg::kernels
