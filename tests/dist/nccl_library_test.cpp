// NCCL loading without a GPU (dist/nccl_library.h): a library that cannot be loaded is a clear error
// naming it; where this machine has libnccl.so.2 it is found and new enough, and a unique id can be made
// (rank 0's part of the rendezvous needs no GPU). Also Megatron's NCCL_GRAPH_REGISTER rule.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "core/error.h"
#include "dist/communicator.h"
#include "dist/nccl_library.h"
#include "dist/rank_processes.h"

namespace sg::dist {
namespace {

TEST(NcclLibrary, AForcedPathThatDoesNotLoadIsNamed) {
  // In a child: the loader caches its result for the life of the process.
  const auto outcomes = test::run_ranks(1, [](int) {
    ::setenv("STEPGRAPH_NCCL_LIBRARY", "/nonexistent/libnccl.so.2", 1);
    try {
      load_nccl();
    } catch (const Error& e) {
      const std::string text = e.what();
      if (text.find("STEPGRAPH_NCCL_LIBRARY = /nonexistent/libnccl.so.2 cannot be loaded") == std::string::npos) {
        std::fprintf(stderr, "%s\n", text.c_str());
        return 2;
      }
      return 0;
    }
    return 1;
  });
  EXPECT_EQ(outcomes[0].code(), 0) << outcomes[0].stderr_text;
}

TEST(NcclLibrary, LoadsTheMachinesNcclWhereThereIsOne) {
  std::string problem;
  try {
    const NcclLibraryInfo& info = load_nccl();
    EXPECT_GE(info.version_code, kMinNcclVersionCode);
    EXPECT_FALSE(info.path.empty());
    EXPECT_EQ(info.version().substr(0, 2), "2.");
  } catch (const Error& e) {
    problem = e.what();
  }
  if (!problem.empty()) {
    EXPECT_NE(problem.find("Tried:"), std::string::npos) << "the error lists the places looked: " << problem;
    GTEST_SKIP() << "no NCCL on this machine: " << problem;
  }
  const NcclUniqueIdBytes a = new_nccl_unique_id();
  const NcclUniqueIdBytes b = new_nccl_unique_id();
  EXPECT_NE(a, b) << "every run gets its own id";
}

TEST(NcclLibrary, CandidatePathsExist) {
  for (const std::string& p : nccl_candidate_paths()) {
    EXPECT_NE(p.find("libnccl.so.2"), std::string::npos) << p;
  }
}

TEST(GraphRegister, MegatronsRule) {
  // Nothing captured, or fixed memory, or Blackwell: NCCL's default stays.
  for (const auto& [graphs, expandable, cc] : {std::tuple{false, true, 9}, std::tuple{true, false, 9},
                                               std::tuple{true, true, 10}}) {
    const GraphRegisterDecision d = graph_register_decision(graphs, expandable, cc, std::nullopt);
    EXPECT_FALSE(d.set_zero);
    EXPECT_TRUE(d.error.empty());
    EXPECT_FALSE(d.note.empty());
  }
  // stepgraph's own case: collectives captured over the fixed arena on an H200.
  EXPECT_NE(graph_register_decision(true, false, 9, std::nullopt).note.find("safe and kept"), std::string::npos);
  // Captured + expandable + Hopper: turned off when unset, kept off when 0, refused when 1.
  EXPECT_TRUE(graph_register_decision(true, true, 9, std::nullopt).set_zero);
  const GraphRegisterDecision zero = graph_register_decision(true, true, 9, std::string("0"));
  EXPECT_FALSE(zero.set_zero);
  EXPECT_TRUE(zero.error.empty());
  const GraphRegisterDecision one = graph_register_decision(true, true, 9, std::string("1"));
  EXPECT_NE(one.error.find("set NCCL_GRAPH_REGISTER=0"), std::string::npos) << one.error;
}

}  // namespace
}  // namespace sg::dist
