#pragma once
// Which layer kinds the engine can build: letter -> GPU layer, CPU twin, CPU decoding twin
// (model/decode_layer.h) and GPU decoding twin (model/gpu_decode_layer.h), with what each kind declares of
// itself (recompute, FLOPs, host memory; model/layer.h). Adding a kind is one GPU file, one CPU file (both
// CPU twins), one GPU decoding file and ONE registration line in layer_registry.cpp (docs/architecture.md
// has the checklist). Every letter of model/layer_kind.h is registered today (tests/model/stack_test.cpp
// holds that); a letter added to the pattern language before its kind is built would parse and validate,
// and building the model would refuse it with "not implemented yet".
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "model/decode_layer.h"
#include "model/flat_view.h"
#include "model/gpu_decode_layer.h"
#include "model/layer.h"
#include "model/stack.h"

namespace sg::model {

bool layer_kind_implemented(LayerKind kind);
// What the kind declares it can recompute (model/layer.h); nothing for a kind not registered.
LayerRecompute layer_kind_recompute(LayerKind kind);
// The kind's model FLOPs of one token (its GPU class's flops_per_token; train/metrics.h sums them).
// sg::Error for a kind not registered, as every query below.
LayerFlops layer_kind_flops_per_token(LayerKind kind, const ModelSpec& model);
// The host memory of one layer of the kind on the CPU backend, counted from the shapes alone (its CPU
// twin's host_footprint; train/host_memory.h sums them).
CpuLayerFootprint layer_kind_host_footprint(LayerKind kind, const ModelSpec& model, const BatchSpec& batch);
// What a missing kind is called: "Mamba layer kind (M in the pattern)".
std::string missing_layer_kind_text(LayerKind kind);
// The error for building it: "not implemented yet: Mamba layer kind (M in the pattern)".
std::string layer_kind_missing_message(LayerKind kind);
// The kinds of this model that are not registered (empty: the model can be built).
std::vector<LayerKind> missing_layer_kinds(const ModelSpec& spec);

// One layer per place of the stack; sg::Error for a kind that is not registered.
std::vector<std::unique_ptr<Layer>> make_layers(const ModelSpec& spec);
std::vector<std::unique_ptr<CpuLayer>> make_cpu_layers(const ModelSpec& spec);
std::vector<std::unique_ptr<CpuDecodeLayer>> make_cpu_decode_layers(const ModelSpec& spec);
std::vector<std::unique_ptr<GpuDecodeLayer>> make_gpu_decode_layers(const ModelSpec& spec);
// Host bytes of what the CPU decoder's layers keep for one generation (KV caches, Mamba states): each
// kind's decoding twin's state_bytes, summed over the stack.
double decode_state_bytes(const ModelSpec& model, const DecodeSpec& decode);

// The model's declarations without building a backend (checkpoint loading, `config show`).
ModelLayout model_layout(const ModelSpec& spec);

// One microbatch's saved activation bytes per (layer, module), planned exactly as the GPU step plans
// them but without a GPU (Layer::plan is pure CPU): what activation recompute could give back. The
// residual stream and the pre-norm outputs at the layer boundaries are the step's and not included.
std::vector<SavedActivationBytes> saved_activation_bytes(const ModelSpec& model, const BatchSpec& batch);

// The kept tokens per expert of the last finished step, one row per MoE layer of `layers` in stack
// order (GPU: a synchronous copy on `stream`, outside the step; CPU: the twins' own). Defined with the
// MoE kind (model/layers/moe_layer*.cpp); declared here so the backends need no kind's header.
std::vector<std::vector<int32_t>> moe_step_token_counts(const std::vector<std::unique_ptr<Layer>>& layers,
                                                        cudaStream_t stream);
std::vector<std::vector<int32_t>> moe_step_token_counts(const std::vector<std::unique_ptr<CpuLayer>>& layers);
// For weights loaded from elsewhere (checkpoint.pretrained_checkpoint): when layout.spec routes without the
// expert bias but an MoE layer's bias tensor (Nemotron-H's routers always have one) holds a non-zero value,
// the sentence that names the tensor, the value and the fix; empty otherwise. Such weights describe a model
// that chooses experts with the bias: this one would choose differently. Defined with the MoE kind.
std::string unused_expert_bias(const ModelLayout& layout, const FlatView& weights);

}  // namespace sg::model
