#pragma once
// Which layer kinds the engine can build: letter -> GPU layer and CPU twin. Adding a kind is one GPU
// file, one CPU-twin file and ONE registration line in layer_registry.cpp (docs/architecture.md has
// the checklist). A pattern may name a kind that is not registered yet (E, M): it parses and
// validates, and building the model refuses it with "not implemented yet".
#include <memory>
#include <string>
#include <vector>

#include "model/layer.h"
#include "model/stack.h"

namespace sg::model {

bool layer_kind_implemented(LayerKind kind);
// What the kind declares it can recompute (model/layer.h); nothing for a kind not registered.
LayerRecompute layer_kind_recompute(LayerKind kind);
// What is missing: "MoE layer kind (E in the pattern; issue 11)".
std::string missing_layer_kind_text(LayerKind kind);
// The error for building it: "not implemented yet: MoE layer kind (E in the pattern; issue 11)".
std::string layer_kind_missing_message(LayerKind kind);
// The kinds of this model that are not registered (empty: the model can be built).
std::vector<LayerKind> missing_layer_kinds(const ModelSpec& spec);

// One layer per place of the stack; sg::Error for a kind that is not registered.
std::vector<std::unique_ptr<Layer>> make_layers(const ModelSpec& spec);
std::vector<std::unique_ptr<CpuLayer>> make_cpu_layers(const ModelSpec& spec);

// The model's declarations without building a backend (checkpoint loading, `config show`).
ModelLayout model_layout(const ModelSpec& spec);

// One microbatch's saved activation bytes per (layer, module), planned exactly as the GPU step plans
// them but without a GPU (Layer::plan is pure CPU): what activation recompute could give back. The
// residual stream and the pre-norm outputs at the layer boundaries are the step's and not included.
std::vector<SavedActivationBytes> saved_activation_bytes(const ModelSpec& model, const BatchSpec& batch);

}  // namespace sg::model
