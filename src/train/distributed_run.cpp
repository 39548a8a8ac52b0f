#include "train/distributed_run.h"

#include <cuda_runtime.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "checkpoint/train_state.h"
#include "config/config_differences.h"
#include "core/error.h"
#include "core/log.h"
#include "core/strings.h"
#include "cuda/check.h"
#include "cuda/device.h"
#include "dist/nccl_gradient_reducer.h"
#include "dist/nccl_library.h"
#include "dist/sharding.h"
#include "reference/weight_fingerprint.h"

namespace sg::train {

void refuse_cpu_backend_for_ranks(const dist::WorldInfo& world, bool force_cpu) {
  // One rank on the CPU has nothing to reduce: the CPU backend trains it (backend_factory.cpp).
  if (world.world_size <= 1 || !(force_cpu || cuda::device_count() == 0)) return;
  throw Error(strprintf(
      "data parallelism (%d ranks) runs one rank per GPU with NCCL; the CPU reference backend "
      "trains in one process only (%s). Run a single process for the CPU backend, or the ranks "
      "on GPUs%s",
      world.world_size, force_cpu ? "--cpu was given" : "no GPU is visible", force_cpu ? " without --cpu" : ""));
}

std::unique_ptr<DistributedRun> DistributedRun::from_environment(const dist::EnvLookup& env) {
  const dist::WorldInfo world = dist::world_from_env(env);
  if (!world.data_parallel_path()) return nullptr;
  return std::make_unique<DistributedRun>(world, dist::rendezvous_settings_from_env(env));
}

DistributedRun::DistributedRun(const dist::WorldInfo& world, const dist::RendezvousSettings& settings)
    : world_(world), settings_(settings) {
  rendezvous_ = std::make_unique<dist::Rendezvous>(world, settings);
  log::info(describe());
}

DistributedRun::~DistributedRun() {
  if (!finished_ && rendezvous_) rendezvous_->report_failure("it stopped with an error (its output says which)");
  // Graphs before the communicator (dist/communicator.h): its destructor destroys every live graph first,
  // then aborts (not finished) or destroys it.
  communicator_.reset();
  rendezvous_.reset();
}

std::string DistributedRun::describe() const {
  std::string text = world_.describe();
  if (rendezvous_) text += ", rendezvous " + rendezvous_->where();
  if (communicator_) text += ", " + communicator_->describe();
  return text;
}

int DistributedRun::select_device() {
  if (device_ >= 0) return device_;
  const int count = cuda::device_count();
  const char* visible = std::getenv("CUDA_VISIBLE_DEVICES");
  device_ = dist::device_for_local_rank(world_, count, visible ? std::optional<std::string>(visible) : std::nullopt);
  SG_CUDA_CHECK(cudaSetDevice(device_));
  return device_;
}

dist::Communicator& DistributedRun::communicator() {
  if (communicator_) return *communicator_;
  select_device();
  const std::string id = rendezvous_->broadcast_from_rank0("nccl_unique_id", [] {
    const dist::NcclUniqueIdBytes bytes = dist::new_nccl_unique_id();
    return std::string(bytes.data(), bytes.size());
  });
  SG_CHECK(id.size() == sizeof(dist::NcclUniqueIdBytes),
           strprintf("rank %d received an NCCL unique id of %zu bytes from rank 0 (expected %zu)", rank(), id.size(),
                     sizeof(dist::NcclUniqueIdBytes)));
  dist::NcclUniqueIdBytes bytes;
  std::memcpy(bytes.data(), id.data(), bytes.size());
  communicator_ = std::make_unique<dist::Communicator>(bytes, world_.world_size, world_.rank);
  log::info(communicator_->describe());
  return *communicator_;
}

std::unique_ptr<dist::GradientReducer> DistributedRun::make_reducer(int64_t num_params, bool distributed_optimizer,
                                                                    int64_t bucket_size,
                                                                    const dist::GradientReadiness& readiness,
                                                                    bool overlap_grad_reduce) {
  dist::DataParallelLayout layout = dist::plan_data_parallel(num_params, world_.world_size, world_.rank,
                                                             distributed_optimizer, bucket_size, readiness,
                                                             overlap_grad_reduce);
  log::info(layout.describe());
  return std::make_unique<dist::NcclGradientReducer>(communicator(), std::move(layout));
}

std::unique_ptr<dist::GradientReducer> DistributedRun::make_step_reducer(const config::Config& config,
                                                                         int64_t num_params,
                                                                         const dist::GradientReadiness& readiness,
                                                                         bool graphs_capture_collectives) {
  select_device();
  const char* set = std::getenv("NCCL_GRAPH_REGISTER");
  const dist::GraphRegisterDecision decision =
      dist::graph_register_decision(graphs_capture_collectives, /*expandable_memory=*/false,
                                    cuda::device_properties().cc_major,
                                    set ? std::optional<std::string>(set) : std::nullopt);
  if (!decision.error.empty()) throw Error(decision.error);
  if (decision.set_zero && !communicator_) ::setenv("NCCL_GRAPH_REGISTER", "0", 1);
  log::info(decision.note);
  return make_reducer(num_params, config.optimizer.use_distributed_optimizer, config.ddp.bucket_size.value_or(0),
                      readiness, config.ddp.overlap_grad_reduce);
}

dist::StopAgreement DistributedRun::stop_everywhere(int64_t step, int local_reason) {
  // Generous: a rank may be writing a checkpoint while the others wait here. A dead rank ends the wait
  // at once through the store's liveness signal.
  return rendezvous_->agree_stop(strprintf("stop/%lld", static_cast<long long>(step)), local_reason, 24 * 3600.0);
}

bool DistributedRun::skip_evaluation_everywhere(int64_t step, bool local_skip) {
  const int reason = local_skip ? dist::kStopForOtherReason : 0;
  return rendezvous_->agree_stop(strprintf("eval-skip/%lld", static_cast<long long>(step)), reason, 24 * 3600.0).stop;
}

std::string DistributedRun::broadcast_from_rank0(const std::string& key, const std::function<std::string()>& make) {
  return rendezvous_->broadcast_from_rank0(key, make);
}

void DistributedRun::require_same(const std::string& key, const std::string& value, const std::string& what) {
  rendezvous_->require_same(key, value, what);
}

namespace {

// "2", "2, 3", or the first eight and how many more.
std::string rank_list(const std::vector<int>& ranks) {
  constexpr size_t kShown = 8;
  std::vector<std::string> shown;
  for (size_t i = 0; i < ranks.size() && i < kShown; ++i) shown.push_back(std::to_string(ranks[i]));
  if (ranks.size() > kShown) shown.push_back(strprintf("%zu more", ranks.size() - kShown));
  return join(shown, ", ");
}

std::string hex_words(const std::vector<uint64_t>& values) {
  std::string out;
  for (const uint64_t v : values) out += strprintf("%016llx ", static_cast<unsigned long long>(v));
  return out;
}

std::vector<uint64_t> parse_hex_words(const std::string& text) {
  std::vector<uint64_t> out;
  for (size_t at = 0; at + 16 <= text.size(); at += 17) out.push_back(std::stoull(text.substr(at, 16), nullptr, 16));
  return out;
}

}  // namespace

void DistributedRun::require_same_config(const config::Config& config) {
  const std::string lines = config::key_value_lines(config);
  const std::optional<dist::RankDifference> d = rendezvous_->differences_from_rank0(
      strprintf("config/%lld", static_cast<long long>(++configs_checked_)), checkpoint::config_hash_hex(lines), lines);
  if (!d) return;
  const std::vector<config::KeyDifference> differences = config::key_differences(d->rank0, d->first);
  constexpr size_t kShownKeys = 6;
  std::vector<std::string> keys;
  for (size_t i = 0; i < differences.size() && i < kShownKeys; ++i) {
    const config::KeyDifference& k = differences[i];
    keys.push_back(strprintf("%s = %s on rank %d, %s on rank 0", k.key.c_str(), k.b.c_str(), d->ranks[0], k.a.c_str()));
  }
  if (differences.size() > kShownKeys) keys.push_back(strprintf("%zu more keys", differences.size() - kShownKeys));
  if (keys.empty()) keys.push_back("no key differs, but the texts do (another stepgraph build?)");
  throw Error(
      strprintf("the ranks run different configurations: %s. %s %s %s from rank 0's (of %d ranks). Start "
                "every rank with the same recipe, --config-file files and overrides (check each node's "
                "command line and recipe files)",
                join(keys, "; ").c_str(), d->ranks.size() == 1 ? "Rank" : "Ranks", rank_list(d->ranks).c_str(),
                d->ranks.size() == 1 ? "differs" : "differ", world_size()));
}

void DistributedRun::require_same_weights(int64_t step, const std::vector<uint64_t>& fingerprints,
                                          const std::function<std::string(int64_t)>& describe) {
  const std::optional<dist::RankDifference> d = rendezvous_->differences_from_rank0(
      strprintf("weights/%lld", static_cast<long long>(step)),
      strprintf("%016llx", static_cast<unsigned long long>(ref::fingerprint_digest(fingerprints))),
      hex_words(fingerprints));
  if (!d) return;
  const std::vector<uint64_t> rank0 = parse_hex_words(d->rank0), first = parse_hex_words(d->first);
  std::vector<int64_t> differing;
  for (size_t i = 0; i < rank0.size() && i < first.size(); ++i) {
    if (rank0[i] != first[i]) differing.push_back(static_cast<int64_t>(i));
  }
  constexpr size_t kShown = 3;
  std::vector<std::string> what;
  for (size_t i = 0; i < differing.size() && i < kShown; ++i) what.push_back(describe(differing[i]));
  if (rank0.size() != first.size())
    what.push_back(strprintf("%zu fingerprints against rank 0's %zu", first.size(), rank0.size()));
  throw Error(strprintf(
      "validation.test_mode: after step %lld the data-parallel ranks hold different weights: %s %s %s from rank 0 "
      "(of %d ranks); rank %d's weights differ in %zu of %zu chunks of %lld elements, the first in: %s. Every rank "
      "applies the "
      "same update to the same weights, so this is a fault (a GPU's memory or arithmetic, the network, a corrupted "
      "load) or a bug: resume from the last checkpoint, and if it comes back on the same node, take that node out",
      static_cast<long long>(step), d->ranks.size() == 1 ? "rank" : "ranks", rank_list(d->ranks).c_str(),
      d->ranks.size() == 1 ? "differs" : "differ", world_size(), d->ranks[0], differing.size(), rank0.size(),
      static_cast<long long>(ref::kFingerprintChunkElements), join(what, "; ").c_str()));
}

graph::GraphRegistry::CaptureCheck DistributedRun::capture_check() {
  return [this](const graph::GraphInfo& g) {
    const long long n = ++captures_checked_;
    require_same(strprintf("captured-graph/%lld", n),
                 strprintf("graph '%s' of %llu nodes (%llu kernels)", g.name.c_str(),
                           static_cast<unsigned long long>(g.nodes), static_cast<unsigned long long>(g.kernel_nodes)),
                 strprintf("captured CUDA graph %lld (every rank must capture the same graphs, or their collectives "
                           "would wait on each other forever)",
                           n));
  };
}

data::ScanShare DistributedRun::corpus_scan_share() {
  // Through rank 0, not an all-gather: each rank's part goes to rank 0 alone and the one combined result back, so the
  // store carries O(ranks) messages a corpus, not O(ranks^2). 24 h, as stop_everywhere: a rank's part on a slow disk
  // takes as long as it takes, and a rank that fails ends the wait at once; rank 0 logs which rank it waits for.
  return {
      .part = world_.rank,
      .parts = world_.world_size,
      .exchange = [this](const std::string& mine, const data::ScanCombine& combine) {
        constexpr double kWait = 24 * 3600.0, kSayEvery = 60.0;
        const std::string key = strprintf("corpus-scan/%lld", static_cast<long long>(++corpus_scans_));
        dist::StoreClient& store = rendezvous_->store();
        if (world_.rank != 0) {
          store.set(strprintf("%s/rank%d", key.c_str(), world_.rank), mine);
          return store.get(key, kWait);
        }
        std::vector<std::string> parts = {mine};
        for (int r = 1; r < world_.world_size; ++r) {
          parts.push_back(store.get(
              strprintf("%s/rank%d", key.c_str(), r), kWait,
              [r](double waited) {
                log::info(strprintf("waiting for rank %d's part of the corpus scan (%.0f s so far)", r, waited));
              },
              kSayEvery));
        }
        std::string combined = combine(parts);
        store.set(key, combined);
        return combined;
      }};
}

void DistributedRun::save_everywhere(int64_t step, const std::function<void()>& write) {
  constexpr const char* kSaved = "saved";
  std::string outcome;
  if (is_writer()) {
    try {
      write();
    } catch (const std::exception& e) {
      // Reported before anything else: the others, waiting below, end naming it (not a failure of their own).
      report_failure(e.what());
      throw;
    }
    outcome = kSaved;
  }
  // Generous, as the stop agreement: rank 0's write may take hours; a dead rank ends the wait at once.
  const std::string key = strprintf("save/%lld", static_cast<long long>(step));
  const std::vector<std::string> all = rendezvous_->store().all_gather(key, outcome, 24 * 3600.0);
  SG_CHECK(!all.empty() && all[0] == kSaved,
           strprintf("rank %d: rank 0 did not save the checkpoint of step %lld (it answered '%s')", rank(),
                     static_cast<long long>(step), all.empty() ? "" : all[0].c_str()));
}

void DistributedRun::report_failure(const std::string& message) noexcept {
  if (rendezvous_) rendezvous_->report_failure(message);
}

void DistributedRun::end_failed_rank(const std::string& message, int exit_code) noexcept {
  report_failure(message);  // returns once the store passed it on: the others are ending
  std::fflush(nullptr);
  ::_exit(exit_code);
}

void DistributedRun::finish() {
  rendezvous_->finish();  // every rank is done with every collective
  if (communicator_) communicator_->mark_finished();
  finished_ = true;
  communicator_.reset();  // graphs first, then ncclCommDestroy
}

}  // namespace sg::train
