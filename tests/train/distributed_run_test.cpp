// DistributedRun's host agreements with real processes on loopback (forked ranks, no GPU): a stop or a skipped
// evaluation on one rank is every rank's, so none waits in a collective for ranks that are not coming.
#include "train/distributed_run.h"

#include <gtest/gtest.h>

#include <csignal>

#include "dist/rank_processes.h"
#include "dist/local_launcher.h"
#include "dist/loopback_world.h"

namespace sg::train {
namespace {

// The trainer asks before every due evaluation (trainer.cpp): a rank that got SIGTERM, or whose metrics write
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

}  // namespace
}  // namespace sg::train
