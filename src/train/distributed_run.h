#pragma once
// The data-parallel side of one `stepgraph train` / `stepgraph bench` process: the rank this process
// is (dist/world_env.h), the joined rendezvous (dist/rendezvous.h), its GPU, the NCCL communicator and
// the gradient reducer the step calls.
//
// Lifetime, and the order things end in (docs/distributed.md):
//   join (every rank connected to rank 0's store) -> select_device() -> communicator() (rank 0's NCCL
//   unique id through the store, ncclCommInitRank) -> make_reducer() -> training -> finish()
//   finish()     normal end: a barrier with every rank, then the graphs, then ncclCommDestroy
//   destructor   without finish() (an exception): the other ranks are told at once (they end within
//                seconds), every graph is destroyed, then ncclCommAbort
//   end_failed_rank()  the trainer's steps failed: the others are told, then _exit before the backend is
//                released (its stream may wait in a collective the others left)
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "config/config.h"
#include "data/token_scan_share.h"
#include "dist/communicator.h"
#include "dist/gradient_reducer.h"
#include "dist/rendezvous.h"
#include "dist/world_env.h"
#include "graph/registry.h"

namespace sg::train {

// Throws sg::Error when `world` has more than one rank and this process would train on the CPU backend
// (`force_cpu`, or no GPU visible), which trains one process only: called before the rendezvous, so the rank
// says so at once instead of after waiting for the others (STEPGRAPH_RENDEZVOUS_TIMEOUT).
void refuse_cpu_backend_for_ranks(const dist::WorldInfo& world, bool force_cpu);

class DistributedRun {
 public:
  // Joins the run the environment describes (blocks until every rank is there); nullptr when it
  // describes a plain single process (dist::WorldInfo::data_parallel_path: no launcher, or one Slurm task).
  static std::unique_ptr<DistributedRun> from_environment(const dist::EnvLookup& env = dist::process_environment());

  DistributedRun(const dist::WorldInfo& world, const dist::RendezvousSettings& settings);
  ~DistributedRun();
  DistributedRun(const DistributedRun&) = delete;
  DistributedRun& operator=(const DistributedRun&) = delete;

  int rank() const { return world_.rank; }
  int world_size() const { return world_.world_size; }
  bool is_writer() const { return world_.rank == 0; }  // checkpoints, metrics.jsonl, the log
  const dist::WorldInfo& world() const { return world_; }
  // "rank 1 of 2 (local rank 1, torchrun), rendezvous tcp 127.0.0.1:29500[, NCCL 2.28.3 (...) on GPU 1]"
  std::string describe() const;

  // Makes this rank's GPU current (dist/world_env.h device_for_local_rank). Idempotent; before any other
  // CUDA work of the process. Throws sg::Error without a usable GPU for this rank.
  int select_device();
  // The communicator over every rank, created on first use (collective: every rank calls it).
  dist::Communicator& communicator();
  // A reducer for a step with `num_params` flat parameters (dist/sharding.h; bucket_size <= 0: default)
  // whose backward finishes them as `readiness` says (model/gradient_readiness.h).
  std::unique_ptr<dist::GradientReducer> make_reducer(int64_t num_params, bool distributed_optimizer,
                                                      int64_t bucket_size, const dist::GradientReadiness& readiness,
                                                      bool overlap_grad_reduce);
  // The reducer for the training step of a validated `config` with `num_params` flat parameters: selects
  // the GPU, applies the NCCL_GRAPH_REGISTER rule (dist/communicator.h; NCCL reads it when the
  // communicator is created), then make_reducer with optimizer.use_distributed_optimizer,
  // ddp.bucket_size and ddp.overlap_grad_reduce. `graphs_capture_collectives`: some graph of the run holds a
  // collective (train/gpu_backend.h collectives_captured_in_graphs: the whole step with impl local, the
  // evaluation's loss all-reduce in any graph mode). `readiness`: model::gradient_readiness of the step's layout.
  std::unique_ptr<dist::GradientReducer> make_step_reducer(const config::Config& config, int64_t num_params,
                                                           const dist::GradientReadiness& readiness,
                                                           bool graphs_capture_collectives);

  // Every rank stops after the same step `step` when any rank has a reason to (so none waits in a collective
  // for one that left), and a signal to one rank is every rank's exit status. `local_reason`: this rank's
  // signal number, dist::kStopForOtherReason or 0 (dist/rendezvous.h).
  dist::StopAgreement stop_everywhere(int64_t step, int local_reason);
  // True on every rank when any rank skips the evaluation due after `step` (a stop, a failed metrics write):
  // a rank that evaluated alone would wait in the loss reduction for ranks that never join it.
  bool skip_evaluation_everywhere(int64_t step, bool local_skip);
  // Rank 0's value on every rank (rank 0 computes it; e.g. which checkpoint to resume).
  std::string broadcast_from_rank0(const std::string& key, const std::function<std::string()>& make);
  // Throws sg::Error on every rank unless all ranks pass the same value (e.g. the captured graph's shape).
  void require_same(const std::string& key, const std::string& value, const std::string& what);
  // Throws sg::Error on every rank unless every rank runs the same configuration: every key's value
  // (config/config_differences.h), as each rank loaded it, before its own changes. Ranks with another lr would
  // train apart silently (the same gradients, other updates), and ranks with another batch, model or graph
  // setting would wait on each other in a collective until a timeout that names nothing. The error names the
  // ranks that differ from rank 0 and the first keys in which the first of them does. One digest a rank goes
  // through the store; the texts only when they differ.
  void require_same_config(const config::Config& config);
  // validation.test_mode (Megatron's realtime consistency test): every rank's weight fingerprints after step `step`
  // (model/weight_fingerprints.h) must be rank 0's. Throws sg::Error on every rank otherwise, naming the step, the
  // ranks that differ and what the first differing fingerprints of the first of them cover (`describe(index)`). One
  // digest a rank goes through the store; the fingerprints only when they differ.
  void require_same_weights(int64_t step, const std::vector<uint64_t>& fingerprints,
                            const std::function<std::string(int64_t)>& describe);
  // The check every graph registry of the run applies to its captures (graph/registry.h): every rank captures the
  // same graphs in the same order (same loop, same config), so each rank's n-th capture is compared with the
  // others' n-th (name, nodes, kernels) before its first launch; ranks whose captured collectives differ would
  // wait on each other forever at that launch. The check refers to this run, which must outlive it.
  graph::GraphRegistry::CaptureCheck capture_check();
  // The ranks' shares of the scan of every corpus their loaders open (data/token_scan_share.h): rank r scans the
  // r-th of world_size parts, sends its result to rank 0 through the store (key corpus-scan/<n>/rank<r> for the n-th
  // corpus), and every rank gets rank 0's combination of them (corpus-scan/<n>). Every rank opens the same corpora
  // in the same order (one config); ranks whose n-th corpora differ stop naming both. Not thread-safe (the loaders
  // are made on one thread); the share refers to this run, which must outlive it.
  data::ScanShare corpus_scan_share();
  // The checkpoint save after `step`, by every rank (each after the backend's state(), collective with the
  // distributed optimizer): rank 0 runs `write` (the others ignore it), then every rank meets the others at a
  // barrier for this save (24 h, as stop_everywhere: a large save takes hours; a dead rank ends the wait at once)
  // and returns only once rank 0's write is done. A rank that returned early and then failed (a failed metrics
  // write ends the run after the final save) would abort rank 0 in the middle of writing and lose the checkpoint.
  // A write that throws is reported first (every other rank ends naming it, status 70), then rethrown on rank 0.
  void save_everywhere(int64_t step, const std::function<void()>& write);

  void report_failure(const std::string& message) noexcept;
  // How a rank whose steps failed ends (the caller printed the error): the other ranks are told (they end at once,
  // status 70), stdio is flushed and the process _exits with `exit_code` without releasing the device. Its stream
  // may hold collectives of steps in flight that can never complete now that the others have ended: releasing the
  // GPU (the backend's cudaStreamSynchronize) would wait for them forever. The driver reclaims the device, as for
  // the ranks that end because of it.
  [[noreturn]] void end_failed_rank(const std::string& message, int exit_code) noexcept;
  void finish();

 private:
  dist::WorldInfo world_;
  dist::RendezvousSettings settings_;
  std::unique_ptr<dist::Rendezvous> rendezvous_;
  std::unique_ptr<dist::Communicator> communicator_;
  int device_ = -1;
  bool finished_ = false;
  int64_t captures_checked_ = 0;
  int64_t corpus_scans_ = 0;
  int64_t configs_checked_ = 0;
};

}  // namespace sg::train
