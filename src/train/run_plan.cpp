#include "train/run_plan.h"

#include "checkpoint/hf_config.h"
#include "config/lr_decay.h"
#include "config/model_config.h"
#include "config/weight_decay.h"
#include "core/error.h"
#include "core/strings.h"
#include "cuda/arena.h"
#include "graph/scope_plan.h"
#include "model/activation_account.h"
#include "model/layer_registry.h"
#include "model/stack.h"
#include "model/train_step.h"
#include "train/backend_factory.h"
#include "train/gpu_backend.h"

namespace sg::train {

std::string thousands(int64_t value) {
  std::string digits = std::to_string(value < 0 ? -value : value);
  std::string out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return value < 0 ? "-" + out : out;
}

namespace {

// steps x tokens with thousands separators, in scientific notation where it passes int64 (2^31 steps of 2^31
// sequences printed a negative count).
std::string total_tokens_text(int64_t steps, int64_t tokens_per_step) {
  int64_t total = 0;
  if (__builtin_mul_overflow(steps, tokens_per_step, &total)) {
    return strprintf("%.3g", static_cast<double>(steps) * static_cast<double>(tokens_per_step));
  }
  return thousands(total);
}

std::string millions(int64_t n) {
  if (n >= 1000000000) return strprintf("%.2f B", static_cast<double>(n) / 1e9);
  if (n >= 1000000) return strprintf("%.2f M", static_cast<double>(n) / 1e6);
  return thousands(n);
}

}  // namespace

std::string describe_model(const config::Config& config) {
  const model::ModelSpec m = config::model_spec(config);
  const model::ModelLayout layout = model::model_layout(m);
  const bool tied = m.share_embeddings_and_output_weights;
  const int64_t embeddings = m.vocab_size * m.hidden_size * (tied ? 1 : 2);
  std::string why_no_hf;
  const std::string hf = model::hf_architecture(m, &why_no_hf);
  if (!hf.empty()) {
    // Every save writes this config.json: a model it refuses is refused now, before a step is spent.
    try {
      checkpoint::hf_model_config(m, "bfloat16");
    } catch (const Error& e) {
      throw Error(
          strprintf("%s; this run's checkpoints (%s) could not be saved, so it is refused before its first "
                    "step: change the model settings the message names",
                    e.what(), hf.c_str()));
    }
  }
  return strprintf("model: %s, hidden %lld (%lld heads, %lld KV), ffn %lld, seq %lld, vocab %lld%s: %s parameters "
                   "(%s in the embedding%s); checkpoints load as %s",
                   model::describe_stack(m).c_str(), static_cast<long long>(m.hidden_size),
                   static_cast<long long>(m.num_attention_heads), static_cast<long long>(m.num_query_groups),
                   static_cast<long long>(m.ffn_hidden_size), static_cast<long long>(m.seq_length),
                   static_cast<long long>(m.vocab_size), tied ? ", tied embeddings" : "",
                   millions(layout.num_parameters()).c_str(), millions(embeddings).c_str(),
                   tied ? "" : " and the LM head",
                   hf.empty() ? ("nothing yet (no config.json: " + why_no_hf + ")").c_str() : hf.c_str());
}

std::string describe_batch(const config::Config& config) {
  const model::ModelSpec m = config::model_spec(config);
  const model::BatchSpec b = config::batch_spec(config);
  const int64_t sequences = b.global_microbatches() * b.micro_batch_size;
  const int64_t tokens = sequences * m.seq_length;
  const int64_t steps = config.train.train_iters.value_or(0);
  const std::string ranks =
      b.data_parallel_size == 1
          ? std::string()
          : strprintf(" on each of %lld data-parallel ranks", static_cast<long long>(b.data_parallel_size));
  return strprintf(
      "batch: %lld sequence%s x %lld tokens = %s tokens per step (%lld microbatch%s of %lld%s); "
      "%lld steps = %s tokens",
      static_cast<long long>(sequences), sequences == 1 ? "" : "s", static_cast<long long>(m.seq_length),
      thousands(tokens).c_str(), static_cast<long long>(b.num_microbatches), b.num_microbatches == 1 ? "" : "es",
      static_cast<long long>(b.micro_batch_size), ranks.c_str(), static_cast<long long>(steps),
      total_tokens_text(steps, tokens).c_str());
}

namespace {

// The decay, or how Megatron's schedule changes it: "0 to 0.1, linear over 1000 steps".
std::string describe_weight_decay(const config::Config& config) {
  const double start = config::start_weight_decay(config);
  if (!config::weight_decay_changes(config)) return strprintf("%g", start);
  const int64_t samples = config::weight_decay_incr_samples(config);
  const int64_t gbs = config.train.global_batch_size.value_or(0);
  const std::string length = gbs > 0 && samples % gbs == 0
                                 ? strprintf("%lld steps", static_cast<long long>(samples / gbs))
                                 : strprintf("%lld samples", static_cast<long long>(samples));
  return strprintf("%g to %g, %s over %s", start, config::end_weight_decay(config),
                   config.scheduler.weight_decay_incr_style.c_str(), length.c_str());
}

}  // namespace

std::string describe_optimizer(const config::Config& config) {
  const config::OptimizerConfig& o = config.optimizer;
  std::string text = strprintf(
      "optimizer: AdamW (betas %g, %g; eps %g; weight decay %s; clip %g); fp32 master weights, %s", o.adam_beta1,
      o.adam_beta2, o.adam_eps, describe_weight_decay(config).c_str(), o.clip_grad,
      config.ddp.grad_reduce_in_fp32 ? "fp32 gradients"
                                     : "bf16 gradients (ddp.grad_reduce_in_fp32=false: summed in fp32, rounded where "
                                       "stored, as PyTorch's autocast rounds its weight gradients; reduced in bf16)");
  if (o.exp_avg_dtype == "fp32" && o.exp_avg_sq_dtype == "fp32") return text + ", fp32 Adam moments";
  return text + strprintf("; Adam moments stored as exp_avg %s, exp_avg_sq %s (the precision-aware optimizer: computed "
                          "in fp32, rounded when stored; PyTorch's fused AdamW keeps them in fp32)",
                          o.exp_avg_dtype.c_str(), o.exp_avg_sq_dtype.c_str());
}

std::string describe_gpu_memory_plan(const config::Config& config) {
  const model::ModelSpec m = config::model_spec(config);
  const model::BatchSpec b = config::batch_spec(config);
  // One rank's arena: at data_parallel_size > 1 with the distributed optimizer, its shard of the fp32 state.
  const model::TrainStepOptions options{
      .planned_world_size = static_cast<int>(std::max<int64_t>(1, config.data_parallel_size)),
      .planned_distributed_optimizer = config.optimizer.use_distributed_optimizer && config.data_parallel_size > 1};
  const cuda::MemoryLayout layout = model::TrainStep::plan_memory(m, b, options, optimizer_spec(config)).layout();
  const std::string ranks =
      config.data_parallel_size <= 1
          ? ""
          : strprintf(
                "; each of the %lld data-parallel ranks%s", static_cast<long long>(config.data_parallel_size),
                options.planned_distributed_optimizer ? ", holding its shard of the fp32 weights and moments" : "");
  std::string text = strprintf("GPU memory plan (one arena, from the config; no device needed%s): %s", ranks.c_str(),
                               human_bytes(layout.total_bytes).c_str());
  std::vector<std::string> parts;
  for (int c = 0; c < cuda::kNumMemoryCategories; ++c) {
    const auto category = static_cast<cuda::MemoryCategory>(c);
    std::string part = strprintf("%s %s", cuda::memory_category_name(category),
                                 human_bytes(layout.requested_bytes[c]).c_str());
    if (category == cuda::MemoryCategory::workspaces) {
      // The layers' plan_device() workspaces: declared only with a device (model/layer.h).
      part += model::stack_has_kind(m, model::LayerKind::mamba)
                  ? " + cuDNN attention, CUB sort scratch and the Mamba2 layers' SSD scan and partial-sum workspaces "
                    "(sized on the GPU)"
                  : " + cuDNN attention and CUB sort scratch (sized on the GPU)";
    }
    parts.push_back(part);
  }
  text += "\n  " + join(std::vector<std::string>(parts.begin(), parts.begin() + 4), " | ");
  text += "\n  " + join(std::vector<std::string>(parts.begin() + 4, parts.end()), " | ");
  return text;
}

std::string describe_activation_plan(const config::Config& config) {
  const model::ModelSpec m = config::model_spec(config);
  return join(model::describe_activations(m, model::activation_account(m, config::batch_spec(config))), "\n");
}

std::string describe_graph_plan(const config::Config& config) {
  const model::ModelSpec m = config::model_spec(config);
  const graph::ScopePlan plan = graph::plan_graph_scopes(
      graph::parse_graph_impl(config.model.cuda_graph_impl), graph::parse_graph_scopes(config.model.cuda_graph_scope),
      model::stack_regions(m), config::batch_spec(config).num_microbatches);
  if (plan.impl == graph::GraphImpl::none) {
    return "CUDA graphs: off (model.cuda_graph_impl = none): every step eager";
  }
  const int64_t warmup = config.model.cuda_graph_warmup_steps;
  std::string text = strprintf("CUDA graphs: %s; %s", plan.describe().c_str(),
                               graph::describe_warmup(static_cast<int>(warmup)).c_str());
  if (evaluation_graphed(config)) {
    text += "\n  evaluation: 1 more graph (the forward-only evaluation of one batch): the first evaluated batch "
            "eager, the second captured, replayed after";
  }
  return text;
}

std::string describe_lr_schedule(const config::Config& config) {
  const model::OptimizerSpec o = optimizer_spec(config);
  std::string text = "lr: ";
  if (o.lr_warmup_iters > 0) {
    text += strprintf("warmup over %lld step%s from %g to %g, then ", static_cast<long long>(o.lr_warmup_iters),
                      o.lr_warmup_iters == 1 ? "" : "s", o.lr_warmup_init, o.lr);
  }
  const long long end = o.lr_decay_iters;
  switch (o.lr_decay_style) {
    case model::LrDecayStyle::constant: return text + strprintf("%g constant", o.lr);
    case model::LrDecayStyle::linear:
    case model::LrDecayStyle::cosine:
      return text + strprintf("%s decay from %g to %g at step %lld", config.scheduler.lr_decay_style.c_str(), o.lr,
                              o.min_lr, end);
    case model::LrDecayStyle::inverse_square_root:
      return text + strprintf(
                        "inverse square root: %g x sqrt(warmup samples / samples done), at least %g; %g from "
                        "step %lld",
                        o.lr, o.min_lr, o.min_lr, end);
    case model::LrDecayStyle::wsd:
      return text + strprintf("WSD: %g until step %lld, then %s annealing to %g at step %lld", o.lr,
                              end - o.lr_wsd_decay_iters, config.scheduler.lr_wsd_decay_style.c_str(), o.min_lr, end);
  }
  return text;
}

std::vector<std::string> describe_run_plan(const config::Config& config) {
  return {describe_model(config),       describe_batch(config),           describe_optimizer(config),
          describe_lr_schedule(config), describe_gpu_memory_plan(config), describe_activation_plan(config),
          describe_graph_plan(config)};
}

}  // namespace sg::train
