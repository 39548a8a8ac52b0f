#pragma once
// What the training step offers its layers at each phase (model/layer.h):
//   LayerPlanContext    plan():        saved activations, scratch shared by all layers, cuDNN seed slots
//                                      (pure CPU: activation accounting works without a GPU)
//   DevicePlanContext   plan_device(): kernel plans that need the device before the arena exists, and
//                                      their workspaces
//   LayerBindContext    bind():        arena pointers, the cuBLASLt context, parameter/gradient bases
// Objects that every layer of a kind can share (one cuDNN attention plan for all attention layers)
// live in SharedObjects, owned by the step and reachable from the device phases.
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/philox.h"
#include "cuda/arena.h"
#include "cuda/bf16.h"
#include "graph/region.h"
#include "kernels/float_buffer.h"
#include "model/recompute_layout.h"
#include "model/recompute_spec.h"
#include "model/spec.h"
#include "model/stack.h"

namespace sg::kernels {
class Blas;
class CudnnContext;
}  // namespace sg::kernels

namespace sg::model {

// One buffer that every layer may use (bound at bind()), sized to the largest request for its name.
// Regions run one after the other on one stream, so layers can share scratch safely.
struct SharedBufferRef {
  int32_t index = -1;
};

// Saved activations of one (layer, module): what activation recompute could give back (issue 15).
struct SavedActivationBytes {
  int layer = 0;
  graph::Module module = graph::Module::attn;
  size_t bytes = 0;       // all of them
  size_t recomputed = 0;  // of which the recompute settings give back (model/recompute_layout.h)
};

// Named shared buffers, planned into the MemoryPlan once every layer asked.
class SharedBuffers {
 public:
  SharedBufferRef request(const std::string& name, cuda::MemoryCategory category, size_t bytes);
  void plan(cuda::MemoryPlan& plan);  // adds every buffer; call once, after the last request
  void bind(const cuda::Arena& arena);
  void* get(SharedBufferRef ref) const;

 private:
  struct Entry {
    std::string name;
    cuda::MemoryCategory category;
    size_t bytes;
    cuda::MemorySlot slot;
    void* ptr = nullptr;
  };
  std::vector<Entry> entries_;
  bool planned_ = false;
};

// Objects shared by the layers of one kind, created on first request and owned here.
class SharedObjects {
 public:
  template <class T>
  T& get(const std::string& key, const std::function<std::unique_ptr<T>()>& make) {
    auto it = objects_.find(key);
    if (it == objects_.end()) it = objects_.emplace(key, std::shared_ptr<void>(make())).first;
    return *static_cast<T*>(it->second.get());
  }

 private:
  std::map<std::string, std::shared_ptr<void>> objects_;
};

class LayerPlanContext {
 public:
  // `recompute`: where recomputed activations go (nullptr: nothing is recomputed).
  LayerPlanContext(const ModelSpec& model, const BatchSpec& batch, cuda::MemoryPlan& plan, SharedBuffers& shared,
                   RecomputeLayout* recompute = nullptr);

  const ModelSpec& model() const { return model_; }
  const BatchSpec& batch() const { return batch_; }
  int64_t tokens() const { return tokens_; }  // T: one microbatch's tokens
  void set_layer(int index) { layer_ = index; }  // the step, before each layer's plan()
  int layer() const { return layer_; }

  // A saved activation of `module` (written in forward, read in backward; one microbatch's worth):
  // planned as "act.layer<i>.<name>" and counted per (layer, module). `given_back_by`: the selective
  // recompute module that recomputes it (model/recompute.h); full recompute gives back every one. When
  // the recompute settings give it back, it lives in the shared recompute buffer and the step reruns
  // `module` (Layer::recompute) before the layer's backward.
  cuda::MemorySlot saved(graph::Module module, const std::string& name, size_t bytes,
                         std::optional<RecomputeModule> given_back_by = std::nullopt);
  template <class T>
  cuda::MemorySlot saved_array(graph::Module module, const std::string& name, size_t count,
                               std::optional<RecomputeModule> given_back_by = std::nullopt) {
    return saved(module, name, count * sizeof(T), given_back_by);
  }
  // State of the layer that lives across microbatches and steps (optimizer_state category), planned as
  // "state.layer<i>.<name>", e.g. the MoE per-step token counts.
  cuda::MemorySlot state(const std::string& name, size_t bytes);
  // Whether this layer is recomputed whole (full granularity): Layer::recompute must then also write
  // its output, which the next layer of the chunk reads.
  bool full_recompute() const { return recompute_ != nullptr && recompute_->full(layer_); }
  // `count` int32 counts the layer adds up over a step's microbatches (the MoE tokens per expert), in the
  // step's one "state.step_counts" array; returns their offset there (LayerBindContext::step_counts gives
  // the pointer). With data parallelism the reducer sums that array over ranks before Layer::step_end, so
  // step_end reads the whole global batch's counts, as at world size 1.
  int64_t step_counts(int64_t count);
  int64_t step_counts_total() const { return step_counts_; }
  // Scratch shared by all layers (activations category), e.g. "grad.d_qkv".
  SharedBufferRef scratch(const std::string& name, size_t bytes);
  // State shared by all layers of a kind that lives across steps (optimizer_state category), planned as
  // "state.<name>": e.g. a constant table one layer fills at bind (the RoPE cos/sin table).
  SharedBufferRef shared_state(const std::string& name, size_t bytes);
  // A slot in the step's per-microbatch cuDNN dropout seed table, for attention dropout drawn at
  // `site`; bind() gives the slot's seed and offset pointers.
  int attention_dropout_slot(uint32_t site);

  const std::vector<SavedActivationBytes>& saved_bytes() const { return saved_bytes_; }
  const std::vector<uint32_t>& attention_dropout_sites() const { return attention_sites_; }

 private:
  const ModelSpec& model_;
  const BatchSpec& batch_;
  int64_t tokens_;
  cuda::MemoryPlan& plan_;
  SharedBuffers& shared_;
  RecomputeLayout* recompute_;
  int layer_ = 0;
  std::vector<SavedActivationBytes> saved_bytes_;
  std::vector<uint32_t> attention_sites_;
  int64_t step_counts_ = 0;
};

class DevicePlanContext {
 public:
  DevicePlanContext(const ModelSpec& model, const BatchSpec& batch, SharedBuffers& buffers, SharedObjects& objects,
                    kernels::CudnnContext& cudnn, kernels::FloatDtype grad_dtype = kernels::FloatDtype::fp32);

  const ModelSpec& model() const { return model_; }
  const BatchSpec& batch() const { return batch_; }
  int64_t tokens() const { return tokens_; }
  kernels::CudnnContext& cudnn() { return cudnn_; }
  SharedObjects& objects() { return objects_; }
  // The main gradients' dtype (OptimizerSpec::main_grad_dtype), for plans of weight-gradient writers.
  kernels::FloatDtype grad_dtype() const { return grad_dtype_; }
  // A workspace shared by all layers (workspaces category), e.g. "workspace.cudnn_attention".
  SharedBufferRef workspace(const std::string& name, size_t bytes);

 private:
  const ModelSpec& model_;
  const BatchSpec& batch_;
  int64_t tokens_;
  SharedBuffers& buffers_;
  SharedObjects& objects_;
  kernels::CudnnContext& cudnn_;
  kernels::FloatDtype grad_dtype_;
};

// Device pointers the step binds its layers to (fixed for the life of the step).
struct StepPointers {
  bf16* params = nullptr;                      // bf16 compute weights (flat)
  float* main_weights = nullptr;               // fp32 main weights (flat): what step_end may update
  // With the distributed optimizer (main_weights null: this rank holds only its shard) every rank's copy of
  // the fp32_vector() blocks, packed as ParamLayout::fp32_packed_offset says; null otherwise.
  float* fp32_replica = nullptr;
  kernels::FloatBuffer grads;                  // main_grad (flat), fp32 or bf16 (OptimizerSpec::main_grad_dtype)
  float* aux_loss = nullptr;                   // device scalars of the step's auxiliary losses
  float* z_loss = nullptr;                     //   (AuxLosses; zeroed at the step's start)
  int32_t* step_counts = nullptr;              // the layers' step counts (LayerPlanContext::step_counts)
  const rng::RngState* hidden_rng = nullptr;   // "default" generator: our Philox dropout
  int64_t* attention_dropout_seeds = nullptr;  // [slots] cuDNN seeds, written per microbatch
  int64_t* attention_dropout_offsets = nullptr;
};

class LayerBindContext {
 public:
  LayerBindContext(const ModelLayout& layout, const cuda::Arena& arena, const SharedBuffers& buffers,
                   SharedObjects& objects, kernels::Blas& blas, const StepPointers& pointers,
                   const RecomputeLayout* recompute = nullptr);

  const ModelSpec& model() const { return layout_.spec; }
  const ModelLayout& layout() const { return layout_; }
  kernels::Blas& blas() { return blas_; }
  SharedObjects& objects() { return objects_; }
  const StepPointers& pointers() const { return pointers_; }

  template <class T>
  T* get(cuda::MemorySlot slot) const {
    if (recompute_ != nullptr && recompute_->owns(slot)) return static_cast<T*>(recompute_->get(slot));
    return arena_.get<T>(slot);
  }
  template <class T>
  T* get(SharedBufferRef ref) const {
    return static_cast<T*>(buffers_.get(ref));
  }
  // Parameter block `ref` in the bf16 weights and in the main gradients (of grad_dtype()).
  bf16* weight(ParamRef ref) const { return pointers_.params + layout_.offset(ref); }
  kernels::FloatBuffer grad(ParamRef ref) const { return pointers_.grads.at(layout_.offset(ref)); }
  kernels::FloatDtype grad_dtype() const { return pointers_.grads.dtype; }
  // Its fp32 master weights (Mamba's dt_bias, A_log, D: bf16 would put ~3% of error on dt and A; MoE's expert bias),
  // of a block declared with ParamBuilder::fp32_vector: in the flat master weights, or with the distributed optimizer
  // in the step's replica of those blocks (the same values on every rank; what step_end may update).
  float* main_weight(ParamRef ref) const;
  // The layer's counts at `offset` (what LayerPlanContext::step_counts returned).
  int32_t* step_counts(int64_t offset) const;

 private:
  const ModelLayout& layout_;
  const cuda::Arena& arena_;
  const SharedBuffers& buffers_;
  SharedObjects& objects_;
  kernels::Blas& blas_;
  StepPointers pointers_;
  const RecomputeLayout* recompute_;
};

}  // namespace sg::model
