#pragma once
// Loading a Hugging Face Llama or NemotronH folder — what transformers' save_pretrained writes (NemotronH: with the
// Hub's per-expert tensor names), and what a stepgraph checkpoint of such a model is — into the model: config.json
// -> ModelSpec, safetensors weights (model.safetensors, or shards listed by model.safetensors.index.json; F32, BF16
// or F16 tensors, tied or untied embeddings) -> the flat fp32 parameter buffer of model/param_builder.h. A stepgraph
// checkpoint folder is verified as checkpoint.load verifies it (verify_checkpoint_folder: the recorded CRC-32s), and
// every weight must be finite. Used by checkpoint.pretrained_checkpoint (train/pretrained.h) and `stepgraph
// generate`.
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "checkpoint/safetensors.h"
#include "model/flat_view.h"
#include "model/spec.h"
#include "model/stack.h"

namespace sg::checkpoint {

// The folder holding the model: DIR/iter_N when DIR has latest_checkpointed_iteration.txt (a stepgraph
// checkpoint root), else DIR. sg::Error starting with `what` (the key or argument that named DIR) when
// it does not exist, is not a directory or has no config.json (naming the iteration folders of a root
// without its latest file). A stepgraph checkpoint folder's recorded files other than its tensor files
// (config.json, the tokenizer's) are verified against train_state.json here, before config.json is read.
std::string resolve_model_folder(const std::string& path, const std::string& what);

struct HfModelConfig {
  std::string path;          // FOLDER/config.json
  std::string architecture;  // the folder's transformers class: "LlamaForCausalLM", "MistralForCausalLM", ...
  // seq_length = max_position_embeddings; a LongRoPE folder's lists in spec.longrope (as transformers reads them:
  // config.json's attention_factor, else sqrt(1 + ln(factor) / ln(original)) for factor > 1 and 1 otherwise, factor
  // being rope_parameters' factor or else max_position_embeddings / original), rope_scaling the list for seq_length.
  model::ModelSpec spec;
  int64_t max_position_embeddings = 0;
  // A Mistral or Phi-3 folder's sliding_window: its attention sees only the last this many tokens, stepgraph's every
  // earlier one, so a run is the folder's model only while its sequences fit (train and generate refuse longer ones).
  std::optional<int64_t> sliding_window;
  std::string dtype;                   // torch_dtype (dtype in transformers 5); "" when absent
  // eos_token_id (a number or a list) of config.json and of generation_config.json where the folder has one, each id
  // once; empty when absent.
  std::vector<int64_t> eos_token_ids;
};

// Parses FOLDER/config.json: a Llama one (below; Mistral's is Llama's with MistralConfig's defaults and its
// sliding_window, absent 4096, null none; Phi3's Llama's with fused tensors, hf_fused_tensors.h, and a sliding_window,
// absent none, and a partial_rotary_factor other than 1 refused), or a NemotronH one (model_type "nemotron_h": the
// layer pattern from hybrid_override_pattern or layers_block_type, the Mamba2, attention, MLP and MoE shapes; sg::Error
// for biases, an activation other than relu2, a latent MoE projection, group-limited routing, or norm_topk_prob other
// than Megatron's "k > 1"). Llama: transformers 4 spelling rope_theta + rope_scaling, or transformers 5
// rope_parameters; sg::Error naming config.json's path, the key and its value for what this Llama cannot run: a missing
// model_type or one other than llama, hidden_act other than silu, attention or MLP biases, a RoPE type other than
// default, llama3 and longrope (Phi3Config's legacy "su" and "yarn" are longrope), LongRoPE factor lists not of one
// positive factor per rotated pair; and for values no model has: sizes that are not positive integers,
// num_key_value_heads not dividing num_attention_heads, an odd head dimension, rms_norm_eps or initializer_range not
// positive. (A head_dim other than hidden_size / num_attention_heads is Megatron's kv_channels.)
HfModelConfig read_hf_config(const std::string& folder);

// Which weights of a stepgraph checkpoint folder to read (a plain Hugging Face folder has one kind).
enum class WeightSource : uint8_t {
  main_params,  // optimizer_main_params.safetensors when present: the fp32 main weights (training)
  model,        // the model weights transformers loads (generation)
};

// Where the weights of FOLDER are read from. A stepgraph checkpoint folder (train_state.json):
// optimizer_main_params.safetensors (WeightSource::main_params) or model.safetensors. Otherwise, in this
// order: optimizer_main_params.safetensors (with WeightSource::main_params), the shards
// model.safetensors.index.json lists, model.safetensors. sg::Error naming the folder when none, and for
// a folder with both model.safetensors and an index (transformers would read the first), shard names
// that are not file names in the folder, and shards the index lists that do not exist.
std::vector<std::string> weight_files(const std::string& folder, WeightSource source);

// Fills `weights` (resized to layout.total(), alignment gaps zero) from FOLDER's weights. Everything is
// validated before anything is copied: a stepgraph checkpoint's files against train_state.json's CRC-32s
// (verify_checkpoint_folder); an index's weight_map against the shards' contents; then one sg::Error lists
// each missing, differently shaped, wrongly typed (not F32/BF16/F16) or unexpected tensor; and every
// weight must be finite (the error names the tensor and the first bad element). F16 and BF16 widen to
// fp32 exactly. Ignored: rotary_emb.inv_freq buffers of old transformers versions, and lm_head.weight
// when the embeddings are tied (transformers ties it to embed_tokens too). A family's fused tensors (Phi-3's
// qkv_proj and gate_up_proj) are read as the model's own tensors, their row ranges (hf_fused_tensors.h). `what` is
// the key or argument that named the folder ("checkpoint.pretrained_checkpoint", "generate CHECKPOINT"), for the
// messages. Returns a one-line description of what was read.
std::string load_hf_weights(const std::string& folder, const model::ModelLayout& layout, std::vector<float>& weights,
                            WeightSource source, const std::string& what);

// load_hf_weights' weights, validated alike, left where they are mapped: `view` reads them (layout.total() values,
// F16 and BF16 widened exactly, alignment gaps zero) while `files` stay open, so a pretrained start's backend takes
// them without a host copy (file-backed pages, shared by the ranks of a node).
struct MappedHfWeights {
  std::vector<std::unique_ptr<SafetensorsFile>> files;
  model::FlatView view;
  std::string description;  // what load_hf_weights returns
};
MappedHfWeights map_hf_weights(const std::string& folder, const model::ModelLayout& layout, WeightSource source,
                               const std::string& what);

}  // namespace sg::checkpoint
