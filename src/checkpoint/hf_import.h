#pragma once
// Loading a Hugging Face Llama folder — what transformers' save_pretrained writes, and what every
// stepgraph checkpoint folder is — into the model: config.json -> ModelSpec, safetensors weights
// (model.safetensors, or shards listed by model.safetensors.index.json; BF16 or F32 tensors, tied or
// untied embeddings) -> the flat fp32 parameter buffer of model/param_builder.h.
// Used by checkpoint.pretrained_checkpoint (train/pretrained.h) and `stepgraph generate`.
#include <cstdint>
#include <string>
#include <vector>

#include "model/stack.h"
#include "model/spec.h"

namespace sg::checkpoint {

// The folder holding the model: DIR/iter_N when DIR has latest_checkpointed_iteration.txt (a stepgraph
// checkpoint root), else DIR. sg::Error starting with `what` (the key or argument that named DIR) when
// it does not exist or has no config.json.
std::string resolve_model_folder(const std::string& path, const std::string& what);

struct HfModelConfig {
  std::string path;       // FOLDER/config.json
  model::ModelSpec spec;  // seq_length = max_position_embeddings
  int64_t max_position_embeddings = 0;
  std::string dtype;                   // torch_dtype (dtype in transformers 5); "" when absent
  std::vector<int64_t> eos_token_ids;  // eos_token_id (a number or a list); empty when absent
};

// Parses FOLDER/config.json (transformers 4 spelling rope_theta + rope_scaling, or transformers 5
// rope_parameters). sg::Error naming the key and its value for what this Llama cannot run:
// model_type other than llama, hidden_act other than silu, attention or MLP biases, a head_dim other
// than hidden_size / num_attention_heads, a RoPE type other than default and llama3.
HfModelConfig read_hf_config(const std::string& folder);

// Which weights of a stepgraph checkpoint folder to read (a plain Hugging Face folder has one kind).
enum class WeightSource : uint8_t {
  main_params,  // optimizer_main_params.safetensors when present: the fp32 main weights (training)
  model,        // the model weights transformers loads (generation)
};

// Where the weights of FOLDER are read from, in this order: optimizer_main_params.safetensors (with
// WeightSource::main_params), model.safetensors.index.json (shards), model.safetensors. sg::Error
// naming the folder when none.
std::vector<std::string> weight_files(const std::string& folder, WeightSource source);

// Fills `weights` (resized to layout.total(), alignment gaps zero) from FOLDER's weights. Every file is
// validated before anything is copied: one sg::Error lists each missing, differently shaped, wrongly
// typed or unexpected tensor. Ignored: rotary_emb.inv_freq buffers of old transformers versions, and
// lm_head.weight when the embeddings are tied (transformers ties it to embed_tokens too).
// Returns a one-line description of what was read.
std::string load_hf_weights(const std::string& folder, const model::ModelLayout& layout, std::vector<float>& weights,
                            WeightSource source);

}  // namespace sg::checkpoint
