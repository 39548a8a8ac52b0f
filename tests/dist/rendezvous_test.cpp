// The rendezvous with real processes on loopback (dist/rendezvous.h): ranks are forked copies of this
// test. Rank 0's store hands a blob (the NCCL unique id's role) to every rank; host all-gathers agree;
// a rank that dies or fails ends every other rank within seconds; refusals and timeouts say what is
// wrong; the file rendezvous finds rank 0 without MASTER_ADDR/MASTER_PORT and skips a stale file; under
// torchrun's agent store (which holds MASTER_PORT) the store moves to MASTER_PORT + 1 or STEPGRAPH_STORE_PORT.
#include "dist/rendezvous.h"

#include <gtest/gtest.h>
#include <poll.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <string>
#include <thread>

#include "core/error.h"
#include "core/strings.h"
#include "dist/local_launcher.h"
#include "dist/loopback_world.h"
#include "dist/rank_processes.h"
#include "dist/socket.h"
#include "dist/store_protocol.h"

namespace sg::dist {
namespace {

using test::RankOutcome;
using test::run_ranks;

using test::loopback_world;

RendezvousSettings quick(double timeout = 20.0) {
  RendezvousSettings s;
  s.timeout_seconds = timeout;
  return s;
}

std::string blob_for_test() {
  std::string blob(128, '\0');
  for (size_t i = 0; i < blob.size(); ++i) blob[i] = static_cast<char>((i * 37 + 11) & 0xff);
  return blob;
}

TEST(Rendezvous, RankZeroBlobReachesEveryRankAndHostCollectivesAgree) {
  const int port = find_free_port();
  const int world = 4;
  const auto outcomes = run_ranks(world, [&](int rank) {
    Rendezvous rdzv(loopback_world(rank, world, port), quick());
    const std::string blob = rdzv.broadcast_from_rank0("nccl_unique_id", [] { return blob_for_test(); });
    if (blob != blob_for_test()) return 10;
    const std::vector<std::string> all = rdzv.store().all_gather("who", std::to_string(rank * rank), 20.0);
    if (all.size() != static_cast<size_t>(world)) return 11;
    for (int r = 0; r < world; ++r) {
      if (all[static_cast<size_t>(r)] != std::to_string(r * r)) return 12;
    }
    // The stop agreement: no stop anywhere; then a stop everywhere although only rank 2 got a signal (its
    // signal is every rank's); then a stop with no signal (rank 1's failed metrics write) beside rank 3's.
    if (rdzv.agree_stop("stop/1", 0, 20.0).stop) return 13;
    const StopAgreement by_signal = rdzv.agree_stop("stop/2", rank == 2 ? 15 : 0, 20.0);
    if (!by_signal.stop || by_signal.signal != 15 || by_signal.signal_rank != 2) return 14;
    const StopAgreement mixed = rdzv.agree_stop("stop/3", rank == 1 ? kStopForOtherReason : rank == 3 ? 2 : 0, 20.0);
    if (!mixed.stop || mixed.signal != 2 || mixed.signal_rank != 3) return 15;
    rdzv.require_same("capture", "graph of 123 nodes", "the captured step");
    rdzv.finish();
    return 0;
  });
  for (int r = 0; r < world; ++r) {
    EXPECT_EQ(outcomes[static_cast<size_t>(r)].code(), 0) << "rank " << r << ":\n" << outcomes[static_cast<size_t>(r)].stderr_text;
  }
}

// A long wait for a key can say so: get() with a `waiting` callback calls it every so often until the value comes (rank
// 0 names the rank whose part of a corpus scan it waits for), and returns the value as the plain get() does.
TEST(Rendezvous, AWaitForAKeyCanSaySoWhileItWaits) {
  const int port = find_free_port();
  const auto outcomes = run_ranks(2, [&](int rank) {
    Rendezvous rdzv(loopback_world(rank, 2, port), quick());
    if (rank == 1) {
      std::this_thread::sleep_for(std::chrono::milliseconds(700));
      rdzv.store().set("late", "value");
    } else {
      std::vector<double> said;
      const std::string value = rdzv.store().get(
          "late", 20.0, [&](double waited) { said.push_back(waited); }, 0.1);
      if (value != "value") return 10;
      if (said.size() < 3 || said.size() > 12) return 11;  // about six: every 0.1 s for 0.7 s
      for (size_t i = 1; i < said.size(); ++i) {
        if (said[i] <= said[i - 1]) return 12;
      }
      try {
        rdzv.store().get(
            "never", 0.3, [](double) {}, 0.1);
        return 13;
      } catch (const Error& e) {
        if (std::string(e.what()).find("timed out while waiting for 'never'") == std::string::npos) return 14;
      }
    }
    rdzv.finish();
    return 0;
  });
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(outcomes[static_cast<size_t>(r)].code(), 0) << "rank " << r << ":\n"
                                                          << outcomes[static_cast<size_t>(r)].stderr_text;
  }
}

// The stop agreement's rule: any reason stops every rank; the lowest rank's signal is the exit status of all.
TEST(StopAgreement, AnyReasonStopsAndTheLowestSignalledRankNamesTheSignal) {
  EXPECT_FALSE(agree_on_stop({0, 0, 0}).stop);
  EXPECT_FALSE(agree_on_stop({}).stop);
  const StopAgreement other = agree_on_stop({0, kStopForOtherReason});
  EXPECT_TRUE(other.stop);
  EXPECT_EQ(other.signal, 0);
  EXPECT_EQ(other.signal_rank, -1);
  const StopAgreement two = agree_on_stop({kStopForOtherReason, 0, 15, 2});
  EXPECT_TRUE(two.stop);
  EXPECT_EQ(two.signal, 15);
  EXPECT_EQ(two.signal_rank, 2);
  const StopAgreement one = agree_on_stop({1});
  EXPECT_TRUE(one.stop);
  EXPECT_EQ(one.signal, 1);
  EXPECT_EQ(one.signal_rank, 0);
}

TEST(Rendezvous, DifferentValuesOnRanksAreAnErrorOnEveryRank) {
  const int port = find_free_port();
  const auto outcomes = run_ranks(3, [&](int rank) {
    Rendezvous rdzv(loopback_world(rank, 3, port), quick());
    try {
      rdzv.require_same("capture", rank == 1 ? "517 nodes" : "515 nodes", "the captured graph");
    } catch (const Error& e) {
      const std::string text = e.what();
      if (text.find("the captured graph differs between ranks") == std::string::npos) return 20;
      if (text.find("rank 1 has 517 nodes") == std::string::npos) return 21;
      rdzv.finish();
      return 0;
    }
    return 22;
  });
  for (const RankOutcome& o : outcomes) EXPECT_EQ(o.code(), 0) << o.stderr_text;
}

// The digest form: equal digests give nullopt everywhere (a value the same on every rank, then another where two of
// four ranks differ); every rank gets the same answer, the differing ranks in order with rank 0's text and the first
// differing rank's, although only those two put a text in the store.
TEST(Rendezvous, DigestsThatDifferFromRankZerosGiveEveryRankBothTexts) {
  const int port = find_free_port();
  const int world = 4;
  const auto outcomes = run_ranks(world, [&](int rank) {
    Rendezvous rdzv(loopback_world(rank, world, port), quick());
    if (rdzv.differences_from_rank0("same", "d0", "text of every rank")) return 30;
    const bool odd = rank == 1 || rank == 3;
    const std::optional<RankDifference> d =
        rdzv.differences_from_rank0("odd", odd ? "d1" : "d0", strprintf("text of rank %d", rank));
    if (!d) return 31;
    if (d->ranks != std::vector<int>{1, 3}) return 32;
    if (d->rank0 != "text of rank 0") return 33;
    if (d->first != "text of rank 1") return 34;
    rdzv.finish();
    return 0;
  });
  for (int r = 0; r < world; ++r) {
    EXPECT_EQ(outcomes[static_cast<size_t>(r)].code(), 0) << "rank " << r << ":\n"
                                                          << outcomes[static_cast<size_t>(r)].stderr_text;
  }
}

TEST(Rendezvous, ARankThatDiesEndsEveryOtherRankWithinSeconds) {
  const int port = find_free_port();
  const int world = 3;
  const auto outcomes = run_ranks(world, [&](int rank) {
    Rendezvous rdzv(loopback_world(rank, world, port), quick());
    if (rank == 2) {
      std::this_thread::sleep_for(std::chrono::milliseconds(300));
      _exit(3);  // a crash: no destructor, no message; the kernel closes its connection
    }
    // The others wait for something that never comes (as if blocked in a collective with rank 2).
    rdzv.store().all_gather("never", "x", 600.0);
    return 30;
  }, std::chrono::seconds(30));
  ASSERT_EQ(outcomes[2].code(), 3);
  for (int r = 0; r < 2; ++r) {
    const RankOutcome& o = outcomes[static_cast<size_t>(r)];
    EXPECT_EQ(o.code(), kPeerFailedExitCode) << "rank " << r << ":\n" << o.stderr_text;
    EXPECT_LT(o.seconds - outcomes[2].seconds, 3.0) << "rank " << r << " ended long after rank 2 died";
    EXPECT_NE(o.stderr_text.find("ending because rank 2 failed"), std::string::npos) << o.stderr_text;
  }
}

TEST(Rendezvous, AFailingRankTellsTheOthersWhy) {
  const int port = find_free_port();
  const auto outcomes = run_ranks(2, [&](int rank) {
    Rendezvous rdzv(loopback_world(rank, 2, port), quick());
    if (rank == 0) {
      rdzv.report_failure("could not open dataset.data_path /data/x");
      return 1;
    }
    rdzv.store().all_gather("never", "x", 600.0);
    return 31;
  }, std::chrono::seconds(30));
  EXPECT_EQ(outcomes[0].code(), 1);
  EXPECT_EQ(outcomes[1].code(), kPeerFailedExitCode) << outcomes[1].stderr_text;
  EXPECT_NE(outcomes[1].stderr_text.find("rank 0 failed: could not open dataset.data_path /data/x"), std::string::npos)
      << outcomes[1].stderr_text;
  EXPECT_LT(outcomes[1].seconds, 10.0);
}

TEST(Rendezvous, AnExceptionOnOneRankReachesTheOthersThroughTheDestructor) {
  const int port = find_free_port();
  const auto outcomes = run_ranks(2, [&](int rank) {
    {
      Rendezvous rdzv(loopback_world(rank, 2, port), quick());
      if (rank == 1) return 4;  // unwinds without finish(): a failure
      rdzv.store().all_gather("never", "x", 600.0);
    }
    return 32;
  }, std::chrono::seconds(30));
  EXPECT_EQ(outcomes[1].code(), 4);
  EXPECT_EQ(outcomes[0].code(), kPeerFailedExitCode) << outcomes[0].stderr_text;
  EXPECT_NE(outcomes[0].stderr_text.find("rank 1 failed"), std::string::npos) << outcomes[0].stderr_text;
}

TEST(Rendezvous, WhenRankZeroDiesTheOthersEnd) {
  const int port = find_free_port();
  const auto outcomes = run_ranks(3, [&](int rank) {
    Rendezvous rdzv(loopback_world(rank, 3, port), quick());
    if (rank == 0) _exit(5);
    rdzv.store().all_gather("never", "x", 600.0);
    return 33;
  }, std::chrono::seconds(30));
  EXPECT_EQ(outcomes[0].code(), 5);
  for (int r = 1; r < 3; ++r) {
    EXPECT_EQ(outcomes[static_cast<size_t>(r)].code(), kPeerFailedExitCode) << outcomes[static_cast<size_t>(r)].stderr_text;
  }
}

TEST(Rendezvous, MissingRanksTimeOutNamingThem) {
  const int port = find_free_port();
  try {
    Rendezvous rdzv(loopback_world(0, 3, port), quick(1.0));
    FAIL() << "joined without ranks 1 and 2";
  } catch (const Error& e) {
    const std::string text = e.what();
    EXPECT_NE(text.find("timed out"), std::string::npos) << text;
    EXPECT_NE(text.find("missing ranks: 1, 2"), std::string::npos) << text;
  }
}

TEST(Rendezvous, MissingMasterIsNamed) {
  WorldInfo w = loopback_world(1, 2, 0);
  w.master_addr.clear();
  try {
    Rendezvous rdzv(w, quick(1.0));
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("MASTER_ADDR is not set"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("STEPGRAPH_RENDEZVOUS_FILE"), std::string::npos) << e.what();
  }
}

TEST(Rendezvous, NoRankZeroIsATimeoutThatSaysSo) {
  const int port = find_free_port();  // nobody listens there
  try {
    Rendezvous rdzv(loopback_world(1, 2, port), quick(0.5));
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("could not connect to 127.0.0.1"), std::string::npos) << e.what();
  }
}

// A rank of this job that cannot join (here: another world size) is refused and ends the job at once: rank 0 exits
// with the peer-failure status naming the refusal, well before the rendezvous timeout (it waited all of it).
TEST(Rendezvous, ARankOfThisJobThatCannotJoinEndsTheJob) {
  const int port = find_free_port();
  const auto outcomes = run_ranks(
      2,
      [&](int rank) {
        if (rank == 0) {
          Rendezvous rdzv(loopback_world(0, 2, port), quick(20.0));
          return 42;  // joined: the refused rank was counted
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(200));
        try {
          Rendezvous rdzv(loopback_world(1, 3, port), quick(20.0));
        } catch (const Error& e) {
          if (std::string(e.what()).find("world size is 3, rank 0 says 2") != std::string::npos) return 0;
          std::fprintf(stderr, "%s\n", e.what());
          return 40;
        }
        return 41;
      },
      std::chrono::seconds(60));
  EXPECT_EQ(outcomes[1].code(), 0) << outcomes[1].stderr_text;
  EXPECT_EQ(outcomes[0].code(), kPeerFailedExitCode) << outcomes[0].stderr_text;
  EXPECT_NE(outcomes[0].stderr_text.find("rank 1 was refused at the rendezvous"), std::string::npos)
      << outcomes[0].stderr_text;
  EXPECT_LT(outcomes[0].seconds, 10.0) << "rank 0 waited for the timeout";
}

// A rank of another job (another token on the same MASTER_PORT) is turned away, and this job's ranks still join.
TEST(Rendezvous, ARankOfAnotherJobIsRefusedAndTheJobGoesOn) {
  const int port = find_free_port();
  const auto outcomes = run_ranks(
      3,
      [&](int rank) {
        if (rank == 2) {  // another job's rank, first
          try {
            Rendezvous rdzv(loopback_world(1, 2, port, "other-job"), quick(10.0));
          } catch (const Error& e) {
            if (std::string(e.what()).find("belongs to another job") != std::string::npos) return 0;
            std::fprintf(stderr, "%s\n", e.what());
            return 40;
          }
          return 41;
        }
        if (rank == 1) std::this_thread::sleep_for(std::chrono::milliseconds(1500));
        Rendezvous rdzv(loopback_world(rank, 2, port), quick(10.0));
        if (rdzv.broadcast_from_rank0("id", [] { return blob_for_test(); }) != blob_for_test()) return 50;
        rdzv.finish();
        return 0;
      },
      std::chrono::seconds(60));
  for (const RankOutcome& o : outcomes) EXPECT_EQ(o.code(), 0) << o.stderr_text;
}

// ---- torchrun's agent store (TORCHELASTIC_USE_AGENT_STORE=True) ----
// torchrun's elastic agent (node rank 0) serves its own TCPStore on MASTER_ADDR:MASTER_PORT and tells the workers so.
// Here a listening socket holds that port in its place, and the ranks read torchrun's environment as
// world_from_env does.

EnvLookup env_of(const std::map<std::string, std::string>& vars) {
  return [vars](const std::string& name) -> std::optional<std::string> {
    const auto it = vars.find(name);
    if (it == vars.end()) return std::nullopt;
    return it->second;
  };
}

// The environment torchrun gives rank `rank` of `world` on one node, its agent's store at 127.0.0.1:`master_port`.
std::map<std::string, std::string> torchrun_env(int rank, int world, int master_port) {
  return {{"RANK", std::to_string(rank)},
          {"LOCAL_RANK", std::to_string(rank)},
          {"WORLD_SIZE", std::to_string(world)},
          {"LOCAL_WORLD_SIZE", std::to_string(world)},
          {"MASTER_ADDR", "127.0.0.1"},
          {"MASTER_PORT", std::to_string(master_port)},
          {"TORCHELASTIC_RUN_ID", "agent-store-test"},
          {"TORCHELASTIC_USE_AGENT_STORE", "True"}};
}

// A listening port P (the agent's store) whose P + 1 is free a moment ago.
struct AgentStoreStandIn {
  Socket listener;
  int port = 0;
};
AgentStoreStandIn hold_port_with_free_next() {
  for (int attempt = 0; attempt < 100; ++attempt) {
    Socket held = listen_on(0, "the agent store's stand-in");
    const int port = bound_port(held);
    if (port >= 65535) continue;
    try {
      Socket probe = listen_on(port + 1, "its next port");
    } catch (const Error&) {
      continue;
    }
    return {std::move(held), port};
  }
  throw Error("no port with a free next port found");
}

// Whether a connection waits on the listener: some rank spoke to the agent's store.
bool someone_connected(const Socket& listener) {
  pollfd p{listener.fd(), POLLIN, 0};
  return ::poll(&p, 1, 0) > 0 && (p.revents & POLLIN) != 0;
}

TEST(Rendezvous, UnderTorchrunsAgentStoreTheStoreTakesMasterPortPlusOne) {
  const AgentStoreStandIn agent = hold_port_with_free_next();
  const int world = 2;
  const auto outcomes = run_ranks(world, [&](int rank) {
    const WorldInfo w = world_from_env(env_of(torchrun_env(rank, world, agent.port)));
    Rendezvous rdzv(w, quick());
    if (rdzv.where() != "tcp 127.0.0.1:" + std::to_string(agent.port + 1)) {
      std::fprintf(stderr, "where: %s\n", rdzv.where().c_str());
      return 60;
    }
    if (rdzv.broadcast_from_rank0("nccl_unique_id", [] { return blob_for_test(); }) != blob_for_test()) return 61;
    rdzv.finish();
    return 0;
  });
  for (int r = 0; r < world; ++r) {
    EXPECT_EQ(outcomes[static_cast<size_t>(r)].code(), 0) << "rank " << r << ":\n"
                                                          << outcomes[static_cast<size_t>(r)].stderr_text;
  }
  EXPECT_FALSE(someone_connected(agent.listener)) << "a rank spoke stepgraph's protocol to torchrun's store";
}

TEST(Rendezvous, StepgraphStorePortIsHonoredUnderTorchrunsAgentStore) {
  const AgentStoreStandIn agent = hold_port_with_free_next();
  Socket next = listen_on(agent.port + 1, "MASTER_PORT + 1, taken too");  // STEPGRAPH_STORE_PORT must avoid it
  const int chosen = find_free_port();
  const int world = 2;
  const auto outcomes = run_ranks(world, [&](int rank) {
    auto vars = torchrun_env(rank, world, agent.port);
    vars["STEPGRAPH_STORE_PORT"] = std::to_string(chosen);
    Rendezvous rdzv(world_from_env(env_of(vars)), quick());
    if (rdzv.where() != "tcp 127.0.0.1:" + std::to_string(chosen)) return 62;
    if (rdzv.broadcast_from_rank0("id", [] { return blob_for_test(); }) != blob_for_test()) return 63;
    rdzv.finish();
    return 0;
  });
  for (const RankOutcome& o : outcomes) EXPECT_EQ(o.code(), 0) << o.stderr_text;
  EXPECT_FALSE(someone_connected(agent.listener));
  EXPECT_FALSE(someone_connected(next));
}

// MASTER_PORT + 1 taken as well: rank 0's error names where its port came from and STEPGRAPH_STORE_PORT, the variable
// that picks another (torchrun overwrites MASTER_PORT).
TEST(Rendezvous, UnderTorchrunsAgentStoreATakenPortNamesStepgraphStorePort) {
  const AgentStoreStandIn agent = hold_port_with_free_next();
  Socket next = listen_on(agent.port + 1, "MASTER_PORT + 1, taken too");
  try {
    Rendezvous rdzv(world_from_env(env_of(torchrun_env(0, 1, agent.port))), quick(1.0));
    FAIL() << "served on a taken port";
  } catch (const Error& e) {
    const std::string text = e.what();
    EXPECT_NE(text.find(strprintf("cannot serve the rendezvous store on port %d (MASTER_PORT + 1: torchrun's agent",
                                  agent.port + 1)),
              std::string::npos)
        << text;
    EXPECT_NE(text.find("STEPGRAPH_STORE_PORT=<port>"), std::string::npos) << text;
  }
}

// A rank that finds no store at MASTER_ADDR:MASTER_PORT + 1 is told why that can happen under torchrun (c10d across
// nodes) and what needs no address.
TEST(Rendezvous, UnderTorchrunsAgentStoreNoRankZeroNamesTheFileRendezvous) {
  const AgentStoreStandIn agent = hold_port_with_free_next();
  try {
    Rendezvous rdzv(world_from_env(env_of(torchrun_env(1, 2, agent.port))), quick(0.5));
    FAIL();
  } catch (const Error& e) {
    const std::string text = e.what();
    EXPECT_NE(text.find(strprintf("could not connect to 127.0.0.1:%d", agent.port + 1)), std::string::npos) << text;
    EXPECT_NE(text.find("MASTER_PORT + 1"), std::string::npos) << text;
    EXPECT_NE(text.find("STEPGRAPH_STORE_PORT"), std::string::npos) << text;
    EXPECT_NE(text.find("c10d"), std::string::npos) << text;
    EXPECT_NE(text.find("STEPGRAPH_RENDEZVOUS_FILE"), std::string::npos) << text;
  }
  EXPECT_FALSE(someone_connected(agent.listener));
}

TEST(Rendezvous, FileRendezvousFindsRankZeroAndSkipsAStaleFile) {
  const std::string path = std::string(::testing::TempDir()) + "stepgraph_rdzv_" + std::to_string(::getpid());
  // Holds the port a Slurm job id would have given. A listening socket, not a StoreServer: the ranks are forked
  // copies of this process, and a thread running at the fork makes ThreadSanitizer refuse the ranks' own threads.
  const Socket holder = listen_on(0, "another program's port");
  const int taken_port = bound_port(holder);
  {
    // A leftover of another run, pointing at a port nobody serves.
    std::ofstream stale(path);
    stale << "stepgraph-rendezvous 1\n127.0.0.1 " << find_free_port() << "\n2\nold-job\n";
  }
  const auto outcomes = run_ranks(3, [&](int rank) {
    RendezvousSettings s = quick();
    s.file = path;
    // No port given: rank 0 serves on a free one and publishes it in the file, also where a port was derived (from
    // SLURM_JOB_ID) and is taken.
    WorldInfo w = loopback_world(rank, 3, taken_port, "new-job");
    w.master_port_given = false;
    if (rank == 0) std::this_thread::sleep_for(std::chrono::milliseconds(500));  // the others read the stale file
    Rendezvous rdzv(w, s);
    if (rdzv.broadcast_from_rank0("id", [] { return blob_for_test(); }) != blob_for_test()) return 50;
    rdzv.finish();
    return 0;
  });
  for (const RankOutcome& o : outcomes) EXPECT_EQ(o.code(), 0) << o.stderr_text;
  EXPECT_FALSE(std::filesystem::exists(path)) << "rank 0 removes the file at the end";
}

}  // namespace
}  // namespace sg::dist
