// The trainer's data-parallel paths that run without a GPU: one rank (as `stepgraph launch -n 1` starts it) joins the
// rendezvous and trains on the CPU backend through the same save, resume and failure paths as ranks on GPUs; and two
// ranks run the step loop (run_steps) each on its own CPU backend, for what every rank does at a save. Each run is a
// forked process (tests/dist/rank_processes.h): a failed rank ends its process.
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "checkpoint/checkpoint_dir.h"
#include "config/config.h"
#include "config/model_config.h"
#include "config/validate.h"
#include "dist/local_launcher.h"
#include "dist/loopback_world.h"
#include "dist/rank_processes.h"
#include "test_dir.h"
#include "train/backend_factory.h"
#include "train/cpu_backend.h"
#include "train/distributed_run.h"
#include "train/run_steps.h"
#include "train/trainer.h"

namespace sg::train {
namespace {

namespace fs = std::filesystem;

config::Config tiny_cpu_run(int64_t iters, const std::vector<std::string>& more = {}) {
  std::vector<std::string> overrides = {
      "model.num_layers=1",          "model.hidden_size=64",        "model.ffn_hidden_size=128",
      "model.num_attention_heads=2", "model.num_query_groups=2",    "model.seq_length=32",
      "dataset.seq_length=32",       "model.vocab_size=256",        "train.micro_batch_size=2",
      "train.global_batch_size=2",   "scheduler.lr_warmup_iters=1", "train.train_iters=" + std::to_string(iters)};
  overrides.insert(overrides.end(), more.begin(), more.end());
  return config::load_config("llama/tiny", overrides);
}

// train() as rank 0 of a world of one on loopback; `check` gets the summary and returns the exit code.
test::RankOutcome train_as_one_rank(const config::Config& config, TrainOptions options,
                                    const std::function<int(const TrainSummary&)>& check) {
  const int port = dist::find_free_port();
  return test::run_ranks(1, [&](int rank) {
    dist::RendezvousSettings settings;
    settings.timeout_seconds = 20.0;
    DistributedRun run(test::loopback_world(rank, 1, port), settings);
    options.distributed = &run;
    options.force_cpu = true;
    int code = 0;
    try {
      code = check(train(config, options));
    } catch (const ReportedError&) {
      return 40;  // train() came back through the backend's release
    }
    run.finish();
    return code;
  })[0];
}

// A failure of one rank's own once steps run (here its batch dump cannot be written at step 3: a folder stands where
// the file goes; a loader error or bad_alloc alike) ends that rank's process with the failure's status, after printing
// it and telling the other ranks, without releasing the backend: on a GPU its stream may hold a step whose all-reduce
// waits for ranks that have just ended, and the release (cudaStreamSynchronize) waited for it forever. Before, train()
// threw on, through the backend's release.
TEST(DistributedTrainer, ARankWhoseStepsFailEndsItsProcessWithTheFailuresStatus) {
  const fs::path dir = test::fresh_test_dir("dp_fail");
  fs::create_directories(dir / "dump" / "batch_0000003.safetensors");
  TrainOptions options;
  options.run_dir = (dir / "run").string();
  options.dump_batches_dir = (dir / "dump").string();
  const test::RankOutcome outcome = train_as_one_rank(tiny_cpu_run(6), options, [](const TrainSummary&) { return 0; });
  EXPECT_EQ(outcome.code(), 1) << outcome.stderr_text;
  EXPECT_NE(outcome.stderr_text.find("error: "), std::string::npos) << outcome.stderr_text;
  EXPECT_NE(outcome.stderr_text.find("batch_0000003.safetensors"), std::string::npos) << outcome.stderr_text;
  EXPECT_TRUE(fs::exists(dir / "dump" / "batch_0000002.safetensors")) << "the steps before it ran";
  fs::remove_all(dir);
}

// The saves and the resume of a data-parallel run (every rank meets rank 0 after its write; rank 0 resolves the
// iteration folder every rank loads, and the ranks compare what they loaded) at world size one: a run saved by a rank
// resumes from its latest iteration.
TEST(DistributedTrainer, ARankSavesThroughTheStoreAndResumesTheFolderRankZeroChose) {
  const fs::path dir = test::fresh_test_dir("dp_resume_run");
  const std::string save = (dir / "ckpt").string();
  TrainOptions options;
  options.run_dir = (dir / "run").string();
  const test::RankOutcome first =
      train_as_one_rank(tiny_cpu_run(4, {"checkpoint.save=" + save, "checkpoint.save_interval=2"}), options,
                        [](const TrainSummary& s) { return s.steps_done == 4 ? 0 : 1; });
  ASSERT_EQ(first.code(), 0) << first.stderr_text;
  EXPECT_EQ(checkpoint::read_latest_iteration(save), 4);
  EXPECT_TRUE(fs::exists(dir / "ckpt" / "iter_0000002"));
  const test::RankOutcome resumed = train_as_one_rank(
      tiny_cpu_run(6, {"checkpoint.save=" + save, "checkpoint.load=" + save, "checkpoint.save_interval=2"}), options,
      [](const TrainSummary& s) { return s.start_step == 4 && s.steps_done == 6 ? 0 : 1; });
  EXPECT_EQ(resumed.code(), 0) << resumed.stderr_text;
  EXPECT_NE(resumed.stderr_text.find("resumed from " + save + "/iter_0000004"), std::string::npos)
      << resumed.stderr_text;
  EXPECT_EQ(checkpoint::read_latest_iteration(save), 6);
  fs::remove_all(dir);
}

// The CPU reference backend, counting the state downloads (TrainingBackend::state()) of its rank, and the times it
// joined another rank's (join_state_gather).
class StateCountingBackend final : public TrainingBackend {
 public:
  StateCountingBackend(const config::Config& config, const model::ModelSpec& model, const model::BatchSpec& batch)
      : inner_(model, batch, optimizer_spec(config), {static_cast<uint64_t>(config.rng.seed), 0}) {}
  std::string description() const override { return inner_.description(); }
  std::string memory_plan() const override { return inner_.memory_plan(); }
  const model::ModelLayout& layout() const override { return inner_.layout(); }
  void submit(const model::HostBatch& batch) override { inner_.submit(batch); }
  std::vector<StepResult> collect(int in_flight) override { return inner_.collect(in_flight); }
  void eval_submit(const model::HostBatch& batch) override { inner_.eval_submit(batch); }
  EvalResult eval_collect() override { return inner_.eval_collect(); }
  TrainingState state() override {
    ++downloads;
    return inner_.state();
  }
  void join_state_gather() override { ++joins; }
  void load_state(const TrainingStateView& state) override { inner_.load_state(state); }

  int downloads = 0;
  int joins = 0;

 private:
  CpuBackend inner_;
};

// Two ranks run `iters` steps of run_steps, saving every step into `save`, each on its own CPU backend (nothing
// reduced: what a save does is the point); each exits with the number of states its backend downloaded plus 10 x
// the gathers it joined, or with what `exit_code` makes of its rank and the downloads once its steps are done. `more`: overrides; `setup` adjusts a
// rank's options.
std::vector<test::RankOutcome> two_ranks_saving(
    const fs::path& dir, int64_t iters, bool distributed_optimizer, const std::vector<std::string>& more = {},
    const std::function<void(int rank, TrainOptions& options)>& setup = nullptr,
    const std::function<int(int rank, int downloads)>& exit_code = nullptr) {
  const std::string save = (dir / "ckpt").string();
  std::vector<std::string> overrides = {"dataset.mock=true", "train.global_batch_size=4", "checkpoint.save=" + save,
                                        "checkpoint.save_interval=1"};
  overrides.insert(overrides.end(), more.begin(), more.end());
  config::Config raw = tiny_cpu_run(iters, overrides);
  raw.data_parallel_size = 2;
  raw.optimizer.use_distributed_optimizer = distributed_optimizer;
  raw.ddp.use_distributed_optimizer = distributed_optimizer;
  const config::ValidationReport report = config::validate(raw);
  EXPECT_TRUE(report.ok()) << (report.violations.empty() ? "" : config::format_violation(report.violations[0]));
  const config::Config& config = report.config;
  const int port = dist::find_free_port();
  return test::run_ranks(2, [&](int rank) {
    dist::RendezvousSettings settings;
    settings.timeout_seconds = 20.0;
    DistributedRun run(test::loopback_world(rank, 2, port), settings);
    const model::ModelSpec model = config::model_spec(config);
    const model::BatchSpec batch = config::batch_spec(config);
    BatchSource data(config, model, batch, {}, {.rank = rank, .scan_share = {}});
    Evaluation evaluation(config, model, batch, {}, {.rank = rank, .scan_share = {}});
    StateCountingBackend backend(config, model, batch);
    CheckpointDirs dirs;
    if (run.is_writer()) dirs = prepare_checkpoint_dirs(config.checkpoint);
    RunContext context;
    context.evaluations = {&evaluation};
    context.start = std::chrono::steady_clock::now();
    context.run_id = "two-ranks";
    context.dirs = &dirs;
    TrainOptions options;
    options.run_dir = (dir / ("run_" + std::to_string(rank))).string();
    options.distributed = &run;
    if (setup) setup(rank, options);
    std::optional<LoadedCheckpoint> loaded;
    std::optional<PretrainedStart> pretrained;
    TrainSummary summary;
    summary.train_iters = iters;
    run_steps(config, options, model, batch, backend, data, loaded, pretrained, context, summary);
    if (summary.steps_done != iters) return 90;
    const int code = exit_code ? exit_code(rank, backend.downloads) : backend.downloads + 10 * backend.joins;
    run.finish();
    return code;
  });
}

// Only rank 0 writes a data-parallel run's checkpoints, and only rank 0 downloads the state to save it
// (TrainingBackend::state()): another rank's whole fp32 state would be downloaded into host memory to be thrown away
// (before, every rank downloaded it at every save without the distributed optimizer, and every rank did with it). The
// other ranks join the download's collectives instead (join_state_gather: the distributed optimizer's gathers of the
// shards, which every rank must join), at every save, with the distributed optimizer or without. Either way every
// rank meets rank 0 at each save.
TEST(DistributedTrainer, OnlyTheWritingRankDownloadsTheStateToSaveIt) {
  const fs::path dir = test::fresh_test_dir("dp_save_downloads");
  // Three steps, three saves (the final one is step 3's).
  for (const bool sharded : {false, true}) {
    SCOPED_TRACE(sharded ? "distributed optimizer" : "plain");
    const fs::path run = dir / (sharded ? "sharded" : "plain");
    const std::vector<test::RankOutcome> ranks = two_ranks_saving(run, 3, sharded);
    ASSERT_EQ(ranks.size(), 2u);
    EXPECT_EQ(ranks[0].code(), 3) << "3 downloads, no join\n" << ranks[0].stderr_text;
    EXPECT_EQ(ranks[1].code(), 30) << "no download, 3 joins\n" << ranks[1].stderr_text;
    EXPECT_EQ(checkpoint::list_iterations((run / "ckpt").string()), (std::vector<int64_t>{1, 2, 3}));
    EXPECT_NE(ranks[0].stderr_text.find("saved checkpoint"), std::string::npos) << ranks[0].stderr_text;
    EXPECT_EQ(ranks[1].stderr_text.find("saved checkpoint"), std::string::npos) << ranks[1].stderr_text;
  }
  fs::remove_all(dir);
}

// checkpoint.most_recent_k in a data-parallel run: only the writing rank removes old folders, inside the write that
// DistributedRun::save_everywhere runs, so every rank returns from a save only once its removals are done too. The
// writer's removal of its last old folder is slowed down; the other rank, right after its steps, already sees only
// the newest folder (a removal after the save's barrier would still be running then).
TEST(DistributedTrainer, OnlyTheWritingRankRemovesOldCheckpointsInsideTheSave) {
  const fs::path dir = test::fresh_test_dir("dp_retention");
  const std::string save = (dir / "ckpt").string();
  int removal_steps = 0;  // in each rank's own process
  const std::vector<test::RankOutcome> ranks = two_ranks_saving(
      dir, 3, false, {"checkpoint.most_recent_k=1"},
      [&](int, TrainOptions& options) {
        options.on_checkpoint_removal = [&](const std::string& stage, const std::string& path) {
          ++removal_steps;
          if (stage == "remove" && path.ends_with("iter_0000002.removing")) {
            std::this_thread::sleep_for(std::chrono::milliseconds(500));
          }
        };
      },
      [&](int rank, int) {
        if (rank == 0) return removal_steps;  // rename and remove of iter_0000001, then of iter_0000002
        if (removal_steps != 0) return 91;
        const bool pruned = checkpoint::list_iterations(save) == std::vector<int64_t>{3} &&
                            !fs::exists(save + "/iter_0000002.removing");
        return pruned ? 0 : 92;
      });
  ASSERT_EQ(ranks.size(), 2u);
  EXPECT_EQ(ranks[0].code(), 4) << ranks[0].stderr_text;
  EXPECT_EQ(ranks[1].code(), 0) << ranks[1].stderr_text;
  EXPECT_EQ(checkpoint::list_iterations(save), (std::vector<int64_t>{3}));
  EXPECT_NE(ranks[0].stderr_text.find("checkpoint.most_recent_k=1: removed iter_0000002"), std::string::npos)
      << ranks[0].stderr_text;
  EXPECT_EQ(ranks[1].stderr_text.find("most_recent_k"), std::string::npos) << ranks[1].stderr_text;
  fs::remove_all(dir);
}

}  // namespace
}  // namespace sg::train
