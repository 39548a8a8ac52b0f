#pragma once
// Activation memory of one microbatch per layer, with and without the recompute settings, planned
// exactly as the GPU step plans it but without a GPU (Layer::plan and the recompute layout are pure CPU).
// `config show`, `validate --json` and the start of a run print it.
#include <cstddef>
#include <string>
#include <vector>

#include "model/layer_kind.h"
#include "model/spec.h"

namespace sg::model {

struct LayerActivations {
  int layer = 0;
  LayerKind kind = LayerKind::attention;
  size_t bytes = 0;       // without recompute: its saved activations + its input boundary (x_i, n_i, rstd_i)
  size_t recomputed = 0;  // of which the recompute settings give back
  size_t kept() const { return bytes - recomputed; }
};

struct ActivationAccount {
  std::vector<LayerActivations> layers;
  size_t recompute_buffer_bytes = 0;  // the shared buffers the recomputed activations live in
  size_t without_recompute() const;
  size_t with_recompute() const;  // kept + recompute buffers
};

// Throws sg::Error for a layer kind that is not implemented or an invalid model (as the step would).
ActivationAccount activation_account(const ModelSpec& model, const BatchSpec& batch);

// "activations per microbatch: 16 layers, 1.20 GiB; recompute selective (core_attn): 1.00 GiB
// (0.95 GiB kept + 50.0 MiB recompute buffer)" and one line per group of alike layers.
std::vector<std::string> describe_activations(const ModelSpec& model, const ActivationAccount& account);

}  // namespace sg::model
