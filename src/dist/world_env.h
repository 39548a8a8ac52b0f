#pragma once
// Who this process is in a data-parallel run, read from the environment the common launchers set:
//
//   torchrun / stepgraph launch   RANK, WORLD_SIZE, LOCAL_RANK, [LOCAL_WORLD_SIZE], MASTER_ADDR, MASTER_PORT
//                                 (torchrun also TORCHELASTIC_USE_AGENT_STORE: the store's port below)
//   Slurm (srun, one task per GPU) SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID, [SLURM_NTASKS_PER_NODE];
//                                 MASTER_ADDR if set, else the first host of SLURM_STEP_NODELIST /
//                                 SLURM_JOB_NODELIST / SLURM_NODELIST (where task 0 runs with Slurm's
//                                 default block distribution), else SLURM_LAUNCH_NODE_IPADDR;
//                                 MASTER_PORT if set, else 15000 + the last four digits of SLURM_JOB_ID
//                                 (the convention PyTorch Lightning uses, so every task derives the same)
//   neither                       a single process: world size 1
//
// torchrun's variables win when both are present (torchrun inside an srun allocation sets its own).
//
// The port of stepgraph's own rendezvous store (rank 0 serves it at MASTER_ADDR, dist/rendezvous.h):
//   STEPGRAPH_STORE_PORT if set (any launcher);
//   else MASTER_PORT + 1 when TORCHELASTIC_USE_AGENT_STORE=True: torchrun's elastic agent (node rank 0)
//        already serves its own TCPStore on MASTER_ADDR:MASTER_PORT, and overwrites MASTER_PORT;
//   else MASTER_PORT (Slurm without it: 15000 + the last four digits of SLURM_JOB_ID).
// Every inconsistency is an sg::Error naming the variable, its value and the fix.
#include <functional>
#include <optional>
#include <string>

namespace sg::dist {

// Reads one environment variable (std::nullopt when unset). Tests pass a map.
using EnvLookup = std::function<std::optional<std::string>(const std::string& name)>;
EnvLookup process_environment();

struct WorldInfo {
  int rank = 0;
  int world_size = 1;
  int local_rank = 0;
  int local_world_size = 0;  // 0: not given by the launcher
  std::string master_addr;   // "" when neither given nor derivable (then only a file rendezvous works)
  // The port of stepgraph's rendezvous store, which rank 0 serves at master_addr (see the file comment):
  // MASTER_PORT, STEPGRAPH_STORE_PORT, MASTER_PORT + 1 under torchrun's agent store, or derived from
  // SLURM_JOB_ID; 0 when neither given nor derivable.
  int master_port = 0;
  bool master_port_given = false;  // a file rendezvous serves this port, not a free one: STEPGRAPH_STORE_PORT, or
                                   // MASTER_PORT under Slurm (not one derived from SLURM_JOB_ID; torchrun-style
                                   // launchers always set MASTER_PORT, so there a free one)
  std::string port_source;         // "MASTER_PORT", "STEPGRAPH_STORE_PORT", "MASTER_PORT + 1", "SLURM_JOB_ID"
  std::string port_variable;       // the variable that sets another port: MASTER_PORT, or STEPGRAPH_STORE_PORT where
                                   // torchrun's agent owns MASTER_PORT ("": MASTER_PORT)
  bool agent_store = false;        // TORCHELASTIC_USE_AGENT_STORE=True: torchrun's agent serves MASTER_ADDR:MASTER_PORT
  std::string launcher;      // "torchrun", "slurm" or "none"
  std::string master_source; // where master_addr came from ("MASTER_ADDR", "SLURM_NODELIST", ...)
  std::string local_world_size_variable;  // where local_world_size came from ("LOCAL_WORLD_SIZE", ...); "" if not given
  // Identifies this job, so a rank of another job cannot join our rendezvous: TORCHELASTIC_RUN_ID,
  // STEPGRAPH_RUN_ID, or SLURM_JOB_ID.SLURM_STEP_ID; "" when none is set.
  std::string job_token;

  bool distributed() const { return world_size > 1; }
  // Whether this process trains through the data-parallel path (rendezvous, NCCL communicator, the
  // collectives in the step): always at more than one rank, and at one rank when a torchrun-style
  // launcher started it (`stepgraph launch -n 1`, `torchrun --nproc-per-node 1`), as PyTorch's DDP does —
  // so the whole NCCL path runs on one GPU. One Slurm task, or no launcher, is a plain single process.
  bool data_parallel_path() const { return distributed() || launcher == "torchrun"; }
  // The ranks on this node (each holds its own host buffers, each needs a GPU): local_world_size, else at least
  // local_rank + 1 (Slurm with another task count per node than the first node's).
  int ranks_on_node() const { return local_world_size > 0 ? local_world_size : local_rank + 1; }
  // Where that count came from: "LOCAL_WORLD_SIZE = 8", or "at least local rank 2 + 1" when the launcher gave none.
  std::string ranks_on_node_source() const;
  // "rank 1 of 4 (local rank 1, torchrun), master 10.0.0.1:29501 (MASTER_PORT + 1: torchrun's agent store holds
  // MASTER_PORT)": the port is the store's, with where it came from when not MASTER_PORT.
  std::string describe() const;
};

WorldInfo world_from_env(const EnvLookup& env);

// The rendezvous settings stepgraph reads itself:
//   STEPGRAPH_RENDEZVOUS_FILE     exchange the NCCL unique id through this file on a shared filesystem
//                                 instead of the TCP store at MASTER_ADDR:MASTER_PORT
//   STEPGRAPH_RENDEZVOUS_TIMEOUT  seconds to wait for the other ranks (default 300, at most 1e7)
struct RendezvousSettings {
  std::string file;
  double timeout_seconds = 300.0;
};
RendezvousSettings rendezvous_settings_from_env(const EnvLookup& env);

// The CUDA device this rank uses: LOCAL_RANK when the node's GPUs are all visible, device 0 when each
// rank sees exactly one (srun --gpus-per-task=1, or CUDA_VISIBLE_DEVICES set per rank). Throws sg::Error
// naming the device count and the variables when the node has fewer GPUs than ranks.
int device_for_local_rank(const WorldInfo& world, int device_count,
                          const std::optional<std::string>& cuda_visible_devices);

// Parses a whole decimal integer in [lo, hi] from variable `name`; sg::Error naming it otherwise.
int parse_env_int(const std::string& name, const std::string& value, int lo, int hi);

}  // namespace sg::dist
