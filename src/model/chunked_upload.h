#pragma once
// Reading a FlatView (model/flat_view.h) to the device a chunk at a time through two pageable host buffers (fp32
// values and their bf16 bits), so an upload of a model's weights or moments holds no host copy of them:
// TrainStep::load_state and GpuDecoder::upload_weights.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <vector>

#include "core/bf16_bits.h"
#include "core/error.h"
#include "cuda/check.h"
#include "model/flat_view.h"

namespace sg::model {

class ChunkedUpload {
 public:
  // Buffers of min(chunk_elements, max(largest, 1)) elements: `largest` is the most any each_chunk reads.
  ChunkedUpload(cudaStream_t stream, int64_t chunk_elements, int64_t largest)
      : stream_(stream), chunk_(std::min(chunk_elements, std::max<int64_t>(largest, 1))) {
    SG_CHECK(chunk_elements > 0, "ChunkedUpload: the chunk must hold at least one element");
    values_.resize(static_cast<size_t>(chunk_));
    bits_.resize(static_cast<size_t>(chunk_));
  }

  // Reads view's [begin, end) a chunk at a time into values() and calls enqueue(b, e) (values()[i] is element b + i)
  // to enqueue its copies on the stream. A cudaMemcpyAsync from pageable memory may return before the copy has read
  // it, so each chunk's copies finish (the stream is synchronised) before the buffers are refilled or freed.
  template <class Enqueue>
  void each_chunk(const FlatView& view, int64_t begin, int64_t end, const Enqueue& enqueue) {
    for (int64_t b = begin; b < end; b += chunk_) {
      const int64_t e = std::min(end, b + chunk_);
      view.read(b, e, values_.data());
      enqueue(b, e);
      SG_CUDA_CHECK(cudaStreamSynchronize(stream_));
    }
  }

  const float* values() const { return values_.data(); }
  // The first `count` values as bf16 bits, rounded on the host exactly as the device's __float2bfloat16 (round to
  // nearest even).
  const uint16_t* bf16_bits(int64_t count) {
    for (size_t i = 0; i < static_cast<size_t>(count); ++i) bits_[i] = float_to_bf16_bits(values_[i]);
    return bits_.data();
  }

 private:
  cudaStream_t stream_;
  int64_t chunk_;
  std::vector<float> values_;
  std::vector<uint16_t> bits_;
};

}  // namespace sg::model
