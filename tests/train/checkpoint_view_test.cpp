// A resume reads the checkpoint where it is mapped (train/checkpointing.h LoadedCheckpoint::state): the views are
// the saved values bit for bit, in whatever order and alignment a valid file holds its tensors, and loading them into
// a backend takes no private host copy of the state.
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "checkpoint/checkpoint_dir.h"
#include "checkpoint/file_checksum.h"
#include "checkpoint/train_state.h"
#include "config/model_config.h"
#include "model/layer_registry.h"
#include "process_memory.h"
#include "test_dir.h"
#include "train/backend_factory.h"
#include "train/checkpointing.h"
#include "train/cpu_training_runs.h"
#include "train/pretrained.h"

namespace sg::train {
namespace {

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// A state of `layout` with values of every kind a checkpoint may hold (signed zeros, subnormals, any bits) at its
// tensors and zero in its alignment gaps, as every real state has them.
TrainingState random_state(const model::ModelLayout& layout, int64_t steps_done) {
  std::mt19937 gen(7);
  std::uniform_int_distribution<uint32_t> bits;
  const auto n = static_cast<size_t>(layout.total());
  TrainingState s{.main_weights = std::vector<float>(n),
                  .exp_avg = std::vector<float>(n),
                  .exp_avg_sq = std::vector<float>(n),
                  .steps_done = steps_done,
                  .rng = {11, 22}};
  for (std::vector<float>* v : {&s.main_weights, &s.exp_avg, &s.exp_avg_sq}) {
    for (const model::ParamTensor& t : layout.tensors()) {
      for (int64_t i = 0; i < t.numel; ++i) {
        // Any sign, mantissa and exponent below 128 (subnormals among them): finite also when rounded to the
        // saved bf16 weights (a save refuses NaN and Inf).
        const uint32_t b = bits(gen) & ~0x40000000u;
        std::memcpy(&(*v)[static_cast<size_t>(t.offset + i)], &b, 4);
      }
    }
    (*v)[static_cast<size_t>(layout.tensors().front().offset)] = -0.0f;
  }
  return s;
}

// Saves `state` of `c` (its data position: steps_done global batches of 2) under `dir`; returns the folder.
std::string save(const std::string& dir, const config::Config& c, const model::ModelLayout& layout,
                 const TrainingState& state) {
  const auto consumed = static_cast<uint64_t>(state.steps_done * 2);
  return save_checkpoint(dir, c, layout, state, {.consumed_samples = consumed, .per_source = {consumed}},
                         ResumeRecord{.run_id = "view", .samples_baseline = {}});
}

// Rewrites FOLDER/NAME as another valid safetensors writer could have: the tensors in reverse order, after a header
// padded so that their data starts 2 bytes past a 4-byte boundary (no float in it aligned); train_state.json records
// the new file's checksum, so the folder verifies.
void rewrite_reordered_and_unaligned(const std::string& folder, const std::string& name) {
  const std::string path = folder + "/" + name;
  std::vector<char> data;
  nlohmann::json header = nlohmann::json::object();
  {
    const checkpoint::SafetensorsFile file(path);
    header["__metadata__"] = {{"format", "pt"}};
    for (auto it = file.tensors().rbegin(); it != file.tensors().rend(); ++it) {
      header[it->name] = {{"dtype", checkpoint::dtype_name(it->dtype)},
                          {"shape", it->shape},
                          {"data_offsets", {data.size(), data.size() + it->nbytes}}};
      data.insert(data.end(), it->data, it->data + it->nbytes);
    }
  }
  std::string json = header.dump();
  while ((8 + json.size()) % 8 != 2) json += ' ';
  const uint64_t n = json.size();
  {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(&n), 8);
    out.write(json.data(), static_cast<std::streamsize>(json.size()));
    out.write(data.data(), static_cast<std::streamsize>(data.size()));
  }
  const std::string state_path = folder + "/" + checkpoint::kTrainStateFile;
  nlohmann::json state = nlohmann::json::parse(test::read_file(state_path));
  const checkpoint::FileDigest digest = checkpoint::file_digest(path);
  state[checkpoint::kFileChecksumsKey][name] = {{"bytes", digest.bytes},
                                                {"crc32", checkpoint::crc32_hex(digest.crc32)}};
  checkpoint::seal_train_state_json(state);
  std::ofstream(state_path, std::ios::trunc) << state.dump(2);
}

TEST(CheckpointView, TheViewsOfAMappedCheckpointAreItsValuesBitForBit) {
  test::ScratchDir dir("ckpt_view");
  const config::Config c = test::one_layer_cpu_config({});
  const model::ModelLayout layout = model::model_layout(config::model_spec(c));
  const TrainingState state = random_state(layout, 3);
  const std::string folder = save(dir.str(), c, layout, state);
  const auto expect_state = [&](const std::string& what) {
    SCOPED_TRACE(what);
    const LoadedCheckpoint loaded = load_checkpoint(folder, c, layout);
    EXPECT_TRUE(same_bits(loaded.state.main_weights.to_vector(), state.main_weights));
    EXPECT_TRUE(same_bits(loaded.state.exp_avg.to_vector(), state.exp_avg));
    EXPECT_TRUE(same_bits(loaded.state.exp_avg_sq.to_vector(), state.exp_avg_sq));
    EXPECT_EQ(loaded.state.steps_done, 3);
    EXPECT_EQ(loaded.state.rng.seed, 11u);
    EXPECT_EQ(loaded.state.rng.offset, 22u);
    // Chunks that start and end inside tensors and gaps read the same values.
    std::vector<float> part(1000);
    for (int64_t begin = 0; begin < layout.total(); begin += 777) {
      const int64_t end = std::min<int64_t>(layout.total(), begin + 1000);
      loaded.state.exp_avg.read(begin, end, part.data());
      ASSERT_EQ(std::memcmp(part.data(), state.exp_avg.data() + begin, static_cast<size_t>(end - begin) * 4), 0)
          << "at " << begin;
    }
    // A backend holds exactly the checkpoint's values.
    const std::unique_ptr<TrainingBackend> backend = make_backend(c, /*force_cpu=*/true, nullptr);
    backend->load_state(loaded.state);
    const TrainingState held = backend->state();
    EXPECT_TRUE(same_bits(held.main_weights, state.main_weights));
    EXPECT_TRUE(same_bits(held.exp_avg, state.exp_avg));
    EXPECT_TRUE(same_bits(held.exp_avg_sq, state.exp_avg_sq));
  };
  expect_state("as stepgraph saved it");
  rewrite_reordered_and_unaligned(folder, checkpoint::kOptimizerExpAvgFile);
  rewrite_reordered_and_unaligned(folder, checkpoint::kOptimizerMainParamsFile);
  expect_state("tensors reordered and unaligned");

  // Released, the views are empty and the files unmapped; the step and the RNG stay.
  LoadedCheckpoint loaded = load_checkpoint(folder, c, layout);
  loaded.release_state();
  EXPECT_EQ(loaded.state.main_weights.size(), 0);
  EXPECT_EQ(loaded.mapped_files, nullptr);
  EXPECT_EQ(loaded.state.steps_done, 3);
}

// VmData (/proc/self/status): the private writable memory RLIMIT_DATA limits, in bytes. The checkpoint's read-only
// mappings are not in it (their pages are the page cache's), anything the process allocates is.
int64_t private_data_bytes() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("VmData:", 0) == 0) return std::stoll(line.substr(7)) * 1024;
  }
  return -1;
}

// Runs `load` in a child process whose RLIMIT_DATA is its private memory now plus `margin`, then `check` with the
// limit lifted. The child's exit status: 0 when both went well, 3 when `load` threw (its stderr says what), 4 when
// `check` failed.
int in_child_under_data_limit(int64_t margin, const std::function<void()>& load, const std::function<bool()>& check) {
  const pid_t child = fork();
  if (child < 0) return -1;
  if (child == 0) {
    rlimit before{};
    getrlimit(RLIMIT_DATA, &before);
    rlimit limit = before;
    limit.rlim_cur = static_cast<rlim_t>(private_data_bytes() + margin);
    setrlimit(RLIMIT_DATA, &limit);
    try {
      load();
    } catch (const std::exception& e) {
      std::fprintf(stderr, "under RLIMIT_DATA + %lld bytes: %s\n", static_cast<long long>(margin), e.what());
      _exit(3);
    }
    setrlimit(RLIMIT_DATA, &before);
    _exit(check() ? 0 : 4);
  }
  int status = 0;
  if (waitpid(child, &status, 0) != child || !WIFEXITED(status)) return -2;
  return WEXITSTATUS(status);
}

bool holds(TrainingBackend& backend, const TrainingState& expected, bool fresh_optimizer) {
  const TrainingState held = backend.state();
  const std::vector<float> zeros(expected.main_weights.size(), 0.0f);
  return same_bits(held.main_weights, expected.main_weights) &&
         same_bits(held.exp_avg, fresh_optimizer ? zeros : expected.exp_avg) &&
         same_bits(held.exp_avg_sq, fresh_optimizer ? zeros : expected.exp_avg_sq);
}

// A resume holds no private host copy of the state: loading a checkpoint and handing it to the backend fits in 2
// bytes a parameter of private memory above what the process held before (the former host copy took 14: fp32
// weights and both moments, and the bf16 weights), checked as a hard RLIMIT_DATA in a child, so the peak counts,
// not what is resident afterwards. So does a pretrained start from the same folder (the former copy: the fp32
// weights and two moments of zeros, 12 bytes a parameter). An embedding-heavy model (8.4M parameters, 100 MB a copy
// of the fp32 state).
TEST(CheckpointView, AResumeHoldsNoPrivateHostCopyOfTheState) {
  if (test::kSanitizedAllocator) GTEST_SKIP() << "a sanitizer's shadow memory and allocator count as private memory";
  test::ScratchDir dir("ckpt_view_memory");
  config::Config c = test::one_layer_cpu_config({"model.vocab_size=65536"});
  const model::ModelLayout layout = model::model_layout(config::model_spec(c));
  const auto P = layout.total();
  ASSERT_GT(P, 8'000'000);
  std::string folder;
  {
    const TrainingState state = random_state(layout, 3);
    folder = save(dir.str(), c, layout, state);
  }
  const std::unique_ptr<TrainingBackend> backend = make_backend(c, /*force_cpu=*/true, nullptr);
  const int64_t margin = 2 * P;
  const auto expected = [&] { return random_state(layout, 3); };

  EXPECT_EQ(in_child_under_data_limit(
                margin,
                [&] {
                  LoadedCheckpoint loaded = load_checkpoint(folder, c, layout);
                  backend->load_state(loaded.state);
                  loaded.release_state();
                },
                [&] { return holds(*backend, expected(), false); }),
            0)
      << "3: the resume needed more private memory (stderr says); 4: other values";
  c.checkpoint.pretrained_checkpoint = folder;
  EXPECT_EQ(in_child_under_data_limit(
                margin,
                [&] {
                  std::optional<PretrainedStart> start = pretrained_state(c, layout);
                  backend->load_state(start->state);
                  start.reset();
                },
                [&] { return holds(*backend, expected(), true); }),
            0)
      << "3: the pretrained start needed more private memory (stderr says); 4: other values";

  // And in this process: what a loaded checkpoint keeps resident of its own (the former copy: 12 bytes a parameter).
  const int64_t anonymous = test::resident_anonymous_bytes();
  const LoadedCheckpoint loaded = load_checkpoint(folder, c, layout);
  const int64_t held = test::resident_anonymous_bytes() - anonymous;
  std::printf("a loaded checkpoint of %lld parameters: %lld bytes of anonymous resident memory\n",
              static_cast<long long>(P), static_cast<long long>(held));
  EXPECT_LT(held, margin);
}

}  // namespace
}  // namespace sg::train
