#pragma once
// Megatron-Bridge keys stepgraph accepts without implementing them: the one table of them. Bridge's recipes
// (its common pretraining settings, the Llama, Qwen3-MoE and NemotronH recipes, the logger's W&B keys) set them,
// and each has values that change nothing here (moe_grouped_gemm: the experts always run as grouped GEMMs;
// model.context_parallel_size 1; train.manual_gc: no Python garbage collector). Such a key loads from YAML and
// overrides with its value kept as written, prints in `config show` only when set (a config without them emits,
// and hashes, as before), and validate() notes the neutral values and refuses the others with the fix
// (bridge_inert_keys.cpp). docs/configuration.md's "Megatron-Bridge keys accepted without effect" lists them
// (tests/config/bridge_inert_keys_test.cpp holds the two together).
#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace sg::config {

struct Config;
struct Violation;
struct Note;

// Which written values of a key change nothing in stepgraph. Unset (null) always changes nothing.
enum class InertValues : uint8_t {
  any,       // every value: a kernel, schedule, communication or logging choice
  any_bool,  // true or false
  listed,    // BridgeInertKey::neutral's values (numbers compare as numbers, YAML booleans as booleans)
  copied,    // true or false, which validate copies over another key (mixed_precision's over ddp's, as Bridge does)
};

struct BridgeInertKey {
  const char* section;
  const char* key;
  InertValues accepts;
  const char* neutral;  // with `listed`: the neutral values, comma-separated; "": only unset
  const char* what;     // what the key does in Megatron
  const char* effect;   // why a neutral value changes nothing in stepgraph: the validation note's words
};

inline constexpr const char* kWandbEffect =
    "stepgraph does not log to Weights & Biases; the metrics go to the run folder's metrics.jsonl and, with "
    "logger.tensorboard_dir, to TensorBoard event files";

inline constexpr const char* kNoPipelineEffect =
    "no pipeline parallelism (model.pipeline_model_parallel_size 1): nothing is sent between stages";
inline constexpr const char* kHfMetadataEffect =
    "metadata: the model is the config's keys (checkpoint.pretrained_checkpoint loads Hugging Face weights)";
inline constexpr const char* kNoPythonEffect = "stepgraph is not Python: no garbage collector";
inline constexpr const char* kScheduleEffect = "a schedule: the all-gathered weights are the same";
inline constexpr const char* kFp32Spellings = "fp32, float32, torch.float32";  // Bridge's spellings of fp32
inline constexpr const char* kLoaderEffect =
    "stepgraph reads its batches with its own loader (no PyTorch DataLoader workers or builder threads)";
// Precision (Megatron's TransformerConfig and OptimizerConfig, Bridge's MixedPrecisionConfig): stepgraph trains in bf16
// mixed precision, as Bridge's bf16_mixed recipe does.
inline constexpr const char* kBf16Effect = "stepgraph trains in bf16 mixed precision: bf16 compute over fp32 main weights";
inline constexpr const char* kParamsDtypes = "fp32, float32, torch.float32, bf16, bfloat16, torch.bfloat16";
inline constexpr const char* kParamsDtypeEffect =
    "stepgraph creates the weights as fp32 main weights and computes with their bf16 copy, as Megatron's bf16 mixed "
    "precision does from either dtype";
inline constexpr const char* kFp8Effect = "read only with fp8 set, which stepgraph does not implement (refused)";
inline constexpr const char* kFp4Effect = "read only with fp4 set, which stepgraph does not implement (refused)";
inline constexpr const char* kLowPrecisionEffect =
    "read only with fp8 or fp4 set, which stepgraph does not implement (refused)";
inline constexpr const char* kFp16Effect =
    "read only with fp16 (dynamic loss scaling), which stepgraph does not implement (refused)";
inline constexpr const char* kAutocastEffect = "read only with autocast on, which stepgraph does not implement (refused)";
inline constexpr const char* kWarningOnlyEffect =
    "a non-fatal check: with rerun_state_machine.rerun_mode disabled Megatron only logs a warning; stepgraph does "
    "not check";

// Emission order within each section: the table's. Neutral sets follow the semantics of Megatron's TransformerConfig,
// ModelParallelConfig, OptimizerConfig, DistributedDataParallelConfig and megatron/training/config, and of Bridge's
// overrides of them (each key's `what`): values that change nothing on one GPU or with plain data parallelism, in
// bf16, without tensor, pipeline or context parallelism.
inline constexpr BridgeInertKey kBridgeInertKeys[] = {
    {.section = "model", .key = "moe_grouped_gemm", .accepts = InertValues::any_bool, .neutral = "",
     .what = "run a layer's local experts as one grouped GEMM (false: Megatron's SequentialMLP, a GEMM per expert)",
     .effect = "the experts always run as grouped GEMMs, which compute what per-expert GEMMs do"},
    {.section = "model", .key = "moe_permute_fusion", .accepts = InertValues::any_bool, .neutral = "",
     .what = "fused token permute and unpermute kernels", .effect = "a kernel choice"},
    {.section = "model", .key = "moe_router_fusion", .accepts = InertValues::any_bool, .neutral = "",
     .what = "fused top-k routing and aux-loss kernels", .effect = "a kernel choice"},
    {.section = "model", .key = "moe_use_legacy_grouped_gemm", .accepts = InertValues::any_bool, .neutral = "",
     .what = "Megatron's legacy GroupedMLP instead of Transformer Engine's grouped GEMM (removed from Megatron "
             "in 2026)",
     .effect = "a kernel choice"},
    {.section = "model", .key = "moe_router_padding_for_fp8", .accepts = InertValues::any_bool, .neutral = "",
     .what = "pad each expert's token count to a multiple of 16 for FP8 GEMMs (padded rows carry probability 0)",
     .effect = "stepgraph computes in bf16: no FP8 padding"},
    {.section = "model", .key = "moe_shared_expert_overlap", .accepts = InertValues::any_bool, .neutral = "",
     .what = "overlap the shared expert with the token dispatch",
     .effect = "a schedule: the shared expert computes the same"},
    {.section = "model", .key = "moe_per_layer_logging", .accepts = InertValues::any_bool, .neutral = "",
     .what = "log the aux and z losses of every MoE layer", .effect = "logging only"},
    {.section = "model", .key = "moe_flex_dispatcher_backend", .accepts = InertValues::any, .neutral = "",
     .what = "communication backend of the flex token dispatcher (deepep, hybridep, ncclep)",
     .effect = "a communication choice"},
    {.section = "model", .key = "moe_hybridep_num_sms", .accepts = InertValues::any, .neutral = "",
     .what = "SMs HybridEP's dispatch and combine use", .effect = "a communication choice"},
    {.section = "model", .key = "moe_enable_deepep", .accepts = InertValues::listed, .neutral = "false",
     .what = "DeepEP token dispatch (Megatron switches to the flex dispatcher)",
     .effect = "false: the dispatcher is moe_token_dispatcher_type's"},
    {.section = "model", .key = "moe_router_dtype", .accepts = InertValues::listed, .neutral = "fp32",
     .what = "dtype of the router's scores and of the weighting of the expert outputs (fp32, fp64; unset: the "
             "model's dtype)",
     .effect = "the router always computes in fp32"},
    {.section = "model", .key = "moe_input_jitter_eps", .accepts = InertValues::listed, .neutral = "0",
     .what = "multiply the router's input by uniform noise in [1 - eps, 1 + eps]", .effect = "eps 0 adds no noise"},
    {.section = "model", .key = "moe_router_num_groups", .accepts = InertValues::listed, .neutral = "1",
     .what = "group-limited routing: the experts form this many groups", .effect = "one group: plain top-k routing"},
    {.section = "model", .key = "moe_router_group_topk", .accepts = InertValues::listed, .neutral = "1",
     .what = "group-limited routing: the groups each token may use", .effect = "one group: plain top-k routing"},
    {.section = "model", .key = "moe_router_topk_limited_devices", .accepts = InertValues::listed, .neutral = "",
     .what = "device-limited routing (deprecated for moe_router_num_groups)", .effect = ""},
    {.section = "model", .key = "moe_router_force_load_balancing", .accepts = InertValues::listed, .neutral = "false",
     .what = "benchmarking: random router scores, so the experts get even loads",
     .effect = "false: the router's own scores"},
    {.section = "model", .key = "moe_apply_probs_on_input", .accepts = InertValues::listed, .neutral = "false",
     .what = "scale the expert's input by the routing probability instead of its output",
     .effect = "false: the probability scales the expert's output"},
    {.section = "model", .key = "moe_latent_size", .accepts = InertValues::listed, .neutral = "",
     .what = "project the MoE layer's input to a latent width of this size", .effect = ""},
    {.section = "model", .key = "moe_token_dropping", .accepts = InertValues::listed, .neutral = "false",
     .what = "GShard-style token dropping (unsupported in Megatron too; token dropping is moe_expert_capacity_factor)",
     .effect = "false: off"},
    {.section = "model", .key = "moe_expert_rank_capacity_factor", .accepts = InertValues::listed, .neutral = "",
     .what = "token budget of each expert-parallel rank (flex dispatcher)", .effect = ""},
    {.section = "model", .key = "moe_layer_recompute", .accepts = InertValues::listed, .neutral = "false",
     .what = "recompute each MoE layer in the backward; Megatron turns it into recompute_granularity selective "
             "with moe in recompute_modules, which stepgraph has",
     .effect = "false: off"},
    {.section = "model", .key = "expert_tensor_parallel_size", .accepts = InertValues::listed, .neutral = "1",
     .what = "tensor parallelism inside the experts (unset: tensor_model_parallel_size)",
     .effect = "1: the experts are not split"},
    {.section = "model", .key = "hybrid_attention_ratio", .accepts = InertValues::listed, .neutral = "0",
     .what = "share of attention layers when Megatron lays out the hybrid stack itself (deprecated; Megatron "
             "refuses it with a layer pattern): write the layers in hybrid_override_pattern",
     .effect = "0: the layers are hybrid_override_pattern's"},
    {.section = "model", .key = "hybrid_mlp_ratio", .accepts = InertValues::listed, .neutral = "0",
     .what = "share of MLP layers when Megatron lays out the hybrid stack itself (deprecated; Megatron refuses "
             "it with a layer pattern): write the layers in hybrid_override_pattern",
     .effect = "0: the layers are hybrid_override_pattern's"},
    {.section = "model", .key = "mtp_num_layers", .accepts = InertValues::listed, .neutral = "0",
     .what = "multi-token prediction layers", .effect = "0: no multi-token prediction"},
    {.section = "model", .key = "mtp_hybrid_override_pattern", .accepts = InertValues::listed, .neutral = "",
     .what = "layer pattern of the multi-token prediction layers (deprecated)", .effect = ""},
    {.section = "model", .key = "use_mamba_mem_eff_path", .accepts = InertValues::any_bool, .neutral = "",
     .what = "Megatron's fused memory-efficient Mamba kernels", .effect = "a kernel choice"},
    {.section = "model", .key = "mamba_training_ssm_states_dtype", .accepts = InertValues::listed, .neutral = "",
     .what = "dtype of the Mamba scan's inter-chunk states in training (unset: the activations' dtype)",
     .effect = ""},
    {.section = "model", .key = "context_parallel_size", .accepts = InertValues::listed, .neutral = "1",
     .what = "context parallelism: each rank holds a slice of every sequence",
     .effect = "1: every rank holds whole sequences"},
    {.section = "model", .key = "sequence_parallel", .accepts = InertValues::listed, .neutral = "false",
     .what = "with tensor parallelism, split the norms' and dropouts' activations along the sequence (Megatron "
             "refuses it without tensor parallelism)",
     .effect = "false: off"},
    {.section = "model", .key = "virtual_pipeline_model_parallel_size", .accepts = InertValues::listed,
     .neutral = "", .what = "interleaved pipeline schedule: model chunks per pipeline rank", .effect = ""},
    {.section = "model", .key = "pipeline_dtype", .accepts = InertValues::any, .neutral = "",
     .what = "dtype of the activations pipeline stages send each other", .effect = kNoPipelineEffect},
    {.section = "model", .key = "pipeline_model_parallel_layout", .accepts = InertValues::listed, .neutral = "",
     .what = "the layers of each pipeline stage, written out as Megatron's layout string", .effect = ""},
    {.section = "model", .key = "account_for_embedding_in_pipeline_split", .accepts = InertValues::listed,
     .neutral = "false", .what = "count the embedding as a layer when the layers are split into pipeline stages",
     .effect = "false: off"},
    {.section = "model", .key = "account_for_loss_in_pipeline_split", .accepts = InertValues::listed,
     .neutral = "false", .what = "count the loss as a layer when the layers are split into pipeline stages",
     .effect = "false: off"},
    {.section = "model", .key = "transformer_impl", .accepts = InertValues::listed,
     .neutral = "transformer_engine, local, inference_optimized",
     .what = "the layers' modules: Transformer Engine's, Megatron's own (local) or its inference ones",
     .effect = "a kernel choice"},
    {.section = "model", .key = "attention_backend", .accepts = InertValues::any, .neutral = "",
     .what = "attention kernel: auto (Transformer Engine picks), flash, fused, unfused, local",
     .effect = "a kernel choice"},
    {.section = "model", .key = "apply_rope_fusion", .accepts = InertValues::any_bool, .neutral = "",
     .what = "fused RoPE kernel", .effect = "a kernel choice"},
    {.section = "model", .key = "bias_activation_fusion", .accepts = InertValues::any_bool, .neutral = "",
     .what = "fuse the bias add with the MLP activation", .effect = "a kernel choice"},
    {.section = "model", .key = "masked_softmax_fusion", .accepts = InertValues::any_bool, .neutral = "",
     .what = "fused scaled, masked softmax kernel (unfused attention)", .effect = "a kernel choice"},
    {.section = "model", .key = "persist_layer_norm", .accepts = InertValues::any_bool, .neutral = "",
     .what = "Apex's persistent fused LayerNorm kernel", .effect = "a kernel choice"},
    {.section = "model", .key = "bias_dropout_fusion", .accepts = InertValues::any_bool, .neutral = "",
     .what = "fuse the bias add, dropout and residual add", .effect = "a kernel choice"},
    {.section = "model", .key = "cross_entropy_loss_fusion", .accepts = InertValues::any_bool, .neutral = "",
     .what = "fused vocabulary-parallel cross-entropy kernel", .effect = "a kernel choice"},
    {.section = "model", .key = "cross_entropy_fusion_impl", .accepts = InertValues::listed, .neutral = "native, te",
     .what = "the fused cross entropy's implementation: Megatron's (native) or Transformer Engine's (te)",
     .effect = "a kernel choice"},
    {.section = "model", .key = "use_fused_weighted_squared_relu", .accepts = InertValues::any_bool, .neutral = "",
     .what = "fused kernel of the experts' squared ReLU weighted by the routing probability",
     .effect = "a kernel choice"},
    {.section = "model", .key = "fine_grained_activation_offloading", .accepts = InertValues::listed,
     .neutral = "false", .what = "offload the inputs of the modules in offload_modules to host memory",
     .effect = "false: off"},
    {.section = "model", .key = "offload_modules", .accepts = InertValues::listed, .neutral = "",
     .what = "the modules whose inputs fine_grained_activation_offloading offloads", .effect = ""},
    {.section = "model", .key = "cp_comm_type", .accepts = InertValues::any, .neutral = "",
     .what = "context parallelism's communication: p2p, all_gather, a2a, a2a+p2p",
     .effect = "no context parallelism (context_parallel_size 1): nothing to communicate"},
    {.section = "model", .key = "hf_model_id", .accepts = InertValues::any, .neutral = "",
     .what = "Hugging Face model the provider was built from (checkpoint metadata)", .effect = kHfMetadataEffect},
    {.section = "model", .key = "hf_model_revision", .accepts = InertValues::any, .neutral = "",
     .what = "revision of that Hugging Face model", .effect = kHfMetadataEffect},
    {.section = "model", .key = "normalization", .accepts = InertValues::listed, .neutral = "RMSNorm",
     .what = "the layers' norm: LayerNorm (Megatron's default) or RMSNorm", .effect = "the norms are RMSNorm"},
    {.section = "model", .key = "moe_flex_dispatcher_num_sms", .accepts = InertValues::any, .neutral = "",
     .what = "SMs the flex token dispatcher's communication uses (every backend)",
     .effect = "a communication choice"},
    {.section = "train", .key = "manual_gc", .accepts = InertValues::any_bool, .neutral = "",
     .what = "turn off Python's automatic garbage collection and collect at fixed steps instead",
     .effect = kNoPythonEffect},
    {.section = "train", .key = "manual_gc_interval", .accepts = InertValues::any, .neutral = "",
     .what = "steps between manual_gc's collections (0: none between steps)", .effect = kNoPythonEffect},
    {.section = "train", .key = "manual_gc_eval", .accepts = InertValues::any, .neutral = "",
     .what = "with manual_gc, collect before and after each evaluation", .effect = kNoPythonEffect},
    {.section = "train", .key = "empty_unused_memory_level", .accepts = InertValues::listed, .neutral = "0, 1, 2",
     .what = "return PyTorch's cached device memory every step (torch.cuda.empty_cache): 0 never, 1 before the "
             "optimizer step, 2 also after it",
     .effect = "stepgraph plans its device memory before the first step: no allocator cache to empty"},
    {.section = "train", .key = "check_optimizer_step_success", .accepts = InertValues::any_bool, .neutral = "",
     .what = "agree on the optimizer step's success across the model-parallel ranks",
     .effect = "no tensor or pipeline parallelism: each rank holds the whole model"},
    {.section = "optimizer", .key = "optimizer", .accepts = InertValues::listed, .neutral = "adam",
     .what = "the optimizer: adam (AdamW, with Megatron's default decoupled_weight_decay), sgd, lion, muon, ...",
     .effect = "the optimizer is AdamW"},
    {.section = "optimizer", .key = "bf16", .accepts = InertValues::listed, .neutral = "true",
     .what = "bf16 mixed precision (false with fp16 false: fp32 training)",
     .effect = "stepgraph trains in bf16 mixed precision"},
    {.section = "optimizer", .key = "fp16", .accepts = InertValues::listed, .neutral = "false",
     .what = "fp16 mixed precision with loss scaling", .effect = "false: no fp16"},
    {.section = "optimizer", .key = "overlap_param_gather", .accepts = InertValues::any_bool, .neutral = "",
     .what = "overlap the distributed optimizer's all-gather of the updated weights with the next forward (meant "
             "to match ddp.overlap_param_gather)",
     .effect = kScheduleEffect},
    {.section = "optimizer", .key = "main_grads_dtype", .accepts = InertValues::listed, .neutral = kFp32Spellings,
     .what = "dtype of the main gradients with the precision-aware optimizer (fp32 without it; bf16 reduction is "
             "ddp.grad_reduce_in_fp32=false)",
     .effect = "fp32: the main gradients are as ddp.grad_reduce_in_fp32 says"},
    {.section = "optimizer", .key = "main_params_dtype", .accepts = InertValues::listed, .neutral = kFp32Spellings,
     .what = "dtype of the main (master) weights with the precision-aware optimizer (fp32 without it)",
     .effect = "the main weights are fp32"},
    {.section = "scheduler", .key = "override_opt_param_scheduler", .accepts = InertValues::any_bool,
     .neutral = "",
     .what = "on resume, take the schedule (lr, min_lr, warmup, decay iterations and style) from the config, "
             "not the checkpoint (false: a checkpoint whose schedule differs from the config's is an error)",
     .effect = "stepgraph always takes the schedule from the config; a resume whose schedule changed warns that "
               "the configuration changed"},
    {.section = "scheduler", .key = "use_checkpoint_opt_param_scheduler", .accepts = InertValues::listed,
     .neutral = "false", .what = "on resume, take the schedule from the checkpoint instead of the config",
     .effect = "false: the schedule is the config's"},
    {.section = "dataset", .key = "num_workers", .accepts = InertValues::any, .neutral = "",
     .what = "PyTorch DataLoader worker processes", .effect = kLoaderEffect},
    {.section = "dataset", .key = "num_dataset_builder_threads", .accepts = InertValues::any, .neutral = "",
     .what = "threads that build the datasets' sample indices", .effect = kLoaderEffect},
    {.section = "dataset", .key = "data_sharding", .accepts = InertValues::any_bool, .neutral = "",
     .what = "with dataloader_type cyclic, each data-parallel rank draws from its own shard of the samples",
     .effect = "used only by dataloader_type cyclic"},
    {.section = "dataset", .key = "dataloader_type", .accepts = InertValues::listed, .neutral = "single",
     .what = "the sampler: single (the dataset's sample order, read in sequence), cyclic (reshuffled every "
             "epoch), batch, external",
     .effect = "single: the samples are read in the dataset's order"},
    {.section = "dataset", .key = "mmap_bin_files", .accepts = InertValues::any_bool, .neutral = "",
     .what = "memory-map the .bin files (false: read them)",
     .effect = "stepgraph memory-maps them: the tokens are the same"},
    {.section = "dataset", .key = "skip_getting_attention_mask_from_dataset", .accepts = InertValues::any_bool,
     .neutral = "",
     .what = "no attention mask from the dataset: the attention kernel masks causally (false: the dataset's "
             "causal mask)",
     .effect = "the attention is causal by construction (with reset_attention_mask false the dataset's mask is "
               "the causal one)"},
    {.section = "dataset", .key = "reset_position_ids", .accepts = InertValues::listed, .neutral = "false",
     .what = "restart the position ids after each end-of-document token",
     .effect = "false: positions run over the whole sequence"},
    {.section = "dataset", .key = "reset_attention_mask", .accepts = InertValues::listed, .neutral = "false",
     .what = "no attention across end-of-document tokens", .effect = "false: attention spans the whole sequence"},
    {.section = "checkpoint", .key = "ckpt_format", .accepts = InertValues::listed,
     .neutral = "torch_dist, torch, torch_dcp, fsdp_dtensor", .what = "Megatron's checkpoint format",
     .effect = "stepgraph writes its own checkpoint folders (safetensors)"},
    {.section = "checkpoint", .key = "fully_parallel_save", .accepts = InertValues::any_bool, .neutral = "",
     .what = "spread the writing of a checkpoint over the data-parallel ranks",
     .effect = "an I/O choice: the checkpoint holds the same tensors"},
    {.section = "checkpoint", .key = "async_save", .accepts = InertValues::listed, .neutral = "false",
     .what = "write the checkpoint in the background while training goes on",
     .effect = "false: a save finishes before training goes on, as stepgraph's do"},
    {.section = "checkpoint", .key = "save_optim", .accepts = InertValues::listed, .neutral = "true",
     .what = "save the optimizer state (false: the weights only)",
     .effect = "true: stepgraph's checkpoints hold the optimizer state"},
    {.section = "checkpoint", .key = "save_rng", .accepts = InertValues::listed, .neutral = "true",
     .what = "save the RNG state", .effect = "true: stepgraph's checkpoints hold the RNG state"},
    {.section = "checkpoint", .key = "load_optim", .accepts = InertValues::listed, .neutral = "true",
     .what = "load the optimizer state on resume (false: the weights only, a fresh optimizer)",
     .effect = "true: a resume loads the optimizer state"},
    {.section = "checkpoint", .key = "load_rng", .accepts = InertValues::listed, .neutral = "true",
     .what = "load the RNG state on resume", .effect = "true: a resume loads the RNG state"},
    {.section = "checkpoint", .key = "dist_ckpt_strictness", .accepts = InertValues::listed,
     .neutral = "assume_ok_unexpected, log_unexpected, log_all, raise_unexpected, raise_all, return_unexpected, "
                "return_all, ignore_all",
     .what = "what loading a distributed checkpoint does with missing or unexpected tensors",
     .effect = "stepgraph refuses a checkpoint whose tensors differ from the model's (as raise_all)"},
    {.section = "logger", .key = "wandb_project", .accepts = InertValues::any, .neutral = "",
     .what = "Weights & Biases project", .effect = kWandbEffect},
    {.section = "logger", .key = "wandb_exp_name", .accepts = InertValues::any, .neutral = "",
     .what = "Weights & Biases run name", .effect = kWandbEffect},
    {.section = "logger", .key = "wandb_entity", .accepts = InertValues::any, .neutral = "",
     .what = "Weights & Biases team or user", .effect = kWandbEffect},
    {.section = "logger", .key = "wandb_save_dir", .accepts = InertValues::any, .neutral = "",
     .what = "Weights & Biases local folder", .effect = kWandbEffect},
    {.section = "logger", .key = "log_timers_to_tensorboard", .accepts = InertValues::any_bool, .neutral = "",
     .what = "write the step's timers to TensorBoard", .effect = "logging only"},
    {.section = "logger", .key = "log_throughput", .accepts = InertValues::any_bool, .neutral = "",
     .what = "log the throughput per GPU", .effect = "logging only"},
    {.section = "logger", .key = "timing_log_level", .accepts = InertValues::listed, .neutral = "-1, 0, 1, 2",
     .what = "which timers are measured and logged (-1 none, 0 the iteration, 1 and 2 finer ones, with barriers)",
     .effect = "logging only"},
    {.section = "logger", .key = "log_params_norm", .accepts = InertValues::any_bool, .neutral = "",
     .what = "compute and log the norm of the weights", .effect = "logging only"},
    {.section = "rng", .key = "data_parallel_random_init", .accepts = InertValues::listed, .neutral = "false",
     .what = "initialize the weights with another seed on each data-parallel rank",
     .effect = "false: every rank starts from the same weights"},
    {.section = "rerun_state_machine", .key = "rerun_mode", .accepts = InertValues::listed, .neutral = "disabled",
     .what = "Megatron's rerun state machine: validate_results reruns a step whose loss or gradients look wrong, "
             "to tell a transient fault from a persistent one; report_determinism_stats reruns every step",
     .effect = "disabled: a NaN loss stops the run (check_for_nan_in_loss), as in stepgraph"},
    {.section = "rerun_state_machine", .key = "check_for_spiky_loss", .accepts = InertValues::any_bool,
     .neutral = "", .what = "flag a loss far above the largest one seen (spiky_loss_factor times)",
     .effect = kWarningOnlyEffect},
    {.section = "ddp", .key = "overlap_param_gather", .accepts = InertValues::any_bool, .neutral = "",
     .what = "overlap the distributed optimizer's all-gather of the updated weights with the next forward",
     .effect = kScheduleEffect},
    {.section = "ddp", .key = "average_in_collective", .accepts = InertValues::any_bool, .neutral = "",
     .what = "average the gradients in the collective instead of dividing by the data-parallel size before the sum",
     .effect = "a rounding choice: stepgraph scales the loss by 1 / (microbatches x data-parallel size), so the "
               "sum over the ranks is the mean"},
    {.section = "ddp", .key = "data_parallel_sharding_strategy", .accepts = InertValues::listed,
     .neutral = "no_shard, optim, optim_grads, optim_grads_params",
     .what = "Megatron-FSDP's sharding of the optimizer state, gradients and weights; read only with "
             "use_megatron_fsdp",
     .effect = "without use_megatron_fsdp Megatron does not read it either: the optimizer state is sharded as "
               "optimizer.use_distributed_optimizer says"},
    {.section = "ddp", .key = "check_for_large_grads", .accepts = InertValues::any_bool, .neutral = "",
     .what = "flag a gradient norm far above the ones seen, before the data-parallel reduction",
     .effect = kWarningOnlyEffect},
    {.section = "ddp", .key = "use_megatron_fsdp", .accepts = InertValues::listed, .neutral = "false",
     .what = "Megatron-FSDP: weights, gradients and optimizer state sharded over the data-parallel ranks",
     .effect = "false: data parallelism, the optimizer state sharded with optimizer.use_distributed_optimizer"},
    {.section = "ddp", .key = "num_distributed_optimizer_instances", .accepts = InertValues::listed,
     .neutral = "1",
     .what = "copies of the distributed optimizer, each sharded over a part of the data-parallel ranks",
     .effect = "1: one distributed optimizer over all data-parallel ranks"},    // Precision keys: the model's and optimizer's, and Bridge's mixed_precision section (config/mixed_precision.h).
    {.section = "model", .key = "fp16", .accepts = InertValues::listed, .neutral = "false",
     .what = "fp16 mixed precision with loss scaling", .effect = "false: no fp16"},
    {.section = "model", .key = "bf16", .accepts = InertValues::listed, .neutral = "true",
     .what = "bf16 mixed precision (false with fp16 false: fp32 training)", .effect = kBf16Effect},
    {.section = "model", .key = "params_dtype", .accepts = InertValues::listed, .neutral = kParamsDtypes,
     .what = "dtype the weights are created in (bf16 or fp16 mixed precision then computes with a bf16 or fp16 copy)", .effect = kParamsDtypeEffect},
    {.section = "model", .key = "enable_autocast", .accepts = InertValues::listed, .neutral = "false",
     .what = "run the model under torch.autocast", .effect = "false: off"},
    {.section = "model", .key = "autocast_dtype", .accepts = InertValues::any, .neutral = "",
     .what = "dtype of torch.autocast, read only with enable_autocast", .effect = kAutocastEffect},
    {.section = "model", .key = "fp8", .accepts = InertValues::listed, .neutral = "",
     .what = "FP8 GEMMs through Transformer Engine: e4m3 or hybrid", .effect = ""},
    {.section = "model", .key = "fp8_recipe", .accepts = InertValues::any, .neutral = "",
     .what = "FP8 scaling recipe: tensorwise, delayed, mxfp8 or blockwise", .effect = kFp8Effect},
    {.section = "model", .key = "fp8_param", .accepts = InertValues::any_bool, .neutral = "",
     .what = "keep the weights in FP8", .effect = kFp8Effect},
    {.section = "model", .key = "fp8_margin", .accepts = InertValues::any, .neutral = "",
     .what = "margin of the FP8 scaling factor", .effect = kFp8Effect},
    {.section = "model", .key = "fp8_amax_history_len", .accepts = InertValues::any, .neutral = "",
     .what = "amax history length of FP8 delayed scaling", .effect = kFp8Effect},
    {.section = "model", .key = "fp8_amax_compute_algo", .accepts = InertValues::any, .neutral = "",
     .what = "amax choice of FP8 delayed scaling: most_recent or max", .effect = kFp8Effect},
    {.section = "model", .key = "fp8_wgrad", .accepts = InertValues::any, .neutral = "",
     .what = "FP8 weight-gradient GEMMs (false: in higher precision)", .effect = kFp8Effect},
    {.section = "model", .key = "fp8_dot_product_attention", .accepts = InertValues::any, .neutral = "",
     .what = "FP8 attention", .effect = kFp8Effect},
    {.section = "model", .key = "fp8_multi_head_attention", .accepts = InertValues::any, .neutral = "",
     .what = "FP8 attention projections", .effect = kFp8Effect},
    {.section = "model", .key = "first_last_layers_bf16", .accepts = InertValues::any, .neutral = "",
     .what = "keep the first and last layers in bf16 under FP8 or FP4", .effect = kLowPrecisionEffect},
    {.section = "model", .key = "num_layers_at_start_in_bf16", .accepts = InertValues::any, .neutral = "",
     .what = "with first_last_layers_bf16: the leading layers kept in bf16", .effect = kLowPrecisionEffect},
    {.section = "model", .key = "num_layers_at_end_in_bf16", .accepts = InertValues::any, .neutral = "",
     .what = "with first_last_layers_bf16: the trailing layers kept in bf16", .effect = kLowPrecisionEffect},
    {.section = "model", .key = "fp4", .accepts = InertValues::listed, .neutral = "",
     .what = "FP4 GEMMs through Transformer Engine: e2m1", .effect = ""},
    {.section = "model", .key = "fp4_recipe", .accepts = InertValues::any, .neutral = "",
     .what = "FP4 scaling recipe: nvfp4", .effect = kFp4Effect},
    {.section = "model", .key = "fp4_param", .accepts = InertValues::any_bool, .neutral = "",
     .what = "keep the weights in FP4", .effect = kFp4Effect},
    {.section = "optimizer", .key = "params_dtype", .accepts = InertValues::listed, .neutral = kParamsDtypes,
     .what = "dtype of the model's weights as the optimizer sees them", .effect = kParamsDtypeEffect},
    {.section = "optimizer", .key = "loss_scale", .accepts = InertValues::listed, .neutral = "",
     .what = "a constant loss scale (in bf16 too: the loss is multiplied by it and the gradients divided)", .effect = ""},
    {.section = "optimizer", .key = "initial_loss_scale", .accepts = InertValues::any, .neutral = "",
     .what = "start of the dynamic fp16 loss scale", .effect = kFp16Effect},
    {.section = "optimizer", .key = "min_loss_scale", .accepts = InertValues::any, .neutral = "",
     .what = "floor of the dynamic fp16 loss scale", .effect = kFp16Effect},
    {.section = "optimizer", .key = "loss_scale_window", .accepts = InertValues::any, .neutral = "",
     .what = "steps without overflow before the dynamic fp16 loss scale grows", .effect = kFp16Effect},
    {.section = "optimizer", .key = "hysteresis", .accepts = InertValues::any, .neutral = "",
     .what = "overflows tolerated before the dynamic fp16 loss scale shrinks", .effect = kFp16Effect},
    {.section = "mixed_precision", .key = "fp32", .accepts = InertValues::listed, .neutral = "false",
     .what = "fp32 training", .effect = "false: stepgraph trains in bf16 mixed precision"},
    {.section = "mixed_precision", .key = "fp16", .accepts = InertValues::listed, .neutral = "false",
     .what = "fp16 mixed precision with loss scaling (the fp16_* recipes)", .effect = "false: no fp16"},
    {.section = "mixed_precision", .key = "bf16", .accepts = InertValues::listed, .neutral = "true",
     .what = "bf16 mixed precision (the bf16_* recipes set it; the dataclass default is false)", .effect = kBf16Effect},
    {.section = "mixed_precision", .key = "params_dtype", .accepts = InertValues::listed, .neutral = kParamsDtypes,
     .what = "dtype the weights are created in (copied to model and optimizer)", .effect = kParamsDtypeEffect},
    {.section = "mixed_precision", .key = "pipeline_dtype", .accepts = InertValues::any, .neutral = "",
     .what = "dtype of the activations pipeline stages send each other", .effect = kNoPipelineEffect},
    {.section = "mixed_precision", .key = "autocast_dtype", .accepts = InertValues::any, .neutral = "",
     .what = "dtype of torch.autocast, read only with autocast_enabled", .effect = kAutocastEffect},
    {.section = "mixed_precision", .key = "autocast_enabled", .accepts = InertValues::listed, .neutral = "false",
     .what = "run the model under torch.autocast", .effect = "false: off"},
    {.section = "mixed_precision", .key = "grad_reduce_in_fp32", .accepts = InertValues::copied, .neutral = "",
     .what = "main gradients stored and reduced in fp32 (true: the dataclass default and every bf16 recipe's) or in bf16 (false)", .effect = "validate copies it over ddp.grad_reduce_in_fp32, as Bridge does"},
    {.section = "mixed_precision", .key = "fp8", .accepts = InertValues::listed, .neutral = "",
     .what = "FP8 training: e4m3 or hybrid (the *_fp8_* and *_mxfp8_* recipes set it)", .effect = ""},
    {.section = "mixed_precision", .key = "fp8_recipe", .accepts = InertValues::any, .neutral = "",
     .what = "FP8 scaling recipe: tensorwise, delayed, mxfp8 or blockwise", .effect = kFp8Effect},
    {.section = "mixed_precision", .key = "first_last_layers_bf16", .accepts = InertValues::any, .neutral = "",
     .what = "keep the first and last layers in bf16 under FP8 or FP4", .effect = kLowPrecisionEffect},
    {.section = "mixed_precision", .key = "fp8_margin", .accepts = InertValues::any, .neutral = "",
     .what = "margin of the FP8 scaling factor", .effect = kFp8Effect},
    {.section = "mixed_precision", .key = "fp8_amax_history_len", .accepts = InertValues::any, .neutral = "",
     .what = "amax history length of FP8 delayed scaling", .effect = kFp8Effect},
    {.section = "mixed_precision", .key = "fp8_amax_compute_algo", .accepts = InertValues::any, .neutral = "",
     .what = "amax choice of FP8 delayed scaling: most_recent or max", .effect = kFp8Effect},
    {.section = "mixed_precision", .key = "fp8_wgrad", .accepts = InertValues::any, .neutral = "",
     .what = "FP8 weight-gradient GEMMs (false: in higher precision)", .effect = kFp8Effect},
    {.section = "mixed_precision", .key = "fp8_dot_product_attention", .accepts = InertValues::any, .neutral = "",
     .what = "FP8 attention", .effect = kFp8Effect},
    {.section = "mixed_precision", .key = "fp8_multi_head_attention", .accepts = InertValues::any, .neutral = "",
     .what = "FP8 attention projections", .effect = kFp8Effect},
    {.section = "mixed_precision", .key = "fp8_param", .accepts = InertValues::any_bool, .neutral = "",
     .what = "keep the weights in FP8 (kept equal to fp8_param_gather)", .effect = kFp8Effect},
    {.section = "mixed_precision", .key = "fp8_param_gather", .accepts = InertValues::any_bool, .neutral = "",
     .what = "all-gather the weights in FP8", .effect = kFp8Effect},
    {.section = "mixed_precision", .key = "fp4", .accepts = InertValues::listed, .neutral = "",
     .what = "FP4 training: e2m1 (the *_nvfp4_* recipes set it)", .effect = ""},
    {.section = "mixed_precision", .key = "fp4_recipe", .accepts = InertValues::any, .neutral = "",
     .what = "FP4 scaling recipe: nvfp4", .effect = kFp4Effect},
    {.section = "mixed_precision", .key = "fp4_param", .accepts = InertValues::any_bool, .neutral = "",
     .what = "keep the weights in FP4 (kept equal to fp4_param_gather)", .effect = kFp4Effect},
    {.section = "mixed_precision", .key = "fp4_param_gather", .accepts = InertValues::any_bool, .neutral = "",
     .what = "all-gather the weights in FP4", .effect = kFp4Effect},
    {.section = "mixed_precision", .key = "loss_scale", .accepts = InertValues::listed, .neutral = "",
     .what = "a constant loss scale (in bf16 too: the loss is multiplied by it and the gradients divided)", .effect = ""},
    {.section = "mixed_precision", .key = "initial_loss_scale", .accepts = InertValues::any, .neutral = "",
     .what = "start of the dynamic fp16 loss scale", .effect = kFp16Effect},
    {.section = "mixed_precision", .key = "min_loss_scale", .accepts = InertValues::any, .neutral = "",
     .what = "floor of the dynamic fp16 loss scale", .effect = kFp16Effect},
    {.section = "mixed_precision", .key = "loss_scale_window", .accepts = InertValues::any, .neutral = "",
     .what = "steps without overflow before the dynamic fp16 loss scale grows", .effect = kFp16Effect},
    {.section = "mixed_precision", .key = "hysteresis", .accepts = InertValues::any, .neutral = "",
     .what = "overflows tolerated before the dynamic fp16 loss scale shrinks", .effect = kFp16Effect},
    {.section = "mixed_precision", .key = "num_layers_at_start_in_bf16", .accepts = InertValues::any, .neutral = "",
     .what = "with first_last_layers_bf16: the leading layers kept in bf16", .effect = kLowPrecisionEffect},
    {.section = "mixed_precision", .key = "num_layers_at_end_in_bf16", .accepts = InertValues::any, .neutral = "",
     .what = "with first_last_layers_bf16: the trailing layers kept in bf16", .effect = kLowPrecisionEffect},
    {.section = "mixed_precision", .key = "reuse_grad_buf_for_mxfp8_param_ag", .accepts = InertValues::any_bool, .neutral = "",
     .what = "reuse the gradient buffer for the MXFP8 weights' all-gather", .effect = "read only with MXFP8 weights, which stepgraph does not implement (refused)"},
};

// How many of the table's keys belong to `section` (the size of that section's value array).
constexpr size_t bridge_inert_count(std::string_view section) {
  size_t n = 0;
  for (const BridgeInertKey& k : kBridgeInertKeys) n += section == k.section ? 1 : 0;
  return n;
}

// The value of one of these keys as written (the YAML scalar's text: a number or boolean is not interpreted until
// validation). Unset: null.
struct BridgeInertValue {
  std::optional<std::string> text;
  explicit operator bool() const { return text.has_value(); }
};

// A section's values, in the table's order of that section's keys.
template <size_t N>
using BridgeInertValues = std::array<BridgeInertValue, N>;

// Calls visitor(section, key, value, what) for each of `section`'s keys (visit_fields, config.h).
template <class Values, class Visitor>
void visit_bridge_inert(const char* section, Values& values, Visitor& visitor) {
  size_t i = 0;
  for (const BridgeInertKey& k : kBridgeInertKeys) {
    if (std::string_view(section) == k.section) visitor(k.section, k.key, values[i++], k.what);
  }
}

// The table's row of section.key, or nullptr.
const BridgeInertKey* find_bridge_inert_key(std::string_view section, std::string_view key);
// Whether `value` (as written) changes nothing in stepgraph.
bool bridge_inert_neutral(const BridgeInertKey& key, std::string_view value);
// The neutral values besides null, as docs/configuration.md lists them: "any", "true, false", "fp32", "null only".
std::string bridge_inert_neutral_text(const BridgeInertKey& key);

namespace detail {
// A YAML 1.1 boolean as the loader reads one (config_yaml.cpp: yes, On, FALSE, ...): "true", "false", or nullopt.
std::optional<std::string> yaml_bool(std::string_view text);
// The value as YAML: as written when it reads back the same unquoted (true, 0, 1e-3, fp32), else quoted.
std::string format_yaml(const BridgeInertValue& value);
// Rule 16's part for these keys, after the defaults are resolved: one note naming the keys set to neutral values
// (why each changes nothing), a violation for each key set to a value stepgraph does not implement.
void check_bridge_inert_keys(const Config& config, std::vector<Violation>& violations, std::vector<Note>& notes);
}  // namespace detail

}  // namespace sg::config
