#pragma once
// The layer kinds of Megatron's hybrid layer pattern, one letter each:
//   *  attention       (graph module attn)
//   -  dense MLP       (graph module mlp)
//   E  mixture of experts (graph modules moe_router, moe_preprocess, moe)
//   M  Mamba2 mixer    (graph module mamba)
// This table is the language of patterns: validation, scope planning and `config show` read it
// without building a model. Which kinds the engine can BUILD is model/layer_registry.h.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "graph/region.h"

namespace sg::model {

enum class LayerKind : uint8_t { attention, mlp, moe, mamba };

struct LayerKindInfo {
  LayerKind kind;
  char letter;                         // '*', '-', 'E', 'M'
  const char* name;                    // "attention", "mlp", "moe", "mamba"
  const char* description;             // "attention", "dense MLP", "MoE", "Mamba"
  std::vector<graph::Module> modules;  // graphable modules in forward order (scope planning)
  // Its submodule in a GPT block's Hugging Face names ("model.layers.3.<hf_module>.q_proj.weight");
  // null for kinds that only appear in hybrid patterns (whose layers are "backbone.layers.i.mixer").
  const char* hf_module;
};

const LayerKindInfo& layer_kind_info(LayerKind kind);
const std::vector<LayerKindInfo>& layer_kinds();  // every kind, in enum order
const char* layer_kind_name(LayerKind kind);
char layer_kind_letter(LayerKind kind);

// One kind per character of a Megatron pattern ("M*-M*-"). Throws sg::Error naming the key, the
// character and its 1-based position, and the valid letters, for anything else (an empty pattern too);
// Megatron's '|' (pipeline stages) and '/' (its MTP layers) are named as such, with the pattern without them.
std::vector<LayerKind> parse_layer_pattern(std::string_view pattern,
                                           std::string_view key = "model.hybrid_override_pattern");

// The letters of `kinds` ("*-*-").
std::string layer_pattern_string(const std::vector<LayerKind>& kinds);

// The pattern written compactly: the shortest unit that repeats to the whole pattern, as "(*-)x8";
// a pattern that does not repeat is written as is ("M*-E").
std::string compact_layer_pattern(const std::vector<LayerKind>& kinds);

}  // namespace sg::model
