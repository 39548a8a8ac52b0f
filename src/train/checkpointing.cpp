#include "train/checkpointing.h"

#include <algorithm>
#include <cstring>

#include "checkpoint/checkpoint_dir.h"
#include "checkpoint/durable_io.h"
#include "checkpoint/hf_config.h"
#include "checkpoint/hf_import.h"
#include "config/model_config.h"
#include "core/log.h"
#include "core/strings.h"
#include "cuda/bf16.h"
#include "train/nonfinite_stop.h"

namespace sg::train {
namespace {

using checkpoint::TensorDest;
using checkpoint::TensorDtype;
using checkpoint::TensorRef;

// Identifies what decides the numbers: model, optimizer, schedule, data. Keys that may change on
// resume without changing a bit are left out: train_iters, checkpoint, logging, NaN checks, and the
// CUDA-graph settings (graphs are bitwise equal to eager).
std::string canonical_config(const config::Config& config) {
  config::Config c = config;
  c.train.train_iters.reset();
  c.checkpoint = {};
  c.logger = {};
  // Evaluation reads validation data only: the training's numbers do not depend on it.
  c.train.eval_interval.reset();
  c.train.eval_iters = config::TrainConfig{}.eval_iters;
  c.dataset.valid_data_path.clear();
  c.rerun_state_machine = {};
  c.ddp = {};
  // Sharding the optimizer state only moves it between ranks (and changes the grad norm's fp64 summation
  // order): a checkpoint resumes with or without it, at any world size (data_parallel_size is no key).
  c.optimizer.use_distributed_optimizer = false;
  c.model.cuda_graph_impl = "none";
  c.model.cuda_graph_scope.clear();
  c.model.cuda_graph_warmup_steps = 0;
  c.model.use_te_rng_tracker = false;
  c.rng.te_rng_tracker = false;
  c.source.clear();
  return config::emit_yaml(c);
}

template <class Ref, class Ptr>
std::vector<Ref> tensors_of(const model::ModelLayout& layout, Ptr base, TensorDtype dtype, size_t element_size) {
  std::vector<Ref> out;
  for (const auto& t : layout.tensors()) {
    Ref r;
    r.name = t.name;
    r.dtype = dtype;
    r.shape = t.shape;
    r.data = base + static_cast<size_t>(t.offset) * element_size;
    out.push_back(std::move(r));
  }
  return out;
}

// Every step consumes one global batch, so a checkpoint of the same configuration has consumed
// exactly iteration x global_batch_size samples; one whose batch size changed since can only be
// bounded. A counter beyond that is a damaged or hand-edited file (2^64-1 would make the data loader
// pick windows far outside any epoch).
void check_consumed_samples(const checkpoint::TrainState& ts, const std::string& state_file,
                            const model::BatchSpec& batch, bool same_config) {
  // The global batch: every data-parallel rank's loader passes all of it (data/rank_batch.h).
  const auto per_step = static_cast<unsigned __int128>(batch.micro_batch_size * batch.global_microbatches());
  const auto iteration = static_cast<unsigned __int128>(ts.iteration);
  const auto consumed = static_cast<unsigned __int128>(ts.data_position.consumed_samples);
  const auto max_per_step = static_cast<unsigned __int128>(INT32_MAX);  // validate's bound on batch sizes
  const bool ok = same_config ? consumed == iteration * per_step : consumed <= iteration * max_per_step;
  if (ok) return;
  throw Error(strprintf(
      "%s: consumed_samples %llu does not fit iteration %lld%s; the file was edited or damaged. Load another "
      "iteration",
      state_file.c_str(), static_cast<unsigned long long>(ts.data_position.consumed_samples),
      static_cast<long long>(ts.iteration),
      same_config ? strprintf(" with a global batch of %lld sequences (expected %llu)",
                              static_cast<long long>(per_step), static_cast<unsigned long long>(iteration * per_step))
                        .c_str()
                  : ""));
}

std::vector<uint8_t> rng_bytes(const rng::RngState& s) {
  std::vector<uint8_t> b(sizeof(s));
  std::memcpy(b.data(), &s, sizeof(s));
  return b;
}

// config.json's bos_token_id or eos_token_id as `source` (the file at `path`) has it; null when absent.
nlohmann::json source_token_id(const nlohmann::json& source, const char* key, const std::string& path) {
  if (!source.contains(key)) return nullptr;
  const nlohmann::json& value = source[key];
  if (!checkpoint::is_hf_token_id_value(value)) {
    throw Error(
        strprintf("checkpoint.pretrained_checkpoint: %s: %s = %s is not null, a token id or a list of token "
                  "ids; fix the file (transformers could not use it either)",
                  path.c_str(), key, value.dump().c_str()));
  }
  return value;
}

// The exported config.json's keys that the model's spec does not decide (checkpointing.h says which).
void set_export_keys(nlohmann::json& model_config, const model::ModelSpec& spec, const CheckpointExport& exported) {
  const std::optional<CheckpointSource>& source = exported.source;
  if (source) {
    // The weights still serve the source's context; seq_length is only how much of it this run trained.
    checkpoint::set_hf_max_position_embeddings(model_config,
                                               std::max(source->max_position_embeddings, spec.seq_length));
  }
  // tokenizer.json is among the files of every tokenizer folder: none means the run has no tokenizer.
  if (exported.tokenizer.files.empty() && source) {
    checkpoint::set_hf_special_token_ids(model_config, source->bos_token_id, source->eos_token_id);
  } else {
    checkpoint::set_hf_special_token_ids(model_config, exported.tokenizer.eos_token_id);
  }
}

}  // namespace

CheckpointExport checkpoint_export(const config::Config& config,
                                   const std::optional<data::HfTokenizerInfo>& tokenizer) {
  CheckpointExport out;
  if (tokenizer) {
    out.tokenizer.files = tokenizer->files;
    if (tokenizer->eod_id >= 0) out.tokenizer.eos_token_id = tokenizer->eod_id;
  }
  if (!config.checkpoint.pretrained_checkpoint) return out;
  const std::string folder =
      checkpoint::resolve_model_folder(*config.checkpoint.pretrained_checkpoint, "checkpoint.pretrained_checkpoint");
  const checkpoint::HfModelConfig hf = checkpoint::read_hf_config(folder);
  // Read again for the keys HfModelConfig does not keep as written (bos, and eos as a number or a list).
  nlohmann::json source;
  try {
    source = nlohmann::json::parse(checkpoint::read_text_file(hf.path));
  } catch (const nlohmann::json::parse_error& e) {
    throw Error(strprintf("%s is not valid JSON: %s", hf.path.c_str(), e.what()));
  }
  out.source = CheckpointSource{.max_position_embeddings = hf.max_position_embeddings,
                                .bos_token_id = source_token_id(source, "bos_token_id", hf.path),
                                .eos_token_id = source_token_id(source, "eos_token_id", hf.path)};
  return out;
}

std::string save_checkpoint(const std::string& dir, const config::Config& config, const model::ModelLayout& layout,
                            const TrainingState& state, const data::DataPosition& position, const std::string& run_id,
                            const CheckpointExport& exported) {
  const auto n = static_cast<size_t>(layout.total());
  SG_CHECK(state.main_weights.size() == n && state.exp_avg.size() == n && state.exp_avg_sq.size() == n,
           "training state does not match the parameter layout");
  check_state_finite(state, layout, config);  // a NaN/Inf state is never saved
  // Hugging Face weights in bf16: exactly the compute copy the GPU step uses (round to nearest even).
  std::vector<uint16_t> bf16(n);
  for (size_t i = 0; i < n; ++i) bf16[i] = float_to_bf16_bits(state.main_weights[i]);

  checkpoint::TrainingCheckpoint ckpt;
  const auto* bf16_base = reinterpret_cast<const uint8_t*>(bf16.data());
  ckpt.model = tensors_of<TensorRef>(layout, bf16_base, TensorDtype::BF16, 2);
  ckpt.model_config = checkpoint::hf_model_config(layout.spec, "bfloat16");
  set_export_keys(ckpt.model_config, layout.spec, exported);
  ckpt.main_params = tensors_of<TensorRef>(layout, reinterpret_cast<const uint8_t*>(state.main_weights.data()),
                                           TensorDtype::F32, 4);
  ckpt.exp_avg = tensors_of<TensorRef>(layout, reinterpret_cast<const uint8_t*>(state.exp_avg.data()),
                                       TensorDtype::F32, 4);
  ckpt.exp_avg_sq = tensors_of<TensorRef>(layout, reinterpret_cast<const uint8_t*>(state.exp_avg_sq.data()),
                                          TensorDtype::F32, 4);
  ckpt.state.iteration = state.steps_done;
  ckpt.state.data_position = position;
  ckpt.state.rng_state = rng_bytes(state.rng);
  ckpt.state.config_hash = checkpoint::config_hash_hex(canonical_config(config));
  ckpt.state.extra["run_id"] = run_id;
  ckpt.extra_files = exported.tokenizer.files;
  return checkpoint::save_checkpoint(dir, state.steps_done, checkpoint::training_checkpoint_contents(ckpt));
}

LoadedCheckpoint load_checkpoint(const std::string& path, const config::Config& config, const model::ModelLayout& layout) {
  const auto n = static_cast<size_t>(layout.total());
  LoadedCheckpoint out;
  out.path = checkpoint::resolve_checkpoint(path);
  out.state.main_weights.assign(n, 0.0f);
  out.state.exp_avg.assign(n, 0.0f);
  out.state.exp_avg_sq.assign(n, 0.0f);
  // The bf16 weights are derived from the fp32 main weights; they are only checked (names, shapes).
  std::vector<uint16_t> bf16(n);
  checkpoint::TrainingCheckpointDest dest;
  dest.model = tensors_of<TensorDest>(layout, reinterpret_cast<uint8_t*>(bf16.data()), TensorDtype::BF16, 2);
  dest.main_params = tensors_of<TensorDest>(layout, reinterpret_cast<uint8_t*>(out.state.main_weights.data()),
                                            TensorDtype::F32, 4);
  dest.exp_avg = tensors_of<TensorDest>(layout, reinterpret_cast<uint8_t*>(out.state.exp_avg.data()),
                                        TensorDtype::F32, 4);
  dest.exp_avg_sq = tensors_of<TensorDest>(layout, reinterpret_cast<uint8_t*>(out.state.exp_avg_sq.data()),
                                           TensorDtype::F32, 4);
  const checkpoint::TrainState ts = checkpoint::load_training_checkpoint(out.path, dest);
  const std::string state_file = out.path + "/" + checkpoint::kTrainStateFile;
  if (ts.rng_state.size() != sizeof(rng::RngState)) {
    throw Error(strprintf("%s: rng_state has %zu bytes, expected %zu; the file was edited or comes from another "
                          "program",
                          state_file.c_str(), ts.rng_state.size(), sizeof(rng::RngState)));
  }
  std::memcpy(&out.state.rng, ts.rng_state.data(), sizeof(rng::RngState));
  out.state.steps_done = ts.iteration;
  out.position = ts.data_position;
  if (ts.extra.is_object() && ts.extra.contains("run_id") && ts.extra["run_id"].is_string()) {
    out.run_id = ts.extra["run_id"].get<std::string>();
  }
  const bool same_config = ts.config_hash == checkpoint::config_hash_hex(canonical_config(config));
  check_consumed_samples(ts, state_file, config::batch_spec(config), same_config);
  if (!same_config) {
    log::warn(strprintf("%s was saved with a different configuration (model, optimizer, schedule or data "
                        "settings changed); resuming anyway, but the run will not match an uninterrupted one",
                        out.path.c_str()));
  }
  return out;
}

}  // namespace sg::train
