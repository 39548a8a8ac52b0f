#pragma once
// The run configuration, in Megatron-Bridge's language: the sections and key names of Bridge's
// ConfigContainer (model, train, validation, optimizer, scheduler, dataset, tokenizer, checkpoint, logger, rng,
// rerun_state_machine, ddp), so a Bridge user's dotted overrides work unchanged.
//
// Flow: a recipe (YAML file or shipped recipe name) -> load_config -> apply_overrides ->
// validate() (config/validate.h, which also normalizes) -> emit_yaml / model_spec.
// Defaults are Bridge's (GPTModelProvider with the Llama provider's choices: no biases, no dropout,
// untied embeddings); keys Bridge leaves unset (None) are std::optional here and print as null.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "config/bridge_inert_keys.h"
#include "core/error.h"
#include "model/hf_families.h"

namespace sg::config {

// A configuration the user must fix before anything runs: bad YAML, unknown key, wrong type,
// malformed override, unknown recipe. The CLI exits with exit_code() (2: usage/parse error), unlike
// rule violations found by validate() (exit 1).
class ConfigError : public sg::Error {
 public:
  explicit ConfigError(const std::string& message) : sg::Error(message) {}
  int exit_code() const { return 2; }
};

struct ModelConfig {
  int64_t num_layers = 0;  // Megatron leaves shapes unset (0): a recipe must give them
  int64_t hidden_size = 0;
  std::optional<int64_t> ffn_hidden_size;  // null: 4 * hidden_size
  int64_t num_attention_heads = 0;
  std::optional<int64_t> num_query_groups;  // null: num_attention_heads (no GQA)
  int64_t seq_length = 1024;
  // null: the tokenizer's vocabulary padded to make_vocab_size_divisible_by (Bridge); without a
  // tokenizer it must be set
  std::optional<int64_t> vocab_size;
  int64_t make_vocab_size_divisible_by = 128;  // Megatron's padding of the tokenizer's vocabulary
  double rotary_base = 10000.0;
  double rotary_percent = 1.0;        // share of each head RoPE rotates (Megatron's rotary_percent)
  bool rope_scaling = false;          // Llama 3.x RoPE frequency scaling (Bridge's Llama31 provider)
  double rope_scaling_factor = 8.0;   // its factor (8 for Llama 3.1, 32 for Llama 3.2)
  // LongRoPE (Phi-3.5-mini, Phi-4-mini; HF rope_type longrope): one factor per rotated pair for sequences up to
  // longrope_original_max_position_embeddings positions and one for longer ones; empty lists: none.
  std::vector<double> longrope_short_factor;
  std::vector<double> longrope_long_factor;
  int64_t longrope_original_max_position_embeddings = 4096;
  double longrope_attention_factor = 1.0;  // multiplies cos and sin
  double layernorm_epsilon = 1e-5;
  bool qk_layernorm = false;  // RMSNorm of each query and key head before RoPE (Qwen3)
  bool share_embeddings_and_output_weights = false;
  double init_method_std = 0.02;
  double attention_dropout = 0.0;
  double hidden_dropout = 0.0;
  bool add_bias_linear = false;  // biases of q, k, v, o_proj and the dense MLP's linears (Llama's attention_bias)
  bool add_qkv_bias = false;  // biases of q_proj, k_proj and v_proj (Qwen2)
  // Mixture of Experts: null or 0 experts is a dense model.
  std::optional<int64_t> num_moe_experts;
  int64_t moe_router_topk = 2;
  std::optional<int64_t> moe_ffn_hidden_size;        // null: ffn_hidden_size
  std::optional<double> moe_expert_capacity_factor;  // null: token-dropless
  bool moe_pad_expert_input_to_capacity = false;
  std::string moe_token_dispatcher_type = "allgather";
  double moe_aux_loss_coeff = 0.0;
  // The rest of Megatron's MoE keys (Megatron's defaults; docs/configuration.md).
  std::vector<std::string> moe_layer_freq = {"1"};  // 1, 2, [1,0,1] or "([1]*3+[0])*2"
  std::string moe_router_score_function = "softmax";
  bool moe_router_pre_softmax = false;
  std::optional<double> moe_router_topk_scaling_factor;
  std::string moe_router_load_balancing_type = "aux_loss";
  std::optional<double> moe_z_loss_coeff;
  bool moe_router_enable_expert_bias = false;
  double moe_router_bias_update_rate = 1e-3;
  std::string moe_token_drop_policy = "probs";
  std::optional<int64_t> moe_shared_expert_intermediate_size;
  bool moe_shared_expert_gate = false;  // a sigmoid gate on the shared expert's output (Qwen2-MoE's)
  std::optional<int64_t> kv_channels;  // head dim; null: hidden_size / num_attention_heads
  // Megatron's per-layer pattern: M = Mamba, * = attention, - = MLP, E = MoE. null: num_layers
  // blocks of attention followed by MLP (or MoE when num_moe_experts > 0).
  std::optional<std::string> hybrid_override_pattern;
  // Megatron's is_hybrid_model: the output projections' initial std is init_method_std / sqrt(num_layers)
  // instead of / sqrt(2 * num_layers) (Megatron's output_layer_init_method). Bridge's NemotronH recipes set it.
  bool is_hybrid_model = false;
  // Hybrid models (Megatron's MambaModel, Nemotron-H). position_embedding_type null: rope for GPT
  // blocks, none with a hybrid pattern (Megatron's MambaModel default).
  std::optional<std::string> position_embedding_type;  // rope, none
  std::string activation_func = "silu";  // silu with gated_linear_unit (SwiGLU), squared_relu without
  bool gated_linear_unit = true;
  int64_t mamba_state_dim = 128;
  int64_t mamba_head_dim = 64;
  int64_t mamba_num_groups = 8;
  std::optional<int64_t> mamba_num_heads;  // null: mamba_expand * hidden_size / mamba_head_dim
  int64_t mamba_expand = 2;
  int64_t mamba_conv_kernel = 4;  // MambaMixer's d_conv
  int64_t mamba_chunk_size = 128;
  double mamba_dt_min = 0.001;
  double mamba_dt_max = 0.1;
  double mamba_dt_init_floor = 1e-4;
  double mamba_dt_limit_min = 0.0;
  std::optional<double> mamba_dt_limit_max;  // null: no upper limit (Megatron's dt_limit (0, inf))
  double mamba_A_init_min = 1.0;  // A_init_range
  double mamba_A_init_max = 16.0;
  std::optional<std::string> recompute_granularity;            // null, full, selective
  std::vector<std::string> recompute_modules = {"core_attn"};  // used with selective granularity
  std::optional<std::string> recompute_method;                 // full: uniform, block
  std::optional<int64_t> recompute_num_layers;
  bool cpu_offloading = false;
  bool delay_wgrad_compute = false;
  bool gradient_accumulation_fusion = true;
  int64_t tensor_model_parallel_size = 1;
  int64_t pipeline_model_parallel_size = 1;
  int64_t expert_model_parallel_size = 1;
  std::string cuda_graph_impl = "none";       // none, local, transformer_engine
  std::vector<std::string> cuda_graph_scope;  // YAML list or "attn,mlp"
  int64_t cuda_graph_warmup_steps = 3;
  bool use_te_rng_tracker = false;
  // Megatron-Bridge's model keys stepgraph accepts without implementing them (config/bridge_inert_keys.h)
  BridgeInertValues<bridge_inert_count("model")> bridge_inert;
};

struct TrainConfig {
  std::optional<int64_t> micro_batch_size;
  std::optional<int64_t> global_batch_size;  // null: micro_batch_size x data-parallel size (one microbatch each)
  std::optional<int64_t> train_iters;
  // Megatron's sample-based length (config/training_samples.h): train_iters = train_samples / global_batch_size.
  std::optional<int64_t> train_samples;
  // Bridge's length in passes over the training data (config/num_epochs.h): train_iters derived from it.
  std::optional<double> num_epochs;
  // Bridge's keys stepgraph accepts without implementing them (config/bridge_inert_keys.h), here and below
  BridgeInertValues<bridge_inert_count("train")> bridge_inert;
};

// Bridge's ValidationConfig (Megatron's megatron/training/config): evaluation on the validation data. Bridge still
// reads train.eval_interval, train.eval_iters and train.skip_train as deprecated names of these keys (config_yaml.cpp).
struct ValidationConfig {
  std::optional<int64_t> eval_interval;  // null: no evaluation during training
  int64_t eval_iters = 100;              // global batches per evaluation (Megatron's default)
  std::optional<int64_t> start_eval_at_iter;      // null: evaluate from the first eval_interval on
  // null: train.global_batch_size. Any size the ranks share in whole microbatches: the evaluation packs its rows into
  // the training step's shape (train/evaluation.h).
  std::optional<int64_t> eval_global_batch_size;
  // null: train.micro_batch_size. Only Bridge's rule that eval_global_batch_size divides into these microbatches on
  // every rank: the loss is a token mean, whatever the microbatches.
  std::optional<int64_t> eval_micro_batch_size;
  bool skip_train = false;                        // no training step: evaluate the loaded (or initial) weights and exit
  // Megatron-LM's other validation keys; Bridge's training loop does not read them: full_validation
  // (train/evaluation.h), multiple_validation_sets (config/validation_sets.h) and test_mode (its realtime test that
  // the data-parallel ranks hold the same weights: train/distributed_run.h require_same_weights).
  bool test_mode = false;
  bool full_validation = false;
  bool multiple_validation_sets = false;
  std::vector<std::string> validation_set_names;  // null (empty): none
};

struct OptimizerConfig {
  std::optional<double> lr;
  double min_lr = 0.0;
  double weight_decay = 0.01;
  double adam_beta1 = 0.9;
  double adam_beta2 = 0.999;
  double adam_eps = 1e-8;
  double clip_grad = 1.0;
  // Megatron's distributed optimizer (ZeRO-1): each data-parallel rank keeps and updates a shard of the
  // fp32 master weights and Adam moments; gradients are reduce-scattered, bf16 weights all-gathered.
  // Kept in sync with ddp.use_distributed_optimizer (either true turns both on, as Bridge does).
  bool use_distributed_optimizer = false;
  // Megatron's precision-aware optimizer: with it, the Adam moments may be stored in bf16 (AdamW still
  // computes in fp32). Without it both dtypes must stay fp32, as Megatron requires.
  bool use_precision_aware_optimizer = false;
  std::string exp_avg_dtype = "fp32";     // fp32 or bf16 (config/moment_dtype.h)
  std::string exp_avg_sq_dtype = "fp32";  // fp32 or bf16
  BridgeInertValues<bridge_inert_count("optimizer")> bridge_inert;
};

struct SchedulerConfig {
  int64_t lr_warmup_iters = 0;
  std::optional<int64_t> lr_decay_iters;  // null: train_iters
  std::string lr_decay_style = "linear";  // constant, linear, cosine, inverse-square-root, WSD
  double lr_warmup_init = 0.0;            // the lr the warmup rises from
  // WSD (warmup-stable-decay): the annealing phase's style and length, which ends at lr_decay_iters.
  std::string lr_wsd_decay_style = "exponential";  // exponential, linear, cosine, minus_sqrt
  std::optional<int64_t> lr_wsd_decay_iters;
  std::optional<int64_t> lr_wsd_decay_samples;  // with train.train_samples
  // Megatron's sample-based schedule lengths, with train.train_samples (config/training_samples.h).
  int64_t lr_warmup_samples = 0;
  std::optional<int64_t> lr_decay_samples;  // null: train.train_samples
  // Bridge's newer lengths (config/schedule_lengths.h): the schedule's length in steps (replaces lr_decay_iters), and
  // the warmup as a fraction of the decay.
  std::optional<int64_t> max_steps;
  std::optional<double> lr_warmup_fraction;
  // Megatron's weight-decay schedule (config/weight_decay.h): AdamW's decay goes from start to end over train_iters;
  // null is optimizer.weight_decay (Megatron-LM's rule).
  std::optional<double> start_weight_decay;
  std::optional<double> end_weight_decay;
  std::string weight_decay_incr_style = "constant";  // constant, linear, cosine
  BridgeInertValues<bridge_inert_count("scheduler")> bridge_inert;
};

struct DatasetConfig {
  std::vector<std::string> data_path;  // Megatron indexed dataset prefixes (.bin/.idx)
  bool mock = false;
  std::optional<int64_t> seq_length;  // null: model.seq_length
  bool pad_to_max_length = false;
  bool packed_sequence = false;
  bool pad_cu_seqlens = false;
  bool eod_mask_loss = false;  // no loss where the input token is the tokenizer's EOD
  // Megatron's document-level train/valid/test split of every dataset in data_path ("969,30,1");
  // null: all of data_path trains
  std::optional<std::string> split;
  std::vector<std::string> valid_data_path;  // separate validation prefixes (instead of split)
  BridgeInertValues<bridge_inert_count("dataset")> bridge_inert;
};

struct TokenizerConfig {
  std::optional<std::string> tokenizer_type;   // HuggingFaceTokenizer
  std::optional<std::string> tokenizer_model;  // a folder with tokenizer.json
  // Bridge's: model.vocab_size is the tokenizer's (padded) even when set (its from-scratch pretraining recipes).
  bool use_tokenizer_vocab_size = false;
};

struct CheckpointConfig {
  std::optional<std::string> save;
  std::optional<std::string> load;
  std::optional<int64_t> save_interval;
  // A Hugging Face Llama folder (or a stepgraph checkpoint) whose weights start the run at step 0 with a
  // fresh optimizer, when `load` holds no checkpoint to resume (train/pretrained.h).
  std::optional<std::string> pretrained_checkpoint;
  // stepgraph's: what to do when checkpoint.save already holds checkpoints (train refuses otherwise).
  bool auto_resume = false;  // with load unset: resume from checkpoint.save's latest iteration
  bool overwrite = false;    // delete them and start over
  // Bridge's retention: -1 keeps every checkpoint; k >= 1 keeps the k newest iteration folders of `save` (each save
  // then removes the older ones: train/save_dir_policy.h). No effect on the numbers (not in the config hash).
  int64_t most_recent_k = -1;
  BridgeInertValues<bridge_inert_count("checkpoint")> bridge_inert;
};

struct LoggerConfig {
  int64_t log_interval = 100;
  std::optional<std::string> tensorboard_dir;  // TensorBoard event files go here
  // Bridge's W&B and timer keys: stepgraph logs to metrics.jsonl and TensorBoard (config/bridge_inert_keys.h)
  BridgeInertValues<bridge_inert_count("logger")> bridge_inert;
};

struct RngConfig {
  int64_t seed = 1234;
  bool te_rng_tracker = false;
  BridgeInertValues<bridge_inert_count("rng")> bridge_inert;
};

struct RerunStateMachineConfig {
  bool check_for_nan_in_loss = true;
  BridgeInertValues<bridge_inert_count("rerun_state_machine")> bridge_inert;
};

struct DdpConfig {
  bool check_for_nan_in_grad = false;
  bool use_distributed_optimizer = false;  // see OptimizerConfig::use_distributed_optimizer
  std::optional<int64_t> bucket_size;      // elements per gradient bucket; null: max(40M, 1M x dp)
  bool overlap_grad_reduce = false;        // reduce each bucket during the backward (Megatron's default: off)
  // Main gradients stored and reduced in fp32 (true) or bf16 (false). Megatron's dataclass default is false;
  // stepgraph's is true, its exact fp32 weight gradients (Bridge's recipes set true too).
  bool grad_reduce_in_fp32 = true;
  BridgeInertValues<bridge_inert_count("ddp")> bridge_inert;
};

// Bridge's mixed_precision section (MixedPrecisionConfig, or the name of one of its recipes, which the loader writes
// out as its keys: config/mixed_precision.h). Its keys are Bridge keys (config/bridge_inert_keys.h): validate copies
// grad_reduce_in_fp32 over ddp's, and the section's values replace the model's and optimizer's keys of the same
// names, as Bridge's MixedPrecisionConfig.setup does.
struct MixedPrecisionConfig {
  BridgeInertValues<bridge_inert_count("mixed_precision")> bridge_inert;
};

struct Config {
  ModelConfig model;
  TrainConfig train;
  ValidationConfig validation;
  OptimizerConfig optimizer;
  SchedulerConfig scheduler;
  DatasetConfig dataset;
  TokenizerConfig tokenizer;
  CheckpointConfig checkpoint;
  LoggerConfig logger;
  RngConfig rng;
  RerunStateMachineConfig rerun_state_machine;
  DdpConfig ddp;
  MixedPrecisionConfig mixed_precision;
  // Where the config came from (file path or shipped recipe), for messages. Not a key.
  std::string source;
  // Ranks that each run a slice of the global batch: WORLD_SIZE / (TP x PP), as Bridge derives it from
  // the launcher (ConfigContainer.data_parallel_size). Not a key: set by `train` / `bench -ng`.
  int64_t data_parallel_size = 1;
  // Keys validate() filled in from others, Bridge's null defaults ("model.ffn_hidden_size", "model.vocab_size" from
  // the tokenizer). Not a key: a run's config.yaml writes them as null (EmitDerived::as_null), so an override of
  // what they derive from derives them again when the file is run with it.
  std::vector<std::string> derived_keys;
  // A key Megatron knows under two names (model.hybrid_override_pattern and its newer name model.hybrid_layer_pattern):
  // the name that gave it its value, and where ("recipe.yaml:9:28", "override '...'"). A value under the other name
  // too is refused, as Megatron and Bridge refuse both names set. Not a key; a key unset (null) has no entry.
  struct KeyName {
    std::string key;    // the key as emitted: "model.hybrid_override_pattern"
    std::string name;   // the name used: "model.hybrid_layer_pattern"
    std::string where;  // of the value
  };
  std::vector<KeyName> key_names;
};

// Calls visitor(section, key, member, doc) for every key in emission order. The member type is one of bool, int64_t,
// double, std::string, std::optional<int64_t|double|std::string>, std::vector<std::string>, std::vector<double>,
// BridgeInertValue (a Bridge key stepgraph accepts without implementing it; printed only when set). One table serves
// the YAML loader, overrides, the emitter and the docs.
template <class ConfigT, class Visitor>
void visit_fields(ConfigT& c, Visitor&& v) {
  auto& m = c.model;
  v("model", "num_layers", m.num_layers, "transformer layers (blocks)");
  v("model", "hidden_size", m.hidden_size, "model width");
  v("model", "ffn_hidden_size", m.ffn_hidden_size, "MLP width; null = 4 * hidden_size");
  v("model", "num_attention_heads", m.num_attention_heads, "query heads");
  v("model", "num_query_groups", m.num_query_groups, "KV heads (GQA); null = num_attention_heads");
  v("model", "seq_length", m.seq_length, "tokens per sequence");
  v("model", "vocab_size", m.vocab_size,
    "vocabulary size; null = the tokenizer's, padded (must be set without a tokenizer)");
  v("model", "make_vocab_size_divisible_by", m.make_vocab_size_divisible_by,
    "pad the tokenizer's vocabulary to a multiple of this");
  v("model", "rotary_base", m.rotary_base, "RoPE base");
  v("model", "rotary_percent", m.rotary_percent,
    "share of each head's dimensions RoPE rotates: the first int(head_dim x this), the rest passed through");
  v("model", "rope_scaling", m.rope_scaling, "Llama 3 RoPE frequency scaling");
  v("model", "rope_scaling_factor", m.rope_scaling_factor, "its factor (Llama 3.1: 8, 3.2: 32)");
  v("model", "longrope_short_factor", m.longrope_short_factor,
    "LongRoPE (Phi-3.5): each rotated pair's frequency divisor for sequences up to the original context; [] none");
  v("model", "longrope_long_factor", m.longrope_long_factor, "LongRoPE's divisors for longer sequences");
  v("model", "longrope_original_max_position_embeddings", m.longrope_original_max_position_embeddings,
    "LongRoPE: the longest sequence of the short factors");
  v("model", "longrope_attention_factor", m.longrope_attention_factor, "LongRoPE: multiplies RoPE's cos and sin");
  v("model", "layernorm_epsilon", m.layernorm_epsilon, "RMSNorm epsilon");
  v("model", "qk_layernorm", m.qk_layernorm, "RMSNorm of each query and key head before RoPE (Qwen3)");
  v("model", "share_embeddings_and_output_weights", m.share_embeddings_and_output_weights,
    "tie the output layer to the embedding");
  v("model", "init_method_std", m.init_method_std, "std of the normal weight init");
  v("model", "attention_dropout", m.attention_dropout, "dropout on attention probabilities");
  v("model", "hidden_dropout", m.hidden_dropout, "dropout before each residual add");
  v("model", "add_bias_linear", m.add_bias_linear,
    "biases on every linear of attention and the dense MLP (Llama's attention_bias + mlp_bias)");
  v("model", "add_qkv_bias", m.add_qkv_bias, "bias in the query, key and value projections (Qwen2)");
  v("model", "num_moe_experts", m.num_moe_experts, "experts per MoE layer; null/0 = dense");
  v("model", "moe_router_topk", m.moe_router_topk, "experts per token");
  v("model", "moe_ffn_hidden_size", m.moe_ffn_hidden_size,
    "expert MLP width; null = ffn_hidden_size");
  v("model", "moe_expert_capacity_factor", m.moe_expert_capacity_factor,
    "expert capacity factor; null = token-dropless");
  v("model", "moe_pad_expert_input_to_capacity", m.moe_pad_expert_input_to_capacity,
    "pad every expert's input to its capacity (static shapes)");
  v("model", "moe_token_dispatcher_type", m.moe_token_dispatcher_type, "allgather, alltoall, flex");
  v("model", "moe_aux_loss_coeff", m.moe_aux_loss_coeff, "load-balancing loss weight");
  v("model", "moe_layer_freq", m.moe_layer_freq, "MoE blocks: every Nth (int) or a 0/1 list per block");
  v("model", "moe_router_score_function", m.moe_router_score_function, "softmax, sigmoid, sqrtsoftplus");
  v("model", "moe_router_pre_softmax", m.moe_router_pre_softmax, "softmax over all experts before top-k");
  v("model", "moe_router_topk_scaling_factor", m.moe_router_topk_scaling_factor, "routing weight scale; null = 1");
  v("model", "moe_router_load_balancing_type", m.moe_router_load_balancing_type, "aux_loss, seq_aux_loss, none");
  v("model", "moe_z_loss_coeff", m.moe_z_loss_coeff, "router z-loss weight; null = off");
  v("model", "moe_router_enable_expert_bias", m.moe_router_enable_expert_bias,
    "aux-loss-free balancing bias (sigmoid or sqrtsoftplus routing)");
  v("model", "moe_router_bias_update_rate", m.moe_router_bias_update_rate, "expert bias step per update");
  v("model", "moe_token_drop_policy", m.moe_token_drop_policy, "probs, position (with a capacity factor)");
  v("model", "moe_shared_expert_intermediate_size", m.moe_shared_expert_intermediate_size,
    "shared SwiGLU expert width; null = none");
  v("model", "moe_shared_expert_gate", m.moe_shared_expert_gate,
    "scale the shared expert's output by sigmoid(n w), w [1, hidden] (Qwen2-MoE's shared_expert_gate)");
  v("model", "kv_channels", m.kv_channels, "attention head dim; null = hidden_size / num_attention_heads");
  v("model", "hybrid_override_pattern", m.hybrid_override_pattern,
    "per-layer pattern: M Mamba, * attention, - MLP, E MoE");
  v("model", "is_hybrid_model", m.is_hybrid_model,
    "output projections' initial std init_method_std / sqrt(num_layers); false: / sqrt(2 * num_layers)");
  v("model", "position_embedding_type", m.position_embedding_type,
    "rope, none; null = rope (GPT blocks), none (hybrid pattern)");
  v("model", "activation_func", m.activation_func, "MLP activation: silu, squared_relu");
  v("model", "gated_linear_unit", m.gated_linear_unit, "gated MLP (silu + gated = SwiGLU)");
  v("model", "mamba_state_dim", m.mamba_state_dim, "Mamba SSM state size (d_state)");
  v("model", "mamba_head_dim", m.mamba_head_dim, "Mamba head dimension");
  v("model", "mamba_num_groups", m.mamba_num_groups, "Mamba groups of B and C");
  v("model", "mamba_num_heads", m.mamba_num_heads,
    "Mamba heads; null = mamba_expand * hidden_size / mamba_head_dim");
  v("model", "mamba_expand", m.mamba_expand, "Mamba inner width / hidden_size (without mamba_num_heads)");
  v("model", "mamba_conv_kernel", m.mamba_conv_kernel, "Mamba causal conv1d width (4)");
  v("model", "mamba_chunk_size", m.mamba_chunk_size, "SSD scan chunk (128)");
  v("model", "mamba_dt_min", m.mamba_dt_min, "dt_bias init: smallest initial dt");
  v("model", "mamba_dt_max", m.mamba_dt_max, "dt_bias init: largest initial dt");
  v("model", "mamba_dt_init_floor", m.mamba_dt_init_floor, "dt_bias init: floor of the initial dt");
  v("model", "mamba_dt_limit_min", m.mamba_dt_limit_min, "dt clamped to at least this");
  v("model", "mamba_dt_limit_max", m.mamba_dt_limit_max, "dt clamped to at most this; null = no limit");
  v("model", "mamba_A_init_min", m.mamba_A_init_min, "A_init_range low: A = -U(low, high)");
  v("model", "mamba_A_init_max", m.mamba_A_init_max, "A_init_range high");
  v("model", "recompute_granularity", m.recompute_granularity, "null, full, selective");
  v("model", "recompute_modules", m.recompute_modules,
    "with selective: core_attn, mlp, layernorm, moe_act, moe, shared_experts, mamba");
  v("model", "recompute_method", m.recompute_method,
    "with full: uniform (every layer, in chunks of recompute_num_layers) or block (the first ones)");
  v("model", "recompute_num_layers", m.recompute_num_layers,
    "with full: layers per chunk (uniform) or layers recomputed (block)");
  v("model", "cpu_offloading", m.cpu_offloading, "offload activations to host memory");
  v("model", "delay_wgrad_compute", m.delay_wgrad_compute, "delay weight-gradient GEMMs");
  v("model", "gradient_accumulation_fusion", m.gradient_accumulation_fusion,
    "weight-gradient GEMMs accumulate into the fp32 main_grad");
  v("model", "tensor_model_parallel_size", m.tensor_model_parallel_size, "tensor parallel size");
  v("model", "pipeline_model_parallel_size", m.pipeline_model_parallel_size,
    "pipeline parallel size");
  v("model", "expert_model_parallel_size", m.expert_model_parallel_size, "expert parallel size");
  v("model", "cuda_graph_impl", m.cuda_graph_impl, "none, local, transformer_engine");
  v("model", "cuda_graph_scope", m.cuda_graph_scope,
    "full_iteration, attn, mlp, moe, moe_router, moe_preprocess, mamba (list or a,b)");
  v("model", "cuda_graph_warmup_steps", m.cuda_graph_warmup_steps, "eager steps before capture");
  v("model", "use_te_rng_tracker", m.use_te_rng_tracker, "graph-safe RNG tracker (model side)");
  visit_bridge_inert("model", m.bridge_inert, v);
  v("train", "micro_batch_size", c.train.micro_batch_size, "sequences per microbatch");
  v("train", "global_batch_size", c.train.global_batch_size,
    "sequences per step over all ranks; null = micro_batch_size x data-parallel size");
  v("train", "train_iters", c.train.train_iters, "optimizer steps");
  v("train", "train_samples", c.train.train_samples,
    "sample-based length instead of train_iters: train_iters = train_samples / global_batch_size");
  v("train", "num_epochs", c.train.num_epochs,
    "passes over dataset.data_path instead of train_iters: ceil(epochs x ceil(samples per epoch / global batch))");
  visit_bridge_inert("train", c.train.bridge_inert, v);
  v("validation", "eval_interval", c.validation.eval_interval,
    "steps between evaluations on the validation data; null = none");
  v("validation", "eval_iters", c.validation.eval_iters, "global batches per evaluation");
  v("validation", "start_eval_at_iter", c.validation.start_eval_at_iter,
    "no evaluation during training before this step; null = from the first eval_interval");
  v("validation", "eval_global_batch_size", c.validation.eval_global_batch_size,
    "sequences per evaluation batch; null = train.global_batch_size (run in the training step's shape)");
  v("validation", "eval_micro_batch_size", c.validation.eval_micro_batch_size,
    "sequences per evaluation microbatch; null = train.micro_batch_size (sets only Bridge's divisibility rule)");
  v("validation", "skip_train", c.validation.skip_train,
    "no training: evaluate the checkpoint loaded (checkpoint.load, pretrained_checkpoint) and exit");
  v("validation", "test_mode", c.validation.test_mode,
    "compare the data-parallel ranks' weights after every step (Megatron's realtime test)");
  v("validation", "full_validation", c.validation.full_validation,
    "evaluate the whole validation set each time, every sample once (Megatron-LM's; not eval_iters batches)");
  v("validation", "multiple_validation_sets", c.validation.multiple_validation_sets,
    "one loss per validation dataset, each evaluated on its own (Megatron-LM's; config/validation_sets.h)");
  v("validation", "validation_set_names", c.validation.validation_set_names,
    "names of the validation sets, one a dataset in order (with multiple_validation_sets); [] = their indices");
  v("optimizer", "lr", c.optimizer.lr, "peak learning rate (must be set)");
  v("optimizer", "min_lr", c.optimizer.min_lr, "learning rate at the end of decay");
  v("optimizer", "weight_decay", c.optimizer.weight_decay, "AdamW decoupled weight decay");
  v("optimizer", "adam_beta1", c.optimizer.adam_beta1, "Adam beta1");
  v("optimizer", "adam_beta2", c.optimizer.adam_beta2, "Adam beta2");
  v("optimizer", "adam_eps", c.optimizer.adam_eps, "Adam epsilon");
  v("optimizer", "clip_grad", c.optimizer.clip_grad, "global gradient-norm clip; 0 = off");
  v("optimizer", "use_distributed_optimizer", c.optimizer.use_distributed_optimizer,
    "shard fp32 master weights and Adam moments over data-parallel ranks");
  v("optimizer", "use_precision_aware_optimizer", c.optimizer.use_precision_aware_optimizer,
    "allow exp_avg_dtype / exp_avg_sq_dtype other than fp32");
  v("optimizer", "exp_avg_dtype", c.optimizer.exp_avg_dtype,
    "storage of Adam's first moment: fp32, bf16 (bf16 needs use_precision_aware_optimizer)");
  v("optimizer", "exp_avg_sq_dtype", c.optimizer.exp_avg_sq_dtype,
    "storage of Adam's second moment: fp32, bf16 (bf16 needs use_precision_aware_optimizer)");
  visit_bridge_inert("optimizer", c.optimizer.bridge_inert, v);
  v("scheduler", "lr_warmup_iters", c.scheduler.lr_warmup_iters, "linear warmup steps");
  v("scheduler", "lr_decay_iters", c.scheduler.lr_decay_iters, "decay steps; null = train_iters");
  v("scheduler", "lr_warmup_samples", c.scheduler.lr_warmup_samples,
    "with train.train_samples: warmup in samples (a multiple of global_batch_size)");
  v("scheduler", "lr_decay_samples", c.scheduler.lr_decay_samples,
    "with train.train_samples: decay in samples (a multiple of global_batch_size); null = train_samples");
  v("scheduler", "max_steps", c.scheduler.max_steps,
    "the schedule's length in steps (>= train_iters): replaces lr_decay_iters; null: none");
  v("scheduler", "lr_warmup_fraction", c.scheduler.lr_warmup_fraction,
    "warmup as a fraction of lr_decay_iters, to the nearest step (instead of lr_warmup_iters); null: none");
  v("scheduler", "lr_decay_style", c.scheduler.lr_decay_style,
    "constant, linear, cosine, inverse-square-root, WSD (warmup-stable-decay)");
  v("scheduler", "lr_warmup_init", c.scheduler.lr_warmup_init, "the lr the warmup rises from (<= optimizer.lr)");
  v("scheduler", "lr_wsd_decay_style", c.scheduler.lr_wsd_decay_style,
    "WSD's annealing: exponential, linear, cosine, minus_sqrt");
  v("scheduler", "lr_wsd_decay_iters", c.scheduler.lr_wsd_decay_iters,
    "WSD: the annealing steps, ending at lr_decay_iters; null: none (WSD needs it)");
  v("scheduler", "lr_wsd_decay_samples", c.scheduler.lr_wsd_decay_samples,
    "with train.train_samples: WSD's annealing in samples (a multiple of global_batch_size)");
  v("scheduler", "start_weight_decay", c.scheduler.start_weight_decay,
    "AdamW's weight decay at the first step (replaces optimizer.weight_decay); null = optimizer.weight_decay");
  v("scheduler", "end_weight_decay", c.scheduler.end_weight_decay,
    "weight decay at the last step; null = optimizer.weight_decay");
  v("scheduler", "weight_decay_incr_style", c.scheduler.weight_decay_incr_style,
    "constant, linear, cosine: from start to end (constant needs end = start)");
  visit_bridge_inert("scheduler", c.scheduler.bridge_inert, v);
  v("dataset", "data_path", c.dataset.data_path, "indexed dataset prefixes (list or a,b)");
  v("dataset", "mock", c.dataset.mock, "random tokens instead of data_path");
  v("dataset", "seq_length", c.dataset.seq_length, "must equal model.seq_length; null = that");
  v("dataset", "pad_to_max_length", c.dataset.pad_to_max_length,
    "pad every sequence to seq_length");
  v("dataset", "packed_sequence", c.dataset.packed_sequence,
    "several documents per sequence (THD)");
  v("dataset", "pad_cu_seqlens", c.dataset.pad_cu_seqlens, "pad cu_seqlens to a static length");
  v("dataset", "eod_mask_loss", c.dataset.eod_mask_loss,
    "no loss where the input token is the tokenizer's EOD");
  v("dataset", "split", c.dataset.split,
    "train,valid,test document shares of each dataset (\"969,30,1\"); null = all trains");
  v("dataset", "valid_data_path", c.dataset.valid_data_path,
    "validation dataset prefixes (instead of split)");
  visit_bridge_inert("dataset", c.dataset.bridge_inert, v);
  v("tokenizer", "tokenizer_type", c.tokenizer.tokenizer_type, "HuggingFaceTokenizer");
  v("tokenizer", "tokenizer_model", c.tokenizer.tokenizer_model,
    "tokenizer folder (tokenizer.json, tokenizer_config.json)");
  v("tokenizer", "use_tokenizer_vocab_size", c.tokenizer.use_tokenizer_vocab_size,
    "model.vocab_size is the tokenizer's vocabulary, padded, even when set");
  v("checkpoint", "save", c.checkpoint.save, "directory to save checkpoints to");
  v("checkpoint", "load", c.checkpoint.load, "directory to resume from");
  v("checkpoint", "save_interval", c.checkpoint.save_interval, "steps between saves");
  v("checkpoint", "most_recent_k", c.checkpoint.most_recent_k,
    "checkpoints kept in checkpoint.save: -1 every one, k >= 1 the k newest (each save removes older ones)");
  v("checkpoint", "pretrained_checkpoint", c.checkpoint.pretrained_checkpoint,
    "Hugging Face " SG_HF_FAMILIES " folder, or a stepgraph checkpoint, to start from (step 0, fresh optimizer)");
  v("checkpoint", "auto_resume", c.checkpoint.auto_resume,
    "resume from checkpoint.save when it holds checkpoints and load is unset");
  v("checkpoint", "overwrite", c.checkpoint.overwrite,
    "delete the checkpoints already in checkpoint.save and start over");
  visit_bridge_inert("checkpoint", c.checkpoint.bridge_inert, v);
  v("logger", "log_interval", c.logger.log_interval, "steps between log lines");
  v("logger", "tensorboard_dir", c.logger.tensorboard_dir, "write TensorBoard event files here");
  visit_bridge_inert("logger", c.logger.bridge_inert, v);
  v("rng", "seed", c.rng.seed, "seed of every random stream");
  v("rng", "te_rng_tracker", c.rng.te_rng_tracker, "graph-safe RNG tracker (rng side)");
  visit_bridge_inert("rng", c.rng.bridge_inert, v);
  v("rerun_state_machine", "check_for_nan_in_loss", c.rerun_state_machine.check_for_nan_in_loss,
    "stop on a NaN/Inf loss (device flag, read with the step's metrics)");
  visit_bridge_inert("rerun_state_machine", c.rerun_state_machine.bridge_inert, v);
  v("ddp", "check_for_nan_in_grad", c.ddp.check_for_nan_in_grad,
    "stop on a NaN/Inf gradient norm (device flag, read with the step's metrics)");
  v("ddp", "use_distributed_optimizer", c.ddp.use_distributed_optimizer,
    "same as optimizer.use_distributed_optimizer (kept in sync)");
  v("ddp", "bucket_size", c.ddp.bucket_size, "elements per gradient bucket; null = max(40M, 1M x dp)");
  v("ddp", "overlap_grad_reduce", c.ddp.overlap_grad_reduce,
    "reduce each gradient bucket as soon as the backward finished it, overlapped with the rest");
  v("ddp", "grad_reduce_in_fp32", c.ddp.grad_reduce_in_fp32,
    "main gradients stored and reduced in fp32; false: bf16 (summed in fp32, rounded where stored)");
  visit_bridge_inert("ddp", c.ddp.bridge_inert, v);
  visit_bridge_inert("mixed_precision", c.mixed_precision.bridge_inert, v);
}

// Every dotted key ("model.hidden_size"), in emission order.
std::vector<std::string> config_keys();
// The sections, in emission order.
std::vector<std::string> config_sections();

// The value of a dotted key as it prints in YAML ("[attn, mlp]", "null", "3e-05"). Throws
// ConfigError for an unknown key.
std::string format_value(const Config& config, std::string_view dotted_key);

// ---- YAML in (config_yaml.cpp) -------------------------------------------------------------------
// Parses a recipe. `source` names it in messages ("recipes/llama/tiny.yaml:12:3: ..."). Missing keys
// keep their defaults. Throws ConfigError on bad YAML, unknown section/key (with a suggestion), wrong
// type, duplicate key.
Config load_config_yaml(std::string_view text, const std::string& source);
// Sets the keys a YAML text holds over `config`, the others kept: Bridge's --config-file, a recipe's overrides as a
// file (OmegaConf merges it over the recipe's ConfigContainer). The same checks and messages as a recipe's.
void merge_config_yaml(Config& config, std::string_view text, const std::string& source);

// ---- Overrides (config_overrides.cpp) -------------------------------------------------------------
// Applies "section.key=value"; value is a YAML scalar or flow list ("attn,mlp" and "[attn, mlp]" are
// the same list; an empty value or null unsets an optional key). Throws ConfigError when malformed.
void apply_override(Config& config, std::string_view override_text);
void apply_overrides(Config& config, const std::vector<std::string>& overrides);
// True when the text has the shape of an override (contains '=') rather than a recipe name/path.
bool looks_like_override(std::string_view text);
// True when the text before its '=' has an override key's shape, section.key of letters, digits and _ (what
// apply_override takes), rather than merely holding an '=' ("export X=1").
bool looks_like_dotted_override(std::string_view text);
// Whether a command's first argument is its recipe: anything but an override, and an existing file even when its
// name holds an '=' (train, validate and config show read it alike).
bool is_recipe_argument(const std::string& argument);

// ---- YAML out (config_emit.cpp) -------------------------------------------------------------------
// The config as YAML that load_config_yaml reads back to the same config. `header` becomes leading
// comment lines.
// How emit_yaml writes Config::derived_keys: their values (`config show`, the checkpoints' config), or null with the
// value in a comment ("ffn_hidden_size: null  # = 512 (MLP width; null = 4 * hidden_size)"), as a run's config.yaml.
enum class EmitDerived { as_values, as_null };
std::string emit_yaml(const Config& config, const std::string& header = "",
                      EmitDerived derived = EmitDerived::as_values);

// ---- Recipes (config_recipes.cpp) ----------------------------------------------------------------
// recipes/**/*.yaml are embedded at build time (cmake/EmbedRecipes.cmake), so a shipped recipe loads
// from any working directory.
struct EmbeddedRecipe {
  const char* name;  // "llama/tiny" (path under recipes/, without .yaml)
  const char* text;
};
const std::vector<EmbeddedRecipe>& embedded_recipes();  // generated: sg_embedded_recipes.cpp

inline constexpr const char* kDefaultRecipe = "llama/demo";

struct RecipeText {
  std::string name;    // "llama/tiny" for a shipped recipe, else the path as given
  std::string source;  // for messages: the file path, or "recipes/llama/tiny.yaml" when embedded
  std::string text;
  bool embedded = false;  // read from the copy built into the binary
};

// Names of the shipped recipes, sorted.
std::vector<std::string> shipped_recipe_names();
// Resolves RECIPE: an existing file path wins; otherwise a shipped name ("llama/tiny", "tiny",
// "recipes/llama/tiny.yaml"). Throws ConfigError naming the shipped recipes when nothing matches.
RecipeText find_recipe(std::string_view name_or_path);
// find_recipe + load_config_yaml + apply_overrides (not yet validated or normalized).
Config load_config(std::string_view name_or_path, const std::vector<std::string>& overrides = {});
// Bridge's order: the recipe, then each --config-file (merge_config_yaml, in order), then the dotted overrides.
Config load_config(std::string_view name_or_path, const std::vector<std::string>& config_files,
                   const std::vector<std::string>& overrides);
// The same from a recipe already found (find_recipe), for a command that also prints where it came from.
Config load_config(const RecipeText& recipe, const std::vector<std::string>& config_files,
                   const std::vector<std::string>& overrides);
// Merges the YAML file at `path` over `config`; a file that cannot be read is an error naming it.
void merge_config_file(Config& config, const std::string& path);

}  // namespace sg::config
