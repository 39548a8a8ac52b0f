// `stepgraph train` end to end through the real binary on the CPU fp32 reference backend: the loss
// falls below the corpus's unigram entropy, resume is bitwise exact, mismatched checkpoints are
// refused, recompute gives the same losses, NaN checks stop the run naming the step (exit 3), SIGINT/SIGHUP
// save and exit 128 + signal, --dump-batches writes what the model saw, validation notes are printed, and an
// invalid config never trains.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "core/signal_name.h"
#include "cuda/device.h"
#include "checkpoint/safetensors.h"
#include "data/indexed_dataset.h"
#include "train_cli_fixture.h"

namespace {

using namespace sg::test::train_cli;
namespace fs = std::filesystem;

// 1. The loss of a tiny model falls clearly, below what a unigram model can reach.
TEST_F(TrainerCliTest, TrainsOnTheCpuAndTheLossFalls) {
  // 200 steps of 8 sequences (4 microbatches): about 10 s on one core. With 60 steps of 4 the loss
  // is still near the unigram entropy; with these it ends around 3 nats against 4.9.
  constexpr int kIters = 200;
  // Without a GPU the binary picks the CPU by itself (no --cpu); with one, --cpu forces it.
  const bool have_gpu = sg::cuda::device_count() > 0;
  const RunResult r = train({"train.train_iters=" + std::to_string(kIters), "train.global_batch_size=8",
                             "--run-dir", path("run")},
                            "train", /*force_cpu=*/have_gpu);
  ASSERT_EQ(r.rc, 0) << r.all();

  // One line says it runs on the CPU, with the reference backend and graphs off.
  const std::string expected_reason = have_gpu ? "--cpu: training on the CPU" : "no GPU found: training on the CPU";
  std::istringstream lines(r.err);
  std::string line;
  int cpu_lines = 0;
  while (std::getline(lines, line)) {
    if (line.find(expected_reason) != std::string::npos && line.find("reference backend") != std::string::npos &&
        line.find("graphs off") != std::string::npos) {
      ++cpu_lines;
    }
  }
  EXPECT_EQ(cpu_lines, 1) << r.err;

  const auto metrics = read_metrics(path("run") + "/metrics.jsonl");
  ASSERT_EQ(metrics.size(), static_cast<size_t>(kIters)) << r.all();
  for (size_t i = 0; i < metrics.size(); ++i) {
    EXPECT_EQ(metrics[i].step, static_cast<int64_t>(i + 1)) << metrics[i].raw;
    const auto j = nlohmann::json::parse(metrics[i].raw);  // a JSON object per line
    for (const char* key : {"step", "loss", "grad_norm", "lr", "step_ms"}) {
      EXPECT_TRUE(j.contains(key)) << key << " missing in " << metrics[i].raw;
    }
    EXPECT_TRUE(std::isfinite(metrics[i].loss)) << metrics[i].raw;
  }
  double last5 = 0.0;
  for (int i = kIters - 5; i < kIters; ++i) last5 += metrics[static_cast<size_t>(i)].loss / 5.0;
  const double first = metrics.front().loss;
  // The initial loss of a 256-token vocabulary is about ln 256 = 5.55.
  EXPECT_NEAR(first, std::log(256.0), 0.5);
  EXPECT_LT(last5, unigram_entropy_) << "first loss " << first << ", unigram entropy " << unigram_entropy_;
  EXPECT_LT(last5, 0.8 * first) << "unigram entropy " << unigram_entropy_;
  std::fprintf(stderr, "loss %.4f -> %.4f (mean of the last 5); corpus unigram entropy %.4f nats\n", first,
               last5, unigram_entropy_);
}

// The settings of the resume test: dropout and 2 microbatches, so the RNG state and the data
// position both decide the numbers; the schedule does not depend on train_iters.
std::vector<std::string> resume_config(int iters, const std::string& run_dir) {
  return {"model.hidden_dropout=0.1", "model.attention_dropout=0.1", "scheduler.lr_warmup_iters=3",
          "scheduler.lr_decay_iters=8",
          "train.train_iters=" + std::to_string(iters), "--run-dir", run_dir};
}

std::vector<std::string> plus(std::vector<std::string> a, const std::vector<std::string>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

// 2. Resume is bitwise exact: 8 steps straight equal 4 steps + resume to 8.
TEST_F(TrainerCliTest, ResumeIsBitwiseExact) {
  const RunResult a = train(plus(resume_config(8, path("run_a")),
                                 {"checkpoint.save=" + path("ckpt_a"), "checkpoint.save_interval=4"}),
                            "a");
  ASSERT_EQ(a.rc, 0) << a.all();
  const RunResult b = train(plus(resume_config(4, path("run_b")), {"checkpoint.save=" + path("ckpt_b")}), "b");
  ASSERT_EQ(b.rc, 0) << b.all();
  ASSERT_EQ(trim(read_file(path("ckpt_b") + "/latest_checkpointed_iteration.txt")), "4");
  const RunResult c = train(plus(resume_config(8, path("run_c")),
                                 {"checkpoint.load=" + path("ckpt_b"), "checkpoint.save=" + path("ckpt_c")}),
                            "c");
  ASSERT_EQ(c.rc, 0) << c.all();
  EXPECT_NE(c.err.find("resumed from"), std::string::npos) << c.all();
  EXPECT_EQ(c.err.find("different configuration"), std::string::npos) << c.all();

  const auto ma = read_metrics(path("run_a") + "/metrics.jsonl");
  const auto mb = read_metrics(path("run_b") + "/metrics.jsonl");
  const auto mc = read_metrics(path("run_c") + "/metrics.jsonl");
  ASSERT_EQ(ma.size(), 8u) << a.all();
  ASSERT_EQ(mb.size(), 4u) << b.all();
  ASSERT_EQ(mc.size(), 4u) << c.all();
  for (size_t i = 0; i < 4; ++i) {
    EXPECT_EQ(mb[i].step, ma[i].step);
    EXPECT_EQ(mb[i].loss_text, ma[i].loss_text) << "step " << ma[i].step;
    EXPECT_EQ(mc[i].step, ma[4 + i].step);
    EXPECT_EQ(mc[i].loss_text, ma[4 + i].loss_text) << "step " << ma[4 + i].step << " after resume";
  }
  // The steps differ from each other (a loss that stopped changing would pass trivially).
  EXPECT_NE(ma[4].loss_text, ma[7].loss_text);
  // Dropout is really on (so the RNG state matters): without it step 1 has another loss.
  const RunResult d = train({"scheduler.lr_warmup_iters=3", "scheduler.lr_decay_iters=8", "train.train_iters=1",
                             "--run-dir", path("run_no_dropout")},
                            "no_dropout");
  ASSERT_EQ(d.rc, 0) << d.all();
  const auto md = read_metrics(path("run_no_dropout") + "/metrics.jsonl");
  ASSERT_EQ(md.size(), 1u);
  EXPECT_NE(md[0].loss_text, ma[0].loss_text) << "dropout 0.1 did not change the loss";

  // The final checkpoints are the same bytes: weights, Adam moments, train state.
  for (const char* file : {"model.safetensors", "optimizer_main_params.safetensors", "optimizer_exp_avg.safetensors",
                           "optimizer_exp_avg_sq.safetensors"}) {
    const std::string fa = read_file(path("ckpt_a") + "/iter_0000008/" + file);
    const std::string fc = read_file(path("ckpt_c") + "/iter_0000008/" + file);
    ASSERT_FALSE(fa.empty()) << file;
    EXPECT_TRUE(fa == fc) << file << " differs between the straight and the resumed run";
  }
  // The train states are equal but for the run id, which names the run that saved them: C resumed B's
  // checkpoint, so C is B's run continued (train/run_folder.h), not A's.
  nlohmann::json state_a = nlohmann::json::parse(read_file(path("ckpt_a") + "/iter_0000008/train_state.json"));
  nlohmann::json state_c = nlohmann::json::parse(read_file(path("ckpt_c") + "/iter_0000008/train_state.json"));
  const nlohmann::json state_b = nlohmann::json::parse(read_file(path("ckpt_b") + "/iter_0000004/train_state.json"));
  EXPECT_EQ(state_c["extra"]["run_id"], state_b["extra"]["run_id"]);
  EXPECT_NE(state_c["extra"]["run_id"], state_a["extra"]["run_id"]);
  state_a["extra"].erase("run_id");
  state_c["extra"].erase("run_id");
  // So do the files' own checksums, which cover the run id (checkpoint/train_state.h).
  state_a.erase("crc32c");
  state_c.erase("crc32c");
  EXPECT_EQ(state_a, state_c);
  // ... and the step-4 checkpoints of A and B as well (the saved state does not depend on train_iters).
  EXPECT_TRUE(read_file(path("ckpt_a") + "/iter_0000004/optimizer_main_params.safetensors") ==
              read_file(path("ckpt_b") + "/iter_0000004/optimizer_main_params.safetensors"));
}

// 2b. Activation recompute through the real binary: the start of the run prints the activation bytes
// with and without it, and the losses are the same bits as without recompute (dropout on, 2 microbatches).
TEST_F(TrainerCliTest, RecomputeTrainsToTheSameLossesAndPrintsItsMemory) {
  const RunResult plain = train(resume_config(3, path("run_plain")), "plain");
  ASSERT_EQ(plain.rc, 0) << plain.all();
  EXPECT_NE(plain.err.find("activations per microbatch:"), std::string::npos) << plain.all();
  const RunResult full = train(plus(resume_config(3, path("run_full")),
                                    {"model.recompute_granularity=full", "model.recompute_method=uniform",
                                     "model.recompute_num_layers=1"}),
                               "full");
  ASSERT_EQ(full.rc, 0) << full.all();
  EXPECT_NE(full.err.find("recompute full, uniform"), std::string::npos) << full.all();
  const auto mp = read_metrics(path("run_plain") + "/metrics.jsonl");
  const auto mf = read_metrics(path("run_full") + "/metrics.jsonl");
  ASSERT_EQ(mp.size(), 3u);
  ASSERT_EQ(mf.size(), 3u);
  for (size_t i = 0; i < 3; ++i) EXPECT_EQ(mf[i].loss_text, mp[i].loss_text) << "step " << i + 1;
}

std::vector<std::pair<fs::path, std::string>> snapshot(const fs::path& dir) {
  std::vector<std::pair<fs::path, std::string>> out;
  for (const auto& e : fs::recursive_directory_iterator(dir)) {
    out.push_back({e.path(), e.is_regular_file() ? read_file(e.path()) : std::string("<dir>")});
  }
  std::sort(out.begin(), out.end());
  return out;
}

// 3. A checkpoint of another model shape is refused, naming tensors and both shapes; nothing written.
TEST_F(TrainerCliTest, RefusesACheckpointWithOtherShapes) {
  const RunResult save =
      train({"train.train_iters=2", "checkpoint.save=" + path("ckpt"), "--run-dir", path("run")}, "save");
  ASSERT_EQ(save.rc, 0) << save.all();
  const auto before = snapshot(path("ckpt"));
  ASSERT_FALSE(before.empty());

  const RunResult r = train({"model.hidden_size=96", "train.train_iters=4", "checkpoint.load=" + path("ckpt"),
                             "checkpoint.save=" + path("ckpt"), "--run-dir", path("run_resume")},
                            "resume");
  EXPECT_EQ(r.rc, 1) << r.all();
  for (const char* expected : {"model.embed_tokens.weight", "[256, 64]", "[256, 96]",
                               "model.layers.0.self_attn.q_proj.weight", "[64, 64]", "[96, 96]", "lm_head.weight"}) {
    EXPECT_NE(r.err.find(expected), std::string::npos) << "missing '" << expected << "' in:\n" << r.err;
  }
  EXPECT_FALSE(fs::exists(path("run_resume") + "/metrics.jsonl"));
  EXPECT_TRUE(snapshot(path("ckpt")) == before) << "the refused resume changed the checkpoint folder";
}

// 4. A NaN loss / gradient stops the run with exit 3, naming the step and the check.
TEST_F(TrainerCliTest, NanChecksStopTheRunNamingStepAndCheck) {
  struct Case {
    std::vector<std::string> checks;
    std::string named;
  };
  const Case cases[] = {
      {{"rerun_state_machine.check_for_nan_in_loss=true", "ddp.check_for_nan_in_grad=false"},
       "rerun_state_machine.check_for_nan_in_loss"},
      {{"rerun_state_machine.check_for_nan_in_loss=false", "ddp.check_for_nan_in_grad=true"},
       "ddp.check_for_nan_in_grad"},
  };
  int index = 0;
  for (const Case& c : cases) {
    SCOPED_TRACE(c.named);
    const std::string run = path("run" + std::to_string(index));
    // lr 1e30: Adam's first update moves every weight by about the learning rate, so the second
    // step's forward pass overflows.
    std::vector<std::string> args = {"optimizer.lr=1e30", "train.train_iters=10", "--run-dir", run};
    args.insert(args.end(), c.checks.begin(), c.checks.end());
    const RunResult r = train(args, "nan" + std::to_string(index++));
    EXPECT_EQ(r.rc, 3) << r.all();
    // The failing step is the one after the last step written to metrics.jsonl.
    const size_t finished = count_lines(run + "/metrics.jsonl");
    EXPECT_GE(finished, 1u) << "the first step (before any update) must be finite";
    EXPECT_LT(finished, 10u);
    const std::string step = "step " + std::to_string(finished + 1) + ":";
    EXPECT_NE(r.err.find(step), std::string::npos) << "expected '" << step << "' in:\n" << r.err;
    EXPECT_NE(r.err.find(c.named), std::string::npos) << r.err;
  }
  // Control: with both checks off the same run goes on through the NaNs (the checks did the stopping).
  const RunResult r = train({"optimizer.lr=1e30", "train.train_iters=4", "--run-dir", path("run_unchecked"),
                             "rerun_state_machine.check_for_nan_in_loss=false", "ddp.check_for_nan_in_grad=false"},
                            "nan_unchecked");
  EXPECT_EQ(r.rc, 0) << r.all();
  const auto metrics = read_metrics(path("run_unchecked") + "/metrics.jsonl");
  ASSERT_EQ(metrics.size(), 4u);
  // JSON has no NaN: a non-finite loss is written as null, so metrics.jsonl stays valid JSONL.
  EXPECT_EQ(metrics.back().loss_text, "null") << metrics.back().raw;
}

// 5. SIGINT and SIGHUP (a closed terminal or ssh session) finish the step, save it and exit 128 +
// signal; the checkpoint resumes. (SIGTERM: tests/graph/stop_signal_test.cpp.)
class TrainerSignalTest : public TrainerCliTest {
 protected:
  void expect_stop_saves_and_exits(int signal_number, int expected_rc);
};

TEST_F(TrainerSignalTest, SigintSavesTheLastStepAndExits130) { expect_stop_saves_and_exits(SIGINT, 130); }

TEST_F(TrainerSignalTest, SighupSavesTheLastStepAndExits129) { expect_stop_saves_and_exits(SIGHUP, 129); }

// Started under nohup (SIGHUP ignored), a run outlives its terminal: SIGHUP neither stops nor kills it.
TEST_F(TrainerSignalTest, UnderNohupSighupIsIgnored) {
  const std::string run = path("run_nohup");
  const Child child = spawn(tiny_model({"train.train_iters=150", "--run-dir", run, "--cpu"}), dir_ / "nohup",
                            /*sighup_ignored=*/true);
  KillOnExit guard{child.pid};
  const fs::path metrics_path = fs::path(run) / "metrics.jsonl";
  const MetricsWait waited =
      wait_for_metrics_lines(guard, metrics_path, 2, std::chrono::seconds(static_cast<int>(kRunTimeout)));
  ASSERT_FALSE(waited.ended) << "exited before the signal:\n" << read_file(child.err_path);
  ASSERT_EQ(::kill(child.pid, SIGHUP), 0);
  const RunResult r = wait_for(child, kRunTimeout);
  guard.release();
  EXPECT_EQ(r.rc, 0) << r.all();
  EXPECT_EQ(count_lines(metrics_path), 150u) << r.all();
  EXPECT_EQ(r.err.find("stop requested"), std::string::npos) << r.all();
}

void TrainerSignalTest::expect_stop_saves_and_exits(int signal_number, int expected_rc) {
  const std::string ckpt = path("ckpt"), run = path("run");
  // scheduler.lr_decay_iters is fixed so that the resume (fewer train_iters) keeps the schedule valid.
  std::vector<std::string> args = tiny_model({"train.train_iters=100000", "scheduler.lr_decay_iters=100000",
                                              "checkpoint.save=" + ckpt, "--run-dir", run, "--cpu"});
  const Child child = spawn(args, dir_ / ("signal" + std::to_string(signal_number)));
  // A failed assertion must not leave a 100000-step training running.
  KillOnExit guard{child.pid};
  const fs::path metrics_path = fs::path(run) / "metrics.jsonl";
  const MetricsWait waited =
      wait_for_metrics_lines(guard, metrics_path, 2, std::chrono::seconds(static_cast<int>(kRunTimeout)));
  ASSERT_FALSE(waited.ended) << "exited before the signal (status " << waited.status << "):\n"
                             << read_file(child.err_path);
  ASSERT_GE(count_lines(metrics_path), 2u) << read_file(child.err_path);
  const auto sent = std::chrono::steady_clock::now();
  ASSERT_EQ(::kill(child.pid, signal_number), 0);
  const RunResult r = wait_for(child, kRunTimeout);
  guard.release();  // reaped
  const double stop_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - sent).count();
  ASSERT_FALSE(r.timed_out) << r.all();
  EXPECT_EQ(r.rc, expected_rc) << r.all();
  // One tiny step plus one tiny save: a few seconds even on a loaded machine.
  EXPECT_LT(stop_seconds, 10.0) << r.all();

  const auto metrics = read_metrics(metrics_path);
  ASSERT_FALSE(metrics.empty());
  const int64_t last = metrics.back().step;
  EXPECT_LT(last, 100000);
  EXPECT_EQ(trim(read_file(ckpt + "/latest_checkpointed_iteration.txt")), std::to_string(last)) << r.all();
  char iter_name[32];
  std::snprintf(iter_name, sizeof iter_name, "iter_%07lld", static_cast<long long>(last));
  EXPECT_TRUE(fs::exists(fs::path(ckpt) / iter_name / "optimizer_main_params.safetensors"));
  // A stop still leaves the run's report, saying how it ended.
  const std::string report = read_file(fs::path(run) / "report.html");
  EXPECT_NE(report.find("stopped by " + sg::signal_name(signal_number) + " after step " + std::to_string(last)),
            std::string::npos)
      << r.all();

  const RunResult resumed = train({"train.train_iters=" + std::to_string(last + 2), "scheduler.lr_decay_iters=100000",
                                   "checkpoint.load=" + ckpt, "--run-dir", path("run_resumed")},
                                  "resume");
  EXPECT_EQ(resumed.rc, 0) << resumed.all();
  const auto after = read_metrics(path("run_resumed") + "/metrics.jsonl");
  ASSERT_EQ(after.size(), 2u) << resumed.all();
  EXPECT_EQ(after[0].step, last + 1);
  EXPECT_EQ(after[1].step, last + 2);
}

// 6. --dump-batches writes each step's batch: [global_batch_size, seq_length], targets shifted by one,
// every row a window of the corpus.
TEST_F(TrainerCliTest, DumpBatchesWritesWhatTheModelSaw) {
  const RunResult r =
      train({"train.train_iters=2", "--run-dir", path("run"), "--dump-batches", path("batches")}, "dump");
  ASSERT_EQ(r.rc, 0) << r.all();
  constexpr int64_t kSequences = 4, kSeqLength = 32;
  const SafetensorsFile batch(path("batches") + "/batch_0000001.safetensors");
  ASSERT_TRUE(fs::exists(path("batches") + "/batch_0000002.safetensors"));
  EXPECT_FALSE(fs::exists(path("batches") + "/batch_0000003.safetensors"));
  const std::vector<int64_t> shape = {kSequences, kSeqLength};
  const auto* tokens = batch.find("tokens");
  const auto* targets = batch.find("targets");
  const auto* mask = batch.find("loss_mask");
  ASSERT_TRUE(tokens && targets && mask);
  EXPECT_EQ(tokens->shape, shape);
  EXPECT_EQ(targets->shape, shape);
  EXPECT_EQ(mask->shape, shape);
  ASSERT_EQ(tokens->dtype, TensorDtype::I32);
  ASSERT_EQ(targets->dtype, TensorDtype::I32);
  ASSERT_EQ(mask->dtype, TensorDtype::F32);
  std::vector<int32_t> tok(kSequences * kSeqLength), tgt(tok.size());
  std::vector<float> msk(tok.size());
  std::memcpy(tok.data(), tokens->data, tok.size() * 4);
  std::memcpy(tgt.data(), targets->data, tgt.size() * 4);
  std::memcpy(msk.data(), mask->data, msk.size() * 4);

  const auto corpus = sg::data::IndexedDataset::open(corpus_, 256);
  std::vector<int32_t> stream(corpus.num_tokens());
  corpus.read_tokens(0, stream.size(), stream.data());
  for (int64_t s = 0; s < kSequences; ++s) {
    const int32_t* row = tok.data() + s * kSeqLength;
    const int32_t* next = tgt.data() + s * kSeqLength;
    for (int64_t t = 0; t + 1 < kSeqLength; ++t) {
      ASSERT_EQ(next[t], row[t + 1]) << "sequence " << s << " position " << t;
    }
    for (int64_t t = 0; t < kSeqLength; ++t) {
      EXPECT_EQ(msk[static_cast<size_t>(s * kSeqLength + t)], 1.0f);
      EXPECT_TRUE(row[t] >= 0 && row[t] < 256);
    }
    // The window tokens + last target is seq_length + 1 consecutive corpus tokens at a window start.
    std::vector<int32_t> window(row, row + kSeqLength);
    window.push_back(next[kSeqLength - 1]);
    bool found = false;
    for (size_t start = 0; start + window.size() <= stream.size() && !found; start += kSeqLength) {
      found = std::equal(window.begin(), window.end(), stream.begin() + static_cast<std::ptrdiff_t>(start));
    }
    EXPECT_TRUE(found) << "sequence " << s << " is not a window of the corpus";
  }
  // The second step saw other data.
  const SafetensorsFile second(path("batches") + "/batch_0000002.safetensors");
  const auto* tokens2 = second.find("tokens");
  ASSERT_TRUE(tokens2 != nullptr);
  ASSERT_EQ(tokens2->nbytes, tokens->nbytes);
  EXPECT_NE(std::memcmp(tokens2->data, tokens->data, tokens->nbytes), 0);
}

// 7. An invalid configuration is refused before anything trains.
// What `validate` notes, `train` says too, before it trains.
TEST_F(TrainerCliTest, PrintsTheValidationNotes) {
  const RunResult r = train(
      {"train.train_iters=2", "scheduler.lr_warmup_iters=0", "checkpoint.save_interval=5", "--run-dir", path("run")},
      "notes");
  ASSERT_EQ(r.rc, 0) << r.all();
  EXPECT_NE(r.err.find("note [rule 16]: checkpoint.save_interval without checkpoint.save"), std::string::npos) << r.err;
}

TEST_F(TrainerCliTest, InvalidConfigNeverTrains) {
  const Child c = spawn({"train", "llama/tiny", "model.cuda_graph_impl=local", "model.cuda_graph_scope=attn",
                         "--plain", "--cpu", "--run-dir", path("run")},
                        dir_ / "invalid");
  const RunResult r = wait_for(c, kRunTimeout);
  EXPECT_EQ(r.rc, 1) << r.all();
  EXPECT_NE(r.err.find("[rule 4]"), std::string::npos) << r.all();
  EXPECT_FALSE(fs::exists(path("run") + "/metrics.jsonl"));
}

}  // namespace
