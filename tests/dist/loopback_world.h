#pragma once
// Rank `rank` of `world` on loopback, rank 0's store at `port`: the world a test's forked ranks join
// (run_ranks in rank_processes.h), as torchrun would describe it.
#include <string>

#include "dist/world_env.h"

namespace sg::test {

inline dist::WorldInfo loopback_world(int rank, int world, int port, const std::string& token = "test-job") {
  dist::WorldInfo w;
  w.rank = rank;
  w.local_rank = rank;
  w.world_size = world;
  w.master_addr = "127.0.0.1";
  w.master_port = port;
  w.master_port_given = port != 0;
  w.launcher = "torchrun";
  w.job_token = token;
  return w;
}

}  // namespace sg::test
