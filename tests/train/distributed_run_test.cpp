// DistributedRun's host agreements with real processes on loopback (forked ranks, no GPU): a stop or a skipped
// evaluation on one rank is every rank's, so none waits in a collective for ranks that are not coming; the ranks
// share the scan of each corpus.
#include "train/distributed_run.h"

#include <gtest/gtest.h>

#include <chrono>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "config/config.h"
#include "core/error.h"
#include "core/strings.h"
#include "data/blended_dataset.h"
#include "data/indexed_dataset.h"
#include "data/token_scan_share.h"
#include "dist/local_launcher.h"
#include "dist/loopback_world.h"
#include "dist/rank_processes.h"
#include "dist/store_protocol.h"
#include "test_dir.h"
#include "train/distributed_resume.h"

namespace sg::train {
namespace {

// The trainer asks before every due evaluation (run_steps.cpp): a rank that got SIGTERM, or whose metrics write
// failed, skips it, and then so must the others, whose evaluation would wait for it in the loss reduction.
TEST(DistributedRun, ASkippedEvaluationOnOneRankIsSkippedOnEveryRank) {
  const int port = dist::find_free_port();
  const int world = 3;
  const auto outcomes = test::run_ranks(world, [&](int rank) {
    dist::RendezvousSettings settings;
    settings.timeout_seconds = 20.0;
    DistributedRun run(test::loopback_world(rank, world, port), settings);
    if (run.skip_evaluation_everywhere(2, false)) return 10;        // nobody skips: every rank evaluates
    if (!run.skip_evaluation_everywhere(4, rank == 1)) return 11;   // rank 1 skips: all do
    if (!run.skip_evaluation_everywhere(6, rank != 0)) return 12;
    // The same step's stop agreement is a separate question (a skipped evaluation stops nothing by itself).
    if (run.stop_everywhere(4, 0).stop) return 13;
    if (run.stop_everywhere(6, rank == 2 ? SIGTERM : 0).signal != SIGTERM) return 14;
    run.finish();
    return 0;
  });
  for (int r = 0; r < world; ++r) {
    EXPECT_EQ(outcomes[static_cast<size_t>(r)].code(), 0)
        << "rank " << r << ":\n" << outcomes[static_cast<size_t>(r)].stderr_text;
  }
}

namespace fs = std::filesystem;

dist::RendezvousSettings test_settings() {
  dist::RendezvousSettings settings;
  settings.timeout_seconds = 20.0;
  return settings;
}

// A uint8 corpus of 40 MB (three scan chunks, one a rank of three), token ids (s + i) % 200; `bad_at` puts 250 at
// sequence `bad_at`, position 5.
void write_corpus(const std::string& prefix, int64_t bad_at) {
  data::IndexedDatasetWriter writer(prefix, data::TokenDtype::uint8);
  std::vector<int32_t> tokens(1000);
  for (int64_t s = 0; s < 40000; ++s) {
    for (size_t i = 0; i < tokens.size(); ++i) tokens[i] = static_cast<int32_t>((static_cast<size_t>(s) + i) % 200);
    if (s == bad_at) tokens[5] = 250;
    writer.add_document(tokens);
  }
  writer.finalize();
}

// The ranks' loaders scan a part of each corpus each and combine the parts through the store: rank r scans only the
// r-th part, every rank ends with the whole corpus's bounds, a bad id in one rank's part stops every rank with the
// message one process's open gives, and ranks that opened different corpora stop naming both.
TEST(DistributedRun, TheRanksShareTheScanOfEveryCorpusTheirLoadersOpen) {
  const fs::path dir = test::fresh_test_dir("dp_scan");
  const std::string good = (dir / "good").string(), bad = (dir / "bad").string();
  write_corpus(good, -1);
  write_corpus(bad, 39000);  // in the last chunk: rank 2's part
  std::string single;
  try {
    data::IndexedDataset::open(bad, 200);
  } catch (const Error& e) {
    single = e.what();
  }
  ASSERT_NE(single.find("token id 250 at sequence 39000"), std::string::npos) << single;
  const int port = dist::find_free_port();
  const int world = 3;
  const auto outcomes = test::run_ranks(world, [&](int rank) {
    DistributedRun run(test::loopback_world(rank, world, port), test_settings());
    data::ScanShare share = run.corpus_scan_share();
    std::vector<data::PartScan> sent;
    share.exchange = [&sent, inner = share.exchange](const std::string& mine, const data::ScanCombine& combine) {
      sent.push_back(data::decode_part_scan(mine));
      return inner(mine, combine);
    };
    const data::IndexedDataset ds = data::IndexedDataset::open(good, 200, share);
    if (ds.min_token() != 0 || ds.max_token() != 199) return 10;
    const data::PartRange expected = data::scan_part_range(ds.num_tokens(), data::kScanChunkBytes, rank, world);
    if (sent.size() != 1 || sent[0].range.begin != expected.begin || sent[0].range.end != expected.end) return 11;
    if (expected.end - expected.begin >= ds.num_tokens()) return 12;  // a part, not the whole corpus
    data::DataLoaderOptions options;
    options.data_path = {bad};
    options.seq_length = 64;
    options.vocab_size = 200;
    options.scan_share = share;
    try {
      data::DataLoader loader(options);
      return 13;
    } catch (const Error& e) {
      if (e.what() != single) {
        std::fprintf(stderr, "rank %d: %s\n", rank, e.what());
        return 14;
      }
    }
    try {
      data::IndexedDataset::open(rank == 1 ? bad : good, 256, share);
      return 15;
    } catch (const Error& e) {
      if (std::string(e.what()).find("are not parts of one corpus") == std::string::npos) return 16;
    }
    run.finish();
    return 0;
  });
  for (int r = 0; r < world; ++r) {
    EXPECT_EQ(outcomes[static_cast<size_t>(r)].code(), 0) << "rank " << r << ":\n"
                                                          << outcomes[static_cast<size_t>(r)].stderr_text;
  }
  fs::remove_all(dir);
}

// Forked ranks, each running `body`, which must throw sg::Error on every rank with one message: returns it (rank 0's),
// having checked that every rank threw the same and then ended cleanly.
std::string every_ranks_error(int world, const std::function<void(int rank, DistributedRun& run)>& body) {
  const int port = dist::find_free_port();
  constexpr const char* kMarker = "MESSAGE: ";
  const auto outcomes = test::run_ranks(world, [&](int rank) {
    DistributedRun run(test::loopback_world(rank, world, port), test_settings());
    try {
      body(rank, run);
      return 10;
    } catch (const Error& e) {
      std::fprintf(stderr, "%s%s\n", kMarker, e.what());
    }
    run.finish();
    return 0;
  });
  std::vector<std::string> messages;
  for (int r = 0; r < world; ++r) {
    const std::string& err = outcomes[static_cast<size_t>(r)].stderr_text;
    EXPECT_EQ(outcomes[static_cast<size_t>(r)].code(), 0) << "rank " << r << ":\n" << err;
    const size_t at = err.find(kMarker);
    messages.push_back(at == std::string::npos ? "" : err.substr(at, err.find('\n', at) - at));
  }
  for (int r = 1; r < world; ++r) EXPECT_EQ(messages[static_cast<size_t>(r)], messages[0]) << "rank " << r;
  return messages[0];
}

// Ranks started with different configurations (another lr and batch on one node's command line, another seed on
// another's) stop before anything else, each with the same error naming the ranks and the keys that differ; ranks
// with one configuration pass.
TEST(DistributedRun, RanksWithDifferentConfigurationsStopNamingTheKeys) {
  const std::string m = every_ranks_error(4, [](int rank, DistributedRun& run) {
    run.require_same_config(config::load_config("llama/tiny", {"optimizer.lr=0.0002"}));
    std::vector<std::string> overrides = {"optimizer.lr=0.0002"};
    if (rank == 2) overrides = {"optimizer.lr=0.0003", "train.micro_batch_size=2"};
    if (rank == 3) overrides.push_back("rng.seed=9");
    run.require_same_config(config::load_config("llama/tiny", overrides));
  });
  for (const char* part : {"the ranks run different configurations: ", "train.micro_batch_size = 2 on rank 2, ",
                           " on rank 0; optimizer.lr = ", "Ranks 2, 3 differ from rank 0's (of 4 ranks)",
                           "Start every rank with the same recipe"}) {
    EXPECT_NE(m.find(part), std::string::npos) << "no '" << part << "' in: " << m;
  }
  EXPECT_EQ(m.find("rng.seed"), std::string::npos) << "rank 2's keys only (the first rank that differs): " << m;
}

// validation.test_mode: ranks holding the same weights pass; a rank whose weights changed (one chunk here) stops every
// rank with one error naming the step, the rank and what the differing chunk covers.
TEST(DistributedRun, RanksHoldingDifferentWeightsStopNamingTheChunk) {
  const std::string m = every_ranks_error(3, [](int rank, DistributedRun& run) {
    std::vector<uint64_t> fingerprints = {11, 22, 33, 44, 55};
    const auto describe = [](int64_t index) {
      return strprintf("chunk-%lld-of-the-test", static_cast<long long>(index));
    };
    run.require_same_weights(1, fingerprints, describe);
    if (rank == 1) fingerprints[3] = 45;
    run.require_same_weights(2, fingerprints, describe);
  });
  for (const char* part : {"validation.test_mode: after step 2 the data-parallel ranks hold different weights: rank 1 "
                           "differs from rank 0 (of 3 ranks)",
                           "rank 1's weights differ in 1 of 5 chunks", "the first in: chunk-3-of-the-test."}) {
    EXPECT_NE(m.find(part), std::string::npos) << "no '" << part << "' in: " << m;
  }
}

// A save is every rank's (run_steps.cpp): rank 1 returns from it only once rank 0's write is done, so a failure of its
// own right after (a failed metrics write ends the run after the final save; the final save of a normal end) cannot
// abort rank 0 in the middle of writing the checkpoint. Before, rank 1 returned at once and its failure ended rank 0
// (status 70) while it wrote: the checkpoint was lost, and rank 1 said "the run stopped after saving step N".
TEST(DistributedRun, NoRankLeavesASaveBeforeRankZeroHasWrittenIt) {
  const fs::path dir = test::fresh_test_dir("dp_save");
  const fs::path written = dir / "iter_0000004";
  const int port = dist::find_free_port();
  const auto outcomes = test::run_ranks(2, [&](int rank) {
    DistributedRun run(test::loopback_world(rank, 2, port), test_settings());
    run.save_everywhere(4, [&] {  // rank 0's write: a second, then the folder is whole
      std::this_thread::sleep_for(std::chrono::seconds(1));
      std::ofstream(written) << "whole";
    });
    if (rank == 1) {
      run.report_failure("rank 1's metrics write failed; the run stopped after saving step 4");  // as train() does
      return 1;
    }
    std::this_thread::sleep_for(std::chrono::seconds(20));  // rank 1's failure ends this rank now (status 70)
    return 0;
  });
  EXPECT_TRUE(fs::exists(written)) << "rank 0 was ended in the middle of its write:\n" << outcomes[0].stderr_text;
  EXPECT_EQ(outcomes[1].code(), 1) << outcomes[1].stderr_text;
  EXPECT_GE(outcomes[1].seconds, 0.9) << "rank 1 left the save before rank 0's write was done";
  EXPECT_EQ(outcomes[0].code(), dist::kPeerFailedExitCode) << outcomes[0].stderr_text;
  EXPECT_NE(outcomes[0].stderr_text.find("rank 1's metrics write failed"), std::string::npos)
      << outcomes[0].stderr_text;
  fs::remove_all(dir);
}

// A save that fails on rank 0 is reported before anything else: every other rank, waiting for it, ends naming rank 0's
// error (status 70), and rank 0 gets its own error back (the trainer's exit status: 1, or 3 for a non-finite state).
TEST(DistributedRun, ASaveThatFailsOnRankZeroEndsEveryRankNamingIt) {
  const int port = dist::find_free_port();
  const auto outcomes = test::run_ranks(2, [&](int rank) {
    DistributedRun run(test::loopback_world(rank, 2, port), test_settings());
    try {
      run.save_everywhere(6, [] { throw Error("cannot write iter_0000006: No space left on device"); });
    } catch (const Error& e) {
      if (rank == 0) return std::string(e.what()).find("No space left") != std::string::npos ? 3 : 4;
      std::this_thread::sleep_for(std::chrono::seconds(20));  // the store's abort ends this rank first (status 70)
      return 5;
    }
    return 6;  // returned as if the checkpoint were saved
  });
  EXPECT_EQ(outcomes[0].code(), 3) << outcomes[0].stderr_text;
  EXPECT_EQ(outcomes[1].code(), dist::kPeerFailedExitCode) << outcomes[1].stderr_text;
  EXPECT_NE(outcomes[1].stderr_text.find("rank 0 failed: cannot write iter_0000006: No space left on device"),
            std::string::npos)
      << outcomes[1].stderr_text;
}

// A save directory with a latest file naming `iteration` (and that iteration's folder).
void fake_save_dir(const fs::path& dir, int iteration) {
  const fs::path folder = dir / strprintf("iter_%07d", iteration);
  fs::create_directories(folder);
  std::ofstream(folder / "train_state.json") << "{}";
  std::ofstream(dir / "latest_checkpointed_iteration.txt") << iteration;
}

// Rank 0 resolves the folder to resume (its latest file) and every rank gets that folder: ranks that read the save
// directory each for themselves (a node-local checkpoint.save; a latest file replaced between their reads) resumed
// different steps without a word, then waited a day in stop agreements of different steps.
TEST(DistributedResume, EveryRankResumesTheFolderRankZeroResolved) {
  const fs::path dir = test::fresh_test_dir("dp_resume");
  fake_save_dir(dir / "rank0_view", 2);
  fake_save_dir(dir / "rank1_view", 1);
  const fs::path chosen = dir / "rank0_view" / "iter_0000002";
  for (const bool rank0_resumes : {true, false}) {
    const int port = dist::find_free_port();
    const auto outcomes = test::run_ranks(2, [&](int rank) {
      DistributedRun run(test::loopback_world(rank, 2, port), test_settings());
      const std::optional<std::string> mine =
          rank == 0 ? (rank0_resumes ? std::optional<std::string>((dir / "rank0_view").string()) : std::nullopt)
                    : std::optional<std::string>((dir / "rank1_view").string());
      const std::optional<ResumeFolder> folder = resume_folder_everywhere(run, mine, "checkpoint.load");
      run.finish();  // both ranks here: the agreement is done
      if (!rank0_resumes) return folder ? 11 : 0;
      if (!folder) return 12;
      std::fprintf(stderr, "rank %d resumes %s\n", rank, folder->path.c_str());
      return folder->path == chosen.string() ? 0 : 13;
    });
    for (int r = 0; r < 2; ++r) {
      EXPECT_EQ(outcomes[static_cast<size_t>(r)].code(), 0)
          << "rank 0 resumes " << (rank0_resumes ? chosen.string() : "nothing") << "; rank " << r << ":\n"
          << outcomes[static_cast<size_t>(r)].stderr_text;
    }
  }
  fs::remove_all(dir);
}

// After loading, the ranks compare what they resumed (step and train_state.json's checksum): a rank that read other
// files under rank 0's path (a node-local copy) is an error on every rank naming both; a rank that cannot read rank
// 0's folder at all says that the folder is rank 0's choice and what to fix.
TEST(DistributedResume, RanksThatResumedDifferentCheckpointsAreAnErrorNamingThem) {
  const int port = dist::find_free_port();
  const auto outcomes = test::run_ranks(2, [&](int rank) {
    DistributedRun run(test::loopback_world(rank, 2, port), test_settings());
    if (rank == 1) {  // rank 0's choice that this rank cannot read: named as such
      try {
        load_resume_folder(run, "/ckpt/iter_0000002", []() -> LoadedCheckpoint {
          throw Error("checkpoint.load /ckpt/iter_0000002: no such directory");
        });
        return 20;
      } catch (const Error& e) {
        std::fprintf(stderr, "load: %s\n", e.what());
      }
    }
    LoadedCheckpoint loaded;
    loaded.path = "/ckpt/iter_0000002";
    loaded.state.steps_done = 2;
    loaded.train_state_crc = rank == 0 ? "0a1b2c3d" : "99999999";
    try {
      require_same_resume(run, loaded);
      return 21;
    } catch (const Error& e) {
      std::fprintf(stderr, "agreement: %s\n", e.what());
    }
    run.finish();
    return 0;
  });
  for (int r = 0; r < 2; ++r) {
    const std::string& text = outcomes[static_cast<size_t>(r)].stderr_text;
    EXPECT_EQ(outcomes[static_cast<size_t>(r)].code(), 0) << "rank " << r << ":\n" << text;
    EXPECT_NE(text.find("agreement: the checkpoint each rank resumed from /ckpt/iter_0000002"), std::string::npos)
        << text;
    EXPECT_NE(text.find("rank 0 has step 2, train_state.json CRC-32 0a1b2c3d, rank 1 has step 2, train_state.json "
                        "CRC-32 99999999"),
              std::string::npos)
        << text;
  }
  EXPECT_NE(outcomes[1].stderr_text.find("load: rank 1 cannot load /ckpt/iter_0000002, the checkpoint rank 0 resumes"),
            std::string::npos)
      << outcomes[1].stderr_text;
}

}  // namespace
}  // namespace sg::train
