#include "train/checkpointing.h"

#include <algorithm>
#include <cstring>
#include <filesystem>

#include "checkpoint/checkpoint_dir.h"
#include "checkpoint/durable_io.h"
#include "checkpoint/file_checksum.h"
#include "checkpoint/hf_config.h"
#include "checkpoint/hf_fused_tensors.h"
#include "checkpoint/hf_import.h"
#include "checkpoint/python_json.h"
#include "config/model_config.h"
#include "config/training_samples.h"
#include "config/weight_decay.h"
#include "core/log.h"
#include "core/strings.h"
#include "cuda/bf16.h"
#include "graph/scope_plan.h"
#include "train/nonfinite_stop.h"

namespace sg::train {
namespace {

using checkpoint::TensorDest;
using checkpoint::TensorDtype;
using checkpoint::TensorRef;

// The canonical text as it was before keys were added whose reset values it holds, so checkpoints saved then hash as
// the same configuration: the validation section's two keys were the train section's last ones, and the
// weight-decay schedule's keys (a constant one folded into optimizer.weight_decay) and
// tokenizer.use_tokenizer_vocab_size (whose effect is model.vocab_size's value), the sample-based lengths (folded
// into the steps) and the lr schedule's warmup start and WSD keys (folded where they shape nothing) did not exist.
// The keys of later versions that hash as before them (left out) in this configuration.
struct FoldedKeys {
  bool weight_decay = false, lr_schedule = false, qk_layernorm = false, moe_shared_expert_gate = false;
  bool rotary_percent = false, longrope = false;
};

std::string as_before_newer_keys(std::string text, const FoldedKeys& folded) {
  std::vector<const char*> lines = {"  use_tokenizer_vocab_size: false\n",
                                    "  train_samples: null\n",
                                    "  num_epochs: null\n",
                                    "  lr_warmup_samples: 0\n",
                                    "  lr_decay_samples: null\n",
                                    "  max_steps: null\n",
                                    "  lr_warmup_fraction: null\n"};
  if (folded.weight_decay) {
    lines.insert(lines.end(), {"  start_weight_decay: null\n", "  end_weight_decay: null\n",
                               "  weight_decay_incr_style: constant\n"});
  }
  lines.push_back("  lr_wsd_decay_samples: null\n");
  if (folded.lr_schedule) {
    lines.insert(lines.end(),
                 {"  lr_warmup_init: 0.0\n", "  lr_wsd_decay_style: exponential\n", "  lr_wsd_decay_iters: null\n"});
  }
  if (folded.qk_layernorm) lines.push_back("  qk_layernorm: false\n");  // an inert Bridge key before
  if (folded.moe_shared_expert_gate) lines.push_back("  moe_shared_expert_gate: false\n");  // likewise
  if (folded.rotary_percent) lines.push_back("  rotary_percent: 1.0\n");                    // likewise
  if (folded.longrope) {                                                                    // none before the keys
    lines.insert(lines.end(),
                 {"  longrope_short_factor: []\n", "  longrope_long_factor: []\n",
                  "  longrope_original_max_position_embeddings: 4096\n", "  longrope_attention_factor: 1.0\n"});
  }
  for (const char* line : lines) {
    const size_t at = text.find(line);
    SG_CHECK(at != std::string::npos, std::string("canonical_config: no line ") + line);
    text.erase(at, std::strlen(line));
  }
  const size_t begin = text.find("\nvalidation:\n");
  SG_CHECK(begin != std::string::npos, "canonical_config: the emitted configuration has no validation section");
  size_t end = begin + 1;
  do {
    end = text.find('\n', end) + 1;
  } while (end < text.size() && text.compare(end, 2, "  ") == 0);
  text.replace(begin + 1, end - begin - 1, "  eval_interval: null\n  eval_iters: 100\n");
  return text;
}

// Identifies what decides the numbers: model, optimizer, schedule, data. Keys that may change on
// resume without changing a bit are left out: train_iters, checkpoint (its folders, save_interval and the
// retention of most_recent_k), logging, NaN checks, and the CUDA-graph settings (graphs are bitwise equal to eager).
std::string canonical_config(const config::Config& config) {
  config::Config c = config;
  c.train.train_iters.reset();
  c.checkpoint = {};
  c.logger = {};
  // Megatron-Bridge keys accepted without effect (config/bridge_inert_keys.h): a resume may add or drop them. Those of
  // checkpoint, logger, rerun_state_machine and ddp go with their sections.
  c.model.bridge_inert = {};
  c.train.bridge_inert = {};
  c.optimizer.bridge_inert = {};
  c.scheduler.bridge_inert = {};
  c.dataset.bridge_inert = {};
  c.rng.bridge_inert = {};
  c.mixed_precision = {};  // Bridge keys too; validate copied the one with an effect over ddp's (not hashed either)
  // Evaluation reads validation data only: the training's numbers do not depend on it.
  c.validation = {};
  c.dataset.valid_data_path.clear();
  // A constant weight-decay schedule is one decay (config/weight_decay.h): hashed as that optimizer.weight_decay,
  // as before the schedule's keys. A changing one as its resolved start and end (optimizer.weight_decay then has no
  // effect) and style, and its length below.
  const bool decay_changes = config::weight_decay_changes(config);
  if (decay_changes) {
    c.scheduler.start_weight_decay = config::start_weight_decay(config);
    c.scheduler.end_weight_decay = config::end_weight_decay(config);
    c.optimizer.weight_decay = config::OptimizerConfig{}.weight_decay;
  } else {
    c.optimizer.weight_decay = config::start_weight_decay(config);
    c.scheduler.start_weight_decay.reset();
    c.scheduler.end_weight_decay.reset();
    c.scheduler.weight_decay_incr_style = config::SchedulerConfig{}.weight_decay_incr_style;
  }
  c.tokenizer.use_tokenizer_vocab_size = false;  // validate applied it to model.vocab_size
  // Sample-based lengths hash as the steps they are (validate derived lr_decay_iters from them).
  c.scheduler.lr_warmup_iters = config::resolved_lr_warmup_iters(config);  // lr_warmup_fraction's too
  c.scheduler.lr_warmup_fraction.reset();
  c.scheduler.max_steps.reset();  // validate made it lr_decay_iters (and the decay's length, hashed below)
  c.scheduler.lr_warmup_samples = 0;
  c.scheduler.lr_decay_samples.reset();
  c.train.train_samples.reset();
  c.train.num_epochs.reset();  // like train_iters, which it makes: the run's length
  // The schedule's shape keys of later versions hash only where they shape it (as before them otherwise): the warmup's
  // start under a warmup, WSD's annealing under WSD (in steps, as validate derived them from samples).
  c.scheduler.lr_wsd_decay_samples.reset();
  // (-0.0 too: it prints otherwise.)
  if (config::resolved_lr_warmup_iters(config) == 0 || c.scheduler.lr_warmup_init == 0.0)
    c.scheduler.lr_warmup_init = 0.0;
  if (c.scheduler.lr_decay_style != "WSD") {
    c.scheduler.lr_wsd_decay_style = config::SchedulerConfig{}.lr_wsd_decay_style;
    c.scheduler.lr_wsd_decay_iters.reset();
  }
  const bool lr_schedule_folded = c.scheduler.lr_warmup_init == 0.0 && c.scheduler.lr_decay_style != "WSD";
  c.rerun_state_machine = {};
  c.ddp = {};
  // Sharding the optimizer state only moves it between ranks (and changes the grad norm's fp64 summation
  // order): a checkpoint resumes with or without it, at any world size (data_parallel_size is no key).
  c.optimizer.use_distributed_optimizer = false;
  c.model.cuda_graph_impl = graph::graph_impl_name(graph::GraphImpl::none);
  c.model.cuda_graph_scope.clear();
  c.model.cuda_graph_warmup_steps = 0;
  c.model.use_te_rng_tracker = false;
  c.rng.te_rng_tracker = false;
  c.source.clear();
  // Without LongRoPE's lists its other two keys shape nothing: hashed as before the keys.
  const bool longrope_folded = c.model.longrope_short_factor.empty() && c.model.longrope_long_factor.empty();
  if (longrope_folded) {
    c.model.longrope_original_max_position_embeddings = config::ModelConfig{}.longrope_original_max_position_embeddings;
    c.model.longrope_attention_factor = config::ModelConfig{}.longrope_attention_factor;
  }
  std::string text =
      as_before_newer_keys(config::emit_yaml(c), {.weight_decay = !decay_changes,
                                                  .lr_schedule = lr_schedule_folded,
                                                  .qk_layernorm = !c.model.qk_layernorm,
                                                  .moe_shared_expert_gate = !c.model.moe_shared_expert_gate,
                                                  .rotary_percent = c.model.rotary_percent == 1.0,
                                                  .longrope = longrope_folded});
  // train_iters is left out above, but a changing decay's length (train_iters x global batch, or train_samples)
  // decides every step's decay.
  if (decay_changes) {
    text += strprintf("wd_incr_steps: %lld\n", static_cast<long long>(config::weight_decay_incr_samples(config)));
  }
  return text;
}

template <class Ref, class Ptr>
std::vector<Ref> tensors_of(const model::ModelLayout& layout, Ptr base, TensorDtype dtype, size_t element_size) {
  std::vector<Ref> out;
  for (const auto& t : layout.tensors()) {
    Ref r;
    r.name = t.name;
    r.dtype = dtype;
    r.shape = t.shape;
    r.data = base == nullptr ? nullptr : base + static_cast<size_t>(t.offset) * element_size;  // null: expected only
    out.push_back(std::move(r));
  }
  return out;
}

// config.json's model_type ("" without one: no transformers class loads the model).
std::string hf_model_type(const nlohmann::json& model_config) {
  return model_config.is_object() ? model_config.value("model_type", "") : "";
}

constexpr const char* kSamplesBaselineKey = "samples_baseline";  // extra's SamplesBaseline (absent: {0, 0})
constexpr const char* kEvalPendingKey = "eval_pending";          // extra's ResumeRecord::eval_pending

// The baseline train_state.json records (absent: {0, 0}, every file from before the key), checked against the
// file's own iteration and counter.
SamplesBaseline recorded_baseline(const checkpoint::TrainState& ts, const std::string& state_file,
                                  const std::string& advice) {
  SamplesBaseline b;
  if (!ts.extra.is_object() || !ts.extra.contains(kSamplesBaselineKey)) return b;
  const nlohmann::json& j = ts.extra[kSamplesBaselineKey];
  const bool ok = j.is_object() && j.contains("iteration") && j["iteration"].is_number_unsigned() &&
                  j.contains("consumed_samples") && j["consumed_samples"].is_number_unsigned() &&
                  j["iteration"].get<uint64_t>() <= static_cast<uint64_t>(ts.iteration) &&
                  j["consumed_samples"].get<uint64_t>() <= ts.data_position.consumed_samples;
  if (!ok) {
    throw Error(strprintf("%s: extra.%s = %s is not an iteration and a sample count at or before iteration %lld "
                          "(consumed_samples %llu); the file was edited or damaged. %s",
                          state_file.c_str(), kSamplesBaselineKey, j.dump().c_str(),
                          static_cast<long long>(ts.iteration),
                          static_cast<unsigned long long>(ts.data_position.consumed_samples), advice.c_str()));
  }
  b.iteration = static_cast<int64_t>(j["iteration"].get<uint64_t>());
  b.consumed_samples = j["consumed_samples"].get<uint64_t>();
  return b;
}

// Every step consumes one global batch, so a checkpoint of the same configuration has consumed exactly
// (iteration - baseline) x global_batch_size samples since its baseline (where that batch size started:
// SamplesBaseline); one whose configuration changed since can only be bounded. A counter beyond that is a
// damaged or hand-edited file (2^64-1 would make the data loader pick windows far outside any epoch).
void check_consumed_samples(const checkpoint::TrainState& ts, const std::string& state_file,
                            const model::BatchSpec& batch, bool same_config, const SamplesBaseline& baseline,
                            const std::string& advice) {
  // The global batch: every data-parallel rank's loader passes all of it (data/rank_batch.h).
  const auto per_step = static_cast<unsigned __int128>(batch.micro_batch_size * batch.global_microbatches());
  const auto steps = static_cast<unsigned __int128>(ts.iteration - baseline.iteration);
  const auto consumed = static_cast<unsigned __int128>(ts.data_position.consumed_samples - baseline.consumed_samples);
  const auto max_per_step = static_cast<unsigned __int128>(INT32_MAX);  // validate's bound on batch sizes
  const bool ok = same_config ? consumed == steps * per_step : consumed <= steps * max_per_step;
  if (ok) return;
  const auto expected = static_cast<unsigned long long>(baseline.consumed_samples + steps * per_step);
  const std::string since =
      baseline.iteration > 0 ? strprintf(" since iteration %lld (%llu samples then, when that batch size started)",
                                         static_cast<long long>(baseline.iteration),
                                         static_cast<unsigned long long>(baseline.consumed_samples))
                             : std::string();
  throw Error(strprintf(
      "%s: consumed_samples %llu does not fit iteration %lld%s; the file was edited or damaged. %s",
      state_file.c_str(), static_cast<unsigned long long>(ts.data_position.consumed_samples),
      static_cast<long long>(ts.iteration),
      same_config ? strprintf(" with a global batch of %lld sequences%s (expected %llu)",
                              static_cast<long long>(per_step), since.c_str(), expected)
                        .c_str()
                  : "",
      advice.c_str()));
}

std::vector<uint8_t> rng_bytes(const rng::RngState& s) {
  std::vector<uint8_t> b(sizeof(s));
  std::memcpy(b.data(), &s, sizeof(s));
  return b;
}

// The config.json at `path`, parsed.
// As transformers writes it (a NemotronH config's bare Infinity included).
nlohmann::json read_config_json(const std::string& path) {
  return checkpoint::parse_python_json(checkpoint::read_text_file(path), path);
}

// FOLDER's generation_config.json as written (its eos ids are where transformers' generate() and stepgraph's stop,
// hf_import.h), checked to be JSON now; empty when the folder has none.
std::string generation_config_text(const std::string& folder) {
  const std::string path = folder + "/" + checkpoint::kGenerationConfigFile;
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) return std::string();
  std::string text = checkpoint::read_text_file(path);
  checkpoint::parse_python_json(text, path);
  return text;
}

// config.json's bos_token_id or eos_token_id as `source` (the file at `path`, named through `what`) has it; null
// when absent.
nlohmann::json source_token_id(const nlohmann::json& source, const char* key, const std::string& path,
                               const char* what) {
  if (!source.contains(key)) return nullptr;
  const nlohmann::json& value = source[key];
  if (!checkpoint::is_hf_token_id_value(value)) {
    throw Error(
        strprintf("%s: %s: %s = %s is not null, a token id or a list of token ids; fix the file "
                  "(transformers could not use it either)",
                  what, path.c_str(), key, value.dump().c_str()));
  }
  return value;
}

CheckpointSource source_of(const std::string& folder, const nlohmann::json& config_json,
                           int64_t max_position_embeddings, const std::string& path, const char* what) {
  return CheckpointSource{.max_position_embeddings = max_position_embeddings,
                          .bos_token_id = source_token_id(config_json, "bos_token_id", path, what),
                          .eos_token_id = source_token_id(config_json, "eos_token_id", path, what),
                          .generation_config = generation_config_text(folder),
                          .sliding_window = std::nullopt};  // the caller reads it from its own source
}

nlohmann::json id_or_null(const std::optional<int64_t>& id) {
  return id ? nlohmann::json(*id) : nlohmann::json();
}

// The exported config.json's keys that the model's spec does not decide (checkpointing.h says which).
void set_export_keys(nlohmann::json& model_config, const model::ModelSpec& spec, const CheckpointExport& exported) {
  const std::optional<CheckpointSource>& source = exported.source;
  if (source) {
    // The weights still serve the source's context; seq_length is only how much of it this run trained.
    checkpoint::set_hf_max_position_embeddings(model_config,
                                               std::max(source->max_position_embeddings, spec.seq_length));
    if (source->sliding_window) checkpoint::set_hf_mistral_sliding_window(model_config, *source->sliding_window);
  }
  // tokenizer.json is among the files of every tokenizer folder: none means the run has no tokenizer.
  const CheckpointTokenizer& tokenizer = exported.tokenizer;
  if (tokenizer.files.empty() && source) {
    checkpoint::set_hf_special_token_ids(model_config, source->bos_token_id, source->eos_token_id);
  } else {
    checkpoint::set_hf_special_token_ids(model_config, id_or_null(tokenizer.bos_token_id),
                                         id_or_null(tokenizer.eos_token_id));
  }
}

}  // namespace

CheckpointExport checkpoint_export(const config::Config& config,
                                   const std::optional<data::HfTokenizerInfo>& tokenizer) {
  CheckpointExport out;
  if (tokenizer) {
    out.tokenizer.dir = tokenizer->dir;
    out.tokenizer.files = tokenizer->files;
    if (tokenizer->bos_id >= 0) out.tokenizer.bos_token_id = tokenizer->bos_id;
    if (tokenizer->eod_id >= 0) out.tokenizer.eos_token_id = tokenizer->eod_id;
  }
  if (!config.checkpoint.pretrained_checkpoint) return out;
  const std::string folder =
      checkpoint::resolve_model_folder(*config.checkpoint.pretrained_checkpoint, "checkpoint.pretrained_checkpoint");
  const checkpoint::HfModelConfig hf = checkpoint::read_hf_config(folder);
  // Read again for the keys HfModelConfig does not keep as written (bos, and eos as a number or a list).
  out.source = source_of(folder, read_config_json(hf.path), hf.max_position_embeddings, hf.path,
                         "checkpoint.pretrained_checkpoint");
  out.source->sliding_window = hf.sliding_window;
  return out;
}

// The resumed folder's config.json was written by its save from that run's own source, so its values carry over
// every resume. It wins over checkpoint.pretrained_checkpoint: a resumed run does not read the pretrained weights
// (trainer.cpp: a checkpoint to resume wins), the folder already records the larger of the pretrained context and
// the positions trained (and the source's ids), and a pretrained_checkpoint changed between the runs would name a
// folder these weights did not come from. It is read as written, not by read_hf_config (which refuses what this
// run's model could not start from): only the source's context and token ids are needed here.
std::optional<CheckpointSource> resumed_checkpoint_source(const std::string& folder) {
  constexpr const char* what = "the resumed checkpoint";
  const std::string path = folder + "/" + checkpoint::kConfigFile;
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) return std::nullopt;
  const nlohmann::json config_json = read_config_json(path);
  const char* key = "max_position_embeddings";
  const nlohmann::json positions =
      config_json.is_object() ? config_json.value(key, nlohmann::json()) : nlohmann::json();
  if (!positions.is_number_integer() || positions.get<int64_t>() <= 0) {
    throw Error(
        strprintf("%s: %s: %s = %s is not a positive integer; restore the file from a backup, or set it "
                  "to the context the weights serve (model.seq_length for a model trained from scratch)",
                  what, path.c_str(), key, positions.dump().c_str()));
  }
  CheckpointSource source = source_of(folder, config_json, positions.get<int64_t>(), path, what);
  // A save of a run started from a Mistral or Phi-3 folder with a window: the window carries over too.
  const std::string model_type = hf_model_type(config_json);
  if (model_type == "mistral" || model_type == "phi3") {
    const nlohmann::json window = config_json.value("sliding_window", nlohmann::json());
    if (!window.is_null() && (!window.is_number_integer() || window.get<int64_t>() <= 0)) {
      throw Error(
          strprintf("%s: %s: sliding_window = %s is not a positive integer or null; restore the file from a "
                    "backup, or set it to the window of the Mistral or Phi-3 folder the run started from",
                    what, path.c_str(), window.dump().c_str()));
    }
    if (!window.is_null()) source.sliding_window = window.get<int64_t>();
  }
  return source;
}

std::string save_checkpoint(const std::string& dir, const config::Config& config, const model::ModelLayout& layout,
                            const TrainingState& state, const data::DataPosition& position, const ResumeRecord& record,
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
  ckpt.model_config = checkpoint::hf_model_config(layout.spec, "bfloat16");
  // As the config's class reads them (Phi3's q, k, v and gate, up fused); the optimizer's files keep the model's.
  ckpt.model = checkpoint::fuse_hf_tensors(hf_model_type(ckpt.model_config),
                                           tensors_of<TensorRef>(layout, bf16_base, TensorDtype::BF16, 2), 2);
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
  ckpt.state.config_hash = canonical_config_hash(config);
  ckpt.state.extra["run_id"] = record.run_id;
  if (record.samples_baseline != SamplesBaseline{}) {
    ckpt.state.extra[kSamplesBaselineKey] = {{"iteration", record.samples_baseline.iteration},
                                             {"consumed_samples", record.samples_baseline.consumed_samples}};
  }
  if (record.eval_pending) ckpt.state.extra[kEvalPendingKey] = true;
  for (const std::string& name : exported.tokenizer.files) {
    ckpt.extra_files.push_back({.source = exported.tokenizer.dir + "/" + name, .filename = name});
  }
  if (exported.source && !exported.source->generation_config.empty()) {
    ckpt.extra_texts.push_back(
        {.filename = checkpoint::kGenerationConfigFile, .text = exported.source->generation_config});
  }
  return checkpoint::save_checkpoint(dir, state.steps_done, checkpoint::training_checkpoint_contents(ckpt));
}

ResumeFolder find_resume_folder(const std::string& path, const std::string& what) {
  const checkpoint::CheckpointFolder folder = checkpoint::find_checkpoint_folder(path, what);
  ResumeFolder out{.path = folder.path, .note = ""};
  if (folder.newest_without_latest) {
    out.note = strprintf("%s %s has no %s (a save was interrupted before writing it): resuming its newest "
                         "iteration folder, %s, verified before use",
                         what.c_str(), path.c_str(), checkpoint::kLatestFile, out.path.c_str());
  }
  return out;
}

LoadedCheckpoint load_checkpoint(const std::string& path, const config::Config& config,
                                 const model::ModelLayout& layout, const std::string& what) {
  const auto n = static_cast<size_t>(layout.total());
  LoadedCheckpoint out;
  ResumeFolder folder = find_resume_folder(path, what);
  out.path = std::move(folder.path);
  out.note = std::move(folder.note);
  // Only expected (names, shapes, dtypes): the fp32 tensors are read where they are mapped, and the bf16 weights,
  // derived from the fp32 main weights, are only checked.
  checkpoint::TrainingCheckpointDest expected;
  uint8_t* const none = nullptr;
  expected.model = checkpoint::fuse_hf_tensors(hf_model_type(checkpoint::hf_model_config(layout.spec, "bfloat16")),
                                               tensors_of<TensorDest>(layout, none, TensorDtype::BF16, 2), 2);
  expected.main_params = tensors_of<TensorDest>(layout, none, TensorDtype::F32, 4);
  expected.exp_avg = expected.main_params;
  expected.exp_avg_sq = expected.main_params;
  auto opened =
      std::make_shared<checkpoint::OpenedTrainingCheckpoint>(checkpoint::open_training_checkpoint(out.path, expected));
  opened->model.reset();
  const checkpoint::TrainState& ts = opened->state;
  // One piece per tensor: the file holds them in the Hugging Face order without the flat buffer's gaps.
  const auto view = [&](const checkpoint::SafetensorsFile& file) {
    std::vector<model::FlatView::Piece> pieces;
    for (const model::ParamTensor& t : layout.tensors()) {
      const checkpoint::SafetensorsFile::Entry* e = file.find(t.name);
      SG_CHECK(e != nullptr && e->nbytes == static_cast<uint64_t>(t.numel) * 4, "load_checkpoint: " + t.name);
      pieces.push_back({.offset = t.offset, .count = t.numel, .data = reinterpret_cast<const std::byte*>(e->data)});
    }
    return model::FlatView(static_cast<int64_t>(n), std::move(pieces));
  };
  out.state.main_weights = view(*opened->main_params);
  out.state.exp_avg = view(*opened->exp_avg);
  out.state.exp_avg_sq = view(*opened->exp_avg_sq);
  out.mapped_files = std::move(opened);
  const std::string state_file = out.path + "/" + checkpoint::kTrainStateFile;
  const std::string advice = checkpoint::damaged_checkpoint_advice(out.path, "checkpoint.load");
  if (ts.rng_state.size() != sizeof(rng::RngState)) {
    throw Error(strprintf("%s: rng_state has %zu bytes, expected %zu; the file was edited or comes from another "
                          "program. %s",
                          state_file.c_str(), ts.rng_state.size(), sizeof(rng::RngState), advice.c_str()));
  }
  std::memcpy(&out.state.rng, ts.rng_state.data(), sizeof(rng::RngState));
  out.state.steps_done = ts.iteration;
  out.position = ts.data_position;
  out.train_state_crc = checkpoint::crc32_hex(checkpoint::file_digest(state_file).crc32);
  if (ts.extra.is_object() && ts.extra.contains("run_id") && ts.extra["run_id"].is_string()) {
    out.run_id = ts.extra["run_id"].get<std::string>();
  }
  out.eval_pending = ts.extra.is_object() && ts.extra.contains(kEvalPendingKey) &&
                     ts.extra[kEvalPendingKey].is_boolean() && ts.extra[kEvalPendingKey].get<bool>();
  out.same_config = ts.config_hash == canonical_config_hash(config);
  const SamplesBaseline recorded = recorded_baseline(ts, state_file, advice);
  check_consumed_samples(ts, state_file, config::batch_spec(config), out.same_config, recorded, advice);
  // From here on every step takes this configuration's global batch: a changed configuration starts anew.
  out.samples_baseline =
      out.same_config ? recorded : SamplesBaseline{ts.iteration, ts.data_position.consumed_samples};
  return out;
}

void LoadedCheckpoint::release_state() {
  state.main_weights = {};
  state.exp_avg = {};
  state.exp_avg_sq = {};
  mapped_files.reset();
}

void resume_data_position(const LoadedCheckpoint& loaded, data::DataLoader& loader) {
  if (loaded.position.per_source.size() != loader.num_sources()) {
    throw Error(strprintf(
        "%s/%s: its data position counts %zu data source(s) but this run's data has %zu: the checkpoint was saved "
        "with another dataset.data_path (or dataset.mock). Resume it with the data it was saved with (its run's "
        "config.yaml lists it), or start a run from its weights with checkpoint.pretrained_checkpoint=%s",
        loaded.path.c_str(), checkpoint::kTrainStateFile, loaded.position.per_source.size(), loader.num_sources(),
        loaded.path.c_str()));
  }
  try {
    loader.seek(loaded.position);
  } catch (const Error& e) {
    throw Error(
        strprintf("%s/%s: %s; resume from another checkpoint, or start a run from its weights with "
                  "checkpoint.pretrained_checkpoint=%s",
                  loaded.path.c_str(), checkpoint::kTrainStateFile, e.what(), loaded.path.c_str()));
  }
  if (!loaded.same_config) {
    log::warn(strprintf("%s was saved with a different configuration (model, optimizer, schedule or data "
                        "settings changed); resuming anyway, but the run will not match an uninterrupted one",
                        loaded.path.c_str()));
  }
}

std::string canonical_config_hash(const config::Config& config) {
  return checkpoint::config_hash_hex(canonical_config(config));
}

}  // namespace sg::train
