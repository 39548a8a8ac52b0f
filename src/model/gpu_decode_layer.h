#pragma once
// One layer of the stack as the GPU decoder (model/gpu_decoder.h) runs it: the GPU twin of the CPU
// decoding layer (model/decode_layer.h), with the same rows and the same state per sequence, in bf16
// activations with fp32 accumulation (the training step's kernels) and fp32 Mamba states. Each kind's
// GPU decoding twin lives in model/layers/<kind>_layer_decode.cpp and is named by its registration line
// (model/layer_registry.cpp).
//
// Life: declare -> plan (its state, kept between calls, as slots of the decoder's arena; the sizes of its
// scratch) -> the decoder makes its arena -> bind (pointers; the GEMMs of a decoding step planned, so no
// plan is made while that step is captured) -> reset (a new generation) -> forward per call (the prefill
// of one prompt, eager; one decoding step of the batch, captured once and replayed).
//
// Scratch holds nothing between calls, so one region serves every layer (they run one after another):
// each layer takes its pieces from a DecodeScratch twice, once without a base to size the region and once
// with it to bind, in the same order.
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <vector>

#include "cuda/arena.h"
#include "cuda/bf16.h"
#include "model/decoder.h"
#include "model/layer.h"

namespace sg::kernels {
class Blas;
}  // namespace sg::kernels

namespace sg::model {

class DecodeScratch {
 public:
  explicit DecodeScratch(void* base = nullptr) : base_(static_cast<char*>(base)) {}
  // count elements of T, kArenaAlignment-aligned; nullptr while sizing.
  template <class T>
  T* take(int64_t count) {
    const size_t at = used_;
    used_ = (at + static_cast<size_t>(count) * sizeof(T) + cuda::kArenaAlignment - 1) / cuda::kArenaAlignment *
            cuda::kArenaAlignment;
    return base_ != nullptr ? reinterpret_cast<T*>(base_ + at) : nullptr;
  }
  size_t bytes() const { return used_; }

 private:
  char* base_ = nullptr;
  size_t used_ = 0;
};

// The rows of one call, as DecodeRows (model/decode_layer.h), with the positions in device memory.
struct GpuDecodeRows {
  int64_t T = 0;
  int64_t rows_per_slot = 1;
  int64_t first_slot = 0;
  const int32_t* positions = nullptr;  // device [T]
};

struct GpuDecodeIO {
  const ModelLayout& layout;
  const bf16* weights = nullptr;  // the flat bf16 parameters
  // The blocks some layer reads in fp32 (GpuDecodeLayer::fp32_params), by ParamRef::index; null elsewhere.
  const std::vector<const float*>* fp32_weights = nullptr;
  const bf16* input = nullptr;  // n_i [T, H]: the layer's pre-norm output
  bf16* output = nullptr;       // delta_i [T, H] (overwritten)
  GpuDecodeRows rows;
  kernels::Blas& blas;  // the GEMMs of a call's row count, planned on first use (a prompt's length)

  const bf16* weight(ParamRef ref) const { return weights + layout.offset(ref); }
  // An optional block's weights (a bias): null where the layer did not declare it.
  const bf16* optional_weight(ParamRef ref) const { return ref.valid() ? weight(ref) : nullptr; }
  const float* fp32_weight(ParamRef ref) const;  // sg::Error for a block no layer asked for
};

class GpuDecodeLayer : public LayerBase {
 public:
  using LayerBase::LayerBase;

  // The blocks it reads in fp32, as the training step reads them (its main weights: the Mamba mixer's
  // A_log, D and dt_bias, the MoE expert bias, which chooses experts); the decoder keeps these in fp32 too.
  virtual std::vector<ParamRef> fp32_params() const { return {}; }
  // Adds its state for decode.batch sequences of decode.capacity() positions to `memory` (slot names
  // start with "decode.layer<i>."), and keeps the shapes its scratch is taken for: decode.max_rows() rows.
  virtual void plan(const ModelSpec& model, const DecodeSpec& decode, cuda::MemoryPlan& memory) = 0;
  // Its scratch pieces, in a fixed order (see the file comment).
  virtual void take_scratch(DecodeScratch& scratch) = 0;
  // Its state's pointers, and the GEMMs of a decoding step (decode.batch rows) planned in `blas`.
  virtual void bind(const cuda::Arena& arena, kernels::Blas& blas) = 0;
  // A new generation: every sequence's state back to its start (on `stream`, outside a capture).
  virtual void reset(cudaStream_t /*stream*/) {}
  // Eval semantics, as the CPU twin's: no dropout, no auxiliary loss, no capacity drop. Enqueues only.
  virtual void forward(cudaStream_t stream, const GpuDecodeIO& io) = 0;
};

}  // namespace sg::model
