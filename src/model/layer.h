#pragma once
// One layer of the stack (model/stack.h): one object per pattern letter, a GPU Layer for the training
// step and a CpuLayer twin for the fp32 reference model, both behind the kind's declarations.
//
// Contract with the step, which owns everything between layers:
//   * the layer reads n_i = norm_i(x_i) (LayerIO::input, the step's buffer) and, in the forward of its
//     LAST module, writes delta_i to LayerIO::output. The step then adds dropout(delta_i) to the
//     residual stream and applies the next layer's pre-norm, fused, inside that module's region.
//   * backward runs the modules in reverse; the first to run (the last module) reads d delta_i from
//     LayerIO::d_output, the last to run (the first module) writes d n_i to LayerIO::d_input
//     (overwriting). Weight gradients are ADDED into the fp32 main_grad (microbatches accumulate),
//     except those the layer lists in first_written_grads(): in the step's first microbatch
//     (LayerIO::first_microbatch) their writer OVERWRITES them, so the step need not zero them
//     (model/gradient_zeroing.h); in later microbatches it adds like the others.
//   * a region body only enqueues work on its stream with plan-time constants and static pointers
//     (graph/region.h): it is captured once and replayed for every microbatch and step.
//
// Life of a GPU layer: declare (parameters, dropout sites; pure CPU) -> plan (saved activations,
// scratch; pure CPU) -> plan_device (kernel plans needing the device, workspaces) -> the step makes
// its arena -> bind (pointers, GEMM plans) -> forward / backward per module, every microbatch.
//
// Activation recompute (model/recompute_layout.h). A kind opts in with ONE declaration in its GPU
// class, read by its registration (model/layer_registry.cpp):
//     static LayerRecompute recompute_support() { return {{RecomputeModule::core_attn}, /*full=*/true}; }
// and keeps the promise it makes there:
//   * plan() tags each saved activation with the selective module that gives it back
//     (ctx.saved(module, name, bytes, RecomputeModule::core_attn)); untagged ones come back only with
//     full recompute;
//   * recompute(module) rewrites, from the same inputs, exactly the bits forward(module) wrote into the
//     saved activations that the plan put in the recompute buffer (and, when ctx.full_recompute(), its
//     output too), and changes nothing else: no accumulation into step state, no RNG advance. The
//     default reruns forward(), which keeps that promise for a forward without side effects.
// A kind without the declaration refuses recompute with a clear error (model/recompute.h).
//
// Arithmetic over the stack without building it (a config may ask for far more than fits). Each kind
// declares, beside its code, and its registration reads (model/layer_registry.h):
//     static LayerFlops flops_per_token(const ModelSpec&);                               // GPU class
//     static CpuLayerFootprint host_footprint(const ModelSpec&, const BatchSpec&);       // CPU twin
// train/metrics.h sums the first over the stack (MFU), train/host_memory.h the second (the CPU backend's
// plan before it allocates).
#include <cuda_runtime.h>

#include <utility>
#include <vector>

#include "core/philox.h"
#include "cuda/bf16.h"
#include "graph/region.h"
#include "model/layer_context.h"
#include "model/layer_kind.h"
#include "model/recompute.h"
#include "model/stack.h"

namespace sg::model {

// Model FLOPs of one token through one layer, forward and backward, as Megatron's MFU counts them.
struct LayerFlops {
  double matmul_weights = 0.0;  // weights its GEMMs multiply the token by: 6 FLOPs each
  double attention = 0.0;       // its attention products, in hidden_size-wide layers (q_dim / H): 12 S H FLOPs each
  double scan = 0.0;            // its SSD scan's FLOPs
};

// The host memory of one CPU twin, in fp32 elements: its own parameters (not its pre-norm: the step's),
// the activations it saves for one microbatch and its scratch.
struct CpuLayerFootprint {
  double params = 0.0, saved = 0.0, scratch = 0.0;
};

// What the GPU and CPU layers of one place share: where they sit, and their declarations.
class LayerBase {
 public:
  explicit LayerBase(LayerPlace place) : place_(std::move(place)) {}
  virtual ~LayerBase() = default;
  LayerBase(const LayerBase&) = delete;
  LayerBase& operator=(const LayerBase&) = delete;

  const LayerPlace& place() const { return place_; }
  int index() const { return place_.index; }
  LayerKind kind() const { return place_.kind; }
  // Its graphable modules in forward order (the kind's, model/layer_kind.h).
  const std::vector<graph::Module>& modules() const { return layer_kind_info(place_.kind).modules; }

  // Parameters (HF names under place().param_prefix) and the dropout sites drawn inside the layer,
  // in a fixed order. Also checks the model shapes the kind needs (sg::Error naming the key).
  virtual void declare(LayerDeclarations& declarations) = 0;

 private:
  LayerPlace place_;
};

// The static buffers a layer exchanges with the step (the same pointers on every call).
struct LayerIO {
  const bf16* input = nullptr;     // n_i [T, H]
  bf16* output = nullptr;          // delta_i [T, H]
  const bf16* d_output = nullptr;  // d delta_i [T, H]
  bf16* d_input = nullptr;         // d n_i [T, H]
  bool dropout = true;             // dropout inside the layer; false: evaluation (forward only)
  bool first_microbatch = false;   // backward of the step's first microbatch: overwrite the gradients
                                   // of first_written_grads() instead of adding (its own region key)
};

class Layer : public LayerBase {
 public:
  using LayerBase::LayerBase;

  virtual void plan(LayerPlanContext& context) = 0;
  virtual void plan_device(DevicePlanContext& /*context*/) {}
  virtual void bind(LayerBindContext& context) = 0;
  virtual void forward(graph::Module module, cudaStream_t stream, const LayerIO& io) = 0;
  virtual void backward(graph::Module module, cudaStream_t stream, const LayerIO& io) = 0;
  // Outside every region, on the step's stream: before the first microbatch (per-step state, e.g. the
  // MoE token counts) and at its end, before the optimizer update (e.g. the MoE expert-bias update, as
  // Megatron's finalize_model_grads runs it before optimizer.step()).
  // Gradient blocks this layer's backward writes with ONE launch per microbatch covering the whole
  // block, and nothing else writes (a cuBLASLt wgrad GEMM): it overwrites them when
  // LayerIO::first_microbatch. Pure CPU, valid after declare(). Every other gradient of the layer is
  // zeroed by the step before the first microbatch and only added to.
  virtual std::vector<ParamRef> first_written_grads() const { return {}; }
  virtual void step_begin(cudaStream_t /*stream*/) {}
  virtual void step_end(cudaStream_t /*stream*/) {}
  // Run by the step at the start of the layer's backward, in forward module order, for the modules
  // whose saved activations the recompute settings put in the recompute buffer (see above).
  virtual void recompute(graph::Module module, cudaStream_t stream, const LayerIO& io) { forward(module, stream, io); }
};

// Auxiliary losses a layer adds to the training objective (MoE load balancing and z-loss), each
// already multiplied by its coefficient; reported apart from the language-model loss.
struct AuxLosses {
  double load_balancing = 0.0;
  double z = 0.0;
};

// The CPU fp32 twin: the same computation with the sg::ref functions, whole layer at a time.
struct CpuLayerIO {
  const ModelLayout& layout;
  const float* weights = nullptr;  // flat fp32 parameters
  float* grads = nullptr;          // flat fp32 gradients (added into)
  const float* input = nullptr;    // n_i [T, H]
  float* output = nullptr;         // delta_i [T, H]
  const float* d_output = nullptr;  // d delta_i [T, H]
  float* d_input = nullptr;         // d n_i [T, H]
  rng::RngState rng{};             // the microbatch's generator state (dropout inside the layer)
  bool dropout = true;             // false: evaluation, the layer's dropout off
  // Auxiliary losses: forward adds loss_scale * value into *aux_losses (may be null); backward adds
  // loss_scale * their gradients (loss_scale = 1 / num_microbatches, as the main loss's).
  AuxLosses* aux_losses = nullptr;
  float loss_scale = 1.0f;

  const float* weight(ParamRef ref) const { return weights + layout.offset(ref); }
  // An optional block's weights (a bias): null where the layer did not declare it.
  const float* optional_weight(ParamRef ref) const { return ref.valid() ? weight(ref) : nullptr; }
  float* grad(ParamRef ref) const { return grads + layout.offset(ref); }
};

class CpuLayer : public LayerBase {
 public:
  using LayerBase::LayerBase;

  // Sizes the layer's own activations and scratch for one microbatch.
  virtual void plan(const ModelSpec& model, const BatchSpec& batch) = 0;
  virtual void forward(const CpuLayerIO& io) = 0;
  virtual void backward(const CpuLayerIO& io) = 0;
  // Reruns the forward for activation recompute (CpuModel::recompute_group): the same saved activations
  // and output bit for bit, and nothing else (no auxiliary loss, no step state), as Layer::recompute.
  virtual void recompute(const CpuLayerIO& io) { forward(io); }
  // As Layer::step_begin / step_end; step_end may change the flat fp32 weights (the expert bias).
  virtual void step_begin() {}
  virtual void step_end(const ModelLayout& /*layout*/, float* /*weights*/) {}
};

}  // namespace sg::model
