#include "train/backend_factory.h"

#include "config/lr_decay.h"
#include "config/model_config.h"
#include "config/moment_dtype.h"
#include "config/training_samples.h"
#include "config/weight_decay.h"
#include "core/log.h"
#include "core/strings.h"
#include "cuda/device.h"
#include "train/cpu_backend.h"
#include "train/distributed_backend.h"
#include "train/gpu_backend.h"

namespace sg::train {

model::OptimizerSpec optimizer_spec(const config::Config& config) {
  model::OptimizerSpec o;
  o.lr = config.optimizer.lr.value_or(o.lr);
  o.min_lr = config.optimizer.min_lr;
  // Megatron's weight-decay schedule (its keys, when set, replace optimizer.weight_decay).
  o.weight_decay = config::start_weight_decay(config);
  o.weight_decay_incr_style = config::weight_decay_incr_style(config);
  o.end_weight_decay = config::end_weight_decay(config);
  o.weight_decay_incr_samples = config::weight_decay_incr_samples(config);
  o.adam_beta1 = config.optimizer.adam_beta1;
  o.adam_beta2 = config.optimizer.adam_beta2;
  o.adam_eps = config.optimizer.adam_eps;
  o.clip_grad = config.optimizer.clip_grad;
  // Validation names the keys first; this only guards a config that skipped it.
  const auto moment_dtype = [](const char* key, const std::string& name) {
    const auto named = config::moment_dtype_named(name);
    if (!named) {
      throw Error(strprintf("%s = %s is not a moment dtype stepgraph has; use one of: %s", key, name.c_str(),
                            join(config::moment_dtype_names(), ", ").c_str()));
    }
    return *named;
  };
  o.exp_avg_dtype = moment_dtype("optimizer.exp_avg_dtype", config.optimizer.exp_avg_dtype);
  o.exp_avg_sq_dtype = moment_dtype("optimizer.exp_avg_sq_dtype", config.optimizer.exp_avg_sq_dtype);
  o.main_grad_dtype = config.ddp.grad_reduce_in_fp32 ? kernels::FloatDtype::fp32 : kernels::FloatDtype::bf16;
  o.lr_warmup_iters = config::resolved_lr_warmup_iters(config);  // lr_warmup_samples' steps with train_samples
  o.lr_decay_iters = config::resolved_lr_decay_iters(config).value_or(0);
  o.lr_decay_style = config::lr_decay_style(config.scheduler.lr_decay_style);
  o.lr_warmup_init = config.scheduler.lr_warmup_init;
  if (o.lr_decay_style == model::LrDecayStyle::wsd) {
    o.lr_wsd_decay_iters = config.scheduler.lr_wsd_decay_iters.value_or(0);  // lr_wsd_decay_samples' steps too
    o.lr_wsd_decay_style = config::lr_wsd_decay_style(config.scheduler.lr_wsd_decay_style);
  }
  return o;
}

bool uses_cpu_backend(bool force_cpu) { return force_cpu || cuda::device_count() == 0; }

std::unique_ptr<TrainingBackend> make_backend(const config::Config& config, bool force_cpu,
                                              DistributedRun* distributed) {
  const model::ModelSpec model = config::model_spec(config);
  const model::BatchSpec batch = config::batch_spec(config);
  const rng::RngState rng{static_cast<uint64_t>(config.rng.seed), 0};
  const int gpus = cuda::device_count();
  // One rank (stepgraph launch -n 1) on the CPU: nothing to reduce, so the CPU backend trains it alone.
  if (distributed != nullptr && !(distributed->world_size() == 1 && (force_cpu || gpus == 0))) {
    if (force_cpu || gpus == 0) {
      throw Error(strprintf("data parallelism (%d ranks) runs one rank per GPU with NCCL; the CPU reference backend "
                            "trains in one process only (%s). Run a single process for the CPU backend",
                            distributed->world_size(), force_cpu ? "--cpu was given" : "no GPU is visible"));
    }
    return std::make_unique<DistributedGpuBackend>(*distributed, config, model, batch, optimizer_spec(config), rng);
  }
  if (gpus > 0 && !force_cpu) return make_gpu_backend(config, model, batch, optimizer_spec(config), rng);
  if (gpus == 0) {
    log::info("no GPU found: training on the CPU with the fp32 reference backend, CUDA graphs off "
              "(slow; use it for tiny models)");
  } else {
    log::info("--cpu: training on the CPU with the fp32 reference backend, CUDA graphs off");
  }
  return std::make_unique<CpuBackend>(model, batch, optimizer_spec(config), rng);
}

}  // namespace sg::train
