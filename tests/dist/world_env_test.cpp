// Who this rank is, from the launchers' environments (dist/world_env.h): torchrun, Slurm, none; every
// missing or inconsistent variable is an error naming it. And Slurm hostlists (dist/hostlist.h).
#include <gtest/gtest.h>

#include <map>
#include <string>

#include "core/error.h"
#include "dist/hostlist.h"
#include "dist/world_env.h"

namespace sg::dist {
namespace {

EnvLookup env_of(const std::map<std::string, std::string>& vars) {
  return [vars](const std::string& name) -> std::optional<std::string> {
    const auto it = vars.find(name);
    if (it == vars.end()) return std::nullopt;
    return it->second;
  };
}

// The error text of world_from_env, or "" when it does not throw.
std::string error_of(const std::map<std::string, std::string>& vars) {
  try {
    world_from_env(env_of(vars));
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(WorldEnv, NoLauncherIsASingleProcess) {
  const WorldInfo w = world_from_env(env_of({{"PATH", "/bin"}}));
  EXPECT_EQ(w.world_size, 1);
  EXPECT_EQ(w.rank, 0);
  EXPECT_FALSE(w.distributed());
  EXPECT_FALSE(w.data_parallel_path());
  EXPECT_EQ(w.launcher, "none");
}

TEST(WorldEnv, OneRankOfATorchrunStyleLauncherTakesTheNcclPathOneSlurmTaskDoesNot) {
  // stepgraph launch -n 1 / torchrun --nproc-per-node 1: the whole data-parallel path at world size 1.
  const WorldInfo one = world_from_env(env_of({{"RANK", "0"},
                                               {"WORLD_SIZE", "1"},
                                               {"LOCAL_RANK", "0"},
                                               {"MASTER_ADDR", "127.0.0.1"},
                                               {"MASTER_PORT", "29500"}}));
  EXPECT_FALSE(one.distributed());
  EXPECT_TRUE(one.data_parallel_path());
  // A single srun task (or a shell inside an allocation) is a plain single process.
  const WorldInfo task = world_from_env(env_of({{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "1"}, {"SLURM_LOCALID", "0"}}));
  EXPECT_EQ(task.launcher, "slurm");
  EXPECT_FALSE(task.data_parallel_path());
  const WorldInfo two = world_from_env(env_of({{"SLURM_PROCID", "1"}, {"SLURM_NTASKS", "2"}, {"SLURM_LOCALID", "1"}}));
  EXPECT_TRUE(two.data_parallel_path());
}

TEST(WorldEnv, Torchrun) {
  const WorldInfo w = world_from_env(env_of({{"RANK", "3"},
                                             {"WORLD_SIZE", "8"},
                                             {"LOCAL_RANK", "1"},
                                             {"LOCAL_WORLD_SIZE", "2"},
                                             {"MASTER_ADDR", "node07"},
                                             {"MASTER_PORT", "29500"},
                                             {"TORCHELASTIC_RUN_ID", "abc"},
                                             {"SLURM_PROCID", "0"}}));  // torchrun inside srun: torchrun wins
  EXPECT_EQ(w.launcher, "torchrun");
  EXPECT_EQ(w.rank, 3);
  EXPECT_EQ(w.world_size, 8);
  EXPECT_EQ(w.local_rank, 1);
  EXPECT_EQ(w.local_world_size, 2);
  EXPECT_EQ(w.master_addr, "node07");
  EXPECT_EQ(w.master_port, 29500);
  EXPECT_EQ(w.job_token, "torchelastic:abc");
  EXPECT_TRUE(w.distributed());
  EXPECT_NE(w.describe().find("rank 3 of 8"), std::string::npos);
}

TEST(WorldEnv, TorchrunMissingOrInconsistentVariablesAreNamed) {
  const std::map<std::string, std::string> ok = {
      {"RANK", "1"}, {"WORLD_SIZE", "2"}, {"LOCAL_RANK", "1"}, {"MASTER_ADDR", "h"}, {"MASTER_PORT", "1234"}};
  EXPECT_EQ(error_of(ok), "");
  for (const char* missing : {"RANK", "WORLD_SIZE", "LOCAL_RANK"}) {
    auto vars = ok;
    vars.erase(missing);
    const std::string e = error_of(vars);
    EXPECT_NE(e.find(std::string(missing) + " is not set"), std::string::npos) << missing << ": " << e;
  }
  const auto with = [&](const char* name, const char* value) {
    auto vars = ok;
    vars[name] = value;
    return error_of(vars);
  };
  EXPECT_NE(with("RANK", "2").find("RANK = 2 must be less than WORLD_SIZE = 2"), std::string::npos);
  EXPECT_NE(with("RANK", "one").find("RANK = 'one' is not an integer"), std::string::npos);
  EXPECT_NE(with("WORLD_SIZE", "0").find("WORLD_SIZE = '0'"), std::string::npos);
  EXPECT_NE(with("LOCAL_RANK", "-1").find("LOCAL_RANK"), std::string::npos);
  EXPECT_NE(with("MASTER_PORT", "70000").find("MASTER_PORT = '70000'"), std::string::npos);
  EXPECT_NE(with("LOCAL_WORLD_SIZE", "1").find("LOCAL_RANK = 1 must be less than LOCAL_WORLD_SIZE = 1"),
            std::string::npos);
  EXPECT_NE(with("LOCAL_WORLD_SIZE", "4").find("LOCAL_WORLD_SIZE = 4 exceeds WORLD_SIZE = 2"), std::string::npos);
  // Only the variables that are set are listed as set.
  const std::string rank_only = error_of({{"RANK", "0"}});
  EXPECT_NE(rank_only.find("WORLD_SIZE is not set, but RANK is ("), std::string::npos) << rank_only;
  const std::string two = error_of({{"RANK", "0"}, {"LOCAL_RANK", "0"}});
  EXPECT_NE(two.find("WORLD_SIZE is not set, but RANK and LOCAL_RANK are ("), std::string::npos) << two;
  // The master is only needed by the TCP rendezvous (dist/rendezvous.h names it there).
  auto no_master = ok;
  no_master.erase("MASTER_ADDR");
  EXPECT_EQ(error_of(no_master), "");
}

TEST(WorldEnv, SlurmWithDerivedMaster) {
  const WorldInfo w = world_from_env(env_of({{"SLURM_PROCID", "5"},
                                             {"SLURM_NTASKS", "8"},
                                             {"SLURM_LOCALID", "1"},
                                             {"SLURM_NTASKS_PER_NODE", "4(x2)"},
                                             {"SLURM_JOB_NODELIST", "gpu-[017-018]"},
                                             {"SLURM_LAUNCH_NODE_IPADDR", "10.1.2.3"},
                                             {"SLURM_JOB_ID", "4412345"},
                                             {"SLURM_STEP_ID", "0"}}));
  EXPECT_EQ(w.launcher, "slurm");
  EXPECT_EQ(w.rank, 5);
  EXPECT_EQ(w.world_size, 8);
  EXPECT_EQ(w.local_rank, 1);
  EXPECT_EQ(w.local_world_size, 4);
  EXPECT_EQ(w.master_addr, "gpu-017") << "task 0 runs on the first node";
  EXPECT_EQ(w.master_source, "first host of SLURM_JOB_NODELIST");
  EXPECT_EQ(w.master_port, 15000 + 2345);
  EXPECT_EQ(w.job_token, "slurm:4412345.0");
}

TEST(WorldEnv, SlurmMasterGivenOrFromTheLaunchNode) {
  std::map<std::string, std::string> vars = {{"SLURM_PROCID", "0"},          {"SLURM_NTASKS", "2"},
                                             {"SLURM_LOCALID", "0"},          {"SLURM_LAUNCH_NODE_IPADDR", "10.1.2.3"},
                                             {"SLURM_JOB_ID", "77"},          {"MASTER_PORT", "4000"}};
  WorldInfo w = world_from_env(env_of(vars));
  EXPECT_EQ(w.master_addr, "10.1.2.3");
  EXPECT_EQ(w.master_port, 4000);
  vars["MASTER_ADDR"] = "head";
  vars["SLURM_NODELIST"] = "n[1-2]";
  w = world_from_env(env_of(vars));
  EXPECT_EQ(w.master_addr, "head");
}

TEST(WorldEnv, SlurmMissingOrInconsistentVariablesAreNamed) {
  const std::map<std::string, std::string> ok = {{"SLURM_PROCID", "1"}, {"SLURM_NTASKS", "2"}, {"SLURM_LOCALID", "0"}};
  EXPECT_EQ(error_of(ok), "");
  auto vars = ok;
  vars.erase("SLURM_LOCALID");
  EXPECT_NE(error_of(vars).find("SLURM_LOCALID is not set"), std::string::npos) << error_of(vars);
  vars = ok;
  vars.erase("SLURM_NTASKS");
  EXPECT_NE(error_of(vars).find("SLURM_NTASKS is not set"), std::string::npos) << error_of(vars);
  vars = ok;
  vars["SLURM_PROCID"] = "2";
  EXPECT_NE(error_of(vars).find("SLURM_PROCID = 2 must be less than SLURM_NTASKS = 2"), std::string::npos);
  vars = ok;
  vars.erase("SLURM_NTASKS");
  vars["SLURM_NPROCS"] = "4";
  EXPECT_EQ(world_from_env(env_of(vars)).world_size, 4);
  // MASTER_PORT derives from the job id's last digits: a non-numeric id is named as not an integer, without
  // the digits' range.
  vars = ok;
  vars["SLURM_JOB_ID"] = "abc";
  EXPECT_NE(error_of(vars).find("SLURM_JOB_ID = 'abc' is not an integer"), std::string::npos) << error_of(vars);
  EXPECT_EQ(error_of(vars).find("9999"), std::string::npos) << error_of(vars);
  vars["MASTER_PORT"] = "4000";
  EXPECT_EQ(error_of(vars), "") << "a given MASTER_PORT needs no job id";
  vars = ok;
  vars["SLURM_NODELIST"] = "bad[1-2";
  EXPECT_NE(error_of(vars).find("SLURM_NODELIST = 'bad[1-2'"), std::string::npos) << error_of(vars);
}

// Where stepgraph's own store listens. torchrun's elastic agent serves its TCPStore on MASTER_ADDR:MASTER_PORT and says
// so with TORCHELASTIC_USE_AGENT_STORE=True: then MASTER_PORT + 1, or STEPGRAPH_STORE_PORT. Elsewhere MASTER_PORT as
// before (or the port Slurm's job id gives), unless STEPGRAPH_STORE_PORT is set.
TEST(WorldEnv, TheStorePortAvoidsTorchrunsAgentStore) {
  const std::map<std::string, std::string> torchrun = {{"RANK", "1"},
                                                       {"WORLD_SIZE", "2"},
                                                       {"LOCAL_RANK", "1"},
                                                       {"MASTER_ADDR", "node0"},
                                                       {"MASTER_PORT", "29500"},
                                                       {"TORCHELASTIC_USE_AGENT_STORE", "True"}};
  WorldInfo w = world_from_env(env_of(torchrun));
  EXPECT_TRUE(w.agent_store);
  EXPECT_EQ(w.master_port, 29501);
  EXPECT_EQ(w.port_source, "MASTER_PORT + 1");
  EXPECT_EQ(w.port_variable, "STEPGRAPH_STORE_PORT");
  EXPECT_FALSE(w.master_port_given) << "derived: a file rendezvous serves a free port";
  EXPECT_NE(w.describe().find("master node0:29501 (MASTER_PORT + 1: torchrun's agent store holds MASTER_PORT)"),
            std::string::npos)
      << w.describe();

  auto vars = torchrun;
  vars["STEPGRAPH_STORE_PORT"] = "41000";
  w = world_from_env(env_of(vars));
  EXPECT_EQ(w.master_port, 41000);
  EXPECT_EQ(w.port_source, "STEPGRAPH_STORE_PORT");
  EXPECT_TRUE(w.master_port_given);

  // Without the agent store (torchrun with TORCH_DISABLE_SHARE_RDZV_TCP_STORE=1, stepgraph launch): MASTER_PORT.
  vars = torchrun;
  vars["TORCHELASTIC_USE_AGENT_STORE"] = "False";
  w = world_from_env(env_of(vars));
  EXPECT_FALSE(w.agent_store);
  EXPECT_EQ(w.master_port, 29500);
  EXPECT_EQ(w.port_source, "MASTER_PORT");
  EXPECT_FALSE(w.master_port_given) << "a file rendezvous serves a free port, as before";
  vars.erase("TORCHELASTIC_USE_AGENT_STORE");
  EXPECT_EQ(world_from_env(env_of(vars)).master_port, 29500);

  // Slurm: unchanged (MASTER_PORT, else derived from the job id, not given); the flag is torchrun's only.
  std::map<std::string, std::string> slurm = {{"SLURM_PROCID", "0"},
                                              {"SLURM_NTASKS", "2"},
                                              {"SLURM_LOCALID", "0"},
                                              {"SLURM_JOB_ID", "4412345"},
                                              {"TORCHELASTIC_USE_AGENT_STORE", "True"}};
  w = world_from_env(env_of(slurm));
  EXPECT_FALSE(w.agent_store);
  EXPECT_EQ(w.master_port, 15000 + 2345);
  EXPECT_EQ(w.port_source, "SLURM_JOB_ID");
  EXPECT_FALSE(w.master_port_given);
  slurm["MASTER_PORT"] = "4000";
  w = world_from_env(env_of(slurm));
  EXPECT_EQ(w.master_port, 4000);
  EXPECT_TRUE(w.master_port_given);
  slurm["STEPGRAPH_STORE_PORT"] = "4100";
  EXPECT_EQ(world_from_env(env_of(slurm)).master_port, 4100);
}

TEST(WorldEnv, ABadStepgraphStorePortIsNamedWithTheFix) {
  const std::map<std::string, std::string> torchrun = {{"RANK", "0"},
                                                       {"WORLD_SIZE", "2"},
                                                       {"LOCAL_RANK", "0"},
                                                       {"MASTER_ADDR", "node0"},
                                                       {"MASTER_PORT", "29500"},
                                                       {"TORCHELASTIC_USE_AGENT_STORE", "True"}};
  for (const char* bad : {"29x", "0", "70000", "-5"}) {
    auto vars = torchrun;
    vars["STEPGRAPH_STORE_PORT"] = bad;
    const std::string e = error_of(vars);
    EXPECT_NE(e.find(std::string("STEPGRAPH_STORE_PORT = '") + bad + "' is not an integer in [1, 65535]"),
              std::string::npos)
        << e;
    EXPECT_NE(e.find("free TCP port"), std::string::npos) << e;
  }
  // The agent's own port: torchrun's store is there.
  auto vars = torchrun;
  vars["STEPGRAPH_STORE_PORT"] = "29500";
  std::string e = error_of(vars);
  EXPECT_NE(e.find("STEPGRAPH_STORE_PORT = 29500 is MASTER_PORT"), std::string::npos) << e;
  EXPECT_NE(e.find("TORCHELASTIC_USE_AGENT_STORE=True"), std::string::npos) << e;
  // No MASTER_PORT + 1 above 65535.
  vars = torchrun;
  vars["MASTER_PORT"] = "65535";
  e = error_of(vars);
  EXPECT_NE(e.find("MASTER_PORT = 65535 leaves no MASTER_PORT + 1"), std::string::npos) << e;
  EXPECT_NE(e.find("set STEPGRAPH_STORE_PORT"), std::string::npos) << e;
  vars["STEPGRAPH_STORE_PORT"] = "29501";
  EXPECT_EQ(error_of(vars), "");
}

// The ranks on this node, for the host memory plan and the GPU check: LOCAL_WORLD_SIZE (SLURM_NTASKS_PER_NODE), else
// at least local rank + 1.
TEST(WorldEnv, RanksOnThisNode) {
  WorldInfo w = world_from_env(env_of(
      {{"RANK", "9"}, {"WORLD_SIZE", "16"}, {"LOCAL_RANK", "1"}, {"LOCAL_WORLD_SIZE", "8"}, {"MASTER_PORT", "1"}}));
  EXPECT_EQ(w.ranks_on_node(), 8);
  EXPECT_EQ(w.local_world_size_variable, "LOCAL_WORLD_SIZE");
  w = world_from_env(env_of({{"RANK", "3"}, {"WORLD_SIZE", "4"}, {"LOCAL_RANK", "3"}}));
  EXPECT_EQ(w.ranks_on_node(), 4);
  EXPECT_EQ(w.local_world_size_variable, "");
  w = world_from_env(env_of(
      {{"SLURM_PROCID", "5"}, {"SLURM_NTASKS", "8"}, {"SLURM_LOCALID", "1"}, {"SLURM_NTASKS_PER_NODE", "4(x2)"}}));
  EXPECT_EQ(w.ranks_on_node(), 4);
  EXPECT_EQ(w.local_world_size_variable, "SLURM_NTASKS_PER_NODE");
  EXPECT_EQ(world_from_env(env_of({})).ranks_on_node(), 1);
}

// Found with the launcher_env fuzz harness (tests/fuzz/launcher_env_fuzz.cpp): a local rank was bounded only by
// INT_MAX, so LOCAL_RANK (or SLURM_LOCALID) = 2147483647 without a local world size made ranks_on_node() overflow int
// (undefined behaviour) when the device was picked. A local rank is below the world size: named with both variables.
TEST(WorldEnv, ALocalRankAtOrPastTheWorldSizeIsNamed) {
  std::string e = error_of({{"RANK", "0"}, {"WORLD_SIZE", "1"}, {"LOCAL_RANK", "2147483647"}});
  EXPECT_NE(e.find("LOCAL_RANK = 2147483647 must be less than WORLD_SIZE = 1"), std::string::npos) << e;
  e = error_of({{"RANK", "1"}, {"WORLD_SIZE", "2"}, {"LOCAL_RANK", "2"}});
  EXPECT_NE(e.find("LOCAL_RANK = 2 must be less than WORLD_SIZE = 2"), std::string::npos) << e;
  e = error_of({{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "1"}, {"SLURM_LOCALID", "2147483647"}});
  EXPECT_NE(e.find("SLURM_LOCALID = 2147483647 must be less than SLURM_NTASKS = 1"), std::string::npos) << e;
  e = error_of({{"SLURM_PROCID", "0"}, {"SLURM_NPROCS", "2"}, {"SLURM_LOCALID", "5"}});
  EXPECT_NE(e.find("SLURM_LOCALID = 5 must be less than SLURM_NPROCS = 2"), std::string::npos) << e;
}

// A complete Slurm task with one stray torchrun variable: the error says how to use Slurm's.
TEST(WorldEnv, AStrayTorchrunVariableInAnSrunTaskSaysHowToUseSlurms) {
  const auto env = env_of({{"SLURM_PROCID", "1"}, {"SLURM_NTASKS", "2"}, {"SLURM_LOCALID", "1"}, {"LOCAL_RANK", "1"}});
  std::string message;
  try {
    world_from_env(env);
  } catch (const Error& e) {
    message = e.what();
  }
  EXPECT_NE(message.find("WORLD_SIZE is not set, but LOCAL_RANK is"), std::string::npos) << message;
  EXPECT_NE(message.find("SLURM_PROCID is set): unset LOCAL_RANK to use Slurm's variables"), std::string::npos)
      << message;
}

TEST(WorldEnv, RendezvousSettings) {
  EXPECT_EQ(rendezvous_settings_from_env(env_of({})).timeout_seconds, 300.0);
  const RendezvousSettings s =
      rendezvous_settings_from_env(env_of({{"STEPGRAPH_RENDEZVOUS_FILE", "/shared/x"}, {"STEPGRAPH_RENDEZVOUS_TIMEOUT", "2.5"}}));
  EXPECT_EQ(s.file, "/shared/x");
  EXPECT_EQ(s.timeout_seconds, 2.5);
  EXPECT_THROW(rendezvous_settings_from_env(env_of({{"STEPGRAPH_RENDEZVOUS_TIMEOUT", "soon"}})), Error);
  // The deadline is steady_clock nanoseconds: a value past 1e7 s (or infinite) overflowed it into the past.
  for (const char* huge : {"1e10", "inf", "nan", "1e7001"}) {
    EXPECT_THROW(rendezvous_settings_from_env(env_of({{"STEPGRAPH_RENDEZVOUS_TIMEOUT", huge}})), Error) << huge;
  }
  EXPECT_EQ(rendezvous_settings_from_env(env_of({{"STEPGRAPH_RENDEZVOUS_TIMEOUT", "1e7"}})).timeout_seconds, 1e7);
}

TEST(WorldEnv, DeviceForLocalRank) {
  WorldInfo w;
  w.world_size = 4;
  w.local_world_size = 2;
  w.local_rank = 1;
  EXPECT_EQ(device_for_local_rank(w, 8, std::nullopt), 1);
  EXPECT_EQ(device_for_local_rank(w, 1, std::string("3")), 0) << "one GPU given to each rank";
  const auto error = [](const WorldInfo& world, int count, std::optional<std::string> visible) {
    try {
      device_for_local_rank(world, count, visible);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  EXPECT_NE(error(w, 1, std::nullopt).find("2 ranks on this node but this machine has 1 GPU"), std::string::npos);
  EXPECT_NE(error(w, 0, std::nullopt).find("sees none"), std::string::npos);
  w.local_rank = 3;
  w.local_world_size = 4;
  EXPECT_NE(error(w, 2, std::string("0,1")).find("this node has 2 GPUs visible (CUDA_VISIBLE_DEVICES=0,1)"),
            std::string::npos)
      << error(w, 2, std::string("0,1"));
}

TEST(Hostlist, FirstHost) {
  EXPECT_EQ(first_host("node1"), "node1");
  EXPECT_EQ(first_host("a,b,c"), "a");
  EXPECT_EQ(first_host("gpu-[001-004,010],login1"), "gpu-001");
  EXPECT_EQ(first_host("node[7]"), "node7");
  EXPECT_EQ(first_host("rack[1-2]-node[07-08]"), "rack1-node07");
  EXPECT_EQ(first_host("n[3,5-9]x,y"), "n3x");
  EXPECT_EQ(first_host(" spaced "), "spaced");
  for (const char* bad : {"", ",a", "n[1-2", "n]1[", "n[[1]]", "n[a-b]", "n[]"}) {
    EXPECT_THROW(first_host(bad, "SLURM_JOB_NODELIST"), Error) << bad;
  }
  try {
    first_host("n[1-2", "SLURM_JOB_NODELIST");
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("SLURM_JOB_NODELIST"), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("MASTER_ADDR"), std::string::npos) << "says the fix";
  }
}

}  // namespace
}  // namespace sg::dist
