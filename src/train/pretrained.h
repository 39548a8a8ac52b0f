#pragma once
// checkpoint.pretrained_checkpoint (Megatron-Bridge's key): start training from the weights of a Hugging
// Face Llama folder — or of a stepgraph checkpoint, for fine-tuning — at step 0 with a fresh optimizer
// (zero Adam moments, the lr schedule and the RNG from the start). It is used only when
// checkpoint.load holds no checkpoint, so an interrupted fine-tuning run resumes from its own saves.
//
// Shapes: the model keys a recipe can leave unset (model.num_layers, hidden_size and
// num_attention_heads at 0; vocab_size, ffn_hidden_size, num_query_groups, kv_channels null) are taken
// from the folder's config.json; every other shape key (and every set one) must match it, and the model
// must be a Llama's (GPT blocks, dense, RoPE, SwiGLU). One sg::Error lists each mismatch as (key, folder
// value, configured value) with the overrides that fix it.
#include <memory>
#include <string>
#include <vector>

#include "checkpoint/hf_import.h"
#include "config/config.h"
#include "model/stack.h"
#include "train/backend.h"

namespace sg::train {

// `config` with the pretrained folder's shapes applied (unchanged when pretrained_checkpoint is unset, or empty:
// config::validate refuses that one as an empty path).
config::Config apply_pretrained_shapes(const config::Config& config);

// True when checkpoint.load names a folder that holds a checkpoint to resume.
bool has_checkpoint_to_resume(const config::Config& config);

// The training state of step 0 with the folder's weights: `state` views the main weights in `layout` where the
// folder's files are mapped (`weights` keeps them open; no host copy: file-backed pages, shared by the ranks of a
// node), zero Adam moments, the configured seed at offset 0. Drop it once the backend holds the state.
struct PretrainedStart {
  TrainingStateView state;
  std::shared_ptr<const checkpoint::MappedHfWeights> weights;
};
// Validates the folder (load_hf_weights' checks) and logs which file was read.
PretrainedStart pretrained_state(const config::Config& config, const model::ModelLayout& layout);

}  // namespace sg::train
