// `stepgraph launch`'s engine (dist/local_launcher.h) with shell commands as ranks: the environment each
// rank gets, the exit status when all succeed, fail-fast with the failing rank's status, signal
// forwarding, and the exit-code choice.
#include "dist/local_launcher.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>

#include "dist/store_protocol.h"
#include "test_dir.h"

namespace sg::dist {
namespace {

LaunchOptions shell(int n, const std::string& script) {
  LaunchOptions o;
  o.num_ranks = n;
  o.argv = {"/bin/sh", "-c", script};
  o.kill_grace_seconds = 2.0;
  return o;
}

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

TEST(LocalLauncher, EveryRankGetsItsEnvironment) {
  const std::string dir = ::testing::TempDir();
  LaunchOptions o = shell(3, "echo \"$RANK $LOCAL_RANK $WORLD_SIZE $LOCAL_WORLD_SIZE $MASTER_ADDR $MASTER_PORT "
                             "$STEPGRAPH_RUN_ID $EXTRA\" > " + dir + "launch_env_$RANK.txt");
  o.extra_env = {{"EXTRA", "passed"}};
  o.master_port = 29123;
  const LaunchResult r = launch_local(o);
  EXPECT_EQ(r.exit_code, 0) << r.summary;
  EXPECT_EQ(r.failed_rank, -1);
  ASSERT_EQ(r.exits.size(), 3u);
  std::string run_id;
  for (int rank = 0; rank < 3; ++rank) {
    std::istringstream line(read_file(dir + "launch_env_" + std::to_string(rank) + ".txt"));
    std::string rank_s, local, world, local_world, addr, port, id, extra;
    line >> rank_s >> local >> world >> local_world >> addr >> port >> id >> extra;
    EXPECT_EQ(rank_s, std::to_string(rank));
    EXPECT_EQ(local, std::to_string(rank));
    EXPECT_EQ(world, "3");
    EXPECT_EQ(local_world, "3");
    EXPECT_EQ(addr, "127.0.0.1");
    EXPECT_EQ(port, "29123");
    EXPECT_EQ(extra, "passed");
    EXPECT_EQ(id.size(), 16u);
    if (rank == 0) run_id = id;
    EXPECT_EQ(id, run_id) << "one run id per launch";
  }
}

// An enclosing torchrun's TORCHELASTIC_USE_AGENT_STORE=True would move the ranks' store off MASTER_PORT, where no
// agent store listens under `stepgraph launch`: the launcher drops it (and passes the rest of its environment on).
TEST(LocalLauncher, TheRanksDoNotInheritTorchrunsAgentStoreFlag) {
  const std::string dir = ::testing::TempDir();
  ASSERT_EQ(::setenv("TORCHELASTIC_USE_AGENT_STORE", "True", 1), 0);
  ASSERT_EQ(::setenv("STEPGRAPH_LAUNCH_TEST_KEPT", "kept", 1), 0);
  const LaunchResult r =
      launch_local(shell(2, "echo \"${TORCHELASTIC_USE_AGENT_STORE-unset} $STEPGRAPH_LAUNCH_TEST_KEPT\" > " + dir +
                                "launch_agent_$RANK.txt"));
  ::unsetenv("TORCHELASTIC_USE_AGENT_STORE");
  ::unsetenv("STEPGRAPH_LAUNCH_TEST_KEPT");
  EXPECT_EQ(r.exit_code, 0) << r.summary;
  for (int rank = 0; rank < 2; ++rank) {
    EXPECT_EQ(read_file(dir + "launch_agent_" + std::to_string(rank) + ".txt"), "unset kept\n") << "rank " << rank;
  }
}

TEST(LocalLauncher, OneFailingRankEndsTheOthersWithinSecondsAndGivesItsStatus) {
  // Rank 1 fails after a moment; ranks 0 and 2 would sleep for minutes.
  const auto t0 = std::chrono::steady_clock::now();
  const LaunchResult r = launch_local(shell(3, "if [ $RANK = 1 ]; then sleep 0.3; exit 3; fi; exec sleep 300"));
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_EQ(r.exit_code, 3) << r.summary;
  EXPECT_EQ(r.failed_rank, 1);
  EXPECT_LT(seconds, 5.0) << "the others were not ended promptly";
  ASSERT_EQ(r.exits.size(), 3u);
  EXPECT_EQ(r.exits[0].rank, 1) << "rank 1 ended first";
  EXPECT_NE(r.summary.find("rank 1 failed with exit status 3"), std::string::npos) << r.summary;
}

TEST(LocalLauncher, ARankIgnoringSigtermIsKilledAfterTheGrace) {
  // Rank 0 fails only once rank 1 ignores SIGTERM: the launcher's SIGTERM at rank 0's exit would otherwise end a
  // rank 1 that had not reached its trap yet (a slow fork: a loaded machine, a sanitizer's build).
  const test::ScratchDir dir("launch_sigterm_ignored");
  const std::string ignoring = dir / "rank1_ignores_sigterm";
  const auto t0 = std::chrono::steady_clock::now();
  const std::string script = "if [ $RANK = 0 ]; then i=0; while [ ! -e " + ignoring +
                             " ] && [ $i -lt 500 ]; do sleep 0.01; i=$((i+1)); done; exit 7; fi; trap '' TERM; : > " +
                             ignoring + "; while :; do sleep 0.05; done";
  const LaunchResult r = launch_local(shell(2, script));
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_EQ(r.exit_code, 7) << r.summary;
  EXPECT_LT(seconds, 6.0);
  ASSERT_EQ(r.exits.size(), 2u);
  EXPECT_TRUE(WIFSIGNALED(r.exits[1].status) && WTERMSIG(r.exits[1].status) == SIGKILL);
  EXPECT_TRUE(r.exits[1].killed_by_launcher);
}

TEST(LocalLauncher, PeersEndingBecauseOfAFailureDoNotHideTheFailingRank) {
  // Ranks 0 and 2 "notice" rank 1's failure first and exit with kPeerFailedExitCode; rank 1 takes a
  // while to end with its own status: the launcher must report rank 1's.
  const std::string script = "if [ $RANK = 1 ]; then sleep 0.5; exit 4; fi; sleep 0.1; exit " +
                             std::to_string(kPeerFailedExitCode);
  const LaunchResult r = launch_local(shell(3, script));
  EXPECT_EQ(r.exit_code, 4) << r.summary;
  EXPECT_EQ(r.failed_rank, 1);
}

TEST(LocalLauncher, ForwardsSignalsOnceToEveryRank) {
  // The launcher runs in a child of the test; SIGTERM to it must reach both ranks, which exit 143 (the
  // shell's status for SIGTERM with a trap that exits 143).
  const std::string dir = ::testing::TempDir();
  const pid_t child = ::fork();
  if (child == 0) {
    LaunchOptions o = shell(2, "trap 'echo term >> " + dir + "launch_sig_$RANK.txt; exit 143' TERM; "
                               "echo ready > " + dir + "launch_ready_$RANK.txt; while :; do sleep 0.05; done");
    const LaunchResult r = launch_local(o);
    std::ofstream(dir + "launch_summary.txt") << r.summary;
    _exit(r.exit_code);
  }
  for (int i = 0; i < 200; ++i) {
    if (read_file(dir + "launch_ready_0.txt").size() > 0 && read_file(dir + "launch_ready_1.txt").size() > 0) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(25));
  }
  const auto t0 = std::chrono::steady_clock::now();
  ::kill(child, SIGTERM);
  int status = 0;
  ::waitpid(child, &status, 0);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 143);
  EXPECT_LT(seconds, 3.0);
  EXPECT_EQ(read_file(dir + "launch_sig_0.txt"), "term\n") << "exactly one SIGTERM";
  EXPECT_EQ(read_file(dir + "launch_sig_1.txt"), "term\n");
  // A stop the user asked for is not a rank's failure.
  const std::string summary = read_file(dir + "launch_summary.txt");
  EXPECT_NE(summary.find("stopped on SIGTERM"), std::string::npos) << summary;
  EXPECT_EQ(summary.find("failed"), std::string::npos) << summary;
  for (const char* f : {"launch_ready_0.txt", "launch_ready_1.txt", "launch_sig_0.txt", "launch_sig_1.txt",
                        "launch_summary.txt"}) {
    std::remove((dir + f).c_str());
  }
}

TEST(LocalLauncher, ExitCodeChoice) {
  const auto exited = [](int rank, int code, bool killed = false) {
    RankExit e;
    e.rank = rank;
    e.status = code << 8;  // W_EXITCODE(code, 0)
    e.killed_by_launcher = killed;
    return e;
  };
  int failed = -2;
  EXPECT_EQ(choose_exit_code({exited(0, 0), exited(1, 0)}, &failed), 0);
  EXPECT_EQ(failed, -1);
  EXPECT_EQ(choose_exit_code({exited(2, kPeerFailedExitCode), exited(0, 1), exited(1, 0)}, &failed), 1);
  EXPECT_EQ(failed, 0);
  EXPECT_EQ(choose_exit_code({exited(1, 3), exited(0, 143, true)}, &failed), 3);
  EXPECT_EQ(failed, 1);
  EXPECT_EQ(choose_exit_code({exited(0, 143, true), exited(1, 2)}, &failed), 2) << "killed ranks come last";
  EXPECT_EQ(choose_exit_code({exited(0, kPeerFailedExitCode), exited(1, 143, true)}, &failed), kPeerFailedExitCode);
  // The failing rank was slow to exit: the others ended first (status 70), the launcher signalled it, and it still
  // exited with its own status. That status is the run's, not the first 70.
  EXPECT_EQ(
      choose_exit_code({exited(0, kPeerFailedExitCode), exited(2, kPeerFailedExitCode), exited(1, 4, true)}, &failed),
      4);
  EXPECT_EQ(failed, 1);
  RankExit signalled;
  signalled.rank = 3;
  signalled.status = SIGSEGV;  // W_TERMSIG
  EXPECT_EQ(choose_exit_code({signalled}, &failed), 128 + SIGSEGV);
  EXPECT_EQ(failed, 3);
}

TEST(LocalLauncher, AProgramThatCannotRunFails) {
  LaunchOptions o;
  o.num_ranks = 2;
  o.argv = {"/nonexistent/program"};
  const LaunchResult r = launch_local(o);
  EXPECT_EQ(r.exit_code, 127);
}

}  // namespace
}  // namespace sg::dist
