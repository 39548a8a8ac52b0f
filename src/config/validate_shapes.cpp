// Rule 16: shapes and values are consistent (Megatron's own asserts, plus the shapes stepgraph's kernels
// are built for: kernels/shape_limits.h, the same functions the kernels check at plan time). Every failure
// names the keys, values and a fix. This file: the order of the checks, the dense model, attention, layers,
// batch, optimizer, data and checkpoint keys; MoE and Mamba have their own files (validate_shapes_checker.h).
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <limits>

#include "config/checkpoint_overrides.h"
#include "config/lr_decay.h"
#include "config/model_config.h"
#include "config/moment_dtype.h"
#include "config/tokenizer_vocab.h"
#include "config/validate_shapes_checker.h"
#include "config/weight_decay.h"
#include "core/paths.h"
#include "core/strings.h"
#include "kernels/shape_limits.h"
#include "model/hf_families.h"
#include "model/recompute.h"
#include "reference/rope_frequencies.h"

namespace sg::config::detail {

void ShapeChecker::run() {
  check_model();
  check_moe();
  check_hybrid();
  check_layers_and_recompute();
  check_kernel_limits();
  check_batch_and_optimizer();
  check_data_and_io();
}

void ShapeChecker::check_model() {
  const ModelConfig& m = c_.model;
  if (m.num_layers > kMaxLayers) {
    fail(strprintf("model.num_layers must be at most %lld: the training step sums the weight gradients of its "
                   "num_layers + 1 RMSNorms in one launch, one grid row each, at most %lld rows",
                   ll(kMaxLayers), ll(kernels::kMaxBatchedColumnSums)),
         {"model.num_layers"}, strprintf("set model.num_layers to a value between 1 and %lld", ll(kMaxLayers)));
  } else {
    size("model.num_layers", m.num_layers, kMaxLayers);
  }
  const bool hidden_ok = size("model.hidden_size", m.hidden_size);
  const bool heads_ok = size("model.num_attention_heads", m.num_attention_heads);
  // The head dimension's own limits (RoPE's even pairs included) are the attention kernel's:
  // check_attention_limits.
  if (m.kv_channels) {
    size("model.kv_channels", *m.kv_channels);
  } else if (hidden_ok && heads_ok && m.hidden_size % m.num_attention_heads != 0) {
    fail("hidden_size must be divisible by num_attention_heads", {"model.hidden_size", "model.num_attention_heads"},
         "choose num_attention_heads dividing hidden_size (head_dim = hidden_size / heads)");
  }
  if (heads_ok && size("model.num_query_groups", m.num_query_groups) &&
      m.num_attention_heads % *m.num_query_groups != 0) {
    fail("num_attention_heads must be divisible by num_query_groups",
         {"model.num_attention_heads", "model.num_query_groups"},
         "choose num_query_groups dividing num_attention_heads (null = one group per head)");
  }
  if (hidden_ok || m.ffn_hidden_size) size("model.ffn_hidden_size", m.ffn_hidden_size);
  size("model.seq_length", m.seq_length);
  // A named tokenizer that was not read leaves vocab_size null (resolve_tokenizer sets it when it reads one):
  // the tokenizer's own error says why, and "there is no tokenizer" would be false.
  if (m.vocab_size) {
    size("model.vocab_size", m.vocab_size);
  } else if (!tokenizer_configured(c_.tokenizer)) {
    fail("model.vocab_size must be set (there is no tokenizer to take it from)",
         {"model.vocab_size", "tokenizer.tokenizer_model"},
         "set model.vocab_size to a positive integer, or tokenizer.tokenizer_type=HuggingFaceTokenizer "
         "tokenizer.tokenizer_model=DIR to take it from the tokenizer (padded)");
  }
  positive("model.rotary_base", m.rotary_base);
  if (m.rope_scaling) positive("model.rope_scaling_factor", m.rope_scaling_factor);
  positive("model.layernorm_epsilon", m.layernorm_epsilon);
  positive("model.init_method_std", m.init_method_std);
  real("model.attention_dropout", m.attention_dropout, 0.0, true, 1.0, false);
  real("model.hidden_dropout", m.hidden_dropout, 0.0, true, 1.0, false);
  size("model.tensor_model_parallel_size", m.tensor_model_parallel_size);
  size("model.pipeline_model_parallel_size", m.pipeline_model_parallel_size);
  size("model.expert_model_parallel_size", m.expert_model_parallel_size);
}

// position_embedding_type, the MLP activation, and the Mamba mixer's shapes and init (when the
// pattern has M layers: check_mamba).
void ShapeChecker::check_hybrid() {
  const ModelConfig& m = c_.model;
  if (m.position_embedding_type) one_of(position_embedding_type_values(), *m.position_embedding_type);
  const std::string activation = resolved_activation_func(m);  // validate rewrote Bridge's aliases already
  const bool swiglu = activation == "silu" && m.gated_linear_unit;
  const bool squared_relu = activation == "squared_relu" && !m.gated_linear_unit;
  const std::string pair = strprintf("activation_func %s with gated_linear_unit %s", m.activation_func.c_str(),
                                     m.gated_linear_unit ? "true" : "false");
  // One activation for the dense MLP layers and the MoE experts (routed and shared), as Megatron's.
  if (!swiglu && !squared_relu) {
    fail(pair + " is not supported", {"model.activation_func", "model.gated_linear_unit"},
         "use activation_func=silu with gated_linear_unit=true (SwiGLU, Llama) or activation_func=squared_relu "
         "with gated_linear_unit=false (Nemotron-H)");
  }
  if (has_layers(model::LayerKind::mamba)) check_mamba();
}

void ShapeChecker::check_layers_and_recompute() {
  const ModelConfig& m = c_.model;
  if (m.hybrid_override_pattern) {
    const std::string& pattern = *m.hybrid_override_pattern;
    // Megatron's '|' (stage) and '/' (MTP) are no layers: the pattern's own error says what to remove.
    const bool separators = pattern.find_first_of("|/") != std::string::npos;
    if (!separators && static_cast<int64_t>(pattern.size()) != m.num_layers) {
      fail(strprintf("hybrid_override_pattern has %zu layers but num_layers is %lld", pattern.size(),
                     static_cast<long long>(m.num_layers)),
           {"model.hybrid_override_pattern", "model.num_layers"},
           strprintf("set model.num_layers=%zu (one layer per pattern character)", pattern.size()));
    }
    if (pattern.find('E') != std::string::npos && m.num_moe_experts.value_or(0) <= 0) {
      fail("hybrid_override_pattern has MoE layers (E) but num_moe_experts is not set",
           {"model.hybrid_override_pattern", "model.num_moe_experts"},
           "set model.num_moe_experts > 0, or use - (dense MLP) instead of E");
    }
  }
  if (m.recompute_granularity) {
    one_of("model.recompute_granularity", *m.recompute_granularity, model::recompute_granularity_names());
  }
  for (const auto& module : m.recompute_modules)
    one_of("model.recompute_modules", module, model::recompute_module_names());
  if (m.recompute_method) one_of("model.recompute_method", *m.recompute_method, model::recompute_method_names());
  if (m.recompute_num_layers) {
    in_range("model.recompute_num_layers", *m.recompute_num_layers, 1, std::max<int64_t>(1, m.num_layers));
  }
}

// The shapes the GPU kernels are built for (kernels/shape_limits.h), per layer kind present. A key that
// failed its own check above is skipped, so one mistake is reported once.
void ShapeChecker::check_kernel_limits() {
  const ModelConfig& m = c_.model;
  if (m.hidden_size >= 1 && m.hidden_size <= kMaxSize) {
    // Every model has the LM head and the RMSNorms (each layer's pre-norm, the final norm).
    const std::string lm_head = kernels::lm_head_hidden_problem(m.hidden_size);
    if (!lm_head.empty()) {
      fail("the LM head refuses hidden_size: " + lm_head, {"model.hidden_size"},
           strprintf("set model.hidden_size to a multiple of 8 (e.g. %lld)", ll(nearest_multiple(m.hidden_size, 8))));
    }
    // The vector path's width: any other hidden_size is the LM head's error above.
    const std::string norm = kernels::rmsnorm_backward_width_problem(m.hidden_size, /*vector_path=*/true);
    if (!norm.empty()) {
      fail("the RMSNorm kernels refuse hidden_size: " + norm, {"model.hidden_size"},
           strprintf("set model.hidden_size to at most %lld", ll(kernels::rmsnorm_backward_max_width(true))));
    }
  }
  if (has_layers(model::LayerKind::attention)) check_attention_limits();
  check_rotary_percent();
  check_longrope();
  if (has_layers(model::LayerKind::moe)) check_moe_limits();
}

void ShapeChecker::check_attention_limits() {
  const ModelConfig& m = c_.model;
  if (m.seq_length >= 1 && m.seq_length <= kMaxSize) {
    const std::string problem = kernels::attention_seq_len_problem(m.seq_length);
    if (!problem.empty()) {
      fail("the attention layers refuse seq_length: " + problem, {"model.seq_length", "dataset.seq_length"},
           strprintf("set model.seq_length (and dataset.seq_length) to at least %lld",
                     ll(kernels::kAttentionMinSeqLen)));
    }
  }
  if (m.kv_channels) {
    const int64_t head_dim = *m.kv_channels;
    if (head_dim < 1 || head_dim > kMaxSize) return;  // reported by check_model
    const std::string problem = kernels::attention_head_dim_problem(head_dim);
    if (problem.empty()) return;
    const int64_t example =
        nearest_multiple(head_dim, kernels::kAttentionHeadDimMultiple, kernels::kAttentionMaxHeadDim);
    fail("the attention layers refuse kv_channels (the head dimension): " + problem, {"model.kv_channels"},
         strprintf("set model.kv_channels to a multiple of 8 at most %lld (e.g. %lld), or null for "
                   "hidden_size / num_attention_heads",
                   ll(kernels::kAttentionMaxHeadDim), ll(example)));
    return;
  }
  const int64_t hidden = m.hidden_size, heads = m.num_attention_heads;
  if (hidden < 1 || hidden > kMaxSize || heads < 1 || heads > kMaxSize || hidden % heads != 0) return;  // reported
  const std::string problem = kernels::attention_head_dim_problem(hidden / heads);
  if (problem.empty()) return;
  // A concrete head count: the nearest one whose head_dim the kernel takes (the larger on a tie).
  int64_t best = 0;
  const auto distance = [heads](int64_t h) { return h > heads ? h - heads : heads - h; };
  for (int64_t d = kernels::kAttentionHeadDimMultiple; d <= kernels::kAttentionMaxHeadDim;
       d += kernels::kAttentionHeadDimMultiple) {
    if (hidden % d != 0 || !kernels::attention_head_dim_problem(d).empty()) continue;
    const int64_t h = hidden / d;  // d grows, so h falls: a tie keeps the larger h found first
    if (best == 0 || distance(h) < distance(best)) best = h;
  }
  const std::string example =
      best > 0 ? strprintf(" (e.g. num_attention_heads=%lld: head_dim %lld, with num_query_groups dividing it)",
                           ll(best), ll(hidden / best))
               : "";
  fail(strprintf("the attention layers refuse head_dim = hidden_size / num_attention_heads = %lld: %s",
                 ll(hidden / heads), problem.c_str()),
       {"model.hidden_size", "model.num_attention_heads"},
       strprintf("choose hidden_size and num_attention_heads so head_dim = hidden_size / num_attention_heads is a "
                 "multiple of 8 at most %lld%s, or set model.kv_channels",
                 ll(kernels::kAttentionMaxHeadDim), example.c_str()));
}

void ShapeChecker::check_rotary_percent() {
  const ModelConfig& m = c_.model;
  if (m.rotary_percent == 1.0) return;
  if (!(m.rotary_percent > 0.0 && m.rotary_percent <= 1.0)) {
    real("model.rotary_percent", m.rotary_percent, 0.0, false, 1.0, true);
    return;
  }
  if (!has_layers(model::LayerKind::attention)) {
    fail("rotary_percent is the share of each attention head RoPE rotates, and this model has no attention layers",
         {"model.rotary_percent", "model.hybrid_override_pattern"}, "remove model.rotary_percent (or set it to 1.0)");
    return;
  }
  if (resolved_position_embedding_type(m) != "rope") {
    fail("rotary_percent is the share of each head RoPE rotates, and this model's attention has no RoPE",
         {"model.rotary_percent", "model.position_embedding_type"},
         "remove model.rotary_percent (or set it to 1.0), or use position_embedding_type=rope");
    return;
  }
  const int64_t heads = m.num_attention_heads;
  if (heads < 1 || (!m.kv_channels && (m.hidden_size < 1 || m.hidden_size % heads != 0))) return;  // reported
  const int64_t head_dim = m.kv_channels.value_or(m.hidden_size / heads);
  const int64_t rotated = resolved_rotary_dim(m);
  if (rotated >= 2 && rotated % 2 == 0) return;
  // A concrete share: the even count nearest to the one asked for, at least 2.
  const int64_t even = std::clamp<int64_t>((rotated + 1) / 2 * 2, 2, head_dim / 2 * 2);
  fail(strprintf("rotary_percent rotates int(head_dim %lld x %g) = %lld dimensions of each head; RoPE rotates pairs, "
                 "so it needs an even count of at least 2",
                 ll(head_dim), m.rotary_percent, ll(rotated)),
       {"model.rotary_percent"},
       strprintf("choose rotary_percent so head_dim x rotary_percent is even, e.g. %g (%lld dimensions)",
                 static_cast<double>(even) / static_cast<double>(head_dim), ll(even)));
}

void ShapeChecker::check_longrope() {
  const ModelConfig& m = c_.model;
  const std::vector<double>&short_list = m.longrope_short_factor, &long_list = m.longrope_long_factor;
  if (short_list.empty() && long_list.empty()) return;
  const std::vector<std::string> keys = {"model.longrope_short_factor", "model.longrope_long_factor"};
  if (short_list.empty() || long_list.empty()) {
    fail(
        "LongRoPE needs both factor lists (one for sequences up to longrope_original_max_position_embeddings, one "
        "for longer ones)",
        keys, "give both lists, or set both to [] (no LongRoPE)");
    return;
  }
  if (!has_layers(model::LayerKind::attention) || resolved_position_embedding_type(m) != "rope") {
    fail("LongRoPE scales RoPE's frequencies, and this model's attention has no RoPE",
         {"model.longrope_short_factor", "model.position_embedding_type"},
         "set the LongRoPE lists to [], or use position_embedding_type=rope");
    return;
  }
  if (m.rope_scaling) {
    fail("LongRoPE and Llama 3 RoPE scaling both scale the frequencies: one model has one of them",
         {"model.rope_scaling", "model.longrope_short_factor"}, "set model.rope_scaling=false, or the lists to []");
  }
  positive("model.longrope_attention_factor", m.longrope_attention_factor);
  size("model.longrope_original_max_position_embeddings", m.longrope_original_max_position_embeddings);
  const int64_t heads = m.num_attention_heads;
  if (heads < 1 || (!m.kv_channels && (m.hidden_size < 1 || m.hidden_size % heads != 0))) return;  // reported
  const int64_t head_dim = m.kv_channels.value_or(m.hidden_size / heads);
  const int64_t rotated = resolved_rotary_dim(m) > 0 ? resolved_rotary_dim(m) : head_dim;
  const int64_t pairs = rotated / 2;
  for (size_t k = 0; k < keys.size(); ++k) {
    const std::vector<double>& list = k == 0 ? short_list : long_list;
    if (static_cast<int64_t>(list.size()) != pairs) {
      fail(strprintf("%s has %zu factors; RoPE rotates %lld dimensions of each head (%lld pairs), one factor each",
                     keys[k].c_str(), list.size(), ll(rotated), ll(pairs)),
           {keys[k]}, strprintf("give %lld factors", ll(pairs)));
      continue;
    }
    if (pairs > ref::kMaxLongRopePairs) {
      fail(strprintf("LongRoPE takes at most %d factors (%lld rotated dimensions here)", ref::kMaxLongRopePairs,
                     ll(rotated)),
           {keys[k]}, "use a smaller head or rotary_percent");
      continue;
    }
    for (size_t i = 0; i < list.size(); ++i) {
      const auto as_float = static_cast<float>(list[i]);
      if (!(as_float > 0.0f) || !std::isfinite(as_float)) {
        fail(strprintf("%s[%zu] = %g: each factor must be positive and finite (in fp32)", keys[k].c_str(), i, list[i]),
             {keys[k]}, "give positive factors");
        break;
      }
    }
  }
}

void ShapeChecker::check_batch_and_optimizer() {
  const auto& t = c_.train;
  const bool mbs_ok = size("train.micro_batch_size", t.micro_batch_size);
  const bool gbs_ok = size("train.global_batch_size", t.global_batch_size);
  const int64_t dp = c_.data_parallel_size;
  if (dp < 1) {
    fail(strprintf("the data-parallel size %lld must be at least 1", static_cast<long long>(dp)), {},
         "start at least one rank");
  } else if (mbs_ok && gbs_ok && *t.global_batch_size % (*t.micro_batch_size * dp) != 0) {
    // Megatron's rule: every data-parallel rank runs the same number of whole microbatches.
    const int64_t unit = *t.micro_batch_size * dp;
    const int64_t suggestion = unit * std::max<int64_t>(1, *t.global_batch_size / unit);
    if (dp == 1) {
      fail("global_batch_size must be a multiple of micro_batch_size",
           {"train.global_batch_size", "train.micro_batch_size"},
           strprintf("set train.global_batch_size to a multiple of %lld (e.g. %lld)",
                     static_cast<long long>(*t.micro_batch_size), static_cast<long long>(suggestion)));
    } else {
      fail(strprintf("global_batch_size must be a multiple of micro_batch_size x data_parallel_size = %lld x %lld "
                     "(data_parallel_size is the number of ranks: WORLD_SIZE, SLURM_NTASKS, launch -n or "
                     "bench -ng)",
                     static_cast<long long>(*t.micro_batch_size), static_cast<long long>(dp)),
           {"train.global_batch_size", "train.micro_batch_size"},
           strprintf("set train.global_batch_size to a multiple of %lld (e.g. %lld), or change the number of "
                     "ranks or train.micro_batch_size",
                     static_cast<long long>(unit), static_cast<long long>(suggestion)));
    }
  }
  if (c_.ddp.bucket_size) size("ddp.bucket_size", *c_.ddp.bucket_size, std::numeric_limits<int64_t>::max());
  // With train.num_epochs the length is derived; when it could not be, that check (or the data's) says why.
  if (t.train_iters || !t.num_epochs) size("train.train_iters", t.train_iters);

  const auto& o = c_.optimizer;
  if (!o.lr) {
    fail("optimizer.lr must be set", {"optimizer.lr"}, "set optimizer.lr (e.g. 3e-4)");
  } else {
    non_negative("optimizer.lr", *o.lr);
  }
  non_negative("optimizer.min_lr", o.min_lr);
  if (o.lr && std::isfinite(*o.lr) && o.min_lr > *o.lr) {
    fail("min_lr must not exceed lr", {"optimizer.min_lr", "optimizer.lr"}, "set optimizer.min_lr <= optimizer.lr");
  }
  non_negative("optimizer.weight_decay", o.weight_decay);
  real("optimizer.adam_beta1", o.adam_beta1, 0.0, true, 1.0, false);
  real("optimizer.adam_beta2", o.adam_beta2, 0.0, true, 1.0, false);
  positive("optimizer.adam_eps", o.adam_eps);
  non_negative("optimizer.clip_grad", o.clip_grad);
  for (const auto& [key, dtype] : {std::pair<std::string, std::string>{"optimizer.exp_avg_dtype", o.exp_avg_dtype},
                                   {"optimizer.exp_avg_sq_dtype", o.exp_avg_sq_dtype}}) {
    one_of(key, dtype, moment_dtype_names());
    const auto known = moment_dtype_named(dtype);
    if (known && *known != kernels::FloatDtype::fp32 && !o.use_precision_aware_optimizer) {
      fail(key + " = " + dtype + " needs the precision-aware optimizer",
           {key, "optimizer.use_precision_aware_optimizer"},
           "set optimizer.use_precision_aware_optimizer=true, or " + key + "=fp32");
    }
  }

  const auto& s = c_.scheduler;
  in_range("scheduler.lr_warmup_iters", s.lr_warmup_iters, 0, std::numeric_limits<int64_t>::max());
  // With train.train_samples the lengths are checked in samples (config/training_samples.h).
  if (s.lr_decay_iters && size("scheduler.lr_decay_iters", *s.lr_decay_iters, std::numeric_limits<int64_t>::max()) &&
      !c_.train.train_samples && s.lr_warmup_iters >= *s.lr_decay_iters) {
    fail("lr_warmup_iters must be less than lr_decay_iters", {"scheduler.lr_warmup_iters", "scheduler.lr_decay_iters"},
         "shorten the warmup or lengthen the decay (lr_decay_iters null = train.train_iters); Megatron-Bridge would "
         "cap the warmup at lr_decay_iters - 1 with a log line, which changes the schedule the recipe asks for");
  }
  one_of("scheduler.lr_decay_style", s.lr_decay_style, lr_decay_style_names());
  one_of("scheduler.lr_wsd_decay_style", s.lr_wsd_decay_style, lr_wsd_decay_style_names());
  // Megatron's asserts (OptimizerParamScheduler): non-negative, never decreasing, constant means one value.
  if (s.start_weight_decay) non_negative("scheduler.start_weight_decay", *s.start_weight_decay);
  if (s.end_weight_decay) non_negative("scheduler.end_weight_decay", *s.end_weight_decay);
  one_of("scheduler.weight_decay_incr_style", s.weight_decay_incr_style, weight_decay_incr_styles());
  const std::vector<std::string> wd_keys = {"scheduler.start_weight_decay", "scheduler.end_weight_decay",
                                            "optimizer.weight_decay"};
  if (end_weight_decay(c_) < start_weight_decay(c_)) {
    fail(
        "the weight decay schedule decreases: end_weight_decay is below start_weight_decay (a null one is "
        "optimizer.weight_decay)",
        wd_keys, "set scheduler.end_weight_decay >= scheduler.start_weight_decay, as Megatron requires");
  } else if (weight_decay_changes(c_) && s.weight_decay_incr_style == "constant") {
    fail(
        "weight_decay_incr_style constant needs end_weight_decay = start_weight_decay (a null one is "
        "optimizer.weight_decay)",
        {"scheduler.weight_decay_incr_style", "scheduler.start_weight_decay", "scheduler.end_weight_decay",
         "optimizer.weight_decay"},
        "set both to the decay to apply, or a linear or cosine weight_decay_incr_style");
  }
}

void ShapeChecker::check_data_and_io() {
  const auto& d = c_.dataset;
  if (!d.mock && d.data_path.empty()) {
    fail("dataset.data_path is empty and dataset.mock is false", {"dataset.data_path", "dataset.mock"},
         "set dataset.data_path=[prefix] (a Megatron .bin/.idx prefix), or dataset.mock=true");
  }
  // A path the mock loader would not read is refused rather than trained past on random tokens.
  if (d.mock && !d.data_path.empty()) {
    fail("dataset.data_path is set but dataset.mock is true, so the data would not be read (random tokens instead)",
         {"dataset.mock", "dataset.data_path"},
         "add dataset.mock=false to train on data_path (the benchmark recipes are mock), or drop dataset.data_path");
  }
  if (d.seq_length && *d.seq_length != c_.model.seq_length) {
    fail("dataset.seq_length must equal model.seq_length", {"dataset.seq_length", "model.seq_length"},
         "set dataset.seq_length to model.seq_length (or null)");
  }
  if (d.pad_cu_seqlens && !d.pad_to_max_length) {
    fail("pad_cu_seqlens needs pad_to_max_length", {"dataset.pad_cu_seqlens", "dataset.pad_to_max_length"},
         "set dataset.pad_to_max_length=true, or dataset.pad_cu_seqlens=false");
  }
  const auto& ck = c_.checkpoint;
  if (ck.save_interval) size("checkpoint.save_interval", *ck.save_interval, std::numeric_limits<int64_t>::max());
  // Bridge's CheckpointConfig.most_recent_k: -1 keeps every checkpoint; 0 would keep none (not even the one just
  // saved), and any other negative value has no meaning.
  if (ck.most_recent_k != -1 && ck.most_recent_k < 1) {
    fail(strprintf("checkpoint.most_recent_k = %lld: it is -1 (keep every checkpoint) or a count >= 1 (keep that many "
                   "of the newest)%s",
                   static_cast<long long>(ck.most_recent_k),
                   ck.most_recent_k == 0 ? "; 0 would keep no checkpoint, not even the one just saved" : ""),
         {"checkpoint.most_recent_k"},
         "set checkpoint.most_recent_k=-1 to keep every checkpoint, or checkpoint.most_recent_k=K (K >= 1) to keep "
         "the K newest");
  }
  if (ck.save && ck.save->empty()) {
    fail("checkpoint.save is an empty path", {"checkpoint.save"}, "set a directory, or null");
  }
  if (ck.load && ck.load->empty()) {
    fail("checkpoint.load is an empty path", {"checkpoint.load"}, "set a directory, or null");
  } else if (ck.load && !(ck.save && same_directory(*ck.load, *ck.save))) {
    // load = save is Bridge's resume idiom, where a missing folder is a fresh start; any other load must exist
    // (train refuses it, and validate is its pre-flight check).
    std::error_code ec;
    if (!std::filesystem::exists(*ck.load, ec)) {
      fail("checkpoint.load " + *ck.load + ": no such directory", {"checkpoint.load"},
           "point it at a checkpoint directory (an earlier run's checkpoint.save) or one of its iter_N folders, "
           "or null to start fresh");
    }
  }
  if (ck.pretrained_checkpoint && ck.pretrained_checkpoint->empty()) {
    fail("checkpoint.pretrained_checkpoint is an empty path", {"checkpoint.pretrained_checkpoint"},
         "set a Hugging Face " SG_HF_FAMILIES " folder or a checkpoint directory, or null");
  }
  const bool resumes_from_save = ck.load && ck.save && same_directory(*ck.load, *ck.save);
  if (ck.overwrite && (ck.auto_resume || resumes_from_save)) {
    fail(
        "checkpoint.overwrite deletes the checkpoints in checkpoint.save, but the run is asked to resume "
        "from them",
        {"checkpoint.overwrite", "checkpoint.auto_resume", "checkpoint.load", "checkpoint.save"},
        // The keys to turn off, named: a run's config.yaml keeps auto_resume, so "add overwrite" alone fails.
        "to start over: " + join(start_over_overrides(ck), " ") +
            "; to continue from its checkpoints: checkpoint.overwrite=false");
  }
  size("logger.log_interval", c_.logger.log_interval, std::numeric_limits<int64_t>::max());
  in_range("rng.seed", c_.rng.seed, 0, std::numeric_limits<int64_t>::max());
}

void check_shapes(const Config& config, std::vector<Violation>& violations, std::vector<Note>& notes) {
  ShapeChecker(config, violations, notes).run();
}

}  // namespace sg::config::detail
