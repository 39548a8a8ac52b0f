#pragma once
// Who this process is in a data-parallel run, read from the environment the common launchers set:
//
//   torchrun / stepgraph launch   RANK, WORLD_SIZE, LOCAL_RANK, [LOCAL_WORLD_SIZE], MASTER_ADDR, MASTER_PORT
//   Slurm (srun, one task per GPU) SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID, [SLURM_NTASKS_PER_NODE];
//                                 MASTER_ADDR if set, else the first host of SLURM_STEP_NODELIST /
//                                 SLURM_JOB_NODELIST / SLURM_NODELIST (where task 0 runs with Slurm's
//                                 default block distribution), else SLURM_LAUNCH_NODE_IPADDR;
//                                 MASTER_PORT if set, else 15000 + the last four digits of SLURM_JOB_ID
//                                 (the convention PyTorch Lightning uses, so every task derives the same)
//   neither                       a single process: world size 1
//
// torchrun's variables win when both are present (torchrun inside an srun allocation sets its own).
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
  int master_port = 0;       // 0 when neither given nor derivable
  bool master_port_given = false;  // MASTER_PORT set (not derived from SLURM_JOB_ID)
  std::string launcher;      // "torchrun", "slurm" or "none"
  std::string master_source; // where master_addr came from ("MASTER_ADDR", "SLURM_NODELIST", ...)
  // Identifies this job, so a rank of another job cannot join our rendezvous: TORCHELASTIC_RUN_ID,
  // STEPGRAPH_RUN_ID, or SLURM_JOB_ID.SLURM_STEP_ID; "" when none is set.
  std::string job_token;

  bool distributed() const { return world_size > 1; }
  // Whether this process trains through the data-parallel path (rendezvous, NCCL communicator, the
  // collectives in the step): always at more than one rank, and at one rank when a torchrun-style
  // launcher started it (`stepgraph launch -n 1`, `torchrun --nproc-per-node 1`), as PyTorch's DDP does —
  // so the whole NCCL path runs on one GPU. One Slurm task, or no launcher, is a plain single process.
  bool data_parallel_path() const { return distributed() || launcher == "torchrun"; }
  // "rank 1 of 4 (local rank 1, torchrun), master 10.0.0.1:29500"
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
