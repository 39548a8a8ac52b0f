// Checkpoint folders: save/load round trip through `latest`, refusal of mismatched shapes, and
// atomicity — a save killed at any point leaves `latest` naming a whole, loadable checkpoint, and a folder an
// interrupted re-save moved aside is restored.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "checkpoint_test_util.h"
#include "core/error.h"
#include "checkpoint/checkpoint_dir.h"
#include "checkpoint/durable_io.h"
#include "checkpoint/hf_config.h"

namespace sg::checkpoint {
namespace {

namespace fs = std::filesystem;

using test::Fixture;

// Loads `path` into fresh buffers and checks every byte against the fixture of `iteration`.
void expect_loads_iteration(const std::string& path, int64_t iteration, size_t big_floats = 0) {
  const Fixture want(iteration, big_floats);
  Fixture got(iteration + 1000, big_floats);  // different values, same shapes
  got.model.fill(0x5A);
  TrainingCheckpointDest dest{got.model.dests(), got.main_params.dests(), got.exp_avg.dests(),
                              got.exp_avg_sq.dests()};
  if (big_floats > 0)
    dest.main_params.push_back(
        {"zz.big", TensorDtype::F32, {static_cast<int64_t>(big_floats)}, got.big.data()});
  const TrainState state = load_training_checkpoint(path, dest);
  EXPECT_EQ(state, want.state);
  EXPECT_EQ(got.model.bytes, want.model.bytes);
  EXPECT_EQ(got.main_params.bytes, want.main_params.bytes);
  EXPECT_EQ(got.exp_avg.bytes, want.exp_avg.bytes);
  EXPECT_EQ(got.exp_avg_sq.bytes, want.exp_avg_sq.bytes);
  EXPECT_EQ(got.big, want.big);
}

TEST(CheckpointDir, SaveLoadRoundTripThroughLatest) {
  test::ScratchDir dir("ckpt_roundtrip");
  const Fixture f(100);
  const std::string saved = save_checkpoint(dir.str(), 100, f.contents());
  EXPECT_EQ(saved, dir.str() + "/iter_0000100");
  for (const char* name : {kModelFile, kConfigFile, kOptimizerMainParamsFile, kOptimizerExpAvgFile,
                           kOptimizerExpAvgSqFile, kTrainStateFile}) {
    EXPECT_TRUE(fs::exists(saved + "/" + name)) << name;
  }
  EXPECT_EQ(read_text_file(dir.str() + "/" + kLatestFile), "100\n");
  EXPECT_EQ(read_latest_iteration(dir.str()), 100);
  EXPECT_EQ(resolve_checkpoint(dir.str()), saved);
  EXPECT_EQ(resolve_checkpoint(saved), saved);
  expect_loads_iteration(dir.str(), 100);
  expect_loads_iteration(saved, 100);

  // A newer save moves latest; the older folder stays.
  save_checkpoint(dir.str(), 200, Fixture(200).contents());
  EXPECT_EQ(read_latest_iteration(dir.str()), 200);
  expect_loads_iteration(dir.str(), 200);
  expect_loads_iteration(saved, 100);

  // Re-saving an existing iteration replaces it whole.
  Fixture again(200);
  again.state.extra = {{"resaved", true}};
  save_checkpoint(dir.str(), 200, again.contents());
  Fixture got(7);
  const TrainState st = load_training_checkpoint(
      dir.str(),
      {got.model.dests(), got.main_params.dests(), got.exp_avg.dests(), got.exp_avg_sq.dests()});
  EXPECT_EQ(st.extra["resaved"], true);
  for (const auto& e : fs::directory_iterator(dir.path)) {
    EXPECT_EQ(e.path().filename().string().find(".tmp-"), std::string::npos) << e.path();
    EXPECT_EQ(e.path().filename().string().find(".old-"), std::string::npos) << e.path();
  }

  // Weights-only load: empty optimizer lists skip those files.
  Fixture weights(1);
  load_training_checkpoint(dir.str(), {weights.model.dests(), {}, {}, {}});
  EXPECT_EQ(weights.model.bytes, again.model.bytes);
}

TEST(CheckpointDir, MismatchedShapesAreRefusedBeforeAnyCopy) {
  test::ScratchDir dir("ckpt_mismatch");
  save_checkpoint(dir.str(), 5, Fixture(5).contents());
  auto spec = test::tiny_llama_spec();
  spec.hidden_size = 48;  // the config changed since the save
  auto model = test::tiny_llama_tensors(spec, TensorDtype::BF16);
  auto main = test::tiny_llama_tensors(spec, TensorDtype::F32);
  auto m1 = test::tiny_llama_tensors(spec, TensorDtype::F32);
  auto m2 = test::tiny_llama_tensors(spec, TensorDtype::F32);
  model.fill(0x11);
  main.fill(0x11);
  try {
    load_training_checkpoint(dir.str(), {model.dests(), main.dests(), m1.dests(), m2.dests()});
    ADD_FAILURE() << "hidden_size 48 loaded a hidden_size 32 checkpoint";
  } catch (const Error& e) {
    const std::string msg = e.what();
    for (const std::string& needle :
         {std::string("model.safetensors"), std::string("optimizer_exp_avg_sq.safetensors"),
          std::string(
              "model.embed_tokens.weight: checkpoint BF16 [256, 32], expected BF16 [256, 48]"),
          std::string("model.layers.1.self_attn.o_proj.weight: checkpoint F32 [32, 32], expected "
                      "F32 [48, 48]")}) {
      EXPECT_NE(msg.find(needle), std::string::npos) << "missing \"" << needle << "\" in:\n" << msg;
    }
  }
  for (const auto& b : model.bytes)
    for (const uint8_t v : b) ASSERT_EQ(v, 0x11);
  for (const auto& b : main.bytes)
    for (const uint8_t v : b) ASSERT_EQ(v, 0x11);
}

TEST(CheckpointDir, LatestErrors) {
  test::ScratchDir dir("ckpt_latest");
  EXPECT_THROW(resolve_checkpoint(dir.str() + "/missing"), Error);
  EXPECT_THROW(resolve_checkpoint(dir.str()), Error);  // empty folder
  write_file_atomically(dir.str() + "/" + kLatestFile, "12x\n");
  EXPECT_THROW(read_latest_iteration(dir.str()), Error);
  write_file_atomically(dir.str() + "/" + kLatestFile, "12\n");
  try {
    resolve_checkpoint(dir.str());
    ADD_FAILURE();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("iter_0000012"), std::string::npos) << e.what();
  }
}

// Runs a save of iteration 20 in a child process that kills itself (SIGKILL: no cleanup, like a
// crash or an OOM kill) at the point `hooks_for_child` chooses. Returns whether it died by SIGKILL.
bool crash_during_save(const std::string& dir, size_t big_floats,
                       const std::function<SaveHooks()>& hooks_for_child) {
  const pid_t pid = ::fork();
  if (pid == 0) {
    try {
      save_checkpoint(dir, 20, Fixture(20, big_floats).contents(), hooks_for_child());
    } catch (...) {
      ::_exit(3);
    }
    ::_exit(0);
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  return WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL;
}

constexpr size_t kBigFloats = size_t{12} << 20;  // 48 MiB: 12 write chunks

TEST(CheckpointAtomicity, CrashInsideAFileKeepsThePreviousCheckpoint) {
  test::ScratchDir dir("ckpt_crash_file");
  save_checkpoint(dir.str(), 10, Fixture(10, kBigFloats).contents());
  const bool killed = crash_during_save(dir.str(), kBigFloats, [] {
    SaveHooks h;
    h.on_write = [](const std::string& path, uint64_t written, uint64_t total) {
      if (path.find(kOptimizerMainParamsFile) != std::string::npos && written >= total / 2)
        ::raise(SIGKILL);
    };
    return h;
  });
  ASSERT_TRUE(killed) << "the child should have died inside optimizer_main_params.safetensors";
  EXPECT_EQ(read_latest_iteration(dir.str()), 10);
  EXPECT_FALSE(fs::exists(dir.str() + "/iter_0000020"));
  bool leftover = false;
  for (const auto& e : fs::directory_iterator(dir.path))
    leftover |= e.path().filename().string().find(".tmp-") != std::string::npos;
  EXPECT_TRUE(leftover) << "the half-written save stays under its temporary name";
  expect_loads_iteration(dir.str(), 10, kBigFloats);

  // The next save removes the leftover and succeeds.
  save_checkpoint(dir.str(), 30, Fixture(30, kBigFloats).contents());
  for (const auto& e : fs::directory_iterator(dir.path))
    EXPECT_EQ(e.path().filename().string().find(".tmp-"), std::string::npos) << e.path();
  expect_loads_iteration(dir.str(), 30, kBigFloats);
}

TEST(CheckpointAtomicity, CrashBetweenStagesKeepsLatestWhole) {
  for (const std::string stage : {"files_written", "renamed"}) {
    test::ScratchDir dir("ckpt_crash_" + stage);
    save_checkpoint(dir.str(), 10, Fixture(10).contents());
    const bool killed = crash_during_save(dir.str(), 0, [stage] {
      SaveHooks h;
      h.on_stage = [stage](const std::string& s) {
        if (s == stage) ::raise(SIGKILL);
      };
      return h;
    });
    ASSERT_TRUE(killed) << stage;
    EXPECT_EQ(read_latest_iteration(dir.str()), 10) << stage;
    expect_loads_iteration(dir.str(), 10);
    // After the rename the new folder is complete on its own (only `latest` was not moved yet).
    EXPECT_EQ(fs::exists(dir.str() + "/iter_0000020"), stage == "renamed");
    if (stage == "renamed") expect_loads_iteration(dir.str() + "/iter_0000020", 20);
  }
}

// A re-save on a filesystem without an atomic folder swap moves the previous folder aside for a moment; a crash
// there leaves iter_N.old-<pid>. The next save restores it where iter_N is missing (it is the only copy, and
// `latest` may name it), and removes it where iter_N is whole.
TEST(CheckpointAtomicity, AFolderMovedAsideByAnInterruptedReSaveIsRestoredOrRemoved) {
  test::ScratchDir dir("ckpt_moved_aside");
  save_checkpoint(dir.str(), 10, Fixture(10).contents());
  save_checkpoint(dir.str(), 20, Fixture(20).contents());
  fs::rename(dir.str() + "/iter_0000010", dir.str() + "/iter_0000010.old-4242");  // the crash between the renames
  fs::copy(dir.str() + "/iter_0000020", dir.str() + "/iter_0000020.old-4243");    // a leftover beside a whole one
  save_checkpoint(dir.str(), 30, Fixture(30).contents());
  EXPECT_FALSE(fs::exists(dir.str() + "/iter_0000010.old-4242"));
  EXPECT_FALSE(fs::exists(dir.str() + "/iter_0000020.old-4243"));
  expect_loads_iteration(dir.str() + "/iter_0000010", 10);
  expect_loads_iteration(dir.str() + "/iter_0000020", 20);
  EXPECT_EQ(read_latest_iteration(dir.str()), 30);
}

TEST(CheckpointAtomicity, KilledAtArbitraryTimesLatestAlwaysLoads) {
  // An outside SIGKILL at several delays: wherever it lands, `latest` names a whole checkpoint.
  test::ScratchDir dir("ckpt_kill_anytime");
  save_checkpoint(dir.str(), 10, Fixture(10, kBigFloats).contents());
  for (const int delay_ms : {0, 5, 20, 60, 150, 400}) {
    const pid_t pid = ::fork();
    if (pid == 0) {
      try {
        save_checkpoint(dir.str(), 20, Fixture(20, kBigFloats).contents());
      } catch (...) {
        ::_exit(3);
      }
      ::_exit(0);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(delay_ms));
    ::kill(pid, SIGKILL);
    int status = 0;
    ::waitpid(pid, &status, 0);
    ASSERT_TRUE(WIFSIGNALED(status) || (WIFEXITED(status) && WEXITSTATUS(status) == 0))
        << "delay " << delay_ms;
    const auto latest = read_latest_iteration(dir.str());
    ASSERT_TRUE(latest == 10 || latest == 20) << "delay " << delay_ms;
    expect_loads_iteration(dir.str(), *latest, kBigFloats);
    // Reset to iteration 10 for the next round.
    fs::remove_all(dir.str() + "/iter_0000020");
    save_checkpoint(dir.str(), 10, Fixture(10, kBigFloats).contents());
  }
}

}  // namespace
}  // namespace sg::checkpoint
